import { describe, expect, it } from "vitest"
import * as DaemonSet from "../../src/controllers/DaemonSet.js"
import * as History from "../../src/controllers/History.js"

const NOW = Date.parse("2024-05-01T12:00:00Z")
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

const ds = (spec: Record<string, unknown> = {}, templateSpec: Record<string, unknown> = {}) => ({
  apiVersion: "apps/v1",
  kind: "DaemonSet",
  metadata: { name: "agent", namespace: "kube-system", uid: "ds-uid", generation: 2 },
  spec: {
    selector: { matchLabels: { app: "agent" } },
    template: { metadata: { labels: { app: "agent" } }, spec: { containers: [{ name: "c", image: "v2" }], ...templateSpec } },
    ...spec
  }
})

const node = (name: string, labels: Record<string, string> = {}, taints: Array<Record<string, unknown>> = []) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels },
  spec: { taints }
})

interface PodState {
  readonly hash?: string
  readonly phase?: string
  readonly ready?: boolean
  readonly readyFor?: number
  readonly terminating?: boolean
  readonly created?: number
  readonly bound?: boolean
}

let seq = 0
const pod = (nodeName: string, state: PodState = {}) => {
  const id = `${nodeName}-${state.hash ?? "new"}-${seq++}`
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `agent-${id}`,
      namespace: "kube-system",
      uid: `uid-${id}`,
      creationTimestamp: iso(NOW - (state.created ?? 600) * 1000),
      labels: { app: "agent", [History.HashLabel]: state.hash ?? "new", [DaemonSet.TemplateGenerationLabel]: state.hash === "old" ? "1" : "2" },
      ...(state.terminating ? { deletionTimestamp: iso(NOW) } : {})
    },
    spec: {
      ...(state.bound === false ? {} : { nodeName }),
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: [nodeName] }] }] } } }
    },
    status: {
      phase: state.phase ?? "Running",
      conditions: [{ type: "Ready", status: state.ready === false ? "False" : "True", lastTransitionTime: iso(NOW - (state.readyFor ?? 600) * 1000) }]
    }
  }
}

const nodes3 = [node("n1"), node("n2"), node("n3")]

const decide = (
  d: Record<string, unknown>,
  nodes: ReadonlyArray<Record<string, unknown>>,
  pods: ReadonlyArray<Record<string, unknown>>,
  backoff: ReadonlyMap<string, DaemonSet.Backoff> = new Map()
) => DaemonSet.decide(d, { nodes, pods, hash: "new", collisionCount: 0, backoff }, NOW)

const summary = (a: DaemonSet.Actions) => ({ create: [...a.createOn], delete: a.deletePods.map((d) => `${d.node}:${d.reason}`) })

