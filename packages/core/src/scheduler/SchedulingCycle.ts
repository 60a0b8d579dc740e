/**
 * The scheduling cycle (upstream's scheduleOne, up to the binding): pop the best pending pod, take
 * a snapshot with the pods nominated by earlier preemptions counted on their nodes, run
 * `Schedule.schedule` (or the batch) for the pod's profile, and then either
 *
 * - reserve and permit on the chosen node, assume the pod in the cache (the next cycle, which
 *   starts at once, sees the room it takes) and start its binding cycle; or
 * - record why it fits nowhere (`FailureHandler`), act on the preemption PostFilter chose
 *   (`Preemptor`), and park it in the queue until a cluster event that could help.
 *
 * Departures: nominated pods are added to their nodes for the Filter pass only (upstream also
 * filters once without them, which matters only for affinity to a nominated pod); a Permit plugin
 * answering Wait is taken as a rejection (no waiting pods); no `Scheduled` Event is recorded on
 * success (one more write per pod).
 */
import { Clock, Effect } from "effect"
import type * as FleetMetrics from "../observability/FleetMetrics.js"
import * as Views from "../object/Views.js"
import type { BindingCycle } from "./BindingCycle.js"
import { unreserve } from "./BindingCycle.js"
import type * as Counters from "./Counters.js"
import type { Decisions } from "./Decisions.js"
import type { FailureHandler } from "./FailureHandler.js"
import { isSuccess, type QueuedPodInfo, type Status } from "./Framework.js"
import * as Frameworks from "./Frameworks.js"
import type * as Batch from "./OpportunisticBatching.js"
import { nominatedNodeOf, schedulerNameOf } from "./PendingPods.js"
import type { Preemptor } from "./Preemptor.js"
import * as Profiles from "./Profiles.js"
import type * as Queue from "./Queue.js"
import * as Schedule from "./Schedule.js"
import * as Snapshot from "./Snapshot.js"

/** How a cycle ended, as the attempt metrics count it. */
export type Result = "scheduled" | "unschedulable" | "error"

/**
 * The snapshot with the pods nominated to a node (of at least `pod`'s priority, not `pod`) counted
 * there, as upstream's RunFilterPluginsWithNominatedPods: the room a preemption made is kept for
 * the preemptor. `nominatedNodes` is a superset of the nodes with nominations, pruned here as they
 * go, so a cycle looks at a handful of nodes rather than all. Costs nothing without nominations.
 */
export const withNominated = (
  snapshot: Snapshot.Snapshot,
  pod: Snapshot.PodInfo,
  nominatedNodes: Set<string>,
  nominated: (node: string) => ReadonlyArray<Snapshot.PodInfo>
): Snapshot.Snapshot => {
  if (nominatedNodes.size === 0) return snapshot
  let views: Map<string, Snapshot.NodeInfo> | undefined
  for (const name of nominatedNodes) {
    const list = nominated(name)
    if (list.length === 0) {
      nominatedNodes.delete(name)
      continue
    }
    const original = snapshot.get(name)
    if (original === undefined) continue
    let view = original
    for (const p of list) if (p.uid !== pod.uid && p.priority >= pod.priority) view = Snapshot.withPod(view, p)
    if (view !== original) (views ??= new Map()).set(name, view)
  }
  if (views === undefined) return snapshot
  const replaced = views
  const listed = new Set<string>()
  const withAffinityPods = snapshot.withAffinityPods.map((n) => {
    const v = replaced.get(n.name)
    if (v === undefined) return n
    listed.add(n.name)
    return v
  })
  for (const [name, v] of replaced) if (!listed.has(name) && Snapshot.hasAffinityPods(v)) withAffinityPods.push(v)
  return { nodes: snapshot.nodes.map((n) => replaced.get(n.name) ?? n), get: (name) => replaced.get(name) ?? snapshot.get(name), withAffinityPods }
}

/** What a scheduling cycle works with. */
export interface Deps {
  readonly frameworks: Frameworks.Frameworks
  readonly queue: Queue.SchedulingQueue
  readonly cache: Snapshot.Cache
  readonly batch: Batch.Batch
  readonly decisions: Decisions
  readonly counts: Counters.Counts
  /** Nodes that may have nominated pods (see `withNominated`). */
  readonly nominatedNodes: Set<string>
  readonly failures: FailureHandler
  readonly preempt: Preemptor
  readonly bind: BindingCycle
  readonly metrics: ReturnType<typeof FleetMetrics.scheduler>
  /** Cluster-wide percentageOfNodesToScore (a profile's own value wins). */
  readonly percentageOfNodesToScore?: number | undefined
}

/** The scheduling cycles of a running scheduler. */
export interface SchedulingCycle {
  /** One cycle of a popped pod; answers its result. */
  readonly attempt: (qpi: QueuedPodInfo) => Effect.Effect<Result>
  /** Pop the best pod and run its cycle, recording the attempt metrics; a defect backs the pod off. */
  readonly scheduleOne: Effect.Effect<void>
}

