import { describe, expect, it } from "vitest"
import * as Job from "../../src/controllers/Job.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

const job = (spec: Record<string, unknown> = {}, status: Record<string, unknown> = {}, meta: Record<string, unknown> = {}) => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name: "work", namespace: "default", uid: "job-uid", resourceVersion: "7", ...meta },
  spec: {
    parallelism: 1,
    completions: 1,
    backoffLimit: 6,
    template: {
      metadata: { labels: { app: "work" } },
      spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox" }] }
    },
    ...spec
  },
  status
})

interface PodOptions {
  readonly phase?: "Pending" | "Running" | "Succeeded" | "Failed"
  readonly tracked?: boolean
  readonly index?: number
  readonly ready?: boolean
  readonly node?: string
  readonly finishedAt?: number
  readonly restarts?: number
  readonly deleting?: boolean
  readonly created?: number
}

const pod = (name: string, o: PodOptions = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name,
    namespace: "default",
    uid: `uid-${name}`,
    creationTimestamp: iso(o.created ?? T0),
    ...(o.tracked === false ? {} : { finalizers: [Job.trackingFinalizer] }),
    ...(o.index === undefined ? {} : { annotations: { "batch.kubernetes.io/job-completion-index": String(o.index) } }),
    ...(o.deleting ? { deletionTimestamp: iso(T0) } : {}),
    ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "work", uid: "job-uid", controller: true }]
  },
  spec: { ...(o.node === undefined ? {} : { nodeName: o.node }), containers: [{ name: "main", image: "busybox" }] },
  status: {
    phase: o.phase ?? "Running",
    conditions: [{ type: "Ready", status: o.ready ? "True" : "False", lastTransitionTime: iso(T0) }],
    containerStatuses: [
      {
        name: "main",
        restartCount: o.restarts ?? 0,
        state:
          o.phase === "Succeeded" || o.phase === "Failed"
            ? { terminated: { exitCode: o.phase === "Succeeded" ? 0 : 1, finishedAt: iso(o.finishedAt ?? T0 - 60_000) } }
            : { running: {} }
      }
    ]
  }
})

const names = (pods: ReadonlyArray<Record<string, unknown>>) => pods.map((p) => String((p["metadata"] as Record<string, unknown>)["name"]))
const condition = (status: Record<string, unknown> | undefined, type: string) =>
  ((status?.["conditions"] ?? []) as ReadonlyArray<Record<string, unknown>>).find((c) => c["type"] === type)

