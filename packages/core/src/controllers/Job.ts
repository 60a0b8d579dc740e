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
 *
 * `decide` composes the steps of upstream's syncJob, which live in `internal/job/`: `Params` (the
 * spec read once), `Tracking` (finished pods through the finalizer), `Status` (failure,
 * completion, suspension, the finish), `ManagePods` (how many pods, which to delete or create),
 * `Backoff`, `Indexes` (Indexed completion) and `Finished` (a finished Job's leftovers and TTL);
 * `PodControl` writes the pods.
 */
import { Clock, Effect } from "effect"
import type * as Client from "../client/Client.js"
import * as Batch from "../model/Batch.js"
import type * as Conditions from "../object/Conditions.js"
import * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import * as Pods from "../object/Pods.js"
import { type JsonObject, asArray, jsonEqual } from "../object/Json.js"
import { controllerRefOf, isTerminating, labelsOf, metadataOf, rfc3339, timeMs, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Backoff from "./internal/job/Backoff.js"
import * as JobDecision from "./internal/job/Decision.js"
import * as Finished from "./internal/job/Finished.js"
import * as Indexes from "./internal/job/Indexes.js"
import * as ManagePods from "./internal/job/ManagePods.js"
import * as Params from "./internal/job/Params.js"
import * as PodControl from "./internal/job/PodControl.js"
import * as Status from "./internal/job/Status.js"
import * as Tracking from "./internal/job/Tracking.js"

/** The finalizer that keeps a finished pod until the Job has counted it. */
export const trackingFinalizer = Tracking.trackingFinalizer

/** The Job resource. */
export const JobRef: Client.ResourceRef = { apiVersion: "batch/v1", kind: "Job" }

/** Options of the Job controller. */
export interface Options {
  /** Delay before replacing a failed pod, doubled per consecutive failure (upstream: 10 s). */
  readonly podFailureBackoffMs?: number
  /** The cap of that delay (upstream: 6 min). */
  readonly maxPodFailureBackoffMs?: number
  /** Concurrent workers (default 2). */
  readonly workers?: number
}

/** The Job's `Complete` or `Failed` condition when it is True: the Job has finished. */
export const finishedCondition = (job: JsonObject): Conditions.Condition | undefined =>
  (asArray(Params.statusOf(job)["conditions"]) as ReadonlyArray<Conditions.Condition>).find((c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True")

/** Whether the pod carries the job-tracking finalizer (it is not counted yet). */
export const hasTrackingFinalizer: (pod: JsonObject) => boolean = Tracking.hasTrackingFinalizer

/** The completion index of an Indexed Job's pod, or undefined when missing or malformed. */
export const completionIndex: (pod: JsonObject) => number | undefined = Indexes.completionIndex

/** The indexes in a `completedIndexes` string (`0-3,5`) below `completions`, ascending, without repeats. */
export const parseIndexes: (text: string | undefined, completions: number) => ReadonlyArray<number> = Indexes.parseIndexes

/** Ascending indexes as Kubernetes writes `completedIndexes`: runs as `first-last`, singles alone. */
export const formatIndexes: (indexes: ReadonlyArray<number>) => string = Indexes.formatIndexes

/**
 * How long to wait before creating replacement pods: `base * 2^(failures-1)` (capped) after the
 * last failure, counting the failures since the last success, as upstream's backoff record.
 */
export const backoffRemainingMs: (pods: ReadonlyArray<JsonObject>, nowMs: number, baseMs: number, maxMs: number) => number = Backoff.backoffRemainingMs

/** A pod for `job` (with `index` for Indexed Jobs), carrying the tracking finalizer. */
export const podFor: (job: JsonObject, index: number | undefined) => JsonObject = ManagePods.podFor

/** An Event to record about the Job. */
export type JobEvent = JobDecision.JobEvent

/** What the Job controller should do, in this order. */
export type Decision = JobDecision.Decision

/** Settings of `decide`. */
export type DecideOptions = JobDecision.DecideOptions

/**
 * Decides one sync of `job` given the pods it controls, at `nowMs`: pure, the plan of upstream's
 * syncJob (manage the active pods, detect the finish, track terminated pods through the finalizer).
 */
export const decide = (job: JsonObject, pods: ReadonlyArray<JsonObject>, nowMs: number, options: DecideOptions = {}): Decision => {
  const finished = finishedCondition(job)
  if (finished !== undefined) return Finished.decide(job, finished, pods, nowMs)

  const params = Params.of(job)
  const status = Params.statusOf(job)
  const now = rfc3339(nowMs)
  const deleting = isTerminating(job)
  const counts = Tracking.count(params, status, pods)

  const next: JsonObject = { ...status }
  if (next["startTime"] === undefined && !params.suspended) next["startTime"] = now
  const failure = Status.failure(job, params, pods, counts.failed, timeMs(next["startTime"]), nowMs)
  let finishing = failure.finishing

  const active = pods.filter(Pods.isActive)
  const events: Array<JobEvent> = []
  let managed: ManagePods.Managed
  if (finishing !== undefined) managed = ManagePods.stopAll(active)
  else if (deleting) managed = ManagePods.leaveAlone(active)
  else {
    managed = ManagePods.manage(job, params, counts, pods, active, nowMs, options)
    // A suspended Job has not started (newer upstream clears it too): the deadline counts
    // continuous activity only, and the API lets a Job without startTime change its pods'
    // scheduling directives (what queueing controllers do before resuming it).
    if (params.suspended) delete next["startTime"]
  }
  if (finishing === undefined) {
    if (Status.isComplete(params, counts.succeeded, managed.activeAfter)) finishing = { type: "Complete", status: "True" }
    else if (!deleting) events.push(...Status.syncSuspended(next, params.suspended, now))
  }
  Status.withCount(next, "active", managed.activeAfter)
  next["ready"] = managed.kept.filter(Pods.isReady).length

  // Tracking: record finished pods as uncounted, then remove their finalizers.
  const tracked = Tracking.track(params, counts, pods, deleting, finishing !== undefined)
  const recorded = Tracking.recordedStatus(next, params, counts, tracked)
  const recordStatus = jsonEqual(recorded, status) ? undefined : recorded
  // After the finalizers are gone: their uids move into the counters.
  const counted = Tracking.countedStatus(recorded, params, counts, tracked)
  // The Job may be declared finished only when every finished pod has been counted.
  const finish = finishing !== undefined && counted.allCounted ? Status.finish(counted.status, finishing, params, now) : undefined
  const final = finish?.status ?? counted.status
  const requeueAfterMs = JobDecision.soonest(failure.requeueAfterMs, managed.requeueAfterMs, finish?.requeueAfterMs)

  return {
    deleteJob: false,
    delete: managed.delete,
    create: managed.create,
    recordStatus,
    removeFinalizers: tracked.removeFinalizers,
    status: jsonEqual(final, recordStatus ?? status) ? undefined : final,
    events: [...events, ...(finish?.events ?? [])],
    ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {})
  }
}

/**
 * Pods of a Job that is gone (or being deleted) still holding the tracking finalizer: they would
 * never be deleted. Found by their controller reference, or, once orphaned, by the job-name label.
 */
const strandedPods = (pods: ReadonlyArray<JsonObject>, name: string, liveUid: string | undefined) =>
  pods.filter((p) => {
    if (!hasTrackingFinalizer(p)) return false
    const ref = controllerRefOf(p)
    if (ref === undefined) return labelsOf(p)[Batch.JobNameLabel] === name
    return ref["kind"] === "Job" && ref["name"] === name && ref["uid"] !== liveUid
  })

/** Key mapper for pods: their controlling Job, or the Job named by the label of an orphaned, tracked pod. */
const podKeys: Controller.KeyMapper = (change, informers) => {
  const keys = new Set(Controller.controllerOf("Job")(change, informers))
  for (const o of [change.object, change.old]) {
    if (o === undefined || controllerRefOf(o) !== undefined || !hasTrackingFinalizer(o)) continue
    const job: unknown = labelsOf(o)[Batch.JobNameLabel]
    if (typeof job === "string") keys.add(`${String(metadataOf(o)["namespace"])}/${job}`)
  }
  return [...keys]
}

/**
 * The plan's status writes, `active` lowered by the `missing` pods that could not be created:
 * the recorded status before removing finalizers (a pod without the finalizer must already be
 * in the status), then the counted status, then the plan's events.
 */
const writeStatuses = (ctx: Controller.Context, job: JsonObject, plan: Decision, missing: number) =>
  Effect.gen(function* () {
    const recordStatus = missing > 0 ? Status.withoutMissing(plan.recordStatus ?? Params.statusOf(job), missing) : plan.recordStatus
    const finalStatus = Status.withoutMissing(plan.status, missing)
    let current = job
    if (recordStatus !== undefined) current = yield* ctx.client.update({ ...job, status: recordStatus }, "status")
    yield* Effect.forEach(plan.removeFinalizers, (p) => PodControl.removeFinalizer(ctx.client, p), { discard: true })
    if (finalStatus !== undefined) yield* ctx.client.update({ ...current, status: finalStatus }, "status")
    for (const e of plan.events) yield* ctx.events.record(job, e.type, e.reason, e.message)
  })

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
        yield* Effect.forEach(stranded, (p) => PodControl.removeFinalizer(ctx.client, p), { discard: true })
        if (job === undefined) return
      }

      const plan = decide(job, pods.controlledBy(uidOf(job)), nowMs, options)
      if (plan.deleteJob) {
        yield* PodControl.ignoreNotFound(ctx.client.delete(JobRef, namespace, name, { propagationPolicy: "Background", preconditions: { uid: uidOf(job) } }))
        return
      }
      yield* PodControl.deletePods(ctx, job, namespace, plan.delete)
      // A failed creation still lets the status be tracked; the error is retried after.
      const { created, error } = yield* PodControl.createPods(ctx, job, plan.create)
      yield* writeStatuses(ctx, job, plan, plan.create.length - created)
      if (error !== undefined) return yield* Effect.fail(error)
      return plan.requeueAfterMs === undefined ? undefined : { requeueAfterMs: plan.requeueAfterMs }
    })
})
