import { describe, expect, it } from "vitest"
import * as PodGC from "../../src/controllers/PodGC.js"

type Json = Record<string, unknown>

const pod = (name: string, o: { phase?: string; node?: string; created?: string; deleting?: boolean; reason?: string } = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name,
    namespace: "ns",
    uid: `uid-${name}`,
    creationTimestamp: o.created ?? "2024-01-01T00:00:00Z",
    ...(o.deleting ? { deletionTimestamp: "2024-01-02T00:00:00Z" } : {})
  },
  spec: { containers: [{ name: "c", image: "i" }], ...(o.node === undefined ? {} : { nodeName: o.node }) },
  status: { phase: o.phase ?? "Running", ...(o.reason === undefined ? {} : { reason: o.reason }) }
})

const node = (name: string, ready = true, taints: ReadonlyArray<Json> = []): Json => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name },
  spec: taints.length === 0 ? {} : { taints },
  status: { conditions: [{ type: "Ready", status: ready ? "True" : "Unknown" }] }
})

const summary = (deletions: ReadonlyArray<PodGC.Deletion>) =>
  deletions.map((d) => `${String((d.pod["metadata"] as Json)["name"])}:${d.reason}${d.markFailed ? ":fail" : ""}${d.condition ? `:${d.condition.reason}` : ""}`)

describe("PodGC.decide", () => {
  const nodes = [node("n1"), node("down", false, [{ key: PodGC.outOfServiceTaint, value: "nodeshutdown", effect: "NoExecute" }]), node("notready", false)]
  const cases: ReadonlyArray<[string, Omit<PodGC.Observed, "nodes">, ReadonlyArray<string>]> = [
    ["nothing to do", { pods: [pod("a", { node: "n1" })], deletedNodes: new Set(), terminatedPodThreshold: 2 }, []],
    [
      "terminated pods at the threshold are kept",
      { pods: [pod("a", { phase: "Succeeded", node: "n1" }), pod("b", { phase: "Failed", node: "n1" })], deletedNodes: new Set(), terminatedPodThreshold: 2 },
      []
    ],
    [
      "terminated pods over the threshold: oldest first, running pods never",
      {
        pods: [
          pod("new", { phase: "Succeeded", node: "n1", created: "2024-01-03T00:00:00Z" }),
          pod("old", { phase: "Failed", node: "n1", created: "2024-01-01T00:00:00Z" }),
          pod("mid", { phase: "Succeeded", node: "n1", created: "2024-01-02T00:00:00Z" }),
          pod("running", { node: "n1", created: "2023-01-01T00:00:00Z" })
        ],
        deletedNodes: new Set(),
        terminatedPodThreshold: 1
      },
      ["old:Terminated", "mid:Terminated"]
    ],
    [
      "evicted pods go before older ones; equal times by name",
      {
        pods: [
          pod("b", { phase: "Succeeded", node: "n1", created: "2024-01-01T00:00:00Z" }),
          pod("a", { phase: "Succeeded", node: "n1", created: "2024-01-01T00:00:00Z" }),
          pod("evicted", { phase: "Failed", reason: "Evicted", node: "n1", created: "2024-02-01T00:00:00Z" })
        ],
        deletedNodes: new Set(),
        terminatedPodThreshold: 1
      },
      ["evicted:Terminated", "a:Terminated"]
    ],
    [
      "threshold 0 disables the terminated pass",
      { pods: [pod("a", { phase: "Succeeded", node: "n1" }), pod("b", { phase: "Failed", node: "n1" })], deletedNodes: new Set(), terminatedPodThreshold: 0 },
      []
    ],
    [
      "pods on a deleted node: marked Failed with DisruptionTarget, then deleted",
      { pods: [pod("lost", { node: "gone" }), pod("done", { node: "gone", phase: "Succeeded" }), pod("ok", { node: "n1" })], deletedNodes: new Set(["gone"]), terminatedPodThreshold: 100 },
      ["lost:Orphaned:fail:DeletionByPodGC", "done:Orphaned:DeletionByPodGC"]
    ],
    [
      "terminating pods on a not-ready, out-of-service node are force-deleted; without the taint they wait",
      { pods: [pod("t1", { node: "down", deleting: true }), pod("t2", { node: "notready", deleting: true }), pod("r", { node: "down" })], deletedNodes: new Set(), terminatedPodThreshold: 100 },
      ["t1:OutOfService:fail"]
    ],
    [
      "terminating pods that were never scheduled",
      { pods: [pod("u", { deleting: true }), pod("pending")], deletedNodes: new Set(), terminatedPodThreshold: 100 },
      ["u:UnscheduledTerminating:fail"]
    ],
    [
      "a pod matched twice is deleted once (first reason wins)",
      { pods: [pod("x", { node: "gone", phase: "Failed" }), pod("y", { node: "gone", phase: "Failed" })], deletedNodes: new Set(["gone"]), terminatedPodThreshold: 1 },
      ["x:Terminated", "y:Orphaned:DeletionByPodGC"]
    ]
  ]
  it.each(cases)("%s", (_what, observed, expected) => {
    expect(summary(PodGC.decide({ ...observed, nodes }))).toEqual(expected)
  })
})

describe("PodGC.quarantine", () => {
  const pods = [pod("a", { node: "gone" }), pod("b", { node: "n1" }), pod("c")]
  it("starts the clock when a node is first missing", () => {
    const q = PodGC.quarantine(pods, [node("n1")], new Map(), 1_000, 40_000)
    expect([...q.missingSince]).toEqual([["gone", 1_000]])
    expect(q.due).toEqual([])
    expect(q.nextInMs).toBe(40_000)
  })
  it("is due after the quarantine", () => {
    const q = PodGC.quarantine(pods, [node("n1")], new Map([["gone", 1_000]]), 41_000, 40_000)
    expect(q.due).toEqual(["gone"])
    expect(q.nextInMs).toBeUndefined()
  })
  it("forgets a node that came back or that no pod names", () => {
    expect([...PodGC.quarantine(pods, [node("n1"), node("gone")], new Map([["gone", 1_000]]), 2_000, 40_000).missingSince]).toEqual([])
    expect([...PodGC.quarantine([pod("b", { node: "n1" })], [node("n1")], new Map([["old", 1_000]]), 2_000, 40_000).missingSince]).toEqual([])
  })
  it("knows terminated phases", () => {
    expect(["Pending", "Running", "Unknown", "Succeeded", "Failed"].map((phase) => PodGC.isTerminated(pod("p", { phase })))).toEqual([false, false, false, true, true])
  })
})