describe("Job.decide: pods to run", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly spec: Record<string, unknown>
    readonly status?: Record<string, unknown>
    readonly pods: ReadonlyArray<ReturnType<typeof pod>>
    readonly create: number
    readonly deleted?: ReadonlyArray<string>
  }> = [
    { name: "a new Job starts `parallelism` pods", spec: { parallelism: 2, completions: 5 }, pods: [], create: 2 },
    { name: "never more than the completions left", spec: { parallelism: 4, completions: 5 }, status: { succeeded: 3 }, pods: [], create: 2 },
    { name: "enough running: nothing to do", spec: { parallelism: 2, completions: 5 }, pods: [pod("a"), pod("b")], create: 0 },
    { name: "replaces a finished pod", spec: { parallelism: 2, completions: 5 }, status: { succeeded: 1 }, pods: [pod("a"), pod("b", { phase: "Succeeded", tracked: false })], create: 1 },
    { name: "work queue: parallelism until one succeeds", spec: { parallelism: 3, completions: undefined }, pods: [pod("a")], create: 2 },
    { name: "work queue: after a success, no new pods", spec: { parallelism: 3, completions: undefined }, status: { succeeded: 1 }, pods: [pod("a")], create: 0 },
    {
      name: "too many: deletes unscheduled, then pending, then unready first",
      spec: { parallelism: 1, completions: 5 },
      pods: [pod("ready", { node: "n", ready: true }), pod("unscheduled", { phase: "Pending" }), pod("pending", { phase: "Pending", node: "n" })],
      create: 0,
      deleted: ["unscheduled", "pending"]
    },
    { name: "parallelism 0 stops everything", spec: { parallelism: 0, completions: 5 }, pods: [pod("a")], create: 0, deleted: ["a"] }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const d = Job.decide(job(c.spec, c.status ?? {}), c.pods, T0)
      expect(d.create).toHaveLength(c.create)
      expect(names(d.delete.map((x) => x.pod))).toEqual(c.deleted ?? [])
      // Scaling down is not failure: the finalizer goes first so the pods are never counted.
      expect(d.delete.every((x) => x.removeFinalizer)).toBe(true)
    })
  }

  it("stamps pods from the template with the tracking finalizer, labels and owner", () => {
    const d = Job.decide(job({ parallelism: 1 }), [], T0)
    const p = d.create[0] as any
    expect(p.metadata.generateName).toBe("work-")
    expect(p.metadata.finalizers).toEqual([Job.trackingFinalizer])
    expect(p.metadata.labels).toMatchObject({ app: "work", "batch.kubernetes.io/controller-uid": "job-uid", "batch.kubernetes.io/job-name": "work" })
    expect(p.metadata.ownerReferences).toEqual([{ apiVersion: "batch/v1", kind: "Job", name: "work", uid: "job-uid", controller: true, blockOwnerDeletion: true }])
    expect(p.spec.restartPolicy).toBe("Never")
    expect(d.recordStatus).toMatchObject({ startTime: iso(T0), active: 1, ready: 0, uncountedTerminatedPods: {} })
    expect(d.status).toBeUndefined()
  })

  it("keeps labels the API server's defaulting already put on the template", () => {
    const template = { metadata: { labels: { "batch.kubernetes.io/controller-uid": "job-uid", "batch.kubernetes.io/job-name": "work" } }, spec: { restartPolicy: "Never", containers: [] } }
    const p = Job.decide(job({ template }), [], T0).create[0] as any
    expect(p.metadata.labels).toEqual(template.metadata.labels)
  })

  it("counts ready pods", () => {
    const d = Job.decide(job({ parallelism: 2, completions: 2 }, { startTime: iso(T0) }), [pod("a", { ready: true, node: "n" }), pod("b")], T0)
    expect(d.recordStatus).toMatchObject({ active: 2, ready: 1 })
  })
})

describe("Job.decide: counting through the tracking finalizer", () => {
  const started = { startTime: iso(T0 - 1000), active: 1, ready: 0, uncountedTerminatedPods: {} }

  it("a finished pod is first recorded as uncounted, then counted once its finalizer is gone", () => {
    const d = Job.decide(job({ completions: 3 }, started), [pod("a", { phase: "Succeeded" })], T0)
    expect(d.recordStatus).toMatchObject({ uncountedTerminatedPods: { succeeded: ["uid-a"] } })
    expect(d.recordStatus?.["succeeded"]).toBeUndefined()
    expect(names(d.removeFinalizers)).toEqual(["a"])
    expect(d.status).toMatchObject({ succeeded: 1, uncountedTerminatedPods: {} })
  })

  it("a pod already uncounted is not recorded twice (crash before its finalizer was removed)", () => {
    const status = { ...started, succeeded: 1, uncountedTerminatedPods: { succeeded: ["uid-a"] } }
    const d = Job.decide(job({ completions: 3, parallelism: 1 }, status), [pod("a", { phase: "Succeeded" }), pod("b")], T0)
    expect(d.recordStatus).toBeUndefined()
    expect(names(d.removeFinalizers)).toEqual(["a"])
    expect(d.status).toMatchObject({ succeeded: 2, uncountedTerminatedPods: {} })
  })

  it("an uncounted pod whose finalizer is gone is counted (crash before the second write)", () => {
    const status = { ...started, uncountedTerminatedPods: { failed: ["uid-a"] } }
    const d = Job.decide(job({ completions: 3 }, status), [pod("a", { phase: "Failed", tracked: false })], T0)
    expect(d.recordStatus).toMatchObject({ failed: 1, uncountedTerminatedPods: {} })
    expect(d.removeFinalizers).toEqual([])
  })

  it("an uncounted pod that pod GC removed is counted too", () => {
    const status = { ...started, succeeded: 2, uncountedTerminatedPods: { succeeded: ["uid-gone"] } }
    const d = Job.decide(job({ completions: 5 }, status), [pod("b")], T0)
    expect(d.recordStatus).toMatchObject({ succeeded: 3, uncountedTerminatedPods: {} })
  })

  it("a counted pod (no finalizer) is never counted again", () => {
    const status = { ...started, succeeded: 1 }
    const d = Job.decide(job({ completions: 3 }, status), [pod("a", { phase: "Succeeded", tracked: false }), pod("b")], T0)
    expect(d.recordStatus).toBeUndefined()
    expect(d.status).toBeUndefined()
  })

  it("a pod deleted before it succeeded counts as failed", () => {
    const d = Job.decide(job({ completions: 3 }, started), [pod("a", { deleting: true })], T0)
    expect(d.recordStatus).toMatchObject({ uncountedTerminatedPods: { failed: ["uid-a"] } })
    expect(d.status).toMatchObject({ failed: 1 })
  })

  it("a running pod keeps its finalizer", () => {
    const d = Job.decide(job({}, started), [pod("a")], T0)
    expect(d.removeFinalizers).toEqual([])
  })
})

