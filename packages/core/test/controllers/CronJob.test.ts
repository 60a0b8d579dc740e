import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as CronJob from "../../src/controllers/CronJob.js"
import * as CronSchedule from "../../src/model/CronSchedule.js"

const at = (text: string) => Date.parse(text)
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")
const minutes = (text: string) => Math.floor(at(text) / 60_000)

const schedule = (text: string, timeZone?: string) => Either.getOrThrow(CronSchedule.parse(text, timeZone))

const cronJob = (spec: Record<string, unknown> = {}, status: Record<string, unknown> = {}, meta: Record<string, unknown> = {}) => ({
  apiVersion: "batch/v1",
  kind: "CronJob",
  metadata: { name: "nightly", namespace: "default", uid: "cj-uid", creationTimestamp: "2024-05-01T09:59:30Z", ...meta },
  spec: {
    schedule: "* * * * *",
    concurrencyPolicy: "Allow",
    jobTemplate: {
      metadata: { labels: { team: "data" } },
      spec: { template: { spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox" }] } } }
    },
    ...spec
  },
  status
})

const job = (name: string, state: "Running" | "Complete" | "Failed", startTime?: string, completionTime?: string, annotations: Record<string, string> = { [CronJob.scheduledTimestampAnnotation]: "2024-05-01T10:00:00Z" }) => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: {
    name,
    namespace: "default",
    uid: `uid-${name}`,
    resourceVersion: "3",
    annotations,
    ownerReferences: [{ apiVersion: "batch/v1", kind: "CronJob", name: "nightly", uid: "cj-uid", controller: true }]
  },
  spec: {},
  status: {
    ...(startTime === undefined ? {} : { startTime }),
    ...(completionTime === undefined ? {} : { completionTime }),
    ...(state === "Running" ? { active: 1 } : { conditions: [{ type: state, status: "True" }] })
  }
})

const ref = (name: string) => ({ apiVersion: "batch/v1", kind: "Job", namespace: "default", name, uid: `uid-${name}`, resourceVersion: "3" })
const reasons = (d: CronJob.Decision) => d.events.map((e) => e.reason)
const deleted = (d: CronJob.Decision) => d.delete.map((j) => (j["metadata"] as Record<string, unknown>)["name"])

describe("CronJob.missedSchedules", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly schedule: string
    readonly timeZone?: string
    readonly earliest: string
    readonly now: string
    readonly mostRecent: string | undefined
    readonly tooMany?: boolean
  }> = [
    { name: "none due yet", schedule: "*/5 * * * *", earliest: "2024-05-01T10:00:00Z", now: "2024-05-01T10:04:59Z", mostRecent: undefined },
    { name: "exactly at the time", schedule: "*/5 * * * *", earliest: "2024-05-01T10:00:00Z", now: "2024-05-01T10:05:00Z", mostRecent: "2024-05-01T10:05:00Z" },
    { name: "several missed: the most recent", schedule: "*/5 * * * *", earliest: "2024-05-01T10:00:00Z", now: "2024-05-01T10:17:00Z", mostRecent: "2024-05-01T10:15:00Z" },
    { name: "earliest is exclusive", schedule: "0 * * * *", earliest: "2024-05-01T10:00:00Z", now: "2024-05-01T10:30:00Z", mostRecent: undefined },
    { name: "101 missed: too many", schedule: "* * * * *", earliest: "2024-05-01T10:00:00Z", now: "2024-05-01T11:41:30Z", mostRecent: "2024-05-01T11:41:00Z", tooMany: true },
    { name: "100 missed: not too many", schedule: "* * * * *", earliest: "2024-05-01T10:00:00Z", now: "2024-05-01T11:40:30Z", mostRecent: "2024-05-01T11:40:00Z" },
    { name: "a year of minutes", schedule: "* * * * *", earliest: "2023-05-01T10:00:00Z", now: "2024-05-01T10:00:30Z", mostRecent: "2024-05-01T10:00:00Z", tooMany: true },
    {
      name: "irregular: weekdays only (the gap between the first two is a day)",
      schedule: "0 9 * * 1-5",
      earliest: "2024-04-01T00:00:00Z", // a Monday
      now: "2024-04-28T12:00:00Z", // a Sunday
      mostRecent: "2024-04-26T09:00:00Z" // the Friday before
    },
    { name: "monthly", schedule: "0 0 1 * *", earliest: "2023-01-15T00:00:00Z", now: "2024-03-10T00:00:00Z", mostRecent: "2024-03-01T00:00:00Z" },
    {
      name: "in a time zone: 09:00 in Berlin is 07:00Z in summer",
      schedule: "0 9 * * *",
      timeZone: "Europe/Berlin",
      earliest: "2024-05-01T00:00:00Z",
      now: "2024-05-01T08:00:00Z",
      mostRecent: "2024-05-01T07:00:00Z"
    },
    { name: "@every keeps its own chain", schedule: "@every 7s", earliest: "2024-05-01T10:00:01Z", now: "2024-05-01T10:01:00Z", mostRecent: "2024-05-01T10:00:57Z" },
    { name: "@every, long outage", schedule: "@every 2s", earliest: "2024-05-01T10:00:01Z", now: "2024-05-01T11:00:00Z", mostRecent: "2024-05-01T10:59:59Z", tooMany: true }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const m = CronJob.missedSchedules(schedule(c.schedule, c.timeZone), at(c.earliest), at(c.now))
      expect(m.mostRecentMs === undefined ? undefined : iso(m.mostRecentMs)).toBe(c.mostRecent)
      expect(m.tooMany).toBe(c.tooMany ?? false)
    })
  }
})

