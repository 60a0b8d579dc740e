import { describe, expect, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Deferred, Effect, Either, Exit, Fiber, Layer, Ref, Stream } from "effect"
import * as FieldSelector from "../../src/api/FieldSelector.js"
import * as WatchCache from "../../src/api/WatchCache.js"
import { LabelSelector } from "../../src/model/index.js"
import * as Keys from "../../src/store/Keys.js"
import * as Store from "../../src/store/Store.js"
import * as StoreError from "../../src/store/StoreError.js"

type Event = WatchCache.WatchCacheEvent

const prefix = Keys.prefix("", "pods")
const key = (namespace: string, name: string) => Keys.object({ group: "", resource: "pods", namespace, name })

interface PodSpec {
  readonly labels?: Record<string, string>
  readonly phase?: string
  readonly nodeName?: string
}

const pod = (namespace: string, name: string, spec: PodSpec = {}) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels: spec.labels ?? {} },
    spec: spec.nodeName === undefined ? {} : { nodeName: spec.nodeName },
    status: { phase: spec.phase ?? "Pending" }
  })

const decode = (_key: string, value: string, revision: number): object => {
  const o = JSON.parse(value) as { metadata?: object }
  return { ...o, metadata: { ...o.metadata, resourceVersion: String(revision) } }
}

const podFields = FieldSelector.extractor({ apiVersion: "v1", kind: "Pod" })

const makeCache = (options: Partial<WatchCache.Options> = {}) =>
  WatchCache.make({ prefix, decode, fields: podFields, kind: "Pod", apiVersion: "v1", ...options })

const labelSel = (s: string): LabelSelector.Matcher => {
  const r = LabelSelector.parse(s)
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return LabelSelector.compile(r.right)
}

const fieldSel = (s: string): FieldSelector.Matcher => {
  const r = FieldSelector.parseFor(s, { apiVersion: "v1", kind: "Pod" })
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return FieldSelector.compile(r.right)
}

const meta = (e: Event) => (e.object as { metadata: { name?: string; resourceVersion: string; labels?: Record<string, string> } }).metadata
const names = (items: ReadonlyArray<object>) => items.map((o) => (o as { metadata: { name: string } }).metadata.name)
const summary = (e: Event) => `${e.type} ${meta(e).name ?? ""}@${meta(e).resourceVersion}`

/** Poll `check` until it holds, failing after `ms`. */
const eventually = (check: () => boolean, ms = 5_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.fail(new Error("condition not met in time"))
      yield* Effect.sleep("2 millis")
    }
  })

/**
 * Run a watch in the background, collecting its events, and wait until it has registered with
 * the cache (a stream registers when it starts running, in its own fiber).
 */
const collect = (cache: WatchCache.WatchCache, stream: Stream.Stream<Event>) =>
  Effect.gen(function* () {
    const events: Array<Event> = []
    const before = cache.watchers()
    const fiber = yield* Effect.forkScoped(Stream.runForEach(stream, (e) => Effect.sync(() => events.push(e))))
    yield* eventually(() => cache.watchers() > before)
    return { events, fiber }
  })

/** The first `n` events of a stream, failing after a deadline. */
const takeN = (stream: Stream.Stream<Event>, n: number) =>
  Stream.runCollect(Stream.take(stream, n)).pipe(
    Effect.map((c) => [...c]),
    Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error(`fewer than ${n} events`) })
  )

const write = (f: (store: Store.StoreService) => Effect.Effect<{ readonly modRevision: number }, unknown>) =>
  Effect.flatMap(Store.Store, (store) => Effect.map(Effect.orDie(f(store)), (kv) => kv.modRevision))

const create = (ns: string, name: string, spec?: PodSpec) => write((s) => s.create(key(ns, name), pod(ns, name, spec)))

const update = (ns: string, name: string, spec?: PodSpec) =>
  write((s) => Effect.flatMap(s.get(key(ns, name)), (kv) => s.update(kv.key, pod(ns, name, spec), kv.modRevision)))

const remove = (ns: string, name: string) =>
  Effect.flatMap(Store.Store, (s) => Effect.map(Effect.orDie(s.delete(key(ns, name))), (d) => d.revision))

const withStore = <A, E>(effect: Effect.Effect<A, E, Store.Store | Scope.Scope>) =>
  effect.pipe(Effect.provide(Store.layerMemory))