describe("Job.decide: finishing", () => {
  it("completes when `completions` pods succeeded and none is active", () => {
    const d = Job.decide(job({ completions: 2 }, { startTime: iso(T0 - 5000), succeeded: 1 }), [pod("b", { phase: "Succeeded" })], T0)
    expect(d.create).toEqual([])
    expect(condition(d.recordStatus, "Complete")).toBeUndefined()
    expect(condition(d.status, "Complete")).toMatchObject({ status: "True", lastTransitionTime: iso(T0) })
    expect(d.status).toMatchObject({ succeeded: 2, completionTime: iso(T0) })
    expect(d.events).toContainEqual({ type: "Normal", reason: "Completed", message: "Job completed" })
  })

  it("work queue: completes once a pod succeeded and the others are done", () => {
    const spec = { parallelism: 2, completions: undefined }
    const running = Job.decide(job(spec, { startTime: iso(T0) }), [pod("a", { phase: "Succeeded" }), pod("b")], T0)
    expect(running.create).toEqual([])
    expect(condition(running.status, "Complete")).toBeUndefined()
    const done = Job.decide(job(spec, { startTime: iso(T0), succeeded: 1 }), [pod("a", { phase: "Succeeded", tracked: false }), pod("b", { phase: "Succeeded" })], T0)
    expect(condition(done.status, "Complete")?.status).toBe("True")
  })

  const failedCases: ReadonlyArray<{
    readonly name: string
    readonly spec: Record<string, unknown>
    readonly status: Record<string, unknown>
    readonly pods: ReadonlyArray<ReturnType<typeof pod>>
    readonly reason: string
    readonly failed: number
  }> = [
    {
      name: "more failures than backoffLimit",
      spec: { backoffLimit: 2 },
      status: { startTime: iso(T0), failed: 2 },
      pods: [pod("c", { phase: "Failed" })],
      reason: "BackoffLimitExceeded",
      failed: 3
    },
    {
      name: "backoffLimit 0: the first failure",
      spec: { backoffLimit: 0, parallelism: 2, completions: 4 },
      status: { startTime: iso(T0) },
      pods: [pod("a", { phase: "Failed" }), pod("b")],
      reason: "BackoffLimitExceeded",
      failed: 2
    },
    {
      name: "OnFailure: container restarts count against the limit",
      spec: { backoffLimit: 2, template: { spec: { restartPolicy: "OnFailure", containers: [] } } },
      status: { startTime: iso(T0) },
      pods: [pod("a", { restarts: 2 })],
      reason: "BackoffLimitExceeded",
      failed: 1
    },
    {
      name: "activeDeadlineSeconds passed",
      spec: { activeDeadlineSeconds: 5 },
      status: { startTime: iso(T0 - 6000) },
      pods: [pod("a")],
      reason: "DeadlineExceeded",
      failed: 1
    }
  ]
  for (const c of failedCases) {
    it(`fails: ${c.name}`, () => {
      const d = Job.decide(job(c.spec, c.status), c.pods, T0)
      expect(d.create).toEqual([])
      // Active pods are stopped but keep the finalizer: they are counted as failed.
      const active = c.pods.filter((p) => p.status.phase === "Running")
      expect(d.delete).toEqual(active.map((p) => ({ pod: p, removeFinalizer: false })))
      expect(names(d.removeFinalizers)).toEqual(names(c.pods))
      expect(condition(d.status, "Failed")).toMatchObject({ status: "True", reason: c.reason })
      expect(d.status).toMatchObject({ failed: c.failed, uncountedTerminatedPods: {} })
      expect(d.status?.["active"]).toBeUndefined()
      expect(d.status?.["completionTime"]).toBeUndefined()
      expect(d.events.map((e) => e.reason)).toEqual([c.reason])
    })
  }

  it("exactly backoffLimit failures is not yet failure", () => {
    const d = Job.decide(job({ backoffLimit: 2 }, { startTime: iso(T0) }), [pod("a", { phase: "Failed" }), pod("b", { phase: "Failed" })], T0)
    expect(condition(d.status, "Failed")).toBeUndefined()
    expect(d.status).toMatchObject({ failed: 2 })
  })

  it("the BackoffLimitExceeded message is upstream's", () => {
    const d = Job.decide(job({ backoffLimit: 0 }, { startTime: iso(T0) }), [pod("a", { phase: "Failed" })], T0)
    expect(condition(d.status, "Failed")?.["message"]).toBe("Job has reached the specified backoff limit")
  })

  it("before the active deadline: requeue at it", () => {
    const d = Job.decide(job({ activeDeadlineSeconds: 5 }, { startTime: iso(T0 - 2000) }), [pod("a")], T0)
    expect(condition(d.status ?? d.recordStatus, "Failed")).toBeUndefined()
    expect(d.requeueAfterMs).toBe(3000)
  })
})

