/**
 * The generic controller runner (DESIGN §6, controller-runtime's model). A reconciler names the
 * resource it owns and the resources whose changes concern it; the runner keeps shared informers
 * over them, turns every change into a key on a work queue (deduplicated, one worker per key at a
 * time), calls `reconcile(key)` and acts on the answer: success forgets the key's failures and
 * may ask for a timed requeue; a failure retries with exponential backoff; a terminal failure is
 * logged and dropped.
 *
 *   informer events ─▶ map to keys ─▶ WorkQueue ─▶ worker ─▶ reconcile(key, ctx) ─▶ Result | error
 *                                         ▲                        │ writes through ctx.client
 *                                         └── requeue / backoff ◀──┘ then wait to see them
 *
 * Informer caches lag the API by a moment, so a reconciler that created pods could, on its next
 * run, not see them yet and create them again (client-go answers this with "expectations"). Here
 * the client a reconciler gets records what it wrote, and the runner waits until the informers
 * show those writes before the key is done: each reconcile decides on a view that includes its
 * own past actions.
 */
import { Effect, Fiber, type Scope } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import { ApiClient } from "../client/ApiClient.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import { MetricRegistry } from "../observability/MetricRegistry.js"
import * as EventRecorder from "../client/EventRecorder.js"
import * as Informer from "../informer/Informer.js"
import * as WorkQueue from "../informer/WorkQueue.js"
import { asObject } from "../object/Json.js"
import { controllerRefOf, isTerminating, metadataOf, namespaceOrUndefined } from "../object/Metadata.js"
import { TerminalError } from "./ControllerError.js"

/** What a reconcile answers: nothing, or when to look again even if nothing changes. */
export interface Result {
  /** Reconcile this key again after this many milliseconds. */
  readonly requeueAfterMs?: number
}

// Defined in the controllers layer's error module; re-exported so `Controller.TerminalError` stays.
export { TerminalError }

/** Why a reconcile failed: an API error (retried with backoff), or a terminal error. */
export type ReconcileError = ApiError.ApiError | TerminalError

/** What a reconciler works with. */
export interface Context {
  /** The API client; its writes are tracked so the next reconcile sees them. */
  readonly client: Client.Client
  /** The shared informers (read-only caches). */
  readonly informers: Informer.Informers
  /** Records Events about objects (aggregated). */
  readonly events: EventRecorder.EventRecorder
  /** Queue a key of this reconciler (another object it has learnt needs a look). */
  readonly enqueue: (key: string) => void
}

/**
 * Maps a change of a watched resource to the keys of the reconciler's own resource. `enqueue`
 * queues keys later, for mappers that start watching more resources as they learn of them (the
 * garbage collector following new CRDs).
 */
export type KeyMapper = (change: Informer.Change, informers: Informer.Informers, enqueue?: (key: string) => void) => ReadonlyArray<string>

/** A resource a reconciler watches besides its own, and how its changes map to keys. */
export interface Watch {
  readonly ref: Client.ResourceRef
  readonly keys: KeyMapper
}

/** A reconciler: what it owns, what it watches, and the level-triggered `reconcile`. */
export interface Reconciler {
  /** A short unique name (`deployment`, `garbage-collector`): metrics, logs, flags. */
  readonly name: string
  /** The resource whose keys are queued; each of its changes queues its own key. */
  readonly primary: Client.ResourceRef
  /** Other resources whose changes queue keys. */
  readonly watches?: ReadonlyArray<Watch>
  /** Resources the reconciler reads from informers without reacting to them. */
  readonly reads?: ReadonlyArray<Client.ResourceRef>
  /** Concurrent workers (default 2); one key never runs twice at once. */
  readonly workers?: number
  /** Whether a change of the primary itself queues its key (default true). */
  readonly reactToPrimary?: boolean
  /** Reconcile one key (`namespace/name` or `name`), recomputing everything from current state. */
  readonly reconcile: (key: string, ctx: Context) => Effect.Effect<Result | void, ReconcileError>
  /** Keys to queue once at start and then every `resyncMs`, besides the primary's objects. */
  readonly resync?: { readonly everyMs: number; readonly keys: (informers: Informer.Informers) => ReadonlyArray<string> }
}

/** Key mapper: the controlling owner of the changed object, when it is of `kind` (old owner too). */
export const controllerOf =
  (kind: string): KeyMapper =>
  (change) => {
    const keys = new Set<string>()
    for (const o of [change.object, change.old]) {
      if (o === undefined) continue
      const owner = controllerRefOf(o)
      if (owner !== undefined && owner.kind === kind) {
        const ns = namespaceOrUndefined(o)
        keys.add(ns ? `${ns}/${String(owner.name)}` : String(owner.name))
      }
    }
    return [...keys]
  }

