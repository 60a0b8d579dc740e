/**
 * What one sync of a Job decides (the shape `Job.decide` answers and the reconciler applies in
 * order), and how the requeue delays of its steps combine.
 */
import type * as Conditions from "../../../object/Conditions.js"
import type { JsonObject } from "../../../object/Json.js"

/** An Event to record about the Job. */
export interface JobEvent {
  readonly type: "Normal" | "Warning"
  readonly reason: string
  readonly message: string
}

/** A pod to delete; `removeFinalizer` first for pods that must not be counted (suspend, scale down). */
export interface PodDeletion {
  readonly pod: JsonObject
  readonly removeFinalizer: boolean
}

/** What the Job controller should do, in this order. */
export interface Decision {
  /** Delete the Job itself (its `ttlSecondsAfterFinished` has passed), propagationPolicy Background. */
  readonly deleteJob: boolean
  /** Pods to delete; `removeFinalizer` first for pods that must not be counted (suspend, scale down). */
  readonly delete: ReadonlyArray<PodDeletion>
  /** Pods to create. */
  readonly create: ReadonlyArray<JsonObject>
  /** The status that records newly finished pods as uncounted; written before any finalizer goes. Undefined: unchanged. */
  readonly recordStatus: JsonObject | undefined
  /** Pods whose tracking finalizer to remove once `recordStatus` is written. */
  readonly removeFinalizers: ReadonlyArray<JsonObject>
  /** The status once those finalizers are gone (counters moved, Complete/Failed set). Undefined: same as before. */
  readonly status: JsonObject | undefined
  /** Events to record once `status` is written. */
  readonly events: ReadonlyArray<JobEvent>
  /** Look again after this long (backoff, active deadline, TTL). */
  readonly requeueAfterMs?: number
}

/** Settings of `decide`. */
export interface DecideOptions {
  readonly podFailureBackoffMs?: number
  readonly maxPodFailureBackoffMs?: number
}

/** The condition that finishes the Job (`Complete` or `Failed`), before its times are set. */
export type Finishing = Omit<Conditions.Condition, "lastTransitionTime" | "lastUpdateTime">

/** The soonest of the delays that are defined (never negative), or undefined when none is. */
export const soonest = (...values: ReadonlyArray<number | undefined>): number | undefined => {
  const defined = values.filter((v): v is number => v !== undefined)
  return defined.length === 0 ? undefined : Math.max(0, Math.min(...defined))
}