describe("Job.decide: backoff before replacing failed pods", () => {
  const cases: ReadonlyArray<{ readonly name: string; readonly pods: ReadonlyArray<ReturnType<typeof pod>>; readonly wait: number }> = [
    { name: "no failures", pods: [], wait: 0 },
    { name: "one failure 3 s ago: 10 s", pods: [pod("a", { phase: "Failed", finishedAt: T0 - 3000 })], wait: 7000 },
    {
      name: "two failures: 20 s after the last",
      pods: [pod("a", { phase: "Failed", finishedAt: T0 - 30_000 }), pod("b", { phase: "Failed", finishedAt: T0 - 5000 })],
      wait: 15_000
    },
    {
      name: "a success resets the count",
      pods: [pod("a", { phase: "Failed", finishedAt: T0 - 30_000 }), pod("s", { phase: "Succeeded", finishedAt: T0 - 20_000 }), pod("b", { phase: "Failed", finishedAt: T0 - 5000 })],
      wait: 5000
    },
    { name: "long ago: none left", pods: [pod("a", { phase: "Failed", finishedAt: T0 - 11_000 })], wait: 0 },
    { name: "capped", pods: Array.from({ length: 20 }, (_, i) => pod(`f${i}`, { phase: "Failed", finishedAt: T0 })), wait: 360_000 }
  ]
  for (const c of cases) {
    it(c.name, () => {
      expect(Job.backoffRemainingMs(c.pods, T0, 10_000, 360_000)).toBe(c.wait)
    })
  }

  it("waits (requeue) instead of creating, with the option's base", () => {
    const spec = { parallelism: 1, completions: 3, backoffLimit: 6 }
    const pods = [pod("a", { phase: "Failed", finishedAt: T0 - 1000, tracked: false })]
    const waiting = Job.decide(job(spec, { startTime: iso(T0), failed: 1 }), pods, T0, { podFailureBackoffMs: 5000 })
    expect(waiting.create).toEqual([])
    expect(waiting.requeueAfterMs).toBe(4000)
    const ready = Job.decide(job(spec, { startTime: iso(T0), failed: 1 }), pods, T0, { podFailureBackoffMs: 500 })
    expect(ready.create).toHaveLength(1)
  })
})