/** Per-reconciler numbers (for `/metrics` and for tests). */
export interface Metrics {
  readonly name: string
  /** Keys waiting now. */
  readonly depth: number
  /** Keys waiting for a delay or backoff. */
  readonly delayed: number
  readonly adds: number
  readonly reconciles: number
  readonly errors: number
  readonly retries: number
  /** Reconcile latency: count, sum, and the counts at or under each bound (ms). */
  readonly latency: { readonly count: number; readonly sumMs: number; readonly buckets: ReadonlyArray<readonly [number, number]> }
}

const bucketBounds = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

/** How long the runner waits for informers to show a reconcile's writes. */
const observeTimeoutMs = 10_000

/** A running set of controllers. */
export interface Running {
  /** Current metrics of every reconciler. */
  readonly metrics: () => ReadonlyArray<Metrics>
  /** Resolves when every informer has listed once and every queue is empty with no key in flight. */
  readonly idle: Effect.Effect<void>
  /** The shared informers. */
  readonly informers: Informer.Informers
  /** Queue `key` on the named reconciler now (for components that learn of work another way). */
  readonly enqueue: (reconciler: string, key: string) => void
}

/** Options of `start` (the reconcilers act through the context's `ApiClient`). */
export interface Options {
  readonly reconcilers: ReadonlyArray<Reconciler>
  /** Share informers with other components (default: a new set). */
  readonly informers?: Informer.Informers
  /** The component name on recorded Events (default `fleet-controller-manager`). */
  readonly component?: string
  /** Backoff of failing keys. */
  readonly backoff?: WorkQueue.Backoff
}

interface Written {
  readonly revisions: Map<string, number>
  readonly deletions: Array<{ readonly ref: Client.ResourceRef; readonly namespace: string | undefined; readonly name: string; readonly uid: string }>
}

const refKey = (ref: Client.ResourceRef) => `${ref.apiVersion}/${ref.kind ?? ref.plural ?? ""}`

/** A client that records the revisions and deletions of what it writes. */
const tracking = (client: Client.Client, written: () => Written): Client.Client => {
  const note = (ref: Client.ResourceRef) => (o: Client.JsonObject) =>
    Effect.sync(() => {
      const rv = Number(metadataOf(o)["resourceVersion"] ?? 0)
      const w = written()
      const k = refKey(ref)
      if (rv > (w.revisions.get(k) ?? 0)) w.revisions.set(k, rv)
      return o
    })
  const refOf = (o: Client.JsonObject): Client.ResourceRef => ({ apiVersion: String(o["apiVersion"]), kind: String(o["kind"]) })
  return {
    ...client,
    create: (o) => Effect.flatMap(client.create(o), note(refOf(o))),
    update: (o, sub) => Effect.flatMap(client.update(o, sub), note(refOf(o))),
    patch: (ref, ns, name, type, body, sub) => Effect.flatMap(client.patch(ref, ns, name, type, body, sub), note(ref)),
    delete: (ref, ns, name, options) =>
      Effect.flatMap(client.delete(ref, ns, name, options), (answer) => {
        // Pending deletions (grace period, finalizers) answer the updated object: wait for its
        // revision. Immediate ones answer the old object or a Status: wait for the object to go.
        if (answer["kind"] !== "Status" && isTerminating(answer)) return note(ref)(answer)
        const uid = String((answer["kind"] === "Status" ? asObject(answer["details"])["uid"] : metadataOf(answer)["uid"]) ?? "")
        return Effect.sync(() => {
          written().deletions.push({ ref, namespace: ns, name, uid })
          return answer
        })
      })
  }
}

/** Wait until the informers show what a reconcile wrote (bounded). */
const observe = (started: ReadonlyMap<string, Informer.Informer>, w: Written) =>
  Effect.gen(function* () {
    for (const [k, rv] of w.revisions) {
      const informer = started.get(k)
      if (informer !== undefined) yield* informer.waitUntil(() => informer.revision() >= rv, observeTimeoutMs)
    }
    for (const d of w.deletions) {
      const informer = started.get(refKey(d.ref))
      if (informer === undefined) continue
      yield* informer.waitUntil(() => {
        const o = informer.get(d.namespace, d.name)
        return o === undefined || (d.uid !== "" && metadataOf(o)["uid"] !== d.uid) || isTerminating(o)
      }, observeTimeoutMs)
    }
  })

