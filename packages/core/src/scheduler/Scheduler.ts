/**
 * The scheduler at run time: the Effect edge around the pure pipeline, in the shape of
 * kube-scheduler. This module only wires the parts, each a module of its own:
 *
 *   informers ─▶ EventHandlers ─▶ Snapshot.Cache (nodes, bound pods) ─▶ snapshot + nominated ┐
 *                             └─▶ Queue (pending pods) ─▶ pop ─────────────────────────────┴▶ SchedulingCycle
 *                                   ▲                                                            │ schedule ─▶ reserve ─▶ assume
 *                                   └──── moveOnEvent ◀── cluster events                          ├▶ BindingCycle: volumes, bind (async)
 *                                                                                                 │   failed: forget, unreserve, back off
 *                                                                                                 └▶ unschedulable: Preemptor, park,
 *                                                                                                    FailureHandler (condition, Event)
 *
 * `Frameworks` builds one framework per profile with the handle plugins read the informers
 * through; `VolumeBindingScope` says which claims the scheduler binds (Fleet has no PV
 * controller); `Decisions` keeps the last decisions for `explain`.
 */
import { Effect, Fiber, type Scope } from "effect"
import { ApiClient } from "../client/ApiClient.js"
import * as EventRecorder from "../client/EventRecorder.js"
import * as Informer from "../informer/Informer.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import { MetricRegistry } from "../observability/MetricRegistry.js"
import * as BindingCycle from "./BindingCycle.js"
import * as Counters from "./Counters.js"
import { Decisions } from "./Decisions.js"
import * as EventHandlers from "./EventHandlers.js"
import * as FailureHandler from "./FailureHandler.js"
import type { Profile, Registry } from "./Framework.js"
import * as Frameworks from "./Frameworks.js"
import * as Batch from "./OpportunisticBatching.js"
import * as Plugins from "./plugins/index.js"
import * as Preemptor from "./Preemptor.js"
import * as Profiles from "./Profiles.js"
import * as Queue from "./Queue.js"
import type * as Schedule from "./Schedule.js"
import * as SchedulingCycle from "./SchedulingCycle.js"
import * as Snapshot from "./Snapshot.js"

/** How to run the scheduler (it reads and binds through the context's `ApiClient`). */
export interface Options {
  /** Informers to share (default: its own). */
  readonly informers?: Informer.Informers
  /** Profiles, each answering for its `schedulerName` (default: `default-scheduler` with the default plugins). */
  readonly profiles?: ReadonlyArray<Profile>
  /** Plugin factories (default: every built-in plugin). */
  readonly registry?: Registry
  /** Cluster-wide percentageOfNodesToScore (a profile's own value wins). */
  readonly percentageOfNodesToScore?: number
  /** Bindings in flight at once (default 64). */
  readonly bindConcurrency?: number
  /** Queue timings (tests shrink them). */
  readonly queue?: Queue.Options
  /** The component name on Events (default `default-scheduler`). */
  readonly component?: string
  /** How many pods' last decisions are kept for `explain` (default 1,000, most recent). */
  readonly decisionsKept?: number
  /** Reuse a cycle's scores for the next pods with the same signature (default true; see `OpportunisticBatching.ts`). */
  readonly batching?: boolean
}

/** Counters of a running scheduler. */
export interface Metrics {
  /** Scheduling cycles run (one per pod popped from the queue). */
  readonly attempts: number
  /** Pods bound. */
  readonly scheduled: number
  /** Cycles that found no node. */
  readonly unschedulable: number
  /** Cycles or bindings that failed (retried with backoff). */
  readonly errors: number
  /** Pods placed from an earlier cycle's scores (opportunistic batching). */
  readonly batched: number
  /** Preemptions started (victims evicted, node nominated). */
  readonly preemptions: number
  readonly bindingsInFlight: number
  readonly queue: Queue.Lengths
}

/** A running scheduler. */
export interface Running {
  /** The last placement decision of a pod (by uid), explained node by node. */
  readonly explain: (uid: string) => Schedule.Explanation | undefined
  readonly metrics: () => Metrics
  /** Where a pending pod (by uid) waits in the queue, if it does. */
  readonly queued: (uid: string) => "active" | "backoff" | "unschedulable" | "inFlight" | undefined
}

/** Start the scheduler in the current scope. */
export const start = (options: Options): Effect.Effect<Running, string, Scope.Scope | ApiClient> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const client = yield* ApiClient
    const informers = options.informers ?? (yield* Informer.makeShared(client))
    const events = EventRecorder.make(client, { component: options.component ?? Profiles.DefaultSchedulerName })
    const nodes = informers.for(ResourceRefs.Node)
    const pods = informers.for(ResourceRefs.Pod)
    const volumes = informers.for(ResourceRefs.PersistentVolume)
    const claims = informers.for(ResourceRefs.PersistentVolumeClaim)

    const built = Frameworks.build(options.profiles ?? [Profiles.defaultProfile], options.registry ?? Plugins.registry, informers, BindingCycle.bindPod(client))
    if (built._tag === "Left") return yield* Effect.fail(built.left)
    const frameworks = built.right
    const first = frameworks.first
    const queue = Queue.make({
      ...options.queue,
      ...(first.queueSort === undefined ? {} : { less: first.queueSort.less }),
      pluginEvents: { ...Queue.eventsOf(frameworks.rejecting), ...options.queue?.pluginEvents }
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => queue.close()))
    const cache = Snapshot.Cache.make()
    const batch = options.batching === false ? Batch.unbatched : Batch.make()
    const decisions = new Decisions(options.decisionsKept ?? 1_000)
    const counts = Counters.make()
    // Nodes that may have nominated pods (a superset, pruned as nominations go), so a cycle looks
    // at a handful of nodes for nominations rather than at all of them.
    const nominatedNodes = new Set<string>()

    const unsubscribe = EventHandlers.subscribe({ nodes, pods, volumes, claims }, { cache, queue, decisions, names: new Set(frameworks.byName.keys()), nominatedNodes })
    yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))
    yield* Effect.all(
      [
        nodes,
        pods,
        informers.for(ResourceRefs.Namespace),
        informers.for(ResourceRefs.Service),
        volumes,
        claims,
        informers.for(ResourceRefs.PodDisruptionBudget)
      ].map((i) => i.synced),
      { discard: true }
    )

    const failures = yield* FailureHandler.make(client, pods, events, scope)
    const bind = yield* BindingCycle.make({ client, pods, volumes, claims, queue, cache, counts, failures, concurrency: options.bindConcurrency ?? 64 }, scope)
    const cycle = SchedulingCycle.make({
      frameworks,
      queue,
      cache,
      batch,
      decisions,
      counts,
      nominatedNodes,
      failures,
      preempt: Preemptor.make(client, events, queue, counts, nominatedNodes, failures),
      bind,
      metrics: FleetMetrics.scheduler(yield* MetricRegistry),
      percentageOfNodesToScore: options.percentageOfNodesToScore
    })

    const loop = yield* Effect.forkIn(Effect.forever(cycle.scheduleOne), scope)
    yield* Effect.addFinalizer(() => Fiber.interrupt(loop))

    return {
      explain: (uid) => decisions.explain(uid),
      metrics: () => ({
        attempts: counts.attempts,
        scheduled: counts.scheduled,
        unschedulable: counts.unschedulable,
        errors: counts.errors,
        batched: batch.batched(),
        preemptions: counts.preemptions,
        bindingsInFlight: counts.inFlight,
        queue: queue.lengths()
      }),
      queued: (uid) => queue.where(uid)
    }
  })
