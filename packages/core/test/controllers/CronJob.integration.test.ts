// CronJobs through the API with real schedules: `@every 1s` (robfig's grammar, accepted by the API)
// makes times due every second, so concurrency and history run in seconds; minute schedules are
// exercised with a lastScheduleTime in the past. The schedule arithmetic itself (minutes, time
// zones, deadlines, long outages) is covered over simulated time in CronJob.test.ts.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as CronJob from "../../src/controllers/CronJob.js"
import * as Job from "../../src/controllers/Job.js"
import * as Pods from "../../src/object/Pods.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, any>

const JobRef: Client.ResourceRef = { apiVersion: "batch/v1", kind: "Job" }
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const CronJobRef: Client.ResourceRef = { apiVersion: "batch/v1", kind: "CronJob" }
const EventRef: Client.ResourceRef = { apiVersion: "v1", kind: "Event" }
const ns = "default"
const timeoutMs = 20_000
// Each test may wait on a few polls of `timeoutMs`.
const testTimeoutMs = 60_000

const cronJobObject = (name: string, spec: Json, podAnnotations: Record<string, string>, jobSpec: Json = {}): Json => ({
  apiVersion: "batch/v1",
  kind: "CronJob",
  metadata: { name, namespace: ns },
  spec: {
    schedule: "@every 1s",
    ...spec,
    jobTemplate: {
      spec: {
        ...jobSpec,
        template: { metadata: { annotations: podAnnotations }, spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox" }] } }
      }
    }
  }
})

const cluster = () =>
  TestCluster.make({ nodes: 2, podStartupMs: 5, controllers: [Job.reconciler({ podFailureBackoffMs: 20, maxPodFailureBackoffMs: 200 }), CronJob.reconciler()] })

const cronJobUid = (c: TestCluster.TestCluster, name: string) => Effect.map(c.client.get(CronJobRef, ns, name), (cj) => String(Metadata.metadataOf(cj)["uid"]))

/** Every Job of the CronJob `name` seen so far, and the most unfinished ones/active pods seen at once. */
const observe = (c: TestCluster.TestCluster, name: string) => {
  const jobs = new Map<string, Json>()
  const pods = new Map<string, boolean>()
  const seen = { created: new Set<string>(), maxRunningJobs: 0, maxActivePods: 0 }
  const ours = (o: Json) => {
    const ref = Metadata.controllerRefOf(o)
    return ref?.["kind"] === "CronJob" && ref["name"] === name
  }
  c.informers.for(JobRef).subscribe((change) => {
    if (!ours(change.object)) return
    const jobName = String(Metadata.metadataOf(change.object)["name"])
    seen.created.add(jobName)
    if (change.type === "DELETED") jobs.delete(jobName)
    else jobs.set(jobName, change.object)
    const running = [...jobs.values()].filter((j) => Job.finishedCondition(j) === undefined && !Metadata.isTerminating(j)).length
    seen.maxRunningJobs = Math.max(seen.maxRunningJobs, running)
  })
  c.informers.for(PodRef).subscribe((change) => {
    const jobName = ((Metadata.metadataOf(change.object)["labels"] ?? {}) as Record<string, string>)["batch.kubernetes.io/job-name"]
    if (jobName === undefined || !seen.created.has(jobName)) return
    const uid = String(Metadata.metadataOf(change.object)["uid"])
    if (change.type === "DELETED") pods.delete(uid)
    else pods.set(uid, Pods.isActive(change.object))
    seen.maxActivePods = Math.max(seen.maxActivePods, [...pods.values()].filter(Boolean).length)
  })
  return { seen, jobs }
}

const jobsOf = (c: TestCluster.TestCluster, uid: string) =>
  Effect.map(c.client.list(JobRef, { namespace: ns }), (list) => ((list["items"] ?? []) as ReadonlyArray<Json>).filter((j) => Metadata.isControlledBy(j, uid)))

const eventReasons = (c: TestCluster.TestCluster, name: string) =>
  Effect.map(c.client.list(EventRef, { namespace: ns }), (list) =>
    ((list["items"] ?? []) as ReadonlyArray<Json>).filter((e) => e["involvedObject"]?.["name"] === name).map((e) => String(e["reason"]))
  )

const check = (ok: boolean, message: string) => (ok ? Effect.void : Effect.fail(new Error(message)))

describe("CronJob through the API", () => {
  it.live("Forbid never has two Jobs running at once while each runs longer than the period", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const { seen } = observe(c, "forbid")
        yield* c.client.create(cronJobObject("forbid", { concurrencyPolicy: "Forbid" }, { "sim.fleet.koder.dev/exit-code": "0", "sim.fleet.koder.dev/run-ms": "1500" }))
        const uid = yield* cronJobUid(c, "forbid")
        // Three Jobs completed one after the other, each 1.5 s long on a 1 s schedule.
        yield* c.eventually(
          Effect.flatMap(jobsOf(c, uid), (jobs) => {
            const complete = jobs.filter((j) => Job.finishedCondition(j)?.type === "Complete").length
            return check(complete >= 3 || seen.created.size >= 4, `only ${complete} complete of ${seen.created.size}`)
          }),
          { timeoutMs }
        )
        expect(seen.maxRunningJobs).toBe(1)
        expect(seen.maxActivePods).toBe(1)
        expect(yield* eventReasons(c, "forbid")).toContain("JobAlreadyActive")
        const cj = yield* c.client.get(CronJobRef, ns, "forbid")
        expect((cj["status"] as Json)["lastSuccessfulTime"]).toBeDefined()
        expect(((cj["status"] as Json)["active"] ?? []).length).toBeLessThanOrEqual(1)
      })
    ),
    testTimeoutMs
  )

  it.live("Replace deletes the running Job and starts the next", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const { seen } = observe(c, "replace")
        // Pods without an exit code run until stopped.
        yield* c.client.create(cronJobObject("replace", { concurrencyPolicy: "Replace" }, {}))
        const first = yield* c.eventually(
          Effect.flatMap(c.client.get(CronJobRef, ns, "replace"), (cj) => {
            const active = ((cj["status"] as Json)?.["active"] ?? []) as ReadonlyArray<Json>
            return active.length === 1 ? Effect.succeed(String(active[0]!["name"])) : Effect.fail(new Error("no active Job yet"))
          }),
          { timeoutMs }
        )
        const second = yield* c.eventually(
          Effect.flatMap(c.client.get(CronJobRef, ns, "replace"), (cj) => {
            const active = ((cj["status"] as Json)?.["active"] ?? []) as ReadonlyArray<Json>
            return active.length === 1 && active[0]!["name"] !== first ? Effect.succeed(String(active[0]!["name"])) : Effect.fail(new Error("not replaced yet"))
          }),
          { timeoutMs }
        )
        expect(second).not.toBe(first)
        expect(yield* TestCluster.find(c, JobRef, ns, first)).toBeUndefined()
        expect(seen.maxRunningJobs).toBe(1)
        expect(yield* eventReasons(c, "replace")).toContain("SuccessfulDelete")
      })
    ),
    testTimeoutMs
  )

  it.live("history limits prune the oldest finished Jobs", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const ok = observe(c, "keep-ok")
        const bad = observe(c, "keep-bad")
        yield* c.client.create(cronJobObject("keep-ok", { successfulJobsHistoryLimit: 1 }, { "sim.fleet.koder.dev/exit-code": "0" }))
        yield* c.client.create(cronJobObject("keep-bad", { failedJobsHistoryLimit: 1 }, { "sim.fleet.koder.dev/exit-code": "1" }, { backoffLimit: 0 }))
        const okUid = yield* cronJobUid(c, "keep-ok")
        const badUid = yield* cronJobUid(c, "keep-bad")
        const finishedCount = (uid: string, type: string) => Effect.map(jobsOf(c, uid), (jobs) => jobs.filter((j) => Job.finishedCondition(j)?.type === type).length)
        yield* c.eventually(
          Effect.gen(function* () {
            yield* check(ok.seen.created.size >= 4 && bad.seen.created.size >= 4, "fewer than 4 runs yet")
            // Pruning follows each finish: between a finish and the next sync there may be one more.
            yield* check((yield* finishedCount(okUid, "Complete")) === 1, "successful Jobs not pruned")
            yield* check((yield* finishedCount(badUid, "Failed")) === 1, "failed Jobs not pruned")
          }),
          { timeoutMs }
        )
        expect(yield* eventReasons(c, "keep-ok")).toContain("SuccessfulDelete")
      })
    ),
    testTimeoutMs
  )

  it.live("a minute schedule with lastScheduleTime in the past runs the most recent time at once, once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const { seen } = observe(c, "minutely")
        const cj = yield* c.client.create(cronJobObject("minutely", { schedule: "* * * * *", timeZone: "Europe/Berlin" }, {}))
        yield* c.idle
        const past = new Date(Date.now() - 10 * 60_000).toISOString().replace(/\.\d+Z$/, "Z")
        yield* c.client.patch(CronJobRef, ns, "minutely", "merge", { status: { lastScheduleTime: past } }, "status")
        const job = yield* c.eventually(
          Effect.flatMap(jobsOf(c, String(Metadata.metadataOf(cj)["uid"])), (jobs) => (jobs.length > 0 ? Effect.succeed(jobs[0]!) : Effect.fail(new Error("no Job yet")))),
          { timeoutMs }
        )
        yield* c.idle
        const scheduled = Date.parse(String((job["metadata"]["annotations"] as Json)["batch.kubernetes.io/cronjob-scheduled-timestamp"]))
        expect(scheduled % 60_000).toBe(0)
        expect(Date.now() - scheduled).toBeLessThan(2 * 60_000)
        expect(job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]).toMatch(/\+0[12]:00$/)
        expect(job["metadata"]["name"]).toBe(`minutely-${scheduled / 60_000}`)
        const status = (yield* c.client.get(CronJobRef, ns, "minutely"))["status"] as Json
        expect(Date.parse(status["lastScheduleTime"])).toBeGreaterThanOrEqual(scheduled)
        // One Job per time: only another minute boundary passing could add a second.
        expect(seen.created.size).toBeLessThanOrEqual(2)
      })
    ),
    testTimeoutMs
  )
})