describe("CronJob job names and timestamps", () => {
  it("names by minutes since the epoch; off-minute times (only @every) by seconds", () => {
    expect(CronJob.jobName("nightly", at("2024-05-01T10:00:00Z"))).toBe(`nightly-${minutes("2024-05-01T10:00:00Z")}`)
    expect(CronJob.jobName("nightly", at("2024-05-01T10:00:07Z"))).toBe(`nightly-${at("2024-05-01T10:00:07Z") / 1000}`)
  })

  const zones: ReadonlyArray<readonly [string | undefined, string, string]> = [
    [undefined, "2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z"],
    ["UTC", "2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z"],
    ["Europe/Berlin", "2024-01-15T08:00:00Z", "2024-01-15T09:00:00+01:00"],
    ["Europe/Berlin", "2024-07-15T08:00:00Z", "2024-07-15T10:00:00+02:00"],
    ["America/New_York", "2024-01-15T02:30:00Z", "2024-01-14T21:30:00-05:00"],
    ["Asia/Kolkata", "2024-01-15T00:00:00Z", "2024-01-15T05:30:00+05:30"]
  ]
  for (const [zone, utc, local] of zones) {
    it(`${utc} in ${zone ?? "(no zone)"} is ${local}`, () => {
      expect(CronJob.formatInZone(at(utc), zone)).toBe(local)
    })
  }
})

