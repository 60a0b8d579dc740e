/**
 * Failed pods against the Job (upstream's backoff record and pastBackoffLimitOnFailure): the
 * delay before replacing failed pods, and container restarts that count against the backoff
 * limit under restartPolicy OnFailure.
 */
import { type JsonObject, asArray, asFiniteNumber, asObject } from "../../../object/Json.js"
import { metadataOf, timeMs } from "../../../object/Metadata.js"
import * as Pods from "../../../object/Pods.js"
import { specOf } from "./Params.js"

/** Upstream's delay before replacing a failed pod, doubled per consecutive failure. */
export const defaultBackoffMs = 10_000

/** Upstream's cap of that delay. */
export const defaultMaxBackoffMs = 360_000

/** When a terminated pod finished: its last container's finish, else when it became unready, else its deletion. */
const finishedAtMs = (pod: JsonObject): number | undefined => {
  const status = asObject(pod["status"])
  let latest: number | undefined
  for (const c of [...asArray(status["containerStatuses"]), ...asArray(status["initContainerStatuses"])]) {
    const t = timeMs(asObject(asObject(asObject(c)["state"])["terminated"])["finishedAt"])
    if (t !== undefined && (latest === undefined || t > latest)) latest = t
  }
  if (latest !== undefined) return latest
  const ready = Pods.condition(pod, "Ready")
  if (ready?.["status"] === "False") {
    const t = timeMs(ready["lastTransitionTime"])
    if (t !== undefined) return t
  }
  return timeMs(metadataOf(pod)["deletionTimestamp"])
}

/**
 * How long to wait before creating replacement pods: `base * 2^(failures-1)` (capped) after the
 * last failure, counting the failures since the last success, as upstream's backoff record.
 */
export const backoffRemainingMs = (pods: ReadonlyArray<JsonObject>, nowMs: number, baseMs: number, maxMs: number): number => {
  let lastSuccess = -Infinity
  for (const p of pods) if (Pods.phase(p) === "Succeeded") lastSuccess = Math.max(lastSuccess, finishedAtMs(p) ?? nowMs)
  let failures = 0
  let lastFailure = -Infinity
  for (const p of pods) {
    if (Pods.phase(p) !== "Failed") continue
    const t = finishedAtMs(p) ?? nowMs
    if (t <= lastSuccess) continue
    failures++
    lastFailure = Math.max(lastFailure, t)
  }
  if (failures === 0) return 0
  let backoff = baseMs
  for (let i = 1; i < failures && backoff < maxMs; i++) backoff *= 2
  backoff = Math.min(backoff, maxMs)
  const elapsed = nowMs - lastFailure
  return backoff < elapsed ? 0 : backoff - elapsed
}

/** Upstream's pastBackoffLimitOnFailure: container restarts of running pods count against the limit. */
export const pastBackoffLimitOnFailure = (job: JsonObject, pods: ReadonlyArray<JsonObject>, backoffLimit: number): boolean => {
  if (asObject(asObject(specOf(job)["template"])["spec"])["restartPolicy"] !== "OnFailure") return false
  let restarts = 0
  for (const p of pods) {
    const phase = Pods.phase(p)
    if (phase !== "Running" && phase !== "Pending") continue
    const status = asObject(p["status"])
    for (const c of [...asArray(status["initContainerStatuses"]), ...asArray(status["containerStatuses"])]) restarts += asFiniteNumber(asObject(c)["restartCount"]) ?? 0
  }
  return backoffLimit === 0 ? restarts > 0 : restarts >= backoffLimit
}
