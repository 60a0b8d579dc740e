/**
 * What the scheduler writes when a pod does not fit (upstream's handleSchedulingFailure): the
 * `PodScheduled=False` condition, `status.nominatedNodeName` when it changes, and a
 * FailedScheduling Warning Event, in kube-scheduler's words. The writes go in the background, a
 * few at a time, so a burst of unschedulable pods does not hold the scheduling loop on API writes.
 */
import { Clock, Effect, type Scope } from "effect"
import type * as Client from "../client/Client.js"
import type * as EventRecorder from "../client/EventRecorder.js"
import type * as Informer from "../informer/Informer.js"
import * as Conditions from "../object/Conditions.js"
import type { JsonObject } from "../object/Json.js"
import { rfc3339, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"
import { isBound, nominatedNodeOf } from "./PendingPods.js"
import type * as Snapshot from "./Snapshot.js"

/** Why a cycle failed, as the `PodScheduled` condition's reason says it. */
export type Reason = "Unschedulable" | "SchedulerError"

/** The failure writes of a running scheduler. */
export interface FailureHandler {
  /**
   * Record a failed attempt: `PodScheduled=False`, `status.nominatedNodeName` when `nominate`
   * changes it (`null` clears it), and a FailedScheduling Warning. Skipped for a pod that is gone
   * or bound meanwhile.
   */
  readonly reportFailure: (pod: Snapshot.PodInfo, reason: Reason, message: string, nominate?: string | null) => Effect.Effect<void>
  /** Clear a pod's `status.nominatedNodeName` (the nomination no longer holds), in the background. */
  readonly clearNomination: (namespace: string, name: string) => Effect.Effect<void>
}

/** The pod as the informer has it now, if it is still the same pending pod. */
export const current = (pods: Informer.Informer, pod: Snapshot.PodInfo): JsonObject | undefined => {
  const now = pods.get(pod.namespace, pod.name)
  return now !== undefined && uidOf(now) === pod.uid && !isBound(now) ? now : undefined
}

/**
 * The status patch recording a failed attempt on `latest` at `now`: the changed `PodScheduled`
 * condition and nomination, or undefined when neither changes.
 */
export const failurePatch = (latest: JsonObject, reason: Reason, message: string, nominate: string | null | undefined, now: string): Record<string, unknown> | undefined => {
  // Encoded conditions may carry nulls where `Conditions.Condition` has absent fields; `set` reads neither.
  const conditions = (Views.pod(latest).status?.conditions ?? []) as ReadonlyArray<Conditions.Condition>
  const next = Conditions.set(conditions, { type: "PodScheduled", status: "False", reason, message }, now)
  const patch: Record<string, unknown> = {}
  if (next !== conditions) patch["conditions"] = [Conditions.get(next, "PodScheduled")]
  if (nominate !== undefined && (nominate ?? "") !== nominatedNodeOf(latest)) patch["nominatedNodeName"] = nominate
  return Object.keys(patch).length > 0 ? patch : undefined
}

/** The failure writes, forked in `scope`. */
export const make = (client: Client.Client, pods: Informer.Informer, events: EventRecorder.EventRecorder, scope: Scope.Scope): Effect.Effect<FailureHandler> =>
  Effect.map(Effect.makeSemaphore(16), (reporting) => {
    const background = <A>(effect: Effect.Effect<A>) => Effect.asVoid(Effect.forkIn(effect, scope))
    return {
      reportFailure: (pod, reason, message, nominate) =>
        background(
          reporting.withPermits(1)(
            Effect.gen(function* () {
              const latest = current(pods, pod)
              if (latest === undefined) return
              const patch = failurePatch(latest, reason, message, nominate, rfc3339(yield* Clock.currentTimeMillis))
              if (patch !== undefined) {
                // Strategic merge: conditions merge by type, so a concurrent writer's other conditions stay.
                yield* Effect.ignore(client.patch(ResourceRefs.Pod, pod.namespace, pod.name, "strategic", { status: patch }, "status"))
              }
              yield* events.record(latest, "Warning", "FailedScheduling", message)
            })
          )
        ),
      clearNomination: (namespace, name) =>
        background(Effect.ignore(client.patch(ResourceRefs.Pod, namespace, name, "merge", { status: { nominatedNodeName: null } }, "status")))
    }
  })
