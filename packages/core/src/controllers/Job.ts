/**
 * The Job controller: runs a Job's pods until enough of them succeed, or until the Job fails, as
 * kube-controller-manager's job controller does (v1.28 behaviour with the GA features):
 * `parallelism`, `completions` (NonIndexed: complete at `succeeded >= completions`; without
 * completions, work-queue semantics: complete when a pod succeeded and none is active), Indexed
 * completion (`batch.kubernetes.io/job-completion-index` annotation and label, `JOB_COMPLETION_INDEX`
 * from the downward API, hostname `<job>-<index>`, pods named `<job>-<index>-<random>`,
 * `status.completedIndexes` as `0-3,5`), `backoffLimit` (failed pods; with restartPolicy OnFailure
 * also container restarts), `activeDeadlineSeconds`, `suspend`, exponential backoff before
 * replacing failed pods, and `status.{startTime, completionTime, active, ready, succeeded, failed}`.
 *
 * Finished pods are counted exactly once, even across controller restarts, as upstream's
 * finalizer-based tracking does: every pod is created with the `batch.kubernetes.io/job-tracking`
 * finalizer; a pod that terminated is first recorded by uid in `status.uncountedTerminatedPods`
 * (one status write), then loses its finalizer, and only then moves from that list into the
 * `succeeded`/`failed` counters (a second write). A crash between any two steps leaves enough in
 * the status and on the pods to finish the count without counting twice, and a counted pod may be
 * removed by pod GC without changing the counts. Indexed Jobs count successes by index, so their
 * succeeded pods never go through the uid list.
 *
 * Pods of a deleted Job, or of a Job being deleted, lose the finalizer without being counted (found
 * by controller reference, or by the job-name label once orphaned), so they can go. Suspending
 * deletes the active pods uncounted and clears `startTime`, as newer upstream does.
 *
 * Also done here, although upstream has a separate controller for it: `ttlSecondsAfterFinished`
 * (the finished Job is deleted with propagationPolicy Background; upstream's TTL controller uses
 * Foreground). Departures: no pod failure policy, `backoffLimitPerIndex`, `podReplacementPolicy`
 * (pods are replaced as soon as they are terminating, the default), `successPolicy`,
 * `status.terminating` or `managedBy`; no adoption of orphaned pods matching the selector (the
 * generated selector is the Job's uid, so only `manualSelector` Jobs could have any); the failure
 * backoff is derived from the failed pods still present (upstream keeps it in memory), so it
 * shortens once pod GC removed them; the interim `FailureTarget` condition of newer versions is
 * not written; no "expectations" (the runner waits until the informers show this sync's writes).
 */
import { Clock, Effect } from "effect"
import type * as Client from "../client/Client.js"
import * as Batch from "../model/Batch.js"
import * as Conditions from "../object/Conditions.js"
import * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import * as Pods from "../object/Pods.js"
import * as ReplicaSet from "./ReplicaSet.js"
import { type JsonObject, asArray, asObject, stableJson } from "../object/Json.js"
import { controllerRefOf, isTerminating, metadataOf, nameOf, rfc3339, timeMs, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The finalizer that keeps a finished pod until the Job has counted it. */
export const trackingFinalizer = "batch.kubernetes.io/job-tracking"
const completionIndexAnnotation = Batch.JobCompletionIndexAnnotation
const controllerUidLabel = Batch.ControllerUidLabel
const jobNameLabel = Batch.JobNameLabel

/** The Job resource. */
export const JobRef: Client.ResourceRef = { apiVersion: "batch/v1", kind: "Job" }

// Upstream's bounds: at most this many pod creations/deletions and uncounted pods per sync.
const maxPodChangesPerSync = 500
const maxUncountedPods = 500

/** Options of the Job controller. */
export interface Options {
  /** Delay before replacing a failed pod, doubled per consecutive failure (upstream: 10 s). */
  readonly podFailureBackoffMs?: number
  /** The cap of that delay (upstream: 6 min). */
  readonly maxPodFailureBackoffMs?: number
  /** Concurrent workers (default 2). */
  readonly workers?: number
}

const defaultBackoffMs = 10_000
const defaultMaxBackoffMs = 360_000

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined)
const strings = (v: unknown): ReadonlyArray<string> => asArray(v).filter((s): s is string => typeof s === "string")