describe("WatchCache.list", () => {
  it.scopedLive("serves writes from memory, sorted by key, filtered by namespace, labels and fields", () =>
    withStore(
      Effect.gen(function* () {
        yield* create("b", "web-2", { labels: { app: "web" }, phase: "Running", nodeName: "n1" })
        const cache = yield* makeCache()
        expect(cache.size()).toBe(1)
        yield* create("a", "web-1", { labels: { app: "web" }, phase: "Pending" })
        yield* create("a", "db-1", { labels: { app: "db" }, phase: "Running", nodeName: "n2" })
        const last = yield* create("c", "web-3", { labels: { app: "web", tier: "edge" }, phase: "Running", nodeName: "n1" })
        yield* cache.waitFor(last, "2 seconds")

        const all = cache.list({})
        expect(names(all.items)).toEqual(["db-1", "web-1", "web-2", "web-3"])
        expect(all.revision).toBe(last)
        expect(cache.size()).toBe(4)
        expect((all.items[0] as { metadata: { resourceVersion: string } }).metadata.resourceVersion).toMatch(/^\d+$/)

        expect(names(cache.list({ namespace: "a" }).items)).toEqual(["db-1", "web-1"])
        expect(names(cache.list({ label: labelSel("app=web") }).items)).toEqual(["web-1", "web-2", "web-3"])
        expect(names(cache.list({ label: labelSel("app in (web),tier") }).items)).toEqual(["web-3"])
        expect(names(cache.list({ field: fieldSel("status.phase=Running") }).items)).toEqual(["db-1", "web-2", "web-3"])
        expect(names(cache.list({ field: fieldSel("spec.nodeName=n1,status.phase!=Pending") }).items)).toEqual([
          "web-2",
          "web-3"
        ])
        expect(
          names(cache.list({ namespace: "c", label: labelSel("app=web"), field: fieldSel("metadata.name=web-3") }).items)
        ).toEqual(["web-3"])

        // Pages in key order.
        const first = cache.list({}, { limit: 3 })
        expect(names(first.items)).toEqual(["db-1", "web-1", "web-2"])
        expect(first.remaining).toBe(1)
        const second = cache.list({}, { limit: 3, after: first.lastKey! })
        expect(names(second.items)).toEqual(["web-3"])
        expect(second.lastKey).toBeUndefined()

        // Updates and deletes.
        yield* update("a", "web-1", { labels: { app: "web" }, phase: "Running" })
        const del = yield* remove("b", "web-2")
        yield* cache.waitFor(del, "2 seconds")
        expect(names(cache.list({ field: fieldSel("status.phase=Running") }).items)).toEqual(["db-1", "web-1", "web-3"])
        expect(cache.size()).toBe(3)
      })
    )
  )
})

describe("WatchCache.waitFor", () => {
  it.scopedLive("fails after the timeout with kube-apiserver's 504 message", () =>
    withStore(
      Effect.gen(function* () {
        yield* create("a", "p")
        const cache = yield* makeCache()
        const current = cache.revision()
        const exit = yield* Effect.exit(cache.waitFor(current + 100, "50 millis"))
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit) && exit.cause._tag === "Fail") {
          expect(exit.cause.error.status).toMatchObject({
            code: 504,
            reason: "Timeout",
            message: `Timeout: Too large resource version: ${current + 100}, current: ${current}`,
            details: { causes: [{ reason: "ResourceVersionTooLarge" }], retryAfterSeconds: 1 }
          })
        } else {
          throw new Error("expected a typed failure")
        }
      })
    )
  )

  it.scopedLive("waits for a future revision written to this resource", () =>
    withStore(
      Effect.gen(function* () {
        const cache = yield* makeCache()
        const waiting = yield* Effect.fork(cache.waitFor(cache.revision() + 1, "2 seconds"))
        yield* create("a", "p")
        yield* Fiber.join(waiting)
        expect(cache.size()).toBe(1)
      })
    )
  )

  it.scopedLive("is satisfied by a revision written to another resource once the store has passed it", () =>
    withStore(
      Effect.gen(function* () {
        yield* create("a", "p")
        const cache = yield* makeCache()
        const other = yield* write((s) => s.create("/registry/configmaps/a/c", "{}"))
        yield* cache.waitFor(other, "2 seconds")
        expect(cache.revision()).toBeGreaterThanOrEqual(other)
        expect(cache.list({}).revision).toBeGreaterThanOrEqual(other)
      })
    )
  )
})

