/**
 * The CronJob controller: creates a Job for each schedule time of a CronJob, as
 * kube-controller-manager's cronjob controller v2 does. Each sync finds the most recent schedule
 * time missed since `status.lastScheduleTime` (or the creation), bounded below by
 * `startingDeadlineSeconds` (a run later than the deadline is skipped with `MissSchedule`; more than
 * 100 missed times warn `TooManyMissedTimes`), honours `suspend` and `concurrencyPolicy` (Allow;
 * Forbid skips while a Job is active; Replace deletes the active Jobs, Background, first), names
 * the Job `<cronjob>-<scheduled time in minutes since the epoch>` so a retry can never create two,
 * annotates it with `batch.kubernetes.io/cronjob-scheduled-timestamp`, keeps `status.active`,
 * `lastScheduleTime` and `lastSuccessfulTime`, deletes the oldest finished Jobs beyond
 * `successfulJobsHistoryLimit` / `failedJobsHistoryLimit`, and requeues itself just after the next
 * schedule time. Schedules and `spec.timeZone` are read by `model/CronSchedule.ts` (robfig's
 * grammar on croner).
 *
 * Time is `Clock.currentTimeMillis`, so nothing here assumes minute boundaries; tests run real
 * schedules quickly with `@every 1s`, which robfig (and so the API) accepts. Departures, both
 * about that: a schedule time that is not on a whole minute (only `@every` makes those) names its
 * Job by seconds since the epoch, because upstream's minute name would collide and stall a
 * sub-minute schedule; and an unfinished Job this controller created (it has the scheduled-timestamp
 * annotation) that is missing from `status.active` (a crash between creating it and writing the
 * status) is put back into the list, so Forbid still sees it (upstream only warns `UnexpectedJob`).
 */
import { Clock, Effect, Either } from "effect"
import type * as Client from "../client/Client.js"
import * as CronSchedule from "../model/CronSchedule.js"
import * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import * as Job from "./Job.js"
import { type JsonObject, asArray, asObject, stableJson } from "../object/Json.js"
import { isControlledBy, isTerminating, metadataOf, nameOf, ownerReference, rfc3339, timeMs, uidOf } from "../object/Metadata.js"


/** The CronJob resource. */
export const CronJobRef: Client.ResourceRef = { apiVersion: "batch/v1", kind: "CronJob" }

/** Annotation on a CronJob's Job: the schedule time it runs for (RFC 3339, in the CronJob's zone). */
export const scheduledTimestampAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"

// Upstream requeues this long after the schedule time so the sync surely sees it as due.
const nextScheduleDeltaMs = 100

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined)

/** What `missedSchedules` found. */
export interface Missed {
  /** The most recent schedule time at or before now, if any was missed. */
  readonly mostRecentMs: number | undefined
  /** More than 100 schedule times were missed (clock skew, or a long outage without a deadline). */
  readonly tooMany: boolean
}

/**
 * The schedule times of `schedule` after `earliestMs` and at or before `nowMs`: the most recent
 * one, and whether there were more than 100. Like upstream, the count is estimated from the gap
 * between the first two times, which jumps near the end so a long outage costs a few steps only.
 */
export const missedSchedules = (schedule: CronSchedule.Schedule, earliestMs: number, nowMs: number): Missed => {
  const none = { mostRecentMs: undefined, tooMany: false }
  const t1 = schedule.next(new Date(earliestMs))?.getTime()
  if (t1 === undefined || nowMs < t1) return none
  const t2 = schedule.next(new Date(t1))?.getTime()
  if (t2 === undefined || nowMs < t2) return { mostRecentMs: t1, tooMany: false }
  const gapS = Math.round((t2 - t1) / 1000)
  if (gapS < 1) return none
  const missed = Math.floor(Math.floor((nowMs - t1) / 1000) / gapS) + 1
  // Step back from the estimate, then walk forward with the real schedule: exact for irregular
  // schedules, and `@every` stays on its own chain of times. Where the estimate overshoots (the
  // first gap was short: `0 9 * * 1-5` from a Monday), step back further, down to t1 at worst,
  // from which t2 <= now is always found. (Upstream steps back once and may find nothing.)
  let mostRecentMs: number | undefined
  for (let back = 2; mostRecentMs === undefined; back *= 2) {
    const from = t1 + Math.max(0, missed - back) * gapS * 1000
    let t = schedule.next(new Date(from))?.getTime()
    while (t !== undefined && t <= nowMs) {
      mostRecentMs = t
      t = schedule.next(new Date(t))?.getTime()
    }
    if (from <= t1) break
  }
  return { mostRecentMs, tooMany: missed > 100 }
}

