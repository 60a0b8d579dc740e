import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Admission from "../../src/api/Admission.js"
import * as ApiError from "../../src/api/ApiError.js"
import type * as Client from "../../src/client/Client.js"
import * as Job from "../../src/controllers/Job.js"
import * as Pods from "../../src/object/Pods.js"
import * as Status from "../../src/model/Status.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, any>

const JobRef: Client.ResourceRef = { apiVersion: "batch/v1", kind: "Job" }
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const ns = "default"
const timeoutMs = 20_000
// Each test may wait on a few polls of `timeoutMs`.
const testTimeoutMs = 60_000

const jobObject = (name: string, spec: Json, annotations: Record<string, string> = {}, restartPolicy = "Never"): Json => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name, namespace: ns },
  spec: {
    ...spec,
    template: {
      metadata: { labels: { app: name }, annotations },
      spec: { restartPolicy, containers: [{ name: "main", image: "busybox" }] }
    }
  }
})

const cluster = () => TestCluster.make({ nodes: 2, podStartupMs: 5, controllers: [Job.reconciler({ podFailureBackoffMs: 20, maxPodFailureBackoffMs: 200 })] })

const getJob = (c: TestCluster.TestCluster, name: string) => c.client.get(JobRef, ns, name) as Effect.Effect<Json, unknown>

/** Waits until the Job has a True condition of `type`. */
const finished = (c: TestCluster.TestCluster, name: string, type: "Complete" | "Failed") =>
  c.eventually(
    Effect.flatMap(getJob(c, name), (job) => {
      const cond = (job["status"]?.["conditions"] ?? []).find((x: Json) => x["type"] === type && x["status"] === "True")
      return cond === undefined ? Effect.fail(new Error(`${name} not ${type}: ${JSON.stringify(job["status"])}`)) : Effect.succeed({ job, cond })
    }),
    { timeoutMs }
  )

const podsOf = (c: TestCluster.TestCluster, job: Json) =>
  Effect.map(TestCluster.pods(c, ns, `batch.kubernetes.io/job-name=${String(job["metadata"]["name"])}`), (pods) =>
    pods.filter((p) => Metadata.isControlledBy(p, String(job["metadata"]["uid"]))) as ReadonlyArray<Json>
  )

/** The largest number of active pods of Job `name` seen at any pod watch event from now on. */
const watchActive = (c: TestCluster.TestCluster, name: string) => {
  const active = new Map<string, boolean>()
  const seen = { max: 0 }
  c.informers.for(PodRef).subscribe((change) => {
    const labels = (Metadata.metadataOf(change.object)["labels"] ?? {}) as Record<string, string>
    if (labels["batch.kubernetes.io/job-name"] !== name) return
    const key = String(Metadata.metadataOf(change.object)["uid"])
    if (change.type === "DELETED") active.delete(key)
    else active.set(key, Pods.isActive(change.object))
    seen.max = Math.max(seen.max, [...active.values()].filter(Boolean).length)
  })
  return seen
}