describe("DaemonSet.decide: placement", () => {
  const cases: ReadonlyArray<[string, Record<string, unknown>, ReadonlyArray<Record<string, unknown>>, ReadonlyArray<Record<string, unknown>>, { create: Array<string>; delete: Array<string> }]> = [
    ["one pod per node", ds(), nodes3, [], { create: ["n1", "n2", "n3"], delete: [] }],
    ["nodes that have one get none", ds(), nodes3, [pod("n2")], { create: ["n1", "n3"], delete: [] }],
    ["an unscheduled pod pinned to the node counts", ds(), [node("n1")], [pod("n1", { bound: false, phase: "Pending", ready: false })], { create: [], delete: [] }],
    ["a tainted node without toleration gets none", ds(), [node("n1"), node("n2", {}, [{ key: "dedicated", value: "db", effect: "NoSchedule" }])], [], { create: ["n1"], delete: [] }],
    ["a toleration lets it in", ds({}, { tolerations: [{ key: "dedicated", operator: "Equal", value: "db" }] }), [node("n2", {}, [{ key: "dedicated", value: "db", effect: "NoSchedule" }])], [], { create: ["n2"], delete: [] }],
    ["a new NoSchedule taint keeps the existing pod", ds(), [node("n1", {}, [{ key: "dedicated", effect: "NoSchedule" }])], [pod("n1")], { create: [], delete: [] }],
    ["a new NoExecute taint removes it", ds(), [node("n1", {}, [{ key: "dedicated", effect: "NoExecute" }])], [pod("n1")], { create: [], delete: ["n1:Ineligible"] }],
    ["nodeSelector picks nodes", ds({}, { nodeSelector: { role: "edge" } }), [node("n1", { role: "edge" }), node("n2")], [], { create: ["n1"], delete: [] }],
    ["a node that lost the label loses the pod", ds({}, { nodeSelector: { role: "edge" } }), [node("n1")], [pod("n1")], { create: [], delete: ["n1:Ineligible"] }],
    ["a pod whose node is gone is deleted", ds(), [node("n1")], [pod("n1"), pod("n9")], { create: [], delete: ["n9:NodeGone"] }],
    ["a second pod on a node goes, the oldest stays", ds(), [node("n1")], [pod("n1", { created: 100 }), pod("n1", { created: 900 })], { create: [], delete: ["n1:Duplicate"] }],
    ["a terminating pod blocks creation until it is gone", ds(), [node("n1")], [pod("n1", { terminating: true })], { create: [], delete: [] }],
    ["a succeeded pod is deleted", ds(), [node("n1")], [pod("n1", { phase: "Succeeded" })], { create: [], delete: ["n1:Succeeded"] }],
    ["a failed pod is deleted", ds(), [node("n1")], [pod("n1", { phase: "Failed" })], { create: [], delete: ["n1:Failed"] }],
    ["a DaemonSet being deleted does nothing", { ...ds(), metadata: { ...ds().metadata, deletionTimestamp: iso(NOW) } }, nodes3, [], { create: [], delete: [] }]
  ]
  it.each(cases)("%s", (_what, d, nodes, pods, want) => {
    expect(summary(decide(d, nodes, pods))).toEqual(want)
  })

  it("backs off recreating failed pods per node, doubling the delay", () => {
    const failed = [pod("n1", { phase: "Failed" })]
    const first = decide(ds(), [node("n1")], failed)
    expect(first.backoff.get("n1")).toEqual({ lastMs: NOW, delayMs: 1000 })
    const inside = decide(ds(), [node("n1")], failed, new Map([["n1", { lastMs: NOW - 400, delayMs: 1000 }]]))
    expect(summary(inside)).toEqual({ create: [], delete: [] })
    expect(inside.requeueAfterMs).toBe(600)
    const after = decide(ds(), [node("n1")], failed, new Map([["n1", { lastMs: NOW - 1500, delayMs: 1000 }]]))
    expect(summary(after).delete).toEqual(["n1:Failed"])
    expect(after.backoff.get("n1")).toEqual({ lastMs: NOW, delayMs: 2000 })
  })

  it("stamps pods with the hash, the generation, the daemon tolerations and the node pin", () => {
    const p = DaemonSet.newPod(ds({}, { tolerations: [{ key: "dedicated", operator: "Exists" }] }), "n2", "abc") as any
    expect(p.metadata.generateName).toBe("agent-")
    expect(p.metadata.labels).toEqual({ app: "agent", [History.HashLabel]: "abc", [DaemonSet.TemplateGenerationLabel]: "2" })
    expect(p.metadata.ownerReferences[0]).toMatchObject({ kind: "DaemonSet", uid: "ds-uid", controller: true })
    expect(p.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms).toEqual([
      { matchFields: [{ key: "metadata.name", operator: "In", values: ["n2"] }] }
    ])
    expect(p.spec.nodeName).toBeUndefined()
    expect(p.spec.tolerations.map((t: any) => t.key)).toEqual([
      "dedicated",
      "node.kubernetes.io/not-ready",
      "node.kubernetes.io/unreachable",
      "node.kubernetes.io/disk-pressure",
      "node.kubernetes.io/memory-pressure",
      "node.kubernetes.io/pid-pressure",
      "node.kubernetes.io/unschedulable"
    ])
  })
})