/** The Job name for a schedule time: minutes since the epoch (upstream), seconds off the minute. */
export const jobName = (cronJobName: string, scheduledMs: number): string =>
  `${cronJobName}-${scheduledMs % 60_000 === 0 ? Math.floor(scheduledMs / 60_000) : Math.floor(scheduledMs / 1000)}`

/** `ms` as RFC 3339 in `timeZone` (`Z` for a zero offset), as Go formats `time.In(zone)`. */
export const formatInZone = (ms: number, timeZone: string | undefined): string => {
  if (timeZone === undefined) return rfc3339(ms)
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hourCycle: "h23",
    timeZoneName: "longOffset"
  }).formatToParts(new Date(ms))
  const part = (type: Intl.DateTimeFormatPartTypes) => parts.find((p) => p.type === type)?.value ?? ""
  // `GMT+05:30`, `GMT-05:00`, or `GMT` alone; Go writes a zero offset as `Z`.
  const offset = part("timeZoneName").replace(/^GMT/, "")
  return `${part("year")}-${part("month")}-${part("day")}T${part("hour")}:${part("minute")}:${part("second")}${offset === "" || offset === "+00:00" ? "Z" : offset}`
}

/** The Job a CronJob creates for `scheduledMs`: its template, owned by the CronJob, named by the time. */
export const jobFor = (cronJob: JsonObject, scheduledMs: number): JsonObject => {
  const m = metadataOf(cronJob)
  const spec = asObject(cronJob["spec"])
  const template = asObject(spec["jobTemplate"])
  const tm = asObject(template["metadata"])
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: {
      name: jobName(String(m["name"]), scheduledMs),
      namespace: m["namespace"],
      ...(Object.keys(asObject(tm["labels"])).length > 0 ? { labels: { ...asObject(tm["labels"]) } } : {}),
      annotations: { ...asObject(tm["annotations"]), [scheduledTimestampAnnotation]: formatInZone(scheduledMs, spec["timeZone"] as string | undefined) },
      ownerReferences: [ownerReference(cronJob)]
    },
    spec: structuredClone(asObject(template["spec"]))
  }
}

/** The object reference `status.active` keeps for a Job. */
export const jobRef = (job: JsonObject): Record<string, unknown> => ({
  apiVersion: "batch/v1",
  kind: "Job",
  namespace: metadataOf(job)["namespace"],
  name: nameOf(job),
  uid: uidOf(job),
  resourceVersion: metadataOf(job)["resourceVersion"]
})

/** An Event to record about the CronJob. */
export interface CronJobEvent {
  readonly type: "Normal" | "Warning"
  readonly reason: string
  readonly message: string
}

/** What the CronJob controller should do: delete, then create, then write the status. */
export interface Decision {
  /** Jobs to delete with propagationPolicy Background (replaced, or beyond the history limits). */
  readonly delete: ReadonlyArray<JsonObject>
  /** The Job to create, if a schedule time is due; its reference joins `status.active` once created. */
  readonly create: JsonObject | undefined
  /** The new status (without the Job to create); undefined when unchanged. */
  readonly status: JsonObject | undefined
  readonly events: ReadonlyArray<CronJobEvent>
  /** Look again after this long: just after the next schedule time. */
  readonly requeueAfterMs?: number
}

const byStartTime = (a: JsonObject, b: JsonObject) => {
  // Jobs that never started sort last (upstream's byJobStartTime); ties by name.
  const ta = timeMs(asObject(a["status"])["startTime"])
  const tb = timeMs(asObject(b["status"])["startTime"])
  if (ta !== tb) {
    if (ta === undefined) return 1
    if (tb === undefined) return -1
    return ta - tb
  }
  return nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0
}

/** The oldest finished Jobs beyond the history limits (no limit set: keep all, as upstream). */
const beyondHistory = (spec: Record<string, unknown>, jobs: ReadonlyArray<JsonObject>): ReadonlyArray<JsonObject> => {
  const prune = (limit: number | undefined, type: string) => {
    if (limit === undefined) return []
    const finished = jobs.filter((j) => Job.finishedCondition(j)?.type === type).sort(byStartTime)
    return finished.slice(0, Math.max(0, finished.length - limit))
  }
  return [...prune(num(spec["successfulJobsHistoryLimit"]), "Complete"), ...prune(num(spec["failedJobsHistoryLimit"]), "Failed")]
}

/**
 * Decides one sync of `cronJob` given the Jobs it controls, at `nowMs`: pure, upstream's
 * syncCronJob followed by its history cleanup.
 */