describe("Job.decide: Indexed", () => {
  const indexed = { completionMode: "Indexed", completions: 3, parallelism: 3 }

  it("creates one pod per pending index, named, labelled and annotated with it", () => {
    const d = Job.decide(job(indexed), [], T0)
    const pods = d.create as ReadonlyArray<any>
    expect(pods.map((p) => p.metadata.generateName)).toEqual(["work-0-", "work-1-", "work-2-"])
    expect(pods.map((p) => p.spec.hostname)).toEqual(["work-0", "work-1", "work-2"])
    expect(pods[1].metadata.annotations["batch.kubernetes.io/job-completion-index"]).toBe("1")
    expect(pods[1].metadata.labels["batch.kubernetes.io/job-completion-index"]).toBe("1")
    expect(pods[1].spec.containers[0].env).toEqual([
      { name: "JOB_COMPLETION_INDEX", valueFrom: { fieldRef: { fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']" } } }
    ])
  })

  it("records completed indexes and starts the missing ones only", () => {
    const status = { startTime: iso(T0), completedIndexes: "0", succeeded: 1 }
    const d = Job.decide(job(indexed, status), [pod("w1", { index: 1, phase: "Succeeded" })], T0)
    expect(d.create.map((p: any) => p.spec.hostname)).toEqual(["work-2"])
    expect(d.recordStatus).toMatchObject({ completedIndexes: "0-1", succeeded: 2, uncountedTerminatedPods: {} })
    expect(names(d.removeFinalizers)).toEqual(["w1"])
  })

  it("completes with completedIndexes 0-2", () => {
    const status = { startTime: iso(T0), completedIndexes: "0,2", succeeded: 2 }
    const d = Job.decide(job(indexed, status), [pod("w1", { index: 1, phase: "Succeeded" })], T0)
    expect(d.status).toMatchObject({ completedIndexes: "0-2", succeeded: 3 })
    expect(condition(d.status, "Complete")?.status).toBe("True")
  })

  it("deletes repeated and out-of-range indexes", () => {
    const pods = [pod("a", { index: 0, ready: true, node: "n" }), pod("b", { index: 0 }), pod("c", { index: 7 }), pod("d")]
    const d = Job.decide(job(indexed, { startTime: iso(T0) }), pods, T0)
    expect(names(d.delete.map((x) => x.pod)).sort()).toEqual(["b", "c", "d"])
    expect(d.create).toEqual([])
  })
})

describe("Job.decide: suspend", () => {
  it("suspending deletes the active pods uncounted and sets Suspended", () => {
    const d = Job.decide(job({ suspend: true, parallelism: 2, completions: 4 }, { startTime: iso(T0) }), [pod("a"), pod("b")], T0)
    expect(d.delete.map((x) => x.removeFinalizer)).toEqual([true, true])
    expect(d.create).toEqual([])
    expect(condition(d.recordStatus, "Suspended")).toMatchObject({ status: "True", reason: "JobSuspended", message: "Job suspended" })
    expect(d.recordStatus?.["active"]).toBeUndefined()
    expect(d.recordStatus?.["failed"]).toBeUndefined()
    expect(d.recordStatus?.["startTime"]).toBeUndefined()
    expect(d.events).toEqual([{ type: "Normal", reason: "Suspended", message: "Job suspended" }])
  })

  it("a Job created suspended has no startTime and no deadline", () => {
    const d = Job.decide(job({ suspend: true, activeDeadlineSeconds: 1 }), [], T0)
    expect(d.recordStatus?.["startTime"]).toBeUndefined()
    expect(d.requeueAfterMs).toBeUndefined()
  })

  it("resuming restarts the deadline clock and the pods", () => {
    const status = { startTime: iso(T0 - 60_000), conditions: [{ type: "Suspended", status: "True", reason: "JobSuspended", message: "Job suspended", lastTransitionTime: iso(T0 - 30_000) }] }
    const d = Job.decide(job({ suspend: false }, status), [], T0)
    expect(d.create).toHaveLength(1)
    expect(d.recordStatus).toMatchObject({ startTime: iso(T0) })
    expect(condition(d.recordStatus, "Suspended")).toMatchObject({ status: "False", reason: "JobResumed" })
  })
})

describe("Job.decide: after finishing", () => {
  const complete = (ttl: number | undefined, finishedAgoMs: number) =>
    job(ttl === undefined ? {} : { ttlSecondsAfterFinished: ttl }, {
      completionTime: iso(T0 - finishedAgoMs),
      conditions: [{ type: "Complete", status: "True", lastTransitionTime: iso(T0 - finishedAgoMs) }]
    })

  it("does nothing more without a TTL", () => {
    const d = Job.decide(complete(undefined, 5000), [pod("a", { phase: "Succeeded", tracked: false })], T0)
    expect(d).toMatchObject({ deleteJob: false, create: [], delete: [], recordStatus: undefined, status: undefined })
    expect(d.requeueAfterMs).toBeUndefined()
  })

  it("requeues until the TTL passes, then deletes the Job", () => {
    expect(Job.decide(complete(10, 5000), [], T0)).toMatchObject({ deleteJob: false, requeueAfterMs: 5000 })
    expect(Job.decide(complete(3, 5000), [], T0).deleteJob).toBe(true)
    expect(Job.decide(complete(0, 0), [], T0).deleteJob).toBe(true)
  })

  it("a failed Job's TTL counts from its Failed condition", () => {
    const failed = job({ ttlSecondsAfterFinished: 2 }, { conditions: [{ type: "Failed", status: "True", lastTransitionTime: iso(T0 - 1000) }] })
    expect(Job.decide(failed, [], T0)).toMatchObject({ deleteJob: false, requeueAfterMs: 1000 })
  })

  it("leftover pods lose their finalizer", () => {
    expect(names(Job.decide(complete(undefined, 0), [pod("late")], T0).removeFinalizers)).toEqual(["late"])
  })
})

describe("Job.decide: a Job being deleted", () => {
  it("creates nothing and releases every pod", () => {
    const d = Job.decide(job({ parallelism: 2, completions: 4 }, { startTime: iso(T0) }, { deletionTimestamp: iso(T0) }), [pod("a"), pod("b", { phase: "Succeeded" })], T0)
    expect(d.create).toEqual([])
    expect(d.delete).toEqual([])
    expect(names(d.removeFinalizers)).toEqual(["a", "b"])
  })
})

describe("Job completed indexes", () => {
  const cases: ReadonlyArray<readonly [ReadonlyArray<number>, string]> = [
    [[], ""],
    [[0], "0"],
    [[0, 1, 2, 3, 5], "0-3,5"],
    [[1, 2], "1-2"],
    [[7, 0, 3, 1, 8, 9], "0-1,3,7-9"]
  ]
  for (const [indexes, text] of cases) {
    it(`${JSON.stringify(indexes)} ⇄ "${text}"`, () => {
      expect(Job.formatIndexes(indexes)).toBe(text)
      expect(Job.parseIndexes(text, 100)).toEqual([...indexes].sort((a, b) => a - b))
    })
  }

  it("parsing drops indexes at or above completions", () => {
    expect(Job.parseIndexes("0-3,5,9-12", 4)).toEqual([0, 1, 2, 3])
  })
})