describe("CronJob.decide: when to run", () => {
  const now = at("2024-05-01T10:00:05Z")

  it("a due time creates its Job, records lastScheduleTime and requeues after the next time", () => {
    const d = CronJob.decide(cronJob(), [], now)
    const created = d.create as any
    expect(created.metadata).toMatchObject({
      name: `nightly-${minutes("2024-05-01T10:00:00Z")}`,
      namespace: "default",
      labels: { team: "data" },
      annotations: { "batch.kubernetes.io/cronjob-scheduled-timestamp": "2024-05-01T10:00:00Z" },
      ownerReferences: [{ apiVersion: "batch/v1", kind: "CronJob", name: "nightly", uid: "cj-uid", controller: true, blockOwnerDeletion: true }]
    })
    expect(created.spec).toEqual(cronJob().spec.jobTemplate.spec)
    expect(d.status).toMatchObject({ lastScheduleTime: "2024-05-01T10:00:00Z" })
    expect(d.requeueAfterMs).toBe(at("2024-05-01T10:01:00Z") + 100 - now)
  })

  it("nothing due before the first time after creation", () => {
    const d = CronJob.decide(cronJob(), [], at("2024-05-01T09:59:50Z"))
    expect(d.create).toBeUndefined()
    expect(d.status).toBeUndefined()
    expect(d.requeueAfterMs).toBe(10_100)
  })

  it("a time already run is not run again", () => {
    const d = CronJob.decide(cronJob({}, { lastScheduleTime: "2024-05-01T10:00:00Z" }), [], now)
    expect(d.create).toBeUndefined()
    expect(d.requeueAfterMs).toBe(at("2024-05-01T10:01:00Z") + 100 - now)
  })

  it("after missed times, only the most recent runs", () => {
    const d = CronJob.decide(cronJob({}, { lastScheduleTime: "2024-05-01T09:50:00Z" }), [], now)
    expect((d.create as any).metadata.name).toBe(`nightly-${minutes("2024-05-01T10:00:00Z")}`)
    expect(reasons(d)).toEqual([])
  })

  it("more than 100 missed times: warns TooManyMissedTimes and still runs the most recent", () => {
    const d = CronJob.decide(cronJob({}, {}, { creationTimestamp: "2024-04-30T10:00:00Z" }), [], now)
    expect(reasons(d)).toEqual(["TooManyMissedTimes"])
    expect((d.create as any).metadata.name).toBe(`nightly-${minutes("2024-05-01T10:00:00Z")}`)
  })

  it("startingDeadlineSeconds: a time older than the deadline is skipped", () => {
    const late = at("2024-05-01T10:00:30Z")
    const status = { lastScheduleTime: "2024-05-01T09:00:00Z" }
    const skipped = CronJob.decide(cronJob({ startingDeadlineSeconds: 10 }, status), [], late)
    expect(skipped.create).toBeUndefined()
    expect(skipped.requeueAfterMs).toBe(at("2024-05-01T10:01:00Z") + 100 - late)
    const inTime = CronJob.decide(cronJob({ startingDeadlineSeconds: 60 }, status), [], late)
    expect((inTime.create as any).metadata.name).toBe(`nightly-${minutes("2024-05-01T10:00:00Z")}`)
  })

  it("a deadline also keeps a long outage from warning about missed times", () => {
    const d = CronJob.decide(cronJob({ startingDeadlineSeconds: 120 }, {}, { creationTimestamp: "2024-04-30T10:00:00Z" }), [], now)
    expect(reasons(d)).toEqual([])
    expect(d.create).toBeDefined()
  })

  it("suspend: nothing runs and nothing is requeued", () => {
    const d = CronJob.decide(cronJob({ suspend: true }), [], now)
    expect(d.create).toBeUndefined()
    expect(d.requeueAfterMs).toBeUndefined()
  })

  it("a CronJob being deleted starts nothing", () => {
    expect(CronJob.decide(cronJob({}, {}, { deletionTimestamp: "2024-05-01T10:00:00Z" }), [], now).create).toBeUndefined()
  })

  it("time zones: 09:00 Berlin runs at 08:00Z in winter and is annotated in local time", () => {
    const winter = at("2024-01-15T08:00:10Z")
    const d = CronJob.decide(cronJob({ schedule: "0 9 * * *", timeZone: "Europe/Berlin" }, { lastScheduleTime: "2024-01-14T08:00:00Z" }), [], winter)
    expect((d.create as any).metadata.annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"]).toBe("2024-01-15T09:00:00+01:00")
    expect(d.status).toMatchObject({ lastScheduleTime: "2024-01-15T08:00:00Z" })
    expect(d.requeueAfterMs).toBe(at("2024-01-16T08:00:00Z") + 100 - winter)
  })

  it("an unknown time zone or schedule is reported, not run", () => {
    const zone = CronJob.decide(cronJob({ timeZone: "Mars/Olympus" }), [], now)
    expect(reasons(zone)).toEqual(["UnknownTimeZone"])
    expect(zone.create).toBeUndefined()
    const bad = CronJob.decide(cronJob({ schedule: "61 * * * *" }), [], now)
    expect(reasons(bad)).toEqual(["UnparseableSchedule"])
    expect(bad.requeueAfterMs).toBeUndefined()
  })
})

describe("CronJob.decide: concurrency", () => {
  const now = at("2024-05-01T10:01:05Z")
  const previous = `nightly-${minutes("2024-05-01T10:00:00Z")}`
  const status = { lastScheduleTime: "2024-05-01T10:00:00Z", active: [ref(previous)] }
  const running = job(previous, "Running", "2024-05-01T10:00:01Z")

  const cases: ReadonlyArray<{ readonly policy: string; readonly create: boolean; readonly deleted: ReadonlyArray<string>; readonly events: ReadonlyArray<string> }> = [
    { policy: "Allow", create: true, deleted: [], events: [] },
    { policy: "Forbid", create: false, deleted: [], events: ["JobAlreadyActive"] },
    { policy: "Replace", create: true, deleted: [previous], events: ["SuccessfulDelete"] }
  ]
  for (const c of cases) {
    it(`${c.policy} while the previous Job runs`, () => {
      const d = CronJob.decide(cronJob({ concurrencyPolicy: c.policy }, status), [running], now)
      expect(d.create !== undefined).toBe(c.create)
      expect(deleted(d)).toEqual(c.deleted)
      expect(reasons(d)).toEqual(c.events)
      if (c.policy === "Replace") expect(d.status?.["active"]).toBeUndefined()
      if (c.policy === "Allow") expect(d.status).toMatchObject({ active: [ref(previous)] })
      if (c.policy === "Forbid") expect(d.status).toBeUndefined()
    })
  }

  it("Forbid runs the missed time as soon as the previous Job finishes", () => {
    const done = job(previous, "Complete", "2024-05-01T10:00:01Z", "2024-05-01T10:01:30Z")
    const later = at("2024-05-01T10:01:31Z")
    const d = CronJob.decide(cronJob({ concurrencyPolicy: "Forbid" }, status), [done], later)
    expect(reasons(d)).toEqual(["SawCompletedJob"])
    expect((d.create as any).metadata.name).toBe(`nightly-${minutes("2024-05-01T10:01:00Z")}`)
    expect(d.status).toMatchObject({ lastScheduleTime: "2024-05-01T10:01:00Z", lastSuccessfulTime: "2024-05-01T10:01:30Z" })
    expect(d.status?.["active"]).toBeUndefined()
  })

  it("Forbid sees an unfinished Job missing from status.active (lost status write) and puts it back", () => {
    const d = CronJob.decide(cronJob({ concurrencyPolicy: "Forbid" }, { lastScheduleTime: "2024-05-01T10:00:00Z" }), [running], now)
    expect(d.create).toBeUndefined()
    expect(reasons(d)).toEqual(["UnexpectedJob", "JobAlreadyActive"])
    expect(d.status).toMatchObject({ active: [ref(previous)] })
  })

  it("a Job made by hand from the CronJob is only reported, as upstream: Forbid does not wait for it", () => {
    const manual = job("by-hand", "Running", "2024-05-01T10:00:01Z", undefined, { "cronjob.kubernetes.io/instantiate": "manual" })
    const d = CronJob.decide(cronJob({ concurrencyPolicy: "Forbid" }, { lastScheduleTime: "2024-05-01T10:00:00Z" }), [manual], now)
    expect(reasons(d)).toEqual(["UnexpectedJob"])
    expect(d.create).toBeDefined()
    expect(d.status?.["active"]).toBeUndefined()
  })

  it("a Job for the due time that exists already takes the time (never two for one time)", () => {
    const current = `nightly-${minutes("2024-05-01T10:01:00Z")}`
    const d = CronJob.decide(cronJob({}, { lastScheduleTime: "2024-05-01T10:00:00Z" }), [job(current, "Complete", "2024-05-01T10:01:01Z", "2024-05-01T10:01:02Z")], now)
    expect(d.create).toBeUndefined()
    expect(d.status).toMatchObject({ lastScheduleTime: "2024-05-01T10:01:00Z", lastSuccessfulTime: "2024-05-01T10:01:02Z" })
  })

  it("an active Job that disappeared leaves the list", () => {
    const d = CronJob.decide(cronJob({ concurrencyPolicy: "Forbid", suspend: true }, status), [], now)
    expect(reasons(d)).toEqual(["MissingJob"])
    expect(d.status?.["active"]).toBeUndefined()
  })
})

describe("CronJob.decide: history limits", () => {
  const now = at("2024-05-01T10:00:30Z")
  const status = { lastScheduleTime: "2024-05-01T10:00:00Z" }
  const finished = [
    job("ok-3", "Complete", "2024-05-01T09:57:00Z", "2024-05-01T09:57:10Z"),
    job("ok-1", "Complete", "2024-05-01T09:55:00Z", "2024-05-01T09:55:10Z"),
    job("ok-4", "Complete", "2024-05-01T09:58:00Z", "2024-05-01T09:58:10Z"),
    job("ok-2", "Complete", "2024-05-01T09:56:00Z", "2024-05-01T09:56:10Z"),
    job("bad-1", "Failed", "2024-05-01T09:50:00Z"),
    job("bad-2", "Failed", "2024-05-01T09:51:00Z"),
    job("run", "Running", "2024-05-01T09:59:00Z")
  ]

  const cases: ReadonlyArray<{ readonly name: string; readonly spec: Record<string, unknown>; readonly deleted: ReadonlyArray<string> }> = [
    { name: "no limits: keep all", spec: {}, deleted: [] },
    { name: "keep 2 successful, 1 failed: the oldest go", spec: { successfulJobsHistoryLimit: 2, failedJobsHistoryLimit: 1 }, deleted: ["ok-1", "ok-2", "bad-1"] },
    { name: "limits of 0", spec: { successfulJobsHistoryLimit: 0, failedJobsHistoryLimit: 0 }, deleted: ["ok-1", "ok-2", "ok-3", "ok-4", "bad-1", "bad-2"] },
    { name: "limits above the counts", spec: { successfulJobsHistoryLimit: 10, failedJobsHistoryLimit: 10 }, deleted: [] }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const d = CronJob.decide(cronJob(c.spec, { ...status, active: [ref("run")] }), finished, now)
      expect(deleted(d)).toEqual(c.deleted)
      expect(d.events.filter((e) => e.reason === "SuccessfulDelete").map((e) => e.message)).toEqual(c.deleted.map((n) => `Deleted job ${n}`))
    })
  }

  it("lastSuccessfulTime is the newest completion", () => {
    const d = CronJob.decide(cronJob({}, status), finished, now)
    expect(d.status).toMatchObject({ lastSuccessfulTime: "2024-05-01T09:58:10Z", active: [ref("run")] })
  })
})