describe("WatchCache.watch", () => {
  it.scopedLive("replays exactly the events after a revision, then follows live changes", () =>
    withStore(
      Effect.gen(function* () {
        const cache = yield* makeCache()
        const r1 = yield* create("a", "p1")
        yield* create("a", "p2")
        yield* update("a", "p1", { phase: "Running" })
        const r4 = yield* remove("a", "p2")
        yield* cache.waitFor(r4, "2 seconds")

        const watch = yield* collect(cache, cache.watch({}, r1, { bookmarks: false }))
        const r5 = yield* create("a", "p3")
        yield* eventually(() => watch.events.length === 4)
        expect(watch.events.map(summary)).toEqual([
          `ADDED p2@${r1 + 1}`,
          `MODIFIED p1@${r1 + 2}`,
          `DELETED p2@${r4}`,
          `ADDED p3@${r5}`
        ])
        expect(cache.watchers()).toBe(1)
        yield* Fiber.interrupt(watch.fiber)
        yield* eventually(() => cache.watchers() === 0)
      })
    )
  )

  it.scopedLive("starts with the current objects as ADDED when initialEvents is set", () =>
    withStore(
      Effect.gen(function* () {
        yield* create("b", "p2")
        yield* create("a", "p1", { labels: { app: "web" } })
        yield* create("a", "p0", { labels: { app: "db" } })
        const cache = yield* makeCache()
        const watch = yield* collect(
          cache,
          cache.watch({ label: labelSel("app") }, 0, { bookmarks: true, initialEvents: true, initialEventsEndBookmark: true })
        )
        const r = yield* create("a", "p3", { labels: { app: "web" } })
        yield* eventually(() => watch.events.length === 4)
        expect(watch.events.map((e) => `${e.type} ${meta(e).name ?? ""}`)).toEqual(["ADDED p0", "ADDED p1", "BOOKMARK ", "ADDED p3"])
        expect(watch.events[2]!.object).toEqual({
          kind: "Pod",
          apiVersion: "v1",
          metadata: { resourceVersion: String(r - 1), annotations: { "k8s.io/initial-events-end": "true" } }
        })
      })
    )
  )

  it.scopedLive("turns changes into and out of a selector into ADDED and DELETED", () =>
    withStore(
      Effect.gen(function* () {
        yield* create("a", "p", { labels: { app: "db" } })
        const cache = yield* makeCache()
        const from = cache.revision()
        const byLabel = yield* collect(cache, cache.watch({ label: labelSel("app=web") }, from, { bookmarks: false }))
        const byField = yield* collect(cache, cache.watch({ field: fieldSel("status.phase=Running") }, from, { bookmarks: false }))
        const byNamespace = yield* collect(cache, cache.watch({ namespace: "b" }, from, { bookmarks: false }))

        const rIn = yield* update("a", "p", { labels: { app: "web" } }) // enters the label selector
        const rMod = yield* update("a", "p", { labels: { app: "web" }, phase: "Running" }) // still web; enters the field selector
        const rOut = yield* update("a", "p", { labels: { app: "db" }, phase: "Running" }) // leaves the label selector only
        yield* create("a", "q", { labels: { app: "db" } }) // matches neither
        const rDel = yield* remove("a", "p") // field watcher sees the delete
        yield* eventually(() => byLabel.events.length === 3 && byField.events.length === 3)

        expect(byLabel.events.map(summary)).toEqual([`ADDED p@${rIn}`, `MODIFIED p@${rMod}`, `DELETED p@${rOut}`])
        // Like kube-apiserver: the DELETED for an object leaving the selector carries the state
        // the watcher last matched, stamped with the event's resourceVersion.
        expect(meta(byLabel.events[2]!).labels).toEqual({ app: "web" })
        expect(byField.events.map(summary)).toEqual([`ADDED p@${rMod}`, `MODIFIED p@${rOut}`, `DELETED p@${rDel}`])
        expect(byNamespace.events).toEqual([])

        // The same filtering applies when replaying from the ring.
        const replay = yield* takeN(cache.watch({ label: labelSel("app=web") }, from, { bookmarks: false }), 3)
        expect(replay.map(summary)).toEqual(byLabel.events.map(summary))
      })
    )
  )

  it.scopedLive("answers a revision older than the ring with one 410 ERROR event, then ends", () =>
    withStore(
      Effect.gen(function* () {
        const cache = yield* makeCache({ ringEvents: 3 })
        const start = cache.revision()
        let last = 0
        for (let i = 0; i < 10; i++) last = yield* create("a", `p${i}`)
        yield* cache.waitFor(last, "2 seconds")

        const events = yield* Stream.runCollect(cache.watch({}, start, { bookmarks: true })).pipe(
          Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => new Error("stream did not end") })
        )
        expect([...events]).toEqual([
          {
            type: "ERROR",
            object: expect.objectContaining({
              kind: "Status",
              code: 410,
              reason: "Expired",
              message: `too old resource version: ${start} (${last - 3})`
            })
          }
        ])
        expect(cache.watchers()).toBe(0)
        // The ring still serves its own range.
        const recent = yield* takeN(cache.watch({}, last - 3, { bookmarks: false }), 3)
        expect(recent.map((e) => meta(e).name)).toEqual(["p7", "p8", "p9"])
      })
    )
  )

  it.scopedLive("cuts off a watcher that stops reading with 410, while a fast one keeps going", () =>
    withStore(
      Effect.gen(function* () {
        const cache = yield* makeCache({ watcherBuffer: 10 })
        const gate = yield* Deferred.make<void>()
        const slowEvents: Array<Event> = []
        const slow = yield* Effect.forkScoped(
          Stream.runForEach(cache.watch({}, cache.revision(), { bookmarks: false }), (e) =>
            Effect.zipRight(Deferred.await(gate), Effect.sync(() => slowEvents.push(e)))
          )
        )
        const fast = yield* collect(cache, cache.watch({}, cache.revision(), { bookmarks: false }))
        yield* eventually(() => cache.watchers() === 2)

        // Rounds of writes; the fast watcher catches up after each, the slow one never does.
        const round = 5
        for (let i = 0; i < 100; i += round) {
          for (let j = i; j < i + round; j++) yield* create("a", `p${j}`)
          yield* eventually(() => fast.events.length === i + round)
        }
        // The slow watcher was dropped (its queue with it) once it fell the buffer behind.
        expect(cache.watchers()).toBe(1)

        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(slow).pipe(Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => new Error("slow watch did not end") }))
        const lastEvent = slowEvents[slowEvents.length - 1]!
        expect(lastEvent.type).toBe("ERROR")
        expect(lastEvent.object).toMatchObject({ kind: "Status", code: 410 })
        // What it received before the cut-off is a prefix of the stream, within the buffer.
        expect(slowEvents.length).toBeLessThanOrEqual(round + 1)
        expect(slowEvents.slice(0, -1).map(summary)).toEqual(fast.events.slice(0, slowEvents.length - 1).map(summary))

        const more = yield* create("a", "after")
        yield* eventually(() => fast.events.length === 101)
        expect(meta(fast.events[100]!).resourceVersion).toBe(String(more))
      })
    )
  )

  it.scopedLive("sends bookmarks to watchers that allow them", () =>
    withStore(
      Effect.gen(function* () {
        const cache = yield* makeCache({ bookmarkInterval: "20 millis" })
        const r = yield* create("a", "p")
        yield* cache.waitFor(r, "2 seconds")
        const withBookmarks = yield* collect(cache, cache.watch({}, r, { bookmarks: true }))
        const without = yield* collect(cache, cache.watch({}, r, { bookmarks: false }))
        yield* eventually(() => withBookmarks.events.length >= 2)
        expect(withBookmarks.events[0]).toEqual({ type: "BOOKMARK", object: { kind: "Pod", apiVersion: "v1", metadata: { resourceVersion: String(r) } } })
        const r2 = yield* create("a", "q")
        yield* eventually(() => withBookmarks.events.some((e) => e.type === "BOOKMARK" && meta(e).resourceVersion === String(r2)))
        expect(withBookmarks.events.filter((e) => e.type === "ADDED").map(summary)).toEqual([`ADDED q@${r2}`])
        expect(without.events.map(summary)).toEqual([`ADDED q@${r2}`])
      })
    )
  )
})

