/**
 * Finalizer-based tracking of finished pods (upstream's trackJobStatusAndRemoveFinalizers): every
 * pod carries the `batch.kubernetes.io/job-tracking` finalizer; a pod that terminated is first
 * recorded by uid in `status.uncountedTerminatedPods` (one status write), then loses its
 * finalizer, and only then moves from that list into the `succeeded`/`failed` counters (a second
 * write). Indexed Jobs count successes by index in `completedIndexes` instead.
 */
import { type JsonObject, asFiniteNumber, asObject, asString, asStrings } from "../../../object/Json.js"
import { finalizersOf, isTerminating, uidOf } from "../../../object/Metadata.js"
import * as Pods from "../../../object/Pods.js"
import { completionIndex, formatIndexes, parseIndexes, validIndex } from "./Indexes.js"
import type { Params } from "./Params.js"
import { withCount } from "./Status.js"

/** The finalizer that keeps a finished pod until the Job has counted it. */
export const trackingFinalizer = "batch.kubernetes.io/job-tracking"

// Upstream's bound: at most this many uncounted pods per sync.
const maxUncountedPods = 500

/** Whether the pod carries the job-tracking finalizer (it is not counted yet). */
export const hasTrackingFinalizer = (pod: JsonObject): boolean => finalizersOf(pod).includes(trackingFinalizer)

/**
 * A finished-and-failed pod as upstream sees it: phase Failed, or deleted before it succeeded
 * (an orphaned or evicted pod may never reach a terminal phase).
 */
export const isFailedPod = (pod: JsonObject): boolean => {
  const phase = Pods.phase(pod)
  return phase === "Failed" || (isTerminating(pod) && phase !== "Succeeded")
}

/** The Job's counts at the start of a sync. */
export interface Counts {
  /** `status.succeeded`, plus the uncounted uids whose pods already lost the finalizer (or are gone). */
  readonly succeededCount: number
  /** `status.failed`, likewise. */
  readonly failedCount: number
  /** Uncounted uids of succeeded pods that still carry the finalizer. */
  readonly uncountedSucceeded: ReadonlyArray<string>
  /** Uncounted uids of failed pods that still carry the finalizer. */
  readonly uncountedFailed: ReadonlyArray<string>
  /** The indexes of `status.completedIndexes` (Indexed Jobs). */
  readonly previousIndexes: ReadonlyArray<number>
  /** Those and the indexes of newly succeeded pods (Indexed Jobs). */
  readonly succeededIndexes: ReadonlySet<number>
  /** Every success so far, counted or not, including pods that just finished. */
  readonly succeeded: number
  /** Every failure so far, counted or not, including pods that just finished. */
  readonly failed: number
}

/**
 * The counters as stored, with the uncounted uids whose pods lost the finalizer (or are gone)
 * moved into them (those removals happened after the uids were recorded), and the totals
 * including pods that finished since.
 */
export const count = (params: Params, status: JsonObject, pods: ReadonlyArray<JsonObject>): Counts => {
  const { indexed, completions } = params
  const tracked = new Set(pods.filter(hasTrackingFinalizer).map(uidOf))
  const oldUncounted = asObject(status["uncountedTerminatedPods"])
  let succeededCount = asFiniteNumber(status["succeeded"]) ?? 0
  let failedCount = asFiniteNumber(status["failed"]) ?? 0
  const uncountedSucceeded: Array<string> = []
  const uncountedFailed: Array<string> = []
  for (const uid of asStrings(oldUncounted["succeeded"])) {
    if (tracked.has(uid)) uncountedSucceeded.push(uid)
    else succeededCount++
  }
  for (const uid of asStrings(oldUncounted["failed"])) {
    if (tracked.has(uid)) uncountedFailed.push(uid)
    else failedCount++
  }
  const inUncounted = (uid: string) => uncountedSucceeded.includes(uid) || uncountedFailed.includes(uid)

  const newlyFinished = pods.filter((p) => hasTrackingFinalizer(p) && !inUncounted(uidOf(p)) && validIndex(params, p))
  const newSucceeded = newlyFinished.filter((p) => Pods.phase(p) === "Succeeded")
  const newFailed = newlyFinished.filter(isFailedPod)

  const previousIndexes = indexed ? parseIndexes(asString(status["completedIndexes"]), completions ?? 0) : []
  const succeededIndexes = new Set(previousIndexes)
  if (indexed) for (const p of newSucceeded) succeededIndexes.add(completionIndex(p)!)
  return {
    succeededCount,
    failedCount,
    uncountedSucceeded,
    uncountedFailed,
    previousIndexes,
    succeededIndexes,
    succeeded: indexed ? succeededIndexes.size : succeededCount + uncountedSucceeded.length + newSucceeded.length,
    failed: failedCount + uncountedFailed.length + newFailed.length
  }
}