describe("DaemonSet.decide: rolling update", () => {
  const old = (n: string, state: PodState = {}) => pod(n, { hash: "old", ...state })
  const strategy = (rollingUpdate: Record<string, unknown>) => ds({ updateStrategy: { type: "RollingUpdate", rollingUpdate } })
  const cases: ReadonlyArray<[string, Record<string, unknown>, ReadonlyArray<Record<string, unknown>>, { create: Array<string>; delete: Array<string> }]> = [
    ["default maxUnavailable 1: one old pod at a time", ds(), [old("n1"), old("n2"), old("n3")], { create: [], delete: ["n1:Update"] }],
    ["a new pod not yet available uses the budget", ds(), [pod("n1", { ready: false }), old("n2"), old("n3")], { create: [], delete: [] }],
    ["a node without a pod uses the budget too", ds(), [old("n2"), old("n3")], { create: ["n1"], delete: [] }],
    ["once available, the next one", ds(), [pod("n1"), old("n2"), old("n3")], { create: [], delete: ["n2:Update"] }],
    ["maxUnavailable 2", strategy({ maxUnavailable: 2 }), [old("n1"), old("n2"), old("n3")], { create: [], delete: ["n1:Update", "n2:Update"] }],
    ["maxUnavailable as a percentage rounds up", strategy({ maxUnavailable: "34%" }), [old("n1"), old("n2"), old("n3")], { create: [], delete: ["n1:Update", "n2:Update"] }],
    ["an unavailable old pod is replaced regardless", ds(), [old("n1", { ready: false }), old("n2"), old("n3", { ready: false })], { create: [], delete: ["n1:Update", "n3:Update"] }],
    ["the template generation label also marks a pod updated", ds(), [{ ...old("n1"), metadata: { ...old("n1").metadata, labels: { [DaemonSet.TemplateGenerationLabel]: "2" } } }, old("n2"), old("n3")], { create: [], delete: ["n2:Update"] }],
    ["OnDelete replaces nothing", ds({ updateStrategy: { type: "OnDelete" } }), [old("n1"), old("n2"), old("n3")], { create: [], delete: [] }],
    ["maxSurge 1: a new pod first", strategy({ maxSurge: 1, maxUnavailable: 0 }), [old("n1"), old("n2"), old("n3")], { create: ["n1"], delete: [] }],
    ["maxSurge: wait while the new pod is not available", strategy({ maxSurge: 1, maxUnavailable: 0 }), [old("n1"), pod("n1", { ready: false }), old("n2"), old("n3")], { create: [], delete: [] }],
    ["maxSurge: the old pod goes once the new one is available", strategy({ maxSurge: 1, maxUnavailable: 0 }), [old("n1"), pod("n1"), old("n2"), old("n3")], { create: [], delete: ["n1:Update"] }],
    ["maxSurge: unavailable old pods get replacements beyond the surge budget", strategy({ maxSurge: 1, maxUnavailable: 0 }), [old("n1", { ready: false }), old("n2", { ready: false }), old("n3")], { create: ["n1", "n2", "n3"], delete: [] }],
    ["maxSurge: the budget counts surging nodes", strategy({ maxSurge: 1, maxUnavailable: 0 }), [old("n1"), pod("n1", { ready: false }), old("n2", { ready: false }), old("n3")], { create: ["n2"], delete: [] }],
    ["manage work first: no update step in the same sync", ds(), [old("n2"), old("n3")], { create: ["n1"], delete: [] }]
  ]
  it.each(cases)("%s", (_what, d, pods, want) => {
    expect(summary(decide(d, nodes3, pods))).toEqual(want)
  })

  it("resolves bounds like upstream", () => {
    expect(DaemonSet.rolloutBounds(ds(), 10)).toEqual({ maxUnavailable: 1, maxSurge: 0 })
    expect(DaemonSet.rolloutBounds(strategy({ maxUnavailable: "25%" }), 10)).toEqual({ maxUnavailable: 3, maxSurge: 0 })
    expect(DaemonSet.rolloutBounds(strategy({ maxUnavailable: 0, maxSurge: 0 }), 10)).toEqual({ maxUnavailable: 1, maxSurge: 0 })
    expect(DaemonSet.rolloutBounds(strategy({ maxUnavailable: 0, maxSurge: "10%" }), 5)).toEqual({ maxUnavailable: 0, maxSurge: 1 })
  })
})

describe("DaemonSet.decide: status", () => {
  it("counts desired, scheduled, misscheduled, ready, available and updated", () => {
    const d = ds({ minReadySeconds: 30 }, { nodeSelector: { role: "edge" } })
    const nodes = [node("n1", { role: "edge" }), node("n2", { role: "edge" }), node("n3", { role: "edge" }), node("n4")]
    const pods = [
      pod("n1", { readyFor: 60 }),
      pod("n2", { hash: "old", readyFor: 10 }),
      pod("n4"),
      pod("n3", { phase: "Failed" })
    ]
    const a = decide(d, nodes, pods)
    expect(a.status).toEqual({
      desiredNumberScheduled: 3,
      currentNumberScheduled: 2,
      numberMisscheduled: 1,
      numberReady: 2,
      numberAvailable: 1,
      numberUnavailable: 2,
      updatedNumberScheduled: 1,
      observedGeneration: 2,
      collisionCount: 0
    })
    // n2's pod becomes available in 20 s: look again then.
    expect(a.requeueAfterMs).toBe(20_001)
  })
})