/** A store whose watches can be made to fail on demand; counts lists and watches. */
const flakyStore = Effect.gen(function* () {
  const inner = yield* Store.Store
  const failNext = yield* Ref.make<Deferred.Deferred<never, StoreError.Compacted | StoreError.Unavailable> | undefined>(undefined)
  // `list` counts full lists (start and re-lists), not the pinned reads `waitFor` may make.
  const counts = { list: 0, watch: 0 }
  let dropEvents = false
  const service: Store.StoreService = {
    ...inner,
    list: (p, o) =>
      Effect.zipRight(
        Effect.sync(() => {
          if (o?.atRevision === undefined && o?.continue === undefined) counts.list++
        }),
        inner.list(p, o)
      ),
    watch: (p, from) =>
      Stream.unwrap(
        Effect.gen(function* () {
          counts.watch++
          const trigger = yield* Deferred.make<never, StoreError.Compacted | StoreError.Unavailable>()
          yield* Ref.set(failNext, trigger)
          const drop = dropEvents && counts.watch === 1
          return inner.watch(p, from).pipe(
            Stream.filter(() => !drop),
            Stream.interruptWhen(Deferred.await(trigger))
          )
        })
      )
  }
  const fail = (error: StoreError.Compacted | StoreError.Unavailable) =>
    Effect.flatMap(Ref.get(failNext), (d) => (d === undefined ? Effect.void : Deferred.fail(d, error)))
  return { service, counts, fail, dropFirstWatch: () => (dropEvents = true) }
})