/** The finished pods this sync records and releases. */
export interface Tracked {
  /** Pods whose tracking finalizer goes once they are recorded. */
  readonly removeFinalizers: ReadonlyArray<JsonObject>
  /** Uncounted uids of succeeded pods, with the newly recorded ones (NonIndexed Jobs). */
  readonly uncountedSucceeded: ReadonlyArray<string>
  /** Uncounted uids of failed pods, with the newly recorded ones. */
  readonly uncountedFailed: ReadonlyArray<string>
  /** Indexes newly completed (Indexed Jobs). */
  readonly newIndexes: ReadonlyArray<number>
  /** The sync stopped at the bound of uncounted pods: some finished pods wait for the next. */
  readonly reachedMax: boolean
}

/**
 * Records finished pods as uncounted and picks them for finalizer removal; when the Job is being
 * deleted or is finishing, every tracked pod goes, and (finishing) one still running counts as failed.
 */
export const track = (params: Params, counts: Counts, pods: ReadonlyArray<JsonObject>, deleting: boolean, finishing: boolean): Tracked => {
  const { indexed, completions } = params
  const uncountedSucceeded = [...counts.uncountedSucceeded]
  const uncountedFailed = [...counts.uncountedFailed]
  const removeFinalizers: Array<JsonObject> = []
  const newIndexes: Array<number> = []
  let reachedMax = false
  const sorted = indexed ? [...pods].sort((a, b) => (completionIndex(a) ?? Infinity) - (completionIndex(b) ?? Infinity)) : pods
  for (const pod of sorted) {
    if (!hasTrackingFinalizer(pod)) continue
    const uid = uidOf(pod)
    const failedPod = isFailedPod(pod)
    const succeededPod = Pods.phase(pod) === "Succeeded"
    if (!(deleting || finishing || succeededPod || failedPod)) continue
    removeFinalizers.push(pod)
    if (succeededPod && !uncountedFailed.includes(uid)) {
      if (indexed) {
        const ix = completionIndex(pod)
        if (ix !== undefined && ix < (completions ?? 0) && !counts.previousIndexes.includes(ix)) newIndexes.push(ix)
      } else if (!uncountedSucceeded.includes(uid)) uncountedSucceeded.push(uid)
    } else if ((failedPod || finishing) && !uncountedFailed.includes(uid) && validIndex(params, pod)) {
      // Once the Job has failed or completed, a pod still running is counted as failed.
      uncountedFailed.push(uid)
    }
    if (newIndexes.length + uncountedSucceeded.length + uncountedFailed.length >= maxUncountedPods) {
      reachedMax = true
      break
    }
  }
  return { removeFinalizers, uncountedSucceeded, uncountedFailed, newIndexes, reachedMax }
}

/** `status.uncountedTerminatedPods` of these uids (empty lists omitted). */
const uncountedStatus = (succeeded: ReadonlyArray<string>, failed: ReadonlyArray<string>) => ({
  ...(succeeded.length > 0 ? { succeeded: [...succeeded] } : {}),
  ...(failed.length > 0 ? { failed: [...failed] } : {})
})

/** The first write: `status` with the tracked pods recorded as uncounted (and new indexes completed). */
export const recordedStatus = (status: JsonObject, params: Params, counts: Counts, tracked: Tracked): JsonObject => {
  const next: JsonObject = { ...status }
  let succeededCount = counts.succeededCount
  if (params.indexed) {
    const completedIndexes = formatIndexes([...counts.previousIndexes, ...tracked.newIndexes])
    next["completedIndexes"] = completedIndexes
    succeededCount = parseIndexes(completedIndexes, params.completions ?? 0).length
  }
  withCount(next, "succeeded", succeededCount)
  withCount(next, "failed", counts.failedCount)
  next["uncountedTerminatedPods"] = uncountedStatus(tracked.uncountedSucceeded, tracked.uncountedFailed)
  return next
}

/**
 * The second write: the recorded status once the finalizers are gone, their uids moved into the
 * counters; `allCounted` when no finished pod is left uncounted (the Job may then be declared finished).
 */
export const countedStatus = (recorded: JsonObject, params: Params, counts: Counts, tracked: Tracked): { readonly status: JsonObject; readonly allCounted: boolean } => {
  const removed = new Set(tracked.removeFinalizers.map(uidOf))
  const status: JsonObject = { ...recorded }
  const stillSucceeded = tracked.uncountedSucceeded.filter((u) => !removed.has(u))
  const stillFailed = tracked.uncountedFailed.filter((u) => !removed.has(u))
  if (!params.indexed) withCount(status, "succeeded", counts.succeededCount + tracked.uncountedSucceeded.length - stillSucceeded.length)
  withCount(status, "failed", counts.failedCount + tracked.uncountedFailed.length - stillFailed.length)
  status["uncountedTerminatedPods"] = uncountedStatus(stillSucceeded, stillFailed)
  return { status, allCounted: !tracked.reachedMax && stillSucceeded.length === 0 && stillFailed.length === 0 }
}