const specOf = (job: JsonObject) => asObject(job["spec"])
const statusOf = (job: JsonObject) => asObject(job["status"])
const conditionsOf = (o: JsonObject) => asArray(statusOf(o)["conditions"]) as ReadonlyArray<Conditions.Condition>

/** The Job's `Complete` or `Failed` condition when it is True: the Job has finished. */
export const finishedCondition = (job: JsonObject): Conditions.Condition | undefined =>
  conditionsOf(job).find((c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True")

/** Whether the pod carries the job-tracking finalizer (it is not counted yet). */
export const hasTrackingFinalizer = (pod: JsonObject): boolean => strings(metadataOf(pod)["finalizers"]).includes(trackingFinalizer)

const isIndexed = (job: JsonObject) => specOf(job)["completionMode"] === "Indexed"
const isSuspended = (job: JsonObject) => specOf(job)["suspend"] === true

/**
 * A finished-and-failed pod as upstream sees it: phase Failed, or deleted before it succeeded
 * (an orphaned or evicted pod may never reach a terminal phase).
 */
const isFailedPod = (pod: JsonObject) => {
  const phase = Pods.phase(pod)
  return phase === "Failed" || (isTerminating(pod) && phase !== "Succeeded")
}

/** The completion index of an Indexed Job's pod, or undefined when missing or malformed. */
export const completionIndex = (pod: JsonObject): number | undefined => {
  const v = asObject(metadataOf(pod)["annotations"])[completionIndexAnnotation]
  if (typeof v !== "string" || !/^\d+$/.test(v)) return undefined
  const n = Number(v)
  return Number.isSafeInteger(n) ? n : undefined
}

/** The indexes in a `completedIndexes` string (`0-3,5`) below `completions`, ascending, without repeats. */
export const parseIndexes = (text: string | undefined, completions: number): ReadonlyArray<number> => {
  const out = new Set<number>()
  for (const part of (text ?? "").split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim())
    if (m === null) continue
    const first = Number(m[1])
    const last = Math.min(m[2] === undefined ? first : Number(m[2]), completions - 1)
    for (let i = first; i <= last; i++) out.add(i)
  }
  return [...out].sort((a, b) => a - b)
}

/** Ascending indexes as Kubernetes writes `completedIndexes`: runs as `first-last`, singles alone. */
export const formatIndexes = (indexes: ReadonlyArray<number>): string => {
  const sorted = [...new Set(indexes)].sort((a, b) => a - b)
  const parts: Array<string> = []
  for (let i = 0; i < sorted.length; ) {
    let j = i
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++
    parts.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`)
    i = j + 1
  }
  return parts.join(",")
}

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
const pastBackoffLimitOnFailure = (job: JsonObject, pods: ReadonlyArray<JsonObject>, backoffLimit: number) => {
  if (asObject(asObject(specOf(job)["template"])["spec"])["restartPolicy"] !== "OnFailure") return false
  let restarts = 0
  for (const p of pods) {
    const phase = Pods.phase(p)
    if (phase !== "Running" && phase !== "Pending") continue
    const status = asObject(p["status"])
    for (const c of [...asArray(status["initContainerStatuses"]), ...asArray(status["containerStatuses"])]) restarts += num(asObject(c)["restartCount"]) ?? 0
  }
  return backoffLimit === 0 ? restarts > 0 : restarts >= backoffLimit
}

/**
 * Active pods to delete: for Indexed Jobs first those with a missing, out-of-range or repeated
 * index (keeping the most advanced pod of each index), then up to `atLeast` in upstream's
 * ActivePods order (the ReplicaSet's: unscheduled, pending, unready, ready for less time first).
 */
const podsForRemoval = (active: ReadonlyArray<JsonObject>, atLeast: number, indexed: boolean, completions: number) => {
  const remove: Array<JsonObject> = []
  let left: ReadonlyArray<JsonObject> = active
  if (indexed) {
    const byIndex = new Map<number, Array<JsonObject>>()
    for (const p of active) {
      const ix = completionIndex(p)
      if (ix === undefined || ix >= completions) remove.push(p)
      else byIndex.set(ix, [...(byIndex.get(ix) ?? []), p])
    }
    for (const group of byIndex.values()) remove.push(...ReplicaSet.podsToDelete(group, [], group.length - 1))
    left = active.filter((p) => !remove.includes(p))
  }
  if (remove.length < atLeast) remove.push(...ReplicaSet.podsToDelete(left, [], atLeast - remove.length))
  return remove
}

/** The lowest indexes neither completed nor held by an active pod. */
const pendingIndexes = (count: number, completions: number, succeeded: ReadonlySet<number>, active: ReadonlyArray<JsonObject>) => {
  const taken = new Set<number>(succeeded)
  for (const p of active) {
    const ix = completionIndex(p)
    if (ix !== undefined) taken.add(ix)
  }
  const out: Array<number> = []
  for (let i = 0; i < completions && out.length < count; i++) if (!taken.has(i)) out.push(i)
  return out
}

/** A pod for `job` (with `index` for Indexed Jobs), carrying the tracking finalizer. */
export const podFor = (job: JsonObject, index: number | undefined): JsonObject => {
  const name = nameOf(job)
  const template = asObject(specOf(job)["template"])
  const templateLabels = asObject(asObject(template["metadata"])["labels"])
  // The API server's defaulting puts these labels on the template already; add them only if absent.
  const extraLabels: Record<string, string> = {}
  if (templateLabels[controllerUidLabel] === undefined) extraLabels[controllerUidLabel] = uidOf(job)
  if (templateLabels[jobNameLabel] === undefined) extraLabels[jobNameLabel] = name
  if (index !== undefined) extraLabels[completionIndexAnnotation] = String(index)
  const pod = Pods.fromTemplate(template, job, {
    generateName: index === undefined ? `${name}-` : `${name}-${index}-`,
    extraLabels,
    ...(index === undefined ? {} : { extraAnnotations: { [completionIndexAnnotation]: String(index) } })
  })
  const m = asObject(pod["metadata"])
  const finalizers = strings(m["finalizers"])
  m["finalizers"] = finalizers.includes(trackingFinalizer) ? finalizers : [...finalizers, trackingFinalizer]
  if (index !== undefined) {
    const spec = asObject(pod["spec"])
    spec["hostname"] = `${name}-${index}`
    // As upstream: the index reaches the process through the downward API, from the annotation.
    const env = { name: "JOB_COMPLETION_INDEX", valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${completionIndexAnnotation}']` } } }
    for (const key of ["initContainers", "containers"]) {
      if (!Array.isArray(spec[key])) continue
      spec[key] = asArray(spec[key]).map((c) => {
        const container = asObject(c)
        const vars = asArray(container["env"]).map(asObject)
        return vars.some((v) => v["name"] === env.name) ? container : { ...container, env: [...vars, env] }
      })
    }
  }
  return pod
}