describe("WatchCache store watch failures", () => {
  it.scopedLive("re-lists after Compacted and closes the watchers that span the gap with 410", () =>
    withStore(
      Effect.gen(function* () {
        const flaky = yield* flakyStore
        flaky.dropFirstWatch() // the first store watch loses every event: only a re-list can recover them
        const cache = yield* makeCache().pipe(Effect.provide(Layer.succeed(Store.Store, flaky.service)))
        const watch = yield* collect(cache, cache.watch({}, cache.revision(), { bookmarks: false }))
        yield* eventually(() => flaky.counts.watch === 1 && cache.watchers() === 1)
        yield* create("a", "lost-1")
        const r = yield* create("a", "lost-2")
        expect(cache.size()).toBe(0)

        yield* flaky.fail(new StoreError.Compacted({ requestedRevision: 1, compactRevision: r }))
        yield* Fiber.join(watch.fiber).pipe(Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => new Error("watch not closed") }))
        expect(watch.events).toHaveLength(1)
        expect(watch.events[0]).toMatchObject({ type: "ERROR", object: { code: 410 } })

        yield* cache.waitFor(r, "2 seconds")
        expect(flaky.counts.list).toBeGreaterThanOrEqual(2)
        expect(names(cache.list({}).items)).toEqual(["lost-1", "lost-2"])

        // The cache follows the store again.
        const after = yield* collect(cache, cache.watch({}, cache.revision(), { bookmarks: false }))
        const r3 = yield* create("a", "later")
        yield* eventually(() => after.events.length === 1)
        expect(after.events.map(summary)).toEqual([`ADDED later@${r3}`])
        expect(flaky.counts.watch).toBe(2)
      })
    )
  )

  it.scopedLive("resumes from the last applied revision after Unavailable, without closing watchers", () =>
    withStore(
      Effect.gen(function* () {
        const flaky = yield* flakyStore
        const cache = yield* makeCache().pipe(Effect.provide(Layer.succeed(Store.Store, flaky.service)))
        const watch = yield* collect(cache, cache.watch({}, cache.revision(), { bookmarks: false }))
        yield* eventually(() => flaky.counts.watch === 1)
        const r1 = yield* create("a", "p1")
        yield* cache.waitFor(r1, "2 seconds")
        yield* flaky.fail(new StoreError.Unavailable({ reason: "connection reset", retryable: true }))
        const r2 = yield* create("a", "p2")
        const r3 = yield* create("a", "p3")
        yield* eventually(() => watch.events.length === 3)
        expect(watch.events.map(summary)).toEqual([`ADDED p1@${r1}`, `ADDED p2@${r2}`, `ADDED p3@${r3}`])
        expect(flaky.counts.watch).toBe(2)
        expect(flaky.counts.list).toBe(1)
      })
    )
  )
})

