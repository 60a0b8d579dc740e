import { describe, expect, it } from "vitest"
import * as Params from "../../../../src/controllers/internal/job/Params.js"
import * as Tracking from "../../../../src/controllers/internal/job/Tracking.js"

type Json = Record<string, unknown>

const job = (spec: Json = {}): Json => ({ apiVersion: "batch/v1", kind: "Job", metadata: { name: "j", namespace: "ns", uid: "job-uid" }, spec })

const pod = (uid: string, phase: string, m: Json = {}): Json => ({
  metadata: { name: `p-${uid}`, namespace: "ns", uid, finalizers: [Tracking.trackingFinalizer], ...m },
  status: { phase }
})
const untracked = (uid: string, phase: string): Json => pod(uid, phase, { finalizers: [] })
const indexed = (uid: string, phase: string, index: number): Json => pod(uid, phase, { annotations: { "batch.kubernetes.io/job-completion-index": String(index) } })

/** One sync's tracking: the counts, what is recorded first, and what is counted once the finalizers are gone. */
const sync = (spec: Json, status: Json, pods: ReadonlyArray<Json>, flags: { deleting?: boolean; finishing?: boolean } = {}) => {
  const params = Params.of(job(spec))
  const counts = Tracking.count(params, status, pods)
  const tracked = Tracking.track(params, counts, pods, flags.deleting ?? false, flags.finishing ?? false)
  const recorded = Tracking.recordedStatus(status, params, counts, tracked)
  return { counts, tracked, recorded, counted: Tracking.countedStatus(recorded, params, counts, tracked) }
}

describe("Tracking.count", () => {
  it("moves uncounted uids whose pods lost the finalizer into the counters, and totals the new finishes", () => {
    const status = { succeeded: 1, failed: 1, uncountedTerminatedPods: { succeeded: ["gone", "s-held"], failed: ["f-gone"] } }
    const { counts } = sync({ completions: 5, parallelism: 2 }, status, [pod("s-held", "Succeeded"), pod("s-new", "Succeeded"), pod("f-new", "Failed"), pod("run", "Running")])
    expect(counts.succeededCount).toBe(2)
    expect(counts.failedCount).toBe(2)
    expect(counts.uncountedSucceeded).toEqual(["s-held"])
    expect(counts.uncountedFailed).toEqual([])
    expect(counts.succeeded).toBe(4)
    expect(counts.failed).toBe(3)
  })

  it("counts an Indexed Job's successes by index, without repeats", () => {
    const { counts } = sync({ completionMode: "Indexed", completions: 3 }, { completedIndexes: "0" }, [indexed("a", "Succeeded", 0), indexed("b", "Succeeded", 2)])
    expect([...counts.succeededIndexes].sort()).toEqual([0, 2])
    expect(counts.succeeded).toBe(2)
  })
})

describe("Tracking: record, then count", () => {
  // name, spec, status, pods, flags, recorded status, counted status, all counted, pods released
  const cases: ReadonlyArray<[string, Json, Json, ReadonlyArray<Json>, { deleting?: boolean; finishing?: boolean }, Json, Json, boolean, ReadonlyArray<string>]> = [
    [
      "a succeeded pod: recorded uncounted, counted once its finalizer goes",
      {},
      {},
      [pod("s", "Succeeded"), pod("r", "Running")],
      {},
      { uncountedTerminatedPods: { succeeded: ["s"] } },
      { succeeded: 1, uncountedTerminatedPods: {} },
      true,
      ["s"]
    ],
    [
      "a failed pod, and one that went without the finalizer: only the tracked one is recorded",
      {},
      { failed: 2 },
      [pod("f", "Failed"), untracked("u", "Failed")],
      {},
      { failed: 2, uncountedTerminatedPods: { failed: ["f"] } },
      { failed: 3, uncountedTerminatedPods: {} },
      true,
      ["f"]
    ],
    [
      "finishing: a pod still running counts as failed",
      {},
      {},
      [pod("r", "Running")],
      { finishing: true },
      { uncountedTerminatedPods: { failed: ["r"] } },
      { failed: 1, uncountedTerminatedPods: {} },
      true,
      ["r"]
    ],
    [
      "being deleted: a running pod loses its finalizer uncounted",
      {},
      {},
      [pod("r", "Running")],
      { deleting: true },
      { uncountedTerminatedPods: {} },
      { uncountedTerminatedPods: {} },
      true,
      ["r"]
    ],
    [
      "Indexed: a success completes its index, never through the uid list",
      { completionMode: "Indexed", completions: 4 },
      { completedIndexes: "0" },
      [indexed("b", "Succeeded", 1), indexed("c", "Succeeded", 3)],
      {},
      { completedIndexes: "0-1,3", succeeded: 3, uncountedTerminatedPods: {} },
      { completedIndexes: "0-1,3", succeeded: 3, uncountedTerminatedPods: {} },
      true,
      ["b", "c"]
    ]
  ]
  it.each(cases)("%s", (_name, spec, status, pods, flags, recorded, counted, allCounted, released) => {
    const result = sync(spec, status, pods, flags)
    expect(result.recorded).toEqual(recorded)
    expect(result.counted.status).toEqual(counted)
    expect(result.counted.allCounted).toBe(allCounted)
    expect(result.tracked.removeFinalizers.map((p) => (p["metadata"] as Json)["uid"])).toEqual(released)
  })

  it("stops at the bound of uncounted pods: the Job is not yet all counted", () => {
    const pods = Array.from({ length: 501 }, (_, i) => pod(`s${i}`, "Succeeded"))
    const { tracked, counted } = sync({ completions: 1000, parallelism: 1 }, {}, pods)
    expect(tracked.removeFinalizers.length).toBe(500)
    expect(tracked.reachedMax).toBe(true)
    expect(counted.allCounted).toBe(false)
    expect(counted.status["succeeded"]).toBe(500)
  })
})