/** The scheduling cycles over `deps`; the round-robin start index is their state. */
export const make = (deps: Deps): SchedulingCycle => {
  const { queue, cache, batch, counts, failures } = deps
  let startIndex = 0
  const scheduleOptions = (): Schedule.Options => ({
    startIndex,
    ...(deps.percentageOfNodesToScore === undefined ? {} : { percentageOfNodesToScore: deps.percentageOfNodesToScore }),
    random: Math.random
  })

  // No node fits: act on what PostFilter chose, park the pod and report why.
  const unschedulable = (qpi: QueuedPodInfo, framework: Frameworks.Frameworks["first"], decision: Extract<Schedule.Decision, { _tag: "Unschedulable" }>) =>
    Effect.gen(function* () {
      const pod = qpi.pod
      counts.unschedulable++
      const pf = decision.postFilter
      let nominate: string | null | undefined
      if (pf?.nominatedNode !== undefined && pf.nominatedNode !== "" && (pf.victims?.length ?? 0) > 0) {
        yield* deps.preempt(pod, framework, pf.nominatedNode, pf.victims ?? [])
        nominate = pf.nominatedNode
      } else if (pf?.nominatedNode === "") {
        // Preemption found nothing: an earlier nomination did not help (upstream clears it).
        queue.nominate(pod, undefined)
        nominate = null
      }
      queue.addUnschedulable(qpi, decision.unschedulablePlugins)
      yield* failures.reportFailure(pod, "Unschedulable", decision.message, nominate)
      return "unschedulable" as const
    })

  const attempt = (qpi: QueuedPodInfo): Effect.Effect<Result> =>
    Effect.gen(function* () {
      const pod = qpi.pod
      counts.attempts++
      const framework = Frameworks.forName(deps.frameworks, schedulerNameOf(pod.pod))
      const snapshot = withNominated(cache.snapshot(), pod, deps.nominatedNodes, queue.nominated)
      const { decision, state } = batch.schedule(framework, pod, snapshot, scheduleOptions(), yield* Clock.currentTimeMillis)
      startIndex = decision.nextStartIndex
      deps.decisions.remember(pod.uid, decision)
      if (decision._tag === "Error") {
        counts.errors++
        queue.addUnschedulable(qpi, [])
        yield* failures.reportFailure(pod, "SchedulerError", decision.message)
        return "error" as const
      }
      if (decision._tag === "Unschedulable") return yield* unschedulable(qpi, framework, decision)
      // Reserve and Permit on the chosen node; a rejection reads as upstream's one-node FitError.
      const node = decision.node
      const reject = (s: Status, plugin: string) =>
        Effect.gen(function* () {
          unreserve(framework, state, pod, node)
          counts.unschedulable++
          const rejected = s.code === "Unschedulable" || s.code === "UnschedulableAndUnresolvable" || s.code === "Wait"
          queue.addUnschedulable(qpi, rejected ? [plugin] : [])
          yield* failures.reportFailure(
            pod,
            rejected ? "Unschedulable" : "SchedulerError",
            rejected ? Schedule.fitErrorMessage(1, [s]) : `running ${plugin} plugin: ${Schedule.statusMessage(s)}`
          )
          return rejected ? ("unschedulable" as const) : ("error" as const)
        })
      for (const r of framework.reserve) {
        const s = r.reserve(state, pod, node)
        if (!isSuccess(s)) return yield* reject(s, r.name)
      }
      for (const p of framework.permit) {
        const verdict = p.permit(state, pod, node)
        if (!isSuccess(verdict.status)) return yield* reject(verdict.status, p.name)
      }
      // Count the pod on its node before the API confirms it, so the next cycle (which starts now,
      // not after the write) sees the room it takes; its nomination, if any, is now that assumption.
      const nominated = queue.nominatedNode(pod.uid) !== undefined || nominatedNodeOf(pod.pod) !== ""
      cache.assume(pod, node)
      queue.nominate(pod, undefined)
      yield* deps.bind(framework, state, qpi, node, nominated)
      return "scheduled" as const
    })

  // A defect in a cycle (a bug) must not stop scheduling: the pod backs off and the loop goes on.
  const scheduleOne = Effect.flatMap(queue.pop, (qpi) => {
    const t0 = performance.now()
    // Only configured profiles become label values (a pod may name any scheduler).
    const named = Views.pod(qpi.pod.pod).spec?.schedulerName ?? ""
    const profile = deps.frameworks.byName.has(named) ? named : Profiles.DefaultSchedulerName
    const record = (result: string) =>
      Effect.sync(() => {
        deps.metrics.attempts.labels(result, profile).inc()
        deps.metrics.duration.labels(result, profile).observe((performance.now() - t0) / 1000)
      })
    return attempt(qpi).pipe(
      Effect.flatMap(record),
      Effect.catchAllDefect(() =>
        Effect.sync(() => {
          counts.errors++
          queue.addUnschedulable(qpi, [])
        }).pipe(Effect.zipRight(record("error")))
      )
    )
  })

  return { attempt, scheduleOne }
}
