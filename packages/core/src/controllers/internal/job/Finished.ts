/**
 * A Job that has finished (its `Complete` or `Failed` condition is True): nothing runs any more;
 * leftovers (a pod created but unseen when the Job finished) lose their finalizer uncounted, as
 * upstream's orphan handling does, and once `ttlSecondsAfterFinished` has passed the Job itself
 * is deleted (upstream's TTL-after-finished controller).
 */
import type * as Conditions from "../../../object/Conditions.js"
import type { JsonObject } from "../../../object/Json.js"
import { isTerminating, timeMs } from "../../../object/Metadata.js"
import type { Decision } from "./Decision.js"
import * as Params from "./Params.js"
import { hasTrackingFinalizer } from "./Tracking.js"

/** The sync of a Job finished with condition `finished`, at `nowMs`. */
export const decide = (job: JsonObject, finished: Conditions.Condition, pods: ReadonlyArray<JsonObject>, nowMs: number): Decision => {
  const leftovers = pods.filter(hasTrackingFinalizer)
  const ttl = Params.of(job).ttlSecondsAfterFinished
  const finishedAt = timeMs(Params.statusOf(job)["completionTime"]) ?? timeMs(finished.lastTransitionTime) ?? nowMs
  const expires = ttl === undefined || isTerminating(job) ? undefined : finishedAt + ttl * 1000
  const expired = expires !== undefined && nowMs >= expires
  return {
    deleteJob: expired,
    delete: [],
    create: [],
    recordStatus: undefined,
    removeFinalizers: expired ? [] : leftovers,
    status: undefined,
    events: [],
    ...(expires !== undefined && !expired ? { requeueAfterMs: expires - nowMs } : {})
  }
}
