/**
 * The Store contract suite (DESIGN §4): one set of behaviours every backend must show. An adapter
 * runs it with its own layer: `StoreContract.suite("sqlite", SqliteStore.layer(...))`. Each test
 * builds the layer afresh, so a layer must give a new, empty store every time it is built.
 */
import { Chunk, Effect, Either, Exit, Fiber, Layer, Stream } from "effect"
import { describe, expect, it } from "vitest"
import * as KeyOrder from "../store/KeyOrder.js"
import { Store, type StoreService, type WatchEvent } from "../store/Store.js"

type Test = (store: StoreService) => Effect.Effect<void, unknown>

/** Register the contract tests for one backend under `describe("Store contract: <name>")`. */
export const suite = (name: string, layer: Layer.Layer<Store, unknown>, options: { readonly timeout?: number } = {}) => {
  const run = (test: Test) => () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(Store, (store) => test(store)).pipe(Effect.provide(Layer.fresh(layer)))
      ) as Effect.Effect<void, unknown>
    )
  const t = (title: string, test: Test) => it(title, run(test), options.timeout ?? 30_000)

  /** The tag of a failure, or "success". */
  const outcome = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
    Effect.map(Effect.either(effect), (e) => (Either.isLeft(e) ? e.left : "success" as const))

  /** Collect exactly `n` events from a watch. */
  const take = (store: StoreService, prefix: string, from: number, n: number) =>
    Stream.runCollect(Stream.take(store.watch(prefix, from), n)).pipe(
      Effect.map((c) => Chunk.toReadonlyArray(c)),
      Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`timed out waiting for ${n} events from ${from}`) })
    )

  const summary = (events: ReadonlyArray<WatchEvent>) => events.map((e) => `${e.type} ${e.revision} ${e.key}`)

  describe(`Store contract: ${name}`, () => {
    t("creates, reads, updates and deletes a key with etcd-style revisions", (store) =>
      Effect.gen(function* () {
        expect(yield* store.currentRevision).toBe(0)
        const created = yield* store.create("/registry/pods/default/a", "v1")
        expect(created).toEqual({ key: "/registry/pods/default/a", value: "v1", createRevision: 1, modRevision: 1, version: 1 })
        expect(yield* store.get("/registry/pods/default/a")).toEqual(created)

        const updated = yield* store.update("/registry/pods/default/a", "v2", 1)
        expect(updated).toEqual({ key: "/registry/pods/default/a", value: "v2", createRevision: 1, modRevision: 2, version: 2 })

        const deleted = yield* store.delete("/registry/pods/default/a", 2)
        expect(deleted.revision).toBe(3)
        expect(deleted.prev).toEqual(updated)
        expect(yield* outcome(store.get("/registry/pods/default/a"))).toMatchObject({ _tag: "NotFound", key: "/registry/pods/default/a" })

        // A re-created key starts a new life: new createRevision, version 1.
        const again = yield* store.create("/registry/pods/default/a", "v3")
        expect(again).toMatchObject({ createRevision: 4, modRevision: 4, version: 1 })
        expect(yield* store.currentRevision).toBe(4)
      }))

    t("rejects duplicate creates, stale compare-and-swaps and missing keys with typed errors", (store) =>
      Effect.gen(function* () {
        yield* store.create("k", "a")
        yield* store.update("k", "b", 1)
        expect(yield* outcome(store.create("k", "x"))).toMatchObject({ _tag: "AlreadyExists", key: "k", currentRevision: 2 })
        expect(yield* outcome(store.update("k", "x", 1))).toMatchObject({ _tag: "Conflict", key: "k", expectedRevision: 1, currentRevision: 2 })
        expect(yield* outcome(store.delete("k", 1))).toMatchObject({ _tag: "Conflict", currentRevision: 2 })
        expect(yield* outcome(store.update("missing", "x", 1))).toMatchObject({ _tag: "NotFound", key: "missing" })
        expect(yield* outcome(store.delete("missing"))).toMatchObject({ _tag: "NotFound", key: "missing" })
        // Failed operations take no revision and change nothing.
        expect(yield* store.currentRevision).toBe(2)
        expect((yield* store.get("k")).value).toBe("b")
        // An unconditional delete succeeds whatever the revision.
        expect((yield* store.delete("k")).prev.value).toBe("b")
      }))

    t("gives every committed mutation the next revision, with no gaps", (store) =>
      Effect.gen(function* () {
        const seen: Array<number> = []
        for (let i = 0; i < 20; i++) {
          seen.push((yield* store.create(`dense/${i}`, `${i}`)).modRevision)
          yield* Effect.either(store.create(`dense/${i}`, "dup"))
        }
        for (let i = 0; i < 20; i += 2) seen.push((yield* store.update(`dense/${i}`, "u", seen[i]!)).modRevision)
        expect(seen).toEqual(Array.from({ length: 30 }, (_, i) => i + 1))
      }))

    t("commits a txn all-or-nothing with consecutive revisions, including fencing checks", (store) =>
      Effect.gen(function* () {
        yield* store.create("lease", "leader-a")
        yield* store.create("b", "old")

        // A failing op anywhere rolls back the whole txn.
        const failed = yield* outcome(
          store.txn([
            { op: "create", key: "a", value: "1" },
            { op: "update", key: "b", value: "new", expectedRevision: 2 },
            { op: "create", key: "lease", value: "dup" }
          ])
        )
        expect(failed).toMatchObject({ _tag: "AlreadyExists", key: "lease" })
        expect(yield* outcome(store.get("a"))).toMatchObject({ _tag: "NotFound" })
        expect((yield* store.get("b")).value).toBe("old")
        expect(yield* store.currentRevision).toBe(2)

        // A stale fencing check fails the write it guards.
        expect(
          yield* outcome(
            store.txn([
              { op: "check", key: "lease", expectedRevision: 99 },
              { op: "create", key: "a", value: "1" }
            ])
          )
        ).toMatchObject({ _tag: "Conflict", key: "lease", currentRevision: 1 })
        expect(yield* outcome(store.txn([{ op: "check", key: "nothing", expectedRevision: 0 }]))).toBe("success")

        const results = yield* store.txn([
          { op: "check", key: "lease", expectedRevision: 1 },
          { op: "create", key: "a", value: "1" },
          { op: "update", key: "a", value: "2", expectedRevision: 3 },
          { op: "delete", key: "b", expectedRevision: 2 }
        ])
        expect(results.map((r) => [r.op, r.revision])).toEqual([["check", 1], ["create", 3], ["update", 4], ["delete", 5]])
        expect(yield* store.get("a")).toMatchObject({ value: "2", createRevision: 3, modRevision: 4, version: 2 })
        expect(results[3]!.kv?.value).toBe("old")
        expect(yield* store.currentRevision).toBe(5)
      }))

    t("lists a prefix in key order as one snapshot across pages", (store) =>
      Effect.gen(function* () {
        for (const k of ["p/c", "p/a", "p/e", "p/b", "p/d", "pp/x", "p", "o/z"]) yield* store.create(k, k)
        const all = yield* store.list("p/")
        expect(all.items.map((i) => i.key)).toEqual(["p/a", "p/b", "p/c", "p/d", "p/e"])
        expect(all.revision).toBe(8)
        expect(all.continue).toBeUndefined()
        expect(yield* store.count("p/")).toBe(5)

        const page1 = yield* store.list("p/", { limit: 2 })
        expect(page1.items.map((i) => i.key)).toEqual(["p/a", "p/b"])
        expect(page1.remaining).toBe(3)
        expect(page1.continue).toBeTypeOf("string")

        // Writes between pages do not show: the token pins the first page's revision.
        yield* store.delete("p/c")
        yield* store.update("p/d", "changed", 5)
        yield* store.create("p/bb", "new")
        const page2 = yield* store.list("p/", { limit: 2, continue: page1.continue! })
        expect(page2.items.map((i) => [i.key, i.value])).toEqual([["p/c", "p/c"], ["p/d", "p/d"]])
        expect(page2.revision).toBe(8)
        const page3 = yield* store.list("p/", { limit: 2, continue: page2.continue! })
        expect(page3.items.map((i) => i.key)).toEqual(["p/e"])
        expect(page3.continue).toBeUndefined()

        // The current state shows the writes; atRevision reads the past.
        expect((yield* store.list("p/")).items.map((i) => i.key)).toEqual(["p/a", "p/b", "p/bb", "p/d", "p/e"])
        const past = yield* store.list("p/", { atRevision: 3 })
        expect(past.items.map((i) => i.key)).toEqual(["p/a", "p/c", "p/e"])
        expect(past.revision).toBe(3)
      }))

    t("replays exactly the missed events of a watch from a past revision, then goes live", (store) =>
      Effect.gen(function* () {
        yield* store.create("w/a", "a1") // 1
        yield* store.create("w/b", "b1") // 2
        yield* store.update("w/a", "a2", 1) // 3
        yield* store.create("other/x", "x") // 4
        yield* store.delete("w/b") // 5

        const fiber = yield* Effect.fork(take(store, "w/", 2, 4))
        yield* store.create("w/c", "c1") // 6
        yield* store.update("w/c", "c2", 6) // 7
        const events = yield* Fiber.join(fiber)
        expect(summary(events)).toEqual(["MODIFIED 3 w/a", "DELETED 5 w/b", "ADDED 6 w/c", "MODIFIED 7 w/c"])
        expect(events[0]).toMatchObject({ value: "a2", prevValue: "a1", createRevision: 1, version: 2 })
        expect(events[1]).toMatchObject({ value: "b1", prevValue: "b1" })
        expect(events[2]).toMatchObject({ value: "c1", prevValue: undefined, createRevision: 6, version: 1 })
        expect(events[3]).toMatchObject({ value: "c2", prevValue: "c1" })

        // A watch from the current revision sees only what comes next.
        const live = yield* Effect.fork(take(store, "", 7, 1))
        yield* store.create("z", "z")
        expect(summary(yield* Fiber.join(live))).toEqual(["ADDED 8 z"])
      }))

    t("delivers every revision exactly once, in order, to a watcher under many concurrent writers", (store) =>
      Effect.gen(function* () {
        const writers = 8
        const perWriter = 60
        const watcher = yield* Effect.fork(take(store, "c/", 0, writers * perWriter * 2))
        yield* Effect.forEach(
          Array.from({ length: writers }, (_, w) => w),
          (w) =>
            Effect.gen(function* () {
              for (let i = 0; i < perWriter; i++) {
                const kv = yield* store.create(`c/${w}/${i}`, "x")
                yield* store.update(kv.key, "y", kv.modRevision)
              }
            }),
          { concurrency: "unbounded" }
        )
        const events = yield* Fiber.join(watcher)
        expect(events.map((e) => e.revision)).toEqual(Array.from({ length: writers * perWriter * 2 }, (_, i) => i + 1))
        expect(yield* store.currentRevision).toBe(writers * perWriter * 2)
        // Every key was created then modified, in that order.
        const types = new Map<string, Array<string>>()
        for (const e of events) types.set(e.key, [...(types.get(e.key) ?? []), e.type])
        expect(types.size).toBe(writers * perWriter)
        for (const seq of types.values()) expect(seq).toEqual(["ADDED", "MODIFIED"])
      }))

    t("compacts history: old reads and watches fail with Compacted, the current state stays whole", (store) =>
      Effect.gen(function* () {
        yield* store.create("h/a", "a1") // 1
        yield* store.create("h/b", "b1") // 2
        yield* store.update("h/a", "a2", 1) // 3
        yield* store.delete("h/b") // 4
        yield* store.create("h/c", "c1") // 5
        yield* store.compact(4)
        expect(yield* store.compactRevision).toBe(4)

        expect(yield* outcome(store.list("h/", { atRevision: 3 }))).toMatchObject({ _tag: "Compacted", compactRevision: 4 })
        expect(yield* outcome(Stream.runDrain(Stream.take(store.watch("h/", 2), 1)))).toMatchObject({ _tag: "Compacted", requestedRevision: 2, compactRevision: 4 })

        // The state at the horizon and after is intact.
        expect((yield* store.list("h/", { atRevision: 4 })).items.map((i) => [i.key, i.value])).toEqual([["h/a", "a2"]])
        expect((yield* store.list("h/")).items.map((i) => i.key)).toEqual(["h/a", "h/c"])
        expect(yield* store.get("h/a")).toMatchObject({ value: "a2", createRevision: 1, version: 2 })
        expect(summary(yield* take(store, "h/", 4, 1))).toEqual(["ADDED 5 h/c"])
        // Writes go on densely; compacting backwards or beyond the head is harmless.
        yield* store.compact(2)
        yield* store.compact(1_000)
        expect(yield* store.compactRevision).toBe(5)
        expect((yield* store.update("h/a", "a3", 3)).modRevision).toBe(6)
        const next = yield* Effect.fork(take(store, "h/", 5, 1))
        yield* Effect.yieldNow()
        expect(summary(yield* Fiber.join(next))).toEqual(["MODIFIED 6 h/a"])
      }))

    t("fails a continue token with Expired once its revision is compacted, or when it is not a token", (store) =>
      Effect.gen(function* () {
        for (let i = 0; i < 5; i++) yield* store.create(`e/${i}`, "x")
        const page1 = yield* store.list("e/", { limit: 2 })
        yield* store.update("e/0", "y", 1)
        yield* store.compact(6)
        expect(yield* outcome(store.list("e/", { limit: 2, continue: page1.continue! }))).toMatchObject({ _tag: "Expired" })
        expect(yield* outcome(store.list("e/", { continue: "not-a-token" }))).toMatchObject({ _tag: "Expired" })
        expect(yield* outcome(store.list("e/", { continue: "" }))).toMatchObject({ _tag: "Expired" })
      }))

    t("stores, lists and watches large values (1 MiB) intact", (store) =>
      Effect.gen(function* () {
        const big = Array.from({ length: 1024 * 1024 }, (_, i) => String.fromCharCode(97 + (i * 7919) % 26)).join("")
        const watcher = yield* Effect.fork(take(store, "big/", 0, 2))
        yield* store.create("big/1", big)
        const updated = big.slice(1) + "!"
        yield* store.update("big/1", updated, 1)
        expect((yield* store.get("big/1")).value).toBe(updated)
        expect((yield* store.list("big/")).items[0]!.value).toBe(updated)
        const events = yield* Fiber.join(watcher)
        expect(events[0]!.value).toBe(big)
        expect(events[1]!.value).toBe(updated)
        expect(events[1]!.prevValue).toBe(big)
      }))

    t("handles unicode keys and values, listing them in code point order", (store) =>
      Effect.gen(function* () {
        const keys = ["u/é", "u/e", "u/日本", "u/😀", "u/\uffee", "u/z", "u/Ω", "u/a\u0301"]
        for (const k of keys) yield* store.create(k, `value of ${k} ✓`)
        for (const k of keys) expect((yield* store.get(k)).value).toBe(`value of ${k} ✓`)
        const listed = (yield* store.list("u/")).items.map((i) => i.key)
        expect(listed).toEqual([...keys].sort(KeyOrder.compare))
        // Paging by continue token walks the same order.
        const paged: Array<string> = []
        let token: string | undefined
        do {
          const page = yield* store.list("u/", token === undefined ? { limit: 3 } : { limit: 3, continue: token })
          paged.push(...page.items.map((i) => i.key))
          token = page.continue
        } while (token)
        expect(paged).toEqual(listed)
      }))

    t("ends a watch promptly when its consumer stops reading, leaving writes unaffected", (store) =>
      Effect.gen(function* () {
        const fiber = yield* Effect.fork(Stream.runDrain(store.watch("s/", 0)))
        yield* store.create("s/1", "x")
        yield* Fiber.interrupt(fiber)
        expect(Exit.isInterrupted(yield* Fiber.await(fiber))).toBe(true)
        expect((yield* store.create("s/2", "y")).modRevision).toBe(2)
      }))
  })
}