export const decide = (cronJob: JsonObject, jobs: ReadonlyArray<JsonObject>, nowMs: number): Decision => {
  const spec = asObject(cronJob["spec"])
  const status = asObject(cronJob["status"])
  const events: Array<CronJobEvent> = []
  const next: Record<string, unknown> = { ...status }
  let active = asArray(status["active"]).map(asObject)
  const toDelete: Array<JsonObject> = []

  // 1. The active list against the Jobs that exist.
  const byUid = new Map(jobs.map((j) => [uidOf(j), j]))
  let lastSuccessful = timeMs(status["lastSuccessfulTime"])
  for (const job of jobs) {
    const found = active.some((r) => r["uid"] === uidOf(job))
    const finished = Job.finishedCondition(job)
    if (!found && finished === undefined && !isTerminating(job)) {
      events.push({ type: "Warning", reason: "UnexpectedJob", message: `Saw a job that the controller did not create or forgot: ${nameOf(job)}` })
      // One this controller made (it carries the schedule time) and forgot: back into the list.
      // Others (`kubectl create job --from=cronjob/…`) stay out of it, as upstream.
      if (asObject(metadataOf(job)["annotations"])[scheduledTimestampAnnotation] !== undefined) active = [...active, jobRef(job)]
    } else if (found && finished !== undefined) {
      active = active.filter((r) => r["uid"] !== uidOf(job))
      events.push({ type: "Normal", reason: "SawCompletedJob", message: `Saw completed job: ${nameOf(job)}, condition: ${finished.type}` })
    }
    if (finished?.type === "Complete") {
      const completed = timeMs(asObject(job["status"])["completionTime"])
      if (completed !== undefined && (lastSuccessful === undefined || completed > lastSuccessful)) lastSuccessful = completed
    }
  }
  for (const ref of active) {
    if (!byUid.has(String(ref["uid"]))) events.push({ type: "Normal", reason: "MissingJob", message: `Active job went missing: ${String(ref["name"])}` })
  }
  active = active.filter((r) => byUid.has(String(r["uid"])))
  if (lastSuccessful !== undefined) next["lastSuccessfulTime"] = rfc3339(lastSuccessful)

  const finish = (create: JsonObject | undefined, requeueAfterMs: number | undefined, prune: boolean): Decision => {
    const pruned = prune ? beyondHistory(spec, jobs).filter((j) => !toDelete.includes(j)) : []
    for (const j of pruned) events.push({ type: "Normal", reason: "SuccessfulDelete", message: `Deleted job ${nameOf(j)}` })
    const gone = new Set([...toDelete, ...pruned].map(uidOf))
    active = active.filter((r) => !gone.has(String(r["uid"])))
    if (active.length > 0) next["active"] = active
    else delete next["active"]
    return {
      delete: [...toDelete, ...pruned],
      create,
      status: stableJson(next) === stableJson(status) ? undefined : next,
      events,
      ...(requeueAfterMs !== undefined ? { requeueAfterMs: Math.max(0, requeueAfterMs) } : {})
    }
  }

  // 2. Whether a schedule time is due.
  if (isTerminating(cronJob)) return finish(undefined, undefined, false)
  const timeZone = spec["timeZone"] as string | undefined
  if (timeZone !== undefined) {
    const invalid = CronSchedule.validateTimeZone(timeZone)
    if (invalid !== undefined) {
      events.push({ type: "Warning", reason: "UnknownTimeZone", message: `invalid timeZone: ${JSON.stringify(timeZone)}: ${invalid}` })
      return finish(undefined, undefined, true)
    }
  }
  if (spec["suspend"] === true) return finish(undefined, undefined, true)
  const parsed = CronSchedule.parse(String(spec["schedule"] ?? ""), timeZone)
  if (Either.isLeft(parsed)) {
    events.push({ type: "Warning", reason: "UnparseableSchedule", message: `unparseable schedule: ${JSON.stringify(spec["schedule"])} : ${parsed.left}` })
    return finish(undefined, undefined, true)
  }
  const schedule = parsed.right

  const created = timeMs(metadataOf(cronJob)["creationTimestamp"]) ?? nowMs
  const earliest = timeMs(status["lastScheduleTime"]) ?? created
  const deadline = num(spec["startingDeadlineSeconds"])
  // Nothing before the starting deadline will be run, so there is no point looking at it.
  const since = deadline === undefined ? earliest : Math.max(earliest, nowMs - deadline * 1000)
  // The requeue looks past the latest due time whether or not it runs (upstream's nextScheduleTimeDuration).
  const requeueAt = (after: number) => {
    const t = schedule.next(new Date(after))?.getTime()
    return t === undefined ? undefined : t + nextScheduleDeltaMs - nowMs
  }
  const latest = missedSchedules(schedule, earliest, nowMs).mostRecentMs ?? earliest
  const missed = missedSchedules(schedule, since, nowMs)
  if (missed.tooMany) {
    events.push({ type: "Warning", reason: "TooManyMissedTimes", message: "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew" })
  }
  const scheduled = missed.mostRecentMs
  if (scheduled === undefined) return finish(undefined, requeueAt(latest), true)
  if (deadline !== undefined && scheduled + deadline * 1000 < nowMs) {
    events.push({ type: "Warning", reason: "MissSchedule", message: `Missed scheduled time to start a job: ${new Date(scheduled).toUTCString()}` })
    return finish(undefined, requeueAt(latest), true)
  }
  const name = jobName(nameOf(cronJob), scheduled)
  if (active.some((r) => r["name"] === name) || timeMs(status["lastScheduleTime"]) === scheduled) {
    return finish(undefined, requeueAt(latest), true)
  }
  // A Job for this time exists already (its status write was lost): the time is taken.
  if (jobs.some((j) => nameOf(j) === name)) {
    next["lastScheduleTime"] = rfc3339(scheduled)
    return finish(undefined, requeueAt(scheduled), true)
  }
  const policy = spec["concurrencyPolicy"] ?? "Allow"
  if (policy === "Forbid" && active.length > 0) {
    events.push({ type: "Normal", reason: "JobAlreadyActive", message: "Not starting job because prior execution is running and concurrency policy is Forbid" })
    return finish(undefined, requeueAt(latest), true)
  }
  if (policy === "Replace") {
    for (const ref of active) {
      const job = byUid.get(String(ref["uid"]))
      if (job === undefined) continue
      toDelete.push(job)
      events.push({ type: "Normal", reason: "SuccessfulDelete", message: `Deleted job ${nameOf(job)}` })
    }
  }
  next["lastScheduleTime"] = rfc3339(scheduled)
  return finish(jobFor(cronJob, scheduled), requeueAt(scheduled), true)
}