describe("WatchCache.subscribe", () => {
  it.scopedLive("takes batches of the events a watch stream would carry, then undefined once ended", () =>
    withStore(
      Effect.gen(function* () {
        const cache = yield* makeCache({ ringEvents: 2 })
        const start = cache.revision()
        const a = yield* cache.subscribe({}, start, { bookmarks: false })
        const b = yield* cache.subscribe({}, start, { bookmarks: false })
        expect(cache.watchers()).toBe(2)
        const r1 = yield* create("a", "p1")
        const r2 = yield* create("a", "p2")
        yield* cache.waitFor(r2, "2 seconds")
        const batch = yield* a.take
        expect(batch?.map(summary)).toEqual([`ADDED p1@${r1}`, `ADDED p2@${r2}`])
        // Watchers share each change's event object, so it is serialised once for all of them.
        const other = yield* b.take
        expect(other?.[0]).toBe(batch?.[0])
        expect(new TextDecoder().decode(WatchCache.encodeLine(batch![0]!))).toBe(`${JSON.stringify(batch![0])}\n`)
        // ...and encoded once: every watcher writes the same bytes.
        expect(WatchCache.encodeLine(batch![0]!)).toBe(WatchCache.encodeLine(batch![0]!))

        const waiting = yield* Effect.fork(a.take)
        const r3 = yield* create("a", "p3")
        expect((yield* Fiber.join(waiting))?.map(summary)).toEqual([`ADDED p3@${r3}`])

        const stale = yield* cache.subscribe({}, start, { bookmarks: false })
        expect((yield* stale.take)?.map((e) => e.type)).toEqual(["ERROR"])
        expect(yield* stale.take).toBeUndefined()
      })
    )
  )
})

describe("WatchCache fan-out", () => {
  const n = 1_000
  const writes = 20

  /** Writes one pod at a time with a pause between them and reports write ack → delivery. */
  const measure = (label: string, start: (cache: WatchCache.WatchCache, onEvent: (e: Event) => void) => Effect.Effect<void, never, Scope.Scope>) =>
    withStore(
      Effect.gen(function* () {
        const cache = yield* makeCache()
        const from = cache.revision()
        const ack: Array<number> = []
        const latencies: Array<number> = []
        let received = 0
        const onEvent = (e: Event) => {
          latencies.push(performance.now() - ack[Number(meta(e).resourceVersion) - from - 1]!)
          received++
        }
        for (let i = 0; i < n; i++) yield* start(cache, onEvent)
        yield* eventually(() => cache.watchers() === n)

        // The first write warms up the JIT on every path; it is not counted.
        for (let i = 0; i <= writes; i++) {
          yield* create("a", `p${i}`)
          ack.push(performance.now())
          yield* eventually(() => received === n * (i + 1), 20_000)
          if (i === 0) latencies.length = 0
        }
        latencies.sort((a, b) => a - b)
        const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!.toFixed(2)
        console.log(
          `watch fan-out (${label}): ${n} watchers × ${writes} writes; write ack → delivery ` +
            `p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${pct(100)} ms`
        )
        expect(received).toBe(n * (writes + 1))
      })
    )

  it.scopedLive("delivers every event to 1,000 Stream watchers", () =>
    measure("Stream", (cache, onEvent) =>
      Effect.asVoid(
        Effect.forkScoped(
          Stream.runForEachChunk(cache.watch({}, cache.revision(), { bookmarks: false }), (chunk) =>
            Effect.sync(() => {
              for (const e of chunk) onEvent(e)
            })
          )
        )
      )
    ),
    60_000
  )

  it.scopedLive("delivers every event to 1,000 subscribers", () =>
    measure("subscribe", (cache, onEvent) =>
      Effect.gen(function* () {
        const sub = yield* cache.subscribe({}, cache.revision(), { bookmarks: false })
        const loop: Effect.Effect<void> = Effect.flatMap(sub.take, (events) => {
          if (events === undefined) return Effect.void
          for (const e of events) onEvent(e)
          return loop
        })
        yield* Effect.forkScoped(loop)
      })
    ),
    60_000
  )
})