/** Start the reconcilers in the current scope; they stop when it closes. */
export const start = (options: Options): Effect.Effect<Running, never, Scope.Scope | ApiClient> =>
  Effect.gen(function* () {
    const client = yield* ApiClient
    const informers = options.informers ?? (yield* Informer.makeShared(client))
    const events = EventRecorder.make(client, { component: options.component ?? "fleet-controller-manager" })
    const all: Array<{ name: string; metrics: () => Metrics; busy: () => boolean; enqueue: (key: string) => void }> = []
    // The same numbers for /metrics: counters as they happen, depths read at scrape time.
    const exported = FleetMetrics.workqueue(yield* MetricRegistry)
    const stopDepth = exported.depth.collect((add) => all.forEach((c) => add([c.name], c.metrics().depth)))
    const stopDelayed = exported.delayed.collect((add) => all.forEach((c) => add([c.name], c.metrics().delayed)))
    yield* Effect.addFinalizer(() => Effect.sync(() => (stopDepth(), stopDelayed())))
    const started = new Map<string, Informer.Informer>()
    const informer = (ref: Client.ResourceRef) => {
      const i = informers.for(ref)
      started.set(refKey(ref), i)
      return i
    }

    for (const r of options.reconcilers) {
      const queue = WorkQueue.make(options.backoff ? { backoff: options.backoff } : {})
      const counts = { adds: 0, reconciles: 0, errors: 0, retries: 0, latencyCount: 0, latencySum: 0 }
      const buckets = bucketBounds.map(() => 0)
      let inFlight = 0
      const series = { adds: exported.adds.labels(r.name), retries: exported.retries.labels(r.name), work: exported.work.labels(r.name), errors: exported.errors.labels(r.name) }
      const enqueue = (key: string) => {
        counts.adds++
        series.adds.inc()
        queue.add(key)
      }
      const primary = informer(r.primary)
      const unsubscribe: Array<() => void> = []
      if (r.reactToPrimary !== false) unsubscribe.push(primary.subscribe((c) => enqueue(Informer.keyOf(c.object))))
      for (const w of r.watches ?? []) {
        const i = informer(w.ref)
        unsubscribe.push(i.subscribe((c) => w.keys(c, informers, enqueue).forEach(enqueue)))
      }
      for (const ref of r.reads ?? []) informer(ref)
      yield* Effect.addFinalizer(() => Effect.sync(() => {
        unsubscribe.forEach((u) => u())
        queue.shutdown()
      }))

      if (r.resync !== undefined) {
        const resync = r.resync
        yield* Effect.forkScoped(
          Effect.forever(
            Effect.sync(() => resync.keys(informers).forEach(enqueue)).pipe(Effect.zipRight(Effect.sleep(resync.everyMs)))
          )
        )
      }

      const worker = Effect.gen(function* () {
        const key = yield* queue.take
        inFlight++
        const written: Written = { revisions: new Map(), deletions: [] }
        const ctx: Context = { client: tracking(client, () => written), informers, events, enqueue }
        const t0 = Date.now()
        const exit = yield* Effect.exit(r.reconcile(key, ctx))
        const ms = Date.now() - t0
        counts.reconciles++
        counts.latencyCount++
        counts.latencySum += ms
        series.work.observe(ms / 1000)
        bucketBounds.forEach((b, i) => {
          if (ms <= b) buckets[i]!++
        })
        yield* observe(started, written)
        if (exit._tag === "Success") {
          queue.forget(key)
          const after = exit.value?.requeueAfterMs
          if (after !== undefined) queue.addAfter(key, after)
        } else {
          counts.errors++
          series.errors.inc()
          const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
          if (failure !== undefined && failure._tag === "TerminalError") {
            queue.forget(key)
            yield* Effect.logWarning(`${r.name}: ${key}: ${failure.message}`)
          } else {
            counts.retries++
            series.retries.inc()
            queue.addRateLimited(key)
            const why = failure !== undefined ? failure.status.message : String(exit.cause)
            if (queue.failures(key) > 3) yield* Effect.logDebug(`${r.name}: ${key}: retry ${queue.failures(key)}: ${why}`)
          }
        }
        inFlight--
        queue.done(key)
      })

      // Workers start once the informers have listed, so the first decisions see everything.
      const ready = Effect.all([primary.synced, ...(r.watches ?? []).map((w) => informers.for(w.ref).synced), ...(r.reads ?? []).map((ref) => informers.for(ref).synced)], { discard: true })
      const workers = Math.max(1, r.workers ?? 2)
      const fiber = yield* Effect.forkScoped(
        ready.pipe(Effect.zipRight(Effect.all(Array.from({ length: workers }, () => Effect.forever(worker)), { concurrency: "unbounded", discard: true })))
      )
      yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))

      all.push({
        name: r.name,
        enqueue,
        busy: () => inFlight > 0 || queue.depth() > 0,
        metrics: () => ({
          name: r.name,
          depth: queue.depth(),
          delayed: queue.delayed(),
          adds: counts.adds,
          reconciles: counts.reconciles,
          errors: counts.errors,
          retries: counts.retries,
          latency: {
            count: counts.latencyCount,
            sumMs: counts.latencySum,
            buckets: bucketBounds.map((b, i) => [b, buckets[i]!] as const)
          }
        })
      })
    }

    const idle = Effect.gen(function* () {
      yield* Effect.all(informers.all().map((i) => i.synced), { discard: true })
      // Quiet for a few consecutive checks: a reconcile's writes queue more work a moment later.
      let quiet = 0
      while (quiet < 3) {
        quiet = all.some((c) => c.busy()) ? 0 : quiet + 1
        yield* Effect.sleep(20)
      }
    })

    return {
      metrics: () => all.map((c) => c.metrics()),
      idle,
      informers,
      enqueue: (name, key) => all.find((c) => c.name === name)?.enqueue(key)
    }
  })