const JobRef = Job.JobRef

/** The CronJob reconciler. */
export const reconciler = (options: { readonly workers?: number } = {}): Controller.Reconciler => ({
  name: "cronjob",
  primary: CronJobRef,
  watches: [{ ref: JobRef, keys: Controller.controllerOf("CronJob") }],
  workers: options.workers ?? 2,
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const cronJob = ctx.informers.for(CronJobRef).get(namespace, name)
      if (cronJob === undefined) return
      const nowMs = yield* Clock.currentTimeMillis
      const plan = decide(cronJob, ctx.informers.for(JobRef).controlledBy(uidOf(cronJob)), nowMs)

      for (const job of plan.delete) {
        yield* ctx.client
          .delete(JobRef, namespace, nameOf(job), { propagationPolicy: "Background", preconditions: { uid: uidOf(job) } })
          .pipe(Effect.catchIf((e) => e.status.code === 404, () => Effect.void))
      }
      let status = plan.status
      if (plan.create !== undefined) {
        const job = plan.create
        const made = yield* ctx.client.create(job).pipe(
          // The name is the lock: a Job of ours with it means this time was started already.
          Effect.catchIf(
            (e) => e.status.reason === "AlreadyExists",
            (e) =>
              Effect.flatMap(ctx.client.get(JobRef, namespace, nameOf(job)), (existing) =>
                isControlledBy(existing, uidOf(cronJob)) ? Effect.succeed(existing) : Effect.fail(e)
              )
          ),
          Effect.tapError((e) => ctx.events.record(cronJob, "Warning", "FailedCreate", `Error creating job: ${e.message}`))
        )
        const base = status ?? asObject(cronJob["status"])
        const active = asArray(base["active"]).map(asObject).filter((r) => r["uid"] !== uidOf(made))
        status = { ...base, active: [...active, jobRef(made)] }
        yield* ctx.events.record(cronJob, "Normal", "SuccessfulCreate", `Created job ${nameOf(made)}`)
      }
      if (status !== undefined) yield* ctx.client.update({ ...cronJob, status }, "status")
      for (const e of plan.events) yield* ctx.events.record(cronJob, e.type, e.reason, e.message)
      return plan.requeueAfterMs === undefined ? undefined : { requeueAfterMs: plan.requeueAfterMs }
    })
})
