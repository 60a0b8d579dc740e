/**
 * Acting on a preemption PostFilter chose (upstream's prepareCandidate): lower-priority pods
 * nominated to the node lose their claim on it, the preemptor is nominated there, and each victim
 * gets a `DisruptionTarget` condition, is deleted (with a uid precondition, so a newer pod of the
 * same name is never hit) and a `Preempted` Event. The preemptor itself waits in the queue until
 * the victims are gone.
 */
import { Clock, Effect } from "effect"
import type * as Client from "../client/Client.js"
import type * as EventRecorder from "../client/EventRecorder.js"
import * as Conditions from "../object/Conditions.js"
import { asString } from "../object/Json.js"
import { rfc3339 } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"
import type * as Counters from "./Counters.js"
import type { FailureHandler } from "./FailureHandler.js"
import type { Framework } from "./Framework.js"
import * as DefaultPreemption from "./plugins/DefaultPreemption.js"
import type * as Queue from "./Queue.js"
import type * as Snapshot from "./Snapshot.js"

/** Evicts victims and nominates the preemptor. */
export type Preemptor = (pod: Snapshot.PodInfo, framework: Framework, node: string, victims: ReadonlyArray<Snapshot.PodInfo>) => Effect.Effect<void>

/** The `DisruptionTarget` condition to write on `victim` at `now`, per the profile's scheduler name. */
export const victimTarget = (victim: Snapshot.PodInfo, schedulerName: string, now: string): Conditions.Condition | undefined => {
  const condition = DefaultPreemption.victimCondition(schedulerName)
  // Encoded conditions may carry nulls where `Conditions.Condition` has absent fields; `set` reads neither.
  const conditions = (Views.pod(victim.pod).status?.conditions ?? []) as ReadonlyArray<Conditions.Condition>
  const type = asString(condition["type"])
  return Conditions.get(
    Conditions.set(conditions, { type, status: "True", reason: asString(condition["reason"]), message: asString(condition["message"]) }, now),
    type
  )
}

/**
 * The preemptor of a running scheduler. `nominatedNodes` is the scheduler's set of nodes that may
 * have nominated pods (see `SchedulingCycle.withNominated`).
 */
export const make = (
  client: Client.Client,
  events: EventRecorder.EventRecorder,
  queue: Queue.SchedulingQueue,
  counts: Counters.Counts,
  nominatedNodes: Set<string>,
  failures: FailureHandler
): Preemptor => (pod, framework, node, victims) =>
  Effect.gen(function* () {
    counts.preemptions++
    // Lower-priority pods nominated to this node lose their claim on it.
    for (const p of DefaultPreemption.nominationsToClear(pod, queue.nominated(node))) {
      queue.nominate(p, undefined)
      yield* failures.clearNomination(p.namespace, p.name)
    }
    queue.nominate(pod, node)
    nominatedNodes.add(node)
    yield* Effect.forEach(
      victims,
      (v) =>
        Effect.gen(function* () {
          const target = victimTarget(v, framework.profile.schedulerName, rfc3339(yield* Clock.currentTimeMillis))
          yield* Effect.ignore(client.patch(ResourceRefs.Pod, v.namespace, v.name, "strategic", { status: { conditions: [target] } }, "status"))
          yield* Effect.ignore(client.delete(ResourceRefs.Pod, v.namespace, v.name, { preconditions: { uid: v.uid } }))
          yield* events.record(v.pod, "Normal", "Preempted", `Preempted by pod ${pod.uid} on node ${node}`)
        }),
      { concurrency: 8, discard: true }
    )
  })