/** An Event to record about the Job. */
export interface JobEvent {
  readonly type: "Normal" | "Warning"
  readonly reason: string
  readonly message: string
}

/** What the Job controller should do, in this order. */
export interface Decision {
  /** Delete the Job itself (its `ttlSecondsAfterFinished` has passed), propagationPolicy Background. */
  readonly deleteJob: boolean
  /** Pods to delete; `removeFinalizer` first for pods that must not be counted (suspend, scale down). */
  readonly delete: ReadonlyArray<{ readonly pod: JsonObject; readonly removeFinalizer: boolean }>
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

const sameJson = (a: unknown, b: unknown) => stableJson(a) === stableJson(b)

const minDefined = (...values: ReadonlyArray<number | undefined>) => {
  const defined = values.filter((v): v is number => v !== undefined)
  return defined.length === 0 ? undefined : Math.max(0, Math.min(...defined))
}

// Kubernetes omits zero counters (omitempty); `ready` is a pointer and always written.
const withCount = (status: Record<string, unknown>, key: string, n: number) => {
  if (n > 0) status[key] = n
  else delete status[key]
}

const uncountedStatus = (succeeded: ReadonlyArray<string>, failed: ReadonlyArray<string>) => ({
  ...(succeeded.length > 0 ? { succeeded: [...succeeded] } : {}),
  ...(failed.length > 0 ? { failed: [...failed] } : {})
})

/**
 * Decides one sync of `job` given the pods it controls, at `nowMs`: pure, the plan of upstream's
 * syncJob (manage the active pods, detect the finish, track terminated pods through the finalizer).
 */
export const decide = (job: JsonObject, pods: ReadonlyArray<JsonObject>, nowMs: number, options: DecideOptions = {}): Decision => {
  const spec = specOf(job)
  const status = statusOf(job)
  const now = rfc3339(nowMs)
  const deleting = isTerminating(job)

  const finished = finishedCondition(job)
  if (finished !== undefined) {
    // Nothing runs any more; only leftovers (a pod created but unseen when the Job finished)
    // lose their finalizer, uncounted, as upstream's orphan handling does.
    const leftovers = pods.filter(hasTrackingFinalizer)
    const ttl = num(spec["ttlSecondsAfterFinished"])
    const finishedAt = timeMs(status["completionTime"]) ?? timeMs(finished.lastTransitionTime) ?? nowMs
    const expires = ttl === undefined || deleting ? undefined : finishedAt + ttl * 1000
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

  const indexed = isIndexed(job)
  const parallelism = num(spec["parallelism"]) ?? 1
  const completions = num(spec["completions"]) ?? (indexed ? 1 : undefined)
  const backoffLimit = num(spec["backoffLimit"]) ?? 6
  const suspended = isSuspended(job)
  const events: Array<JobEvent> = []
  let requeueAfterMs: number | undefined

  // Counters as stored, then the uncounted uids whose pods lost the finalizer (or are gone)
  // move into them: those removals happened after the uids were recorded.
  const tracked = new Set(pods.filter(hasTrackingFinalizer).map(uidOf))
  const oldUncounted = asObject(status["uncountedTerminatedPods"])
  let succeededCount = num(status["succeeded"]) ?? 0
  let failedCount = num(status["failed"]) ?? 0
  const uncountedSucceeded: Array<string> = []
  const uncountedFailed: Array<string> = []
  for (const uid of strings(oldUncounted["succeeded"])) {
    if (tracked.has(uid)) uncountedSucceeded.push(uid)
    else succeededCount++
  }
  for (const uid of strings(oldUncounted["failed"])) {
    if (tracked.has(uid)) uncountedFailed.push(uid)
    else failedCount++
  }
  const inUncounted = (uid: string) => uncountedSucceeded.includes(uid) || uncountedFailed.includes(uid)
  const validIndex = (p: JsonObject) => {
    if (!indexed) return true
    const ix = completionIndex(p)
    return ix !== undefined && ix < (completions ?? 0)
  }

  const active = pods.filter(Pods.isActive)
  const newlyFinished = pods.filter((p) => hasTrackingFinalizer(p) && !inUncounted(uidOf(p)) && validIndex(p))
  const newSucceeded = newlyFinished.filter((p) => Pods.phase(p) === "Succeeded")
  const newFailed = newlyFinished.filter(isFailedPod)

  const previousIndexes = indexed ? parseIndexes(status["completedIndexes"] as string | undefined, completions ?? 0) : []
  const succeededIndexes = new Set(previousIndexes)
  if (indexed) for (const p of newSucceeded) succeededIndexes.add(completionIndex(p)!)
  const succeeded = indexed ? succeededIndexes.size : succeededCount + uncountedSucceeded.length + newSucceeded.length
  const failed = failedCount + uncountedFailed.length + newFailed.length

  const next: Record<string, unknown> = { ...status }
  if (next["startTime"] === undefined && !suspended) next["startTime"] = now
  const startMs = timeMs(next["startTime"])

  // Failure first: the backoff limit, then the active deadline (upstream's order).
  let finishing: Omit<Conditions.Condition, "lastTransitionTime" | "lastUpdateTime"> | undefined
  const deadline = num(spec["activeDeadlineSeconds"])
  if (failed > backoffLimit || pastBackoffLimitOnFailure(job, pods, backoffLimit)) {
    finishing = { type: "Failed", status: "True", reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit" }
  } else if (deadline !== undefined && startMs !== undefined && !suspended) {
    const due = startMs + deadline * 1000
    if (nowMs >= due) finishing = { type: "Failed", status: "True", reason: "DeadlineExceeded", message: "Job was active longer than specified deadline" }
    else requeueAfterMs = due - nowMs
  }

  const toDelete: Array<{ pod: JsonObject; removeFinalizer: boolean }> = []
  const toCreate: Array<JsonObject> = []
  let activeAfter = active.length
  let kept: ReadonlyArray<JsonObject> = active
  if (finishing !== undefined) {
    // A failed Job stops its pods; they keep the finalizer and are counted as failed below.
    for (const pod of active) toDelete.push({ pod, removeFinalizer: false })
    activeAfter = 0
    kept = []
  } else {
    let managed = false
    if (!deleting) {
      managed = true
      if (suspended) {
        // Suspension is not failure: the finalizer goes first, so these pods are never counted.
        for (const pod of active) toDelete.push({ pod, removeFinalizer: true })
        activeAfter = 0
        kept = []
        // A suspended Job has not started (newer upstream clears it too): the deadline counts
        // continuous activity only, and the API lets a Job without startTime change its pods'
        // scheduling directives (what queueing controllers do before resuming it).
        delete next["startTime"]
      } else {
        let wantActive: number
        if (completions === undefined) wantActive = succeeded > 0 ? active.length : parallelism
        else wantActive = Math.max(0, Math.min(completions - succeeded, parallelism))
        const remove = podsForRemoval(active, Math.max(0, active.length - wantActive), indexed, completions ?? 0).slice(0, maxPodChangesPerSync)
        if (remove.length > 0) {
          // Upstream never creates and deletes in one sync; deletion wins.
          for (const pod of remove) toDelete.push({ pod, removeFinalizer: true })
          activeAfter = active.length - remove.length
          kept = active.filter((p) => !remove.includes(p))
        } else if (wantActive > active.length) {
          const wait = backoffRemainingMs(pods, nowMs, options.podFailureBackoffMs ?? defaultBackoffMs, options.maxPodFailureBackoffMs ?? defaultMaxBackoffMs)
          if (wait > 0) requeueAfterMs = minDefined(requeueAfterMs, wait)
          else {
            const count = Math.min(wantActive - active.length, maxPodChangesPerSync)
            const indexes = indexed ? pendingIndexes(count, completions ?? 0, succeededIndexes, active) : Array.from({ length: count }, () => undefined)
            for (const ix of indexes) toCreate.push(podFor(job, ix))
            activeAfter = active.length + toCreate.length
          }
        }
      }
    }
    const complete = completions === undefined ? succeeded > 0 && activeAfter === 0 : succeeded >= completions && activeAfter === 0
    if (complete) finishing = { type: "Complete", status: "True" }
    else if (managed) {
      const conditions = asArray(next["conditions"]) as ReadonlyArray<Conditions.Condition>
      const current = Conditions.get(conditions, "Suspended")
      if (suspended && current?.status !== "True") {
        next["conditions"] = Conditions.set(conditions, { type: "Suspended", status: "True", reason: "JobSuspended", message: "Job suspended" }, now)
        events.push({ type: "Normal", reason: "Suspended", message: "Job suspended" })
      } else if (!suspended && current?.status === "True") {
        next["conditions"] = Conditions.set(conditions, { type: "Suspended", status: "False", reason: "JobResumed", message: "Job resumed" }, now)
        events.push({ type: "Normal", reason: "Resumed", message: "Job resumed" })
        // The deadline counts continuous activity: it starts again on resume.
        next["startTime"] = now
      }
    }
  }
  withCount(next, "active", activeAfter)
  next["ready"] = kept.filter(Pods.isReady).length

  // Tracking: record finished pods as uncounted, then remove their finalizers.
  const removeFinalizers: Array<JsonObject> = []
  const newIndexes: Array<number> = []
  let reachedMax = false
  const sorted = indexed ? [...pods].sort((a, b) => (completionIndex(a) ?? Infinity) - (completionIndex(b) ?? Infinity)) : pods
  for (const pod of sorted) {
    if (!hasTrackingFinalizer(pod)) continue
    const uid = uidOf(pod)
    const failedPod = isFailedPod(pod)
    const succeededPod = Pods.phase(pod) === "Succeeded"
    if (!(deleting || finishing !== undefined || succeededPod || failedPod)) continue
    removeFinalizers.push(pod)
    if (succeededPod && !uncountedFailed.includes(uid)) {
      if (indexed) {
        const ix = completionIndex(pod)
        if (ix !== undefined && ix < (completions ?? 0) && !previousIndexes.includes(ix)) newIndexes.push(ix)
      } else if (!uncountedSucceeded.includes(uid)) uncountedSucceeded.push(uid)
    } else if ((failedPod || finishing !== undefined) && !uncountedFailed.includes(uid) && validIndex(pod)) {
      // Once the Job has failed or completed, a pod still running is counted as failed.
      uncountedFailed.push(uid)
    }
    if (newIndexes.length + uncountedSucceeded.length + uncountedFailed.length >= maxUncountedPods) {
      reachedMax = true
      break
    }
  }
  if (indexed) {
    next["completedIndexes"] = formatIndexes([...previousIndexes, ...newIndexes])
    succeededCount = parseIndexes(next["completedIndexes"] as string, completions ?? 0).length
  }
  withCount(next, "succeeded", succeededCount)
  withCount(next, "failed", failedCount)
  next["uncountedTerminatedPods"] = uncountedStatus(uncountedSucceeded, uncountedFailed)

  const recordStatus = sameJson(next, status) ? undefined : { ...next }

  // After the finalizers are gone: their uids move into the counters.
  const removed = new Set(removeFinalizers.map(uidOf))
  const final: Record<string, unknown> = { ...next }
  const stillSucceeded = uncountedSucceeded.filter((u) => !removed.has(u))
  const stillFailed = uncountedFailed.filter((u) => !removed.has(u))
  if (!indexed) withCount(final, "succeeded", succeededCount + uncountedSucceeded.length - stillSucceeded.length)
  withCount(final, "failed", failedCount + uncountedFailed.length - stillFailed.length)
  final["uncountedTerminatedPods"] = uncountedStatus(stillSucceeded, stillFailed)
  // The Job may be declared finished only when every finished pod has been counted.
  if (finishing !== undefined && !reachedMax && stillSucceeded.length === 0 && stillFailed.length === 0) {
    final["conditions"] = Conditions.set(asArray(final["conditions"]) as ReadonlyArray<Conditions.Condition>, finishing, now)
    if (finishing.type === "Complete") {
      final["completionTime"] = now
      const total = num(final["succeeded"]) ?? 0
      if (completions !== undefined && total > completions) {
        events.push({ type: "Warning", reason: "TooManySucceededPods", message: "Too many succeeded pods running after completion count reached" })
      }
      events.push({ type: "Normal", reason: "Completed", message: "Job completed" })
    } else events.push({ type: "Warning", reason: finishing.reason ?? "Failed", message: finishing.message ?? "" })
    const ttl = num(spec["ttlSecondsAfterFinished"])
    if (ttl !== undefined) requeueAfterMs = minDefined(requeueAfterMs, ttl * 1000)
  }
  const finalStatus = sameJson(final, recordStatus ?? status) ? undefined : final

  return {
    deleteJob: false,
    delete: toDelete,
    create: toCreate,
    recordStatus,
    removeFinalizers,
    status: finalStatus,
    events,
    ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {})
  }
}

const isNotFound = (e: Controller.ReconcileError) => e._tag === "ApiError" && e.status.code === 404
const ignoreNotFound = <A>(effect: Effect.Effect<A, Controller.ReconcileError>) =>
  effect.pipe(
    Effect.asVoid,
    Effect.catchIf(isNotFound, () => Effect.void)
  )

/** Removes the tracking finalizer with a JSON patch that fails if the list changed meanwhile. */
const removeFinalizer = (client: Client.Client, pod: JsonObject) => {
  const finalizers = strings(metadataOf(pod)["finalizers"])
  const i = finalizers.indexOf(trackingFinalizer)
  if (i < 0) return Effect.void
  return ignoreNotFound(
    client.patch(ResourceRefs.Pod, metadataOf(pod)["namespace"] as string | undefined, nameOf(pod), "json", [
      { op: "test", path: `/metadata/uid`, value: uidOf(pod) },
      { op: "test", path: `/metadata/finalizers/${i}`, value: trackingFinalizer },
      { op: "remove", path: `/metadata/finalizers/${i}` }
    ])
  )
}

/**
 * Pods of a Job that is gone (or being deleted) still holding the tracking finalizer: they would
 * never be deleted. Found by their controller reference, or, once orphaned, by the job-name label.
 */
const strandedPods = (pods: ReadonlyArray<JsonObject>, name: string, liveUid: string | undefined) =>
  pods.filter((p) => {
    if (!hasTrackingFinalizer(p)) return false
    const ref = controllerRefOf(p)
    if (ref === undefined) return asObject(metadataOf(p)["labels"])[jobNameLabel] === name
    return ref["kind"] === "Job" && ref["name"] === name && ref["uid"] !== liveUid
  })

/** Key mapper for pods: their controlling Job, or the Job named by the label of an orphaned, tracked pod. */
const podKeys: Controller.KeyMapper = (change, informers) => {
  const keys = new Set(Controller.controllerOf("Job")(change, informers))
  for (const o of [change.object, change.old]) {
    if (o === undefined || controllerRefOf(o) !== undefined || !hasTrackingFinalizer(o)) continue
    const job = asObject(metadataOf(o)["labels"])[jobNameLabel]
    if (typeof job === "string") keys.add(`${String(metadataOf(o)["namespace"])}/${job}`)
  }
  return [...keys]
}

/** The Job reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => ({
  name: "job",
  primary: JobRef,
  watches: [{ ref: ResourceRefs.Pod, keys: podKeys }],
  workers: options.workers ?? 2,
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const pods = ctx.informers.for(ResourceRefs.Pod)
      const job = ctx.informers.for(JobRef).get(namespace, name)
      const nowMs = yield* Clock.currentTimeMillis

      if (job === undefined || isTerminating(job)) {
        const stranded = strandedPods(pods.list(namespace), name, job === undefined ? undefined : uidOf(job))
        yield* Effect.forEach(stranded, (p) => removeFinalizer(ctx.client, p), { discard: true })
        if (job === undefined) return
      }

      const plan = decide(job, pods.controlledBy(uidOf(job)), nowMs, options)
      if (plan.deleteJob) {
        yield* ignoreNotFound(ctx.client.delete(JobRef, namespace, name, { propagationPolicy: "Background", preconditions: { uid: uidOf(job) } }))
        return
      }
      for (const { pod, removeFinalizer: first } of plan.delete) {
        if (first) yield* removeFinalizer(ctx.client, pod)
        yield* ignoreNotFound(ctx.client.delete(ResourceRefs.Pod, namespace, nameOf(pod)))
        yield* ctx.events.record(job, "Normal", "SuccessfulDelete", `Deleted pod: ${nameOf(pod)}`)
      }
      // Slow start, as upstream: batches of 1, 2, 4, …; a failed batch skips the rest (a quota or
      // admission refusal would refuse them all). The status is still tracked, then the error retried.
      let createError: Controller.ReconcileError | undefined
      let created = 0
      for (const size of ReplicaSet.slowStartBatches(plan.create.length)) {
        const batch = plan.create.slice(created, created + size)
        const results = yield* Effect.forEach(batch, (pod) => Effect.either(ctx.client.create(pod)), { concurrency: size })
        for (const r of results) {
          if (r._tag === "Right") {
            created++
            yield* ctx.events.record(job, "Normal", "SuccessfulCreate", `Created pod: ${nameOf(r.right)}`)
          } else {
            createError ??= r.left
            yield* ctx.events.record(job, "Warning", "FailedCreate", `Error creating: ${r.left.message}`)
          }
        }
        if (createError !== undefined) break
      }
      const missing = plan.create.length - created
      const lessActive = (status: JsonObject | undefined) => {
        if (status === undefined || missing === 0) return status
        const fixed = { ...status }
        withCount(fixed, "active", (num(status["active"]) ?? 0) - missing)
        return fixed
      }
      const recordStatus = missing > 0 ? lessActive(plan.recordStatus ?? statusOf(job)) : plan.recordStatus
      const finalStatus = lessActive(plan.status)

      // Record before removing finalizers: a pod without the finalizer must already be in the status.
      let current = job
      if (recordStatus !== undefined) current = yield* ctx.client.update({ ...job, status: recordStatus }, "status")
      yield* Effect.forEach(plan.removeFinalizers, (p) => removeFinalizer(ctx.client, p), { discard: true })
      if (finalStatus !== undefined) yield* ctx.client.update({ ...current, status: finalStatus }, "status")
      for (const e of plan.events) yield* ctx.events.record(job, e.type, e.reason, e.message)
      if (createError !== undefined) return yield* Effect.fail(createError)
      return plan.requeueAfterMs === undefined ? undefined : { requeueAfterMs: plan.requeueAfterMs }
    })
})