describe("Job through the API", () => {
  it.live("backoffLimit 2 with failing pods: Failed (BackoffLimitExceeded) after exactly 3 failed pods", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(jobObject("fails", { backoffLimit: 2 }, { "sim.fleet.koder.dev/exit-code": "1" }))
        const { job, cond } = yield* finished(c, "fails", "Failed")
        expect(cond).toMatchObject({ reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit" })
        expect(job["status"]).toMatchObject({ failed: 3, uncountedTerminatedPods: {} })
        expect(job["status"]["succeeded"]).toBeUndefined()
        expect(job["status"]["active"]).toBeUndefined()
        yield* c.idle
        const pods = yield* podsOf(c, job)
        expect(pods).toHaveLength(3)
        expect(pods.every((p) => Pods.phase(p) === "Failed")).toBe(true)
        // Counted, so released: pod GC may remove them without changing the counts.
        expect(pods.every((p) => !Job.hasTrackingFinalizer(p))).toBe(true)
        expect((yield* getJob(c, "fails"))["status"]["failed"]).toBe(3)
      })
    ),
    testTimeoutMs
  )

  it.live("restartPolicy OnFailure: container restarts count against backoffLimit", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const created = new Set<string>()
        c.informers.for(PodRef).subscribe((change) => {
          if (((Metadata.metadataOf(change.object)["labels"] ?? {}) as Record<string, string>)["batch.kubernetes.io/job-name"] === "restarts") created.add(String(Metadata.metadataOf(change.object)["uid"]))
        })
        yield* c.client.create(jobObject("restarts", { backoffLimit: 2 }, { "sim.fleet.koder.dev/exit-code": "1", "sim.fleet.koder.dev/run-ms": "20" }, "OnFailure"))
        const { job, cond } = yield* finished(c, "restarts", "Failed")
        expect(cond["reason"]).toBe("BackoffLimitExceeded")
        // The one pod restarted in place, then was stopped (deleted) and counted as failed.
        expect(job["status"]).toMatchObject({ failed: 1 })
        expect(created.size).toBe(1)
        yield* c.eventually(Effect.flatMap(podsOf(c, job), (pods) => (pods.length === 0 ? Effect.void : Effect.fail(new Error("pod not deleted")))), { timeoutMs })
      })
    ),
    testTimeoutMs
  )

  it.live("completions 5, parallelism 2: completes with never more than 2 active pods", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const seen = watchActive(c, "five")
        yield* c.client.create(jobObject("five", { completions: 5, parallelism: 2 }, { "sim.fleet.koder.dev/exit-code": "0", "sim.fleet.koder.dev/run-ms": "30" }))
        const { job } = yield* finished(c, "five", "Complete")
        expect(job["status"]).toMatchObject({ succeeded: 5, ready: 0, uncountedTerminatedPods: {} })
        expect(job["status"]["failed"]).toBeUndefined()
        expect(Date.parse(job["status"]["completionTime"])).toBeGreaterThanOrEqual(Date.parse(job["status"]["startTime"]))
        expect(seen.max).toBe(2)
        yield* c.idle
        const pods = yield* podsOf(c, job)
        expect(pods).toHaveLength(5)
        expect(pods.every((p) => Pods.phase(p) === "Succeeded" && !Job.hasTrackingFinalizer(p))).toBe(true)
        expect(seen.max).toBe(2)
      })
    ),
    testTimeoutMs
  )

  it.live("Indexed, 3 completions: completes with completedIndexes 0-2", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(jobObject("idx", { completionMode: "Indexed", completions: 3, parallelism: 3 }, { "sim.fleet.koder.dev/exit-code": "0" }))
        const { job } = yield* finished(c, "idx", "Complete")
        expect(job["status"]).toMatchObject({ completedIndexes: "0-2", succeeded: 3 })
        const pods = yield* podsOf(c, job)
        const byIndex = pods.map((p) => [p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"], p] as const).sort(([a], [b]) => a.localeCompare(b))
        expect(byIndex.map(([ix]) => ix)).toEqual(["0", "1", "2"])
        for (const [ix, p] of byIndex) {
          expect(p["metadata"]["name"]).toMatch(new RegExp(`^idx-${ix}-[a-z0-9]+$`))
          expect(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]).toBe(ix)
          expect(p["spec"]["hostname"]).toBe(`idx-${ix}`)
          expect(p["spec"]["containers"][0]["env"]).toContainEqual(expect.objectContaining({ name: "JOB_COMPLETION_INDEX" }))
        }
      })
    ),
    testTimeoutMs
  )

  it.live("activeDeadlineSeconds fails a long-running Job and stops its pods", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const seen = watchActive(c, "slow")
        yield* c.client.create(jobObject("slow", { activeDeadlineSeconds: 2, parallelism: 2, completions: 2 }))
        const { job, cond } = yield* finished(c, "slow", "Failed")
        // Both pods ran (they never exit by themselves) until the deadline stopped them.
        expect(seen.max).toBe(2)
        expect(cond).toMatchObject({ reason: "DeadlineExceeded", message: "Job was active longer than specified deadline" })
        expect(job["status"]).toMatchObject({ failed: 2 })
        expect(job["status"]["active"]).toBeUndefined()
        expect(Date.parse(cond["lastTransitionTime"]) - Date.parse(job["status"]["startTime"])).toBeGreaterThanOrEqual(2000)
        // The stopped pods were deleted (their finalizer removed once counted).
        yield* c.eventually(
          Effect.flatMap(podsOf(c, job), (pods) => (pods.some(Pods.isActive) ? Effect.fail(new Error("pods still active")) : Effect.void)),
          { timeoutMs }
        )
      })
    ),
    testTimeoutMs
  )

  it.live("ttlSecondsAfterFinished deletes the finished Job", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const completed: Array<string> = []
        c.informers.for(JobRef).subscribe((change) => {
          if (Job.finishedCondition(change.object)?.type === "Complete") completed.push(String(Metadata.metadataOf(change.object)["name"]))
        })
        yield* c.client.create(jobObject("short", { ttlSecondsAfterFinished: 1 }, { "sim.fleet.koder.dev/exit-code": "0" }))
        yield* c.eventually(
          Effect.flatMap(TestCluster.find(c, JobRef, ns, "short"), (j) => (j === undefined ? Effect.void : Effect.fail(new Error("Job still exists")))),
          { timeoutMs }
        )
        expect(completed).toContain("short")
      })
    ),
    testTimeoutMs
  )

  it.live("suspend: no pods while suspended; resuming runs the Job to completion", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(jobObject("later", { suspend: true }, { "sim.fleet.koder.dev/exit-code": "0" }))
        yield* c.eventually(
          Effect.flatMap(getJob(c, "later"), (j) =>
            (j["status"]?.["conditions"] ?? []).some((x: Json) => x["type"] === "Suspended" && x["status"] === "True") ? Effect.succeed(j) : Effect.fail(new Error("not suspended"))
          ),
          { timeoutMs }
        )
        yield* c.idle
        const job = yield* getJob(c, "later")
        expect(job["status"]["startTime"]).toBeUndefined()
        expect(yield* podsOf(c, job)).toHaveLength(0)
        yield* c.client.patch(JobRef, ns, "later", "merge", { spec: { suspend: false } })
        const done = yield* finished(c, "later", "Complete")
        expect((done.job["status"]["conditions"] as ReadonlyArray<Json>).find((x) => x["type"] === "Suspended")).toMatchObject({ status: "False", reason: "JobResumed" })
      })
    ),
    testTimeoutMs
  )

  it.live("refused pod creations: FailedCreate, active counts only the pods made, retried until allowed", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // An admission plugin standing in for a quota: one pod of this Job, then refusals.
        const gate = { allowed: 1 }
        const quota: Admission.Plugin = {
          name: "TestPodLimit",
          validate: (r) => {
            const labels = (Metadata.metadataOf(r.object)["labels"] ?? {}) as Record<string, string>
            if (r.operation !== "CREATE" || r.resource.kind !== "Pod" || labels["batch.kubernetes.io/job-name"] !== "limited") return Effect.succeed([])
            if (gate.allowed <= 0) return Effect.fail(ApiError.of(Status.forbidden("pods", r.name, "exceeded quota: test")))
            gate.allowed--
            return Effect.succeed([])
          }
        }
        const c = yield* TestCluster.make({ nodes: 1, podStartupMs: 5, admission: [quota], controllers: [Job.reconciler({ podFailureBackoffMs: 20 })] })
        yield* c.client.create(jobObject("limited", { parallelism: 3, completions: 3 }))
        yield* c.eventually(
          Effect.flatMap(c.client.list({ apiVersion: "v1", kind: "Event" }, { namespace: ns }), (list) =>
            ((list["items"] ?? []) as ReadonlyArray<Json>).some((e) => e["reason"] === "FailedCreate" && e["involvedObject"]["name"] === "limited")
              ? Effect.void
              : Effect.fail(new Error("no FailedCreate yet"))
          ),
          { timeoutMs }
        )
        yield* c.eventually(
          Effect.flatMap(getJob(c, "limited"), (j) => (j["status"]?.["active"] === 1 ? Effect.void : Effect.fail(new Error(`active ${j["status"]?.["active"]}`)))),
          { timeoutMs }
        )
        gate.allowed = 100
        yield* c.eventually(
          Effect.flatMap(getJob(c, "limited"), (j) => (j["status"]?.["active"] === 3 ? Effect.void : Effect.fail(new Error(`active ${j["status"]?.["active"]}`)))),
          { timeoutMs }
        )
        expect(yield* podsOf(c, yield* getJob(c, "limited"))).toHaveLength(3)
      })
    ),
    testTimeoutMs
  )

  it.live("a deleted Job's pods lose the tracking finalizer", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(jobObject("gone", { parallelism: 2, completions: 2 }))
        yield* c.eventually(
          Effect.flatMap(getJob(c, "gone"), (j) => (j["status"]?.["active"] === 2 ? Effect.succeed(j) : Effect.fail(new Error("not running yet")))),
          { timeoutMs }
        )
        yield* c.client.delete(JobRef, ns, "gone", { propagationPolicy: "Orphan" })
        yield* c.eventually(
          Effect.flatMap(TestCluster.pods(c, ns, "batch.kubernetes.io/job-name=gone"), (pods) =>
            pods.length === 2 && pods.every((p) => !Job.hasTrackingFinalizer(p)) ? Effect.void : Effect.fail(new Error("finalizers remain"))
          ),
          { timeoutMs }
        )
      })
    ),
    testTimeoutMs
  )
})
