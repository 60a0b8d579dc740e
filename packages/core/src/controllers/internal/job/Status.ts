/**
 * A Job's status conditions and counters as a sync computes them (upstream's syncJob): failure
 * first (the backoff limit, then the active deadline), completion, `Suspended` on suspend and
 * resume, and the `Complete`/`Failed` condition with its events once every finished pod is counted.
 */
import * as Conditions from "../../../object/Conditions.js"
import { type JsonObject, asArray, asFiniteNumber } from "../../../object/Json.js"
import { pastBackoffLimitOnFailure } from "./Backoff.js"
import type { Finishing, JobEvent } from "./Decision.js"
import type { Params } from "./Params.js"

/** Sets a counter, or removes it at zero: Kubernetes omits zero counters (omitempty); `ready` is a pointer and always written. */
export const withCount = (status: JsonObject, key: string, n: number): void => {
  if (n > 0) status[key] = n
  else delete status[key]
}

/** The status with `active` lowered by `missing`, the pods that could not be created. */
export const withoutMissing = (status: JsonObject | undefined, missing: number): JsonObject | undefined => {
  if (status === undefined || missing === 0) return status
  const fixed = { ...status }
  withCount(fixed, "active", (asFiniteNumber(status["active"]) ?? 0) - missing)
  return fixed
}

/**
 * Whether the Job failed, in upstream's order: past the backoff limit (failed pods, or restarts
 * under OnFailure), then past its active deadline; else when the deadline falls due.
 */
export const failure = (
  job: JsonObject,
  params: Params,
  pods: ReadonlyArray<JsonObject>,
  failed: number,
  startMs: number | undefined,
  nowMs: number
): { readonly finishing?: Finishing; readonly requeueAfterMs?: number } => {
  const deadline = params.activeDeadlineSeconds
  if (failed > params.backoffLimit || pastBackoffLimitOnFailure(job, pods, params.backoffLimit)) {
    return { finishing: { type: "Failed", status: "True", reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit" } }
  }
  if (deadline !== undefined && startMs !== undefined && !params.suspended) {
    const due = startMs + deadline * 1000
    if (nowMs >= due) return { finishing: { type: "Failed", status: "True", reason: "DeadlineExceeded", message: "Job was active longer than specified deadline" } }
    return { requeueAfterMs: due - nowMs }
  }
  return {}
}

/** Whether the Job is complete once `activeAfter` pods run: `completions` succeeded (or, without completions, one), none active. */
export const isComplete = (params: Params, succeeded: number, activeAfter: number): boolean =>
  params.completions === undefined ? succeeded > 0 && activeAfter === 0 : succeeded >= params.completions && activeAfter === 0

/** The `Suspended` condition on suspend and on resume (which starts the deadline again); sets it on `status`, answers its events. */
export const syncSuspended = (status: JsonObject, suspended: boolean, now: string): ReadonlyArray<JobEvent> => {
  const conditions = asArray(status["conditions"]) as ReadonlyArray<Conditions.Condition>
  const current = Conditions.get(conditions, "Suspended")
  if (suspended && current?.status !== "True") {
    status["conditions"] = Conditions.set(conditions, { type: "Suspended", status: "True", reason: "JobSuspended", message: "Job suspended" }, now)
    return [{ type: "Normal", reason: "Suspended", message: "Job suspended" }]
  }
  if (!suspended && current?.status === "True") {
    status["conditions"] = Conditions.set(conditions, { type: "Suspended", status: "False", reason: "JobResumed", message: "Job resumed" }, now)
    // The deadline counts continuous activity: it starts again on resume.
    status["startTime"] = now
    return [{ type: "Normal", reason: "Resumed", message: "Job resumed" }]
  }
  return []
}

/**
 * The finished Job: `finishing` set on `status` (and `completionTime` when complete), its events,
 * and when its `ttlSecondsAfterFinished` falls due.
 */
export const finish = (
  status: JsonObject,
  finishing: Finishing,
  params: Params,
  now: string
): { readonly status: JsonObject; readonly events: ReadonlyArray<JobEvent>; readonly requeueAfterMs: number | undefined } => {
  const final: JsonObject = { ...status, conditions: Conditions.set(asArray(status["conditions"]) as ReadonlyArray<Conditions.Condition>, finishing, now) }
  const events: Array<JobEvent> = []
  if (finishing.type === "Complete") {
    final["completionTime"] = now
    const total = asFiniteNumber(final["succeeded"]) ?? 0
    if (params.completions !== undefined && total > params.completions) {
      events.push({ type: "Warning", reason: "TooManySucceededPods", message: "Too many succeeded pods running after completion count reached" })
    }
    events.push({ type: "Normal", reason: "Completed", message: "Job completed" })
  } else events.push({ type: "Warning", reason: finishing.reason ?? "Failed", message: finishing.message ?? "" })
  const ttl = params.ttlSecondsAfterFinished
  return { status: final, events, requeueAfterMs: ttl === undefined ? undefined : ttl * 1000 }
}
