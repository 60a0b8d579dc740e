import { describe, expect, it } from "vitest"
import * as Daemon from "../../src/controllers/internal/NodeEligibility.js"
import * as NodeAffinity from "../../src/matching/NodeAffinity.js"
import * as TaintToleration from "../../src/matching/TaintToleration.js"

// The rules are split by owner (the scheduler's matching, the DaemonSet's verdict); tested together.
const NodeEligibility = { ...TaintToleration, ...NodeAffinity, ...Daemon }

const node = (name: string, labels: Record<string, string> = {}, taints: Array<Record<string, unknown>> = []) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels },
  spec: { taints }
})

describe("NodeEligibility.toleratesTaint", () => {
  const taint = { key: "dedicated", value: "gpu", effect: "NoSchedule" }
  const cases: ReadonlyArray<[string, Record<string, unknown>, Record<string, unknown>, boolean]> = [
    ["Equal with the same value", { key: "dedicated", operator: "Equal", value: "gpu", effect: "NoSchedule" }, taint, true],
    ["empty operator means Equal", { key: "dedicated", value: "gpu" }, taint, true],
    ["Equal with another value", { key: "dedicated", operator: "Equal", value: "db" }, taint, false],
    ["Exists ignores the value", { key: "dedicated", operator: "Exists" }, taint, true],
    ["another key", { key: "other", operator: "Exists" }, taint, false],
    ["empty key with Exists tolerates everything", { operator: "Exists" }, taint, true],
    ["effect must match when given", { key: "dedicated", operator: "Exists", effect: "NoExecute" }, taint, false],
    ["empty effect matches every effect", { key: "dedicated", operator: "Exists" }, { ...taint, effect: "NoExecute" }, true],
    ["Equal with no value matches a taint with no value", { key: "k", operator: "Equal" }, { key: "k", effect: "NoSchedule" }, true],
    ["unknown operator tolerates nothing", { key: "dedicated", operator: "Gt", value: "gpu" }, taint, false]
  ]
  it.each(cases)("%s", (_what, toleration, t, want) => {
    expect(NodeEligibility.toleratesTaint(toleration, t)).toBe(want)
    expect(NodeEligibility.tolerates([{ key: "unrelated", operator: "Exists" }, toleration], t)).toBe(want)
  })

  it("finds the first untolerated taint passing a filter", () => {
    const taints = [
      { key: "a", effect: "PreferNoSchedule" },
      { key: "b", effect: "NoSchedule" },
      { key: "c", effect: "NoExecute" }
    ]
    expect(NodeEligibility.untoleratedTaint(taints, [{ key: "b", operator: "Exists" }], (t) => t.effect !== "PreferNoSchedule")).toEqual(taints[2])
    expect(NodeEligibility.untoleratedTaint(taints, [{ operator: "Exists" }])).toBeUndefined()
  })
})

describe("NodeEligibility.matchesRequirement", () => {
  const labels = { zone: "a", cores: "8" }
  const cases: ReadonlyArray<[string, Record<string, unknown>, boolean]> = [
    ["In", { key: "zone", operator: "In", values: ["a", "b"] }, true],
    ["In, absent key", { key: "rack", operator: "In", values: ["a"] }, false],
    ["In without values is malformed", { key: "zone", operator: "In", values: [] }, false],
    ["NotIn", { key: "zone", operator: "NotIn", values: ["b"] }, true],
    ["NotIn with the value", { key: "zone", operator: "NotIn", values: ["a"] }, false],
    ["NotIn, absent key", { key: "rack", operator: "NotIn", values: ["a"] }, true],
    ["Exists", { key: "zone", operator: "Exists" }, true],
    ["Exists with values is malformed", { key: "zone", operator: "Exists", values: ["a"] }, false],
    ["DoesNotExist", { key: "rack", operator: "DoesNotExist" }, true],
    ["Gt", { key: "cores", operator: "Gt", values: ["4"] }, true],
    ["Gt, equal", { key: "cores", operator: "Gt", values: ["8"] }, false],
    ["Lt", { key: "cores", operator: "Lt", values: ["16"] }, true],
    ["Gt on a non-number label", { key: "zone", operator: "Gt", values: ["1"] }, false],
    ["Gt with two values is malformed", { key: "cores", operator: "Gt", values: ["1", "2"] }, false],
    ["Gt, absent key", { key: "rack", operator: "Gt", values: ["1"] }, false]
  ]
  it.each(cases)("%s", (_what, requirement, want) => {
    expect(NodeEligibility.matchesRequirement(requirement, labels)).toBe(want)
  })
})

describe("NodeEligibility.matchesNodeSelectorAndAffinity", () => {
  const n = node("n1", { zone: "a", disk: "ssd" })
  const affinity = (terms: ReadonlyArray<Record<string, unknown>>) => ({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } })
  const cases: ReadonlyArray<[string, Record<string, unknown>, boolean]> = [
    ["no constraints", {}, true],
    ["nodeSelector matches", { nodeSelector: { zone: "a" } }, true],
    ["nodeSelector needs every key", { nodeSelector: { zone: "a", gpu: "true" } }, false],
    ["nodeSelector value differs", { nodeSelector: { zone: "b" } }, false],
    ["a matching term", { affinity: affinity([{ matchExpressions: [{ key: "disk", operator: "In", values: ["ssd"] }] }]) }, true],
    ["terms are ORed", { affinity: affinity([{ matchExpressions: [{ key: "zone", operator: "In", values: ["b"] }] }, { matchExpressions: [{ key: "disk", operator: "Exists" }] }]) }, true],
    ["requirements of a term are ANDed", { affinity: affinity([{ matchExpressions: [{ key: "disk", operator: "Exists" }, { key: "zone", operator: "In", values: ["b"] }] }]) }, false],
    ["matchFields on metadata.name", { affinity: affinity([{ matchFields: [{ key: "metadata.name", operator: "In", values: ["n1"] }] }]) }, true],
    ["matchFields on another name", { affinity: affinity([{ matchFields: [{ key: "metadata.name", operator: "In", values: ["n2"] }] }]) }, false],
    ["matchFields NotIn", { affinity: affinity([{ matchFields: [{ key: "metadata.name", operator: "NotIn", values: ["n2"] }] }]) }, true],
    ["an empty term matches nothing", { affinity: affinity([{}]) }, false],
    ["no terms match nothing", { affinity: affinity([]) }, false],
    ["preferred terms do not filter", { affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: "zone", operator: "In", values: ["b"] }] } }] } } }, true],
    ["nodeSelector and affinity must both hold", { nodeSelector: { zone: "b" }, affinity: affinity([{ matchExpressions: [{ key: "disk", operator: "Exists" }] }]) }, false]
  ]
  it.each(cases)("%s", (_what, spec, want) => {
    expect(NodeEligibility.matchesNodeSelectorAndAffinity({ metadata: { name: "p" }, spec }, n)).toBe(want)
    // A bare pod spec is accepted too.
    expect(NodeEligibility.matchesNodeSelectorAndAffinity(spec, n)).toBe(want)
  })

  it("matchesNodeSelector compares exact label values", () => {
    expect(NodeEligibility.matchesNodeSelector({ zone: "a" }, n)).toBe(true)
    expect(NodeEligibility.matchesNodeSelector(undefined, n)).toBe(true)
    expect(NodeEligibility.matchesNodeSelector({ zone: "" }, n)).toBe(false)
  })
})

describe("NodeEligibility daemon helpers", () => {
  it("adds the daemon tolerations, network-unavailable only for host-network pods", () => {
    const keys = (spec: Record<string, unknown>) => (NodeEligibility.withDaemonTolerations(spec)["tolerations"] as Array<any>).map((t) => `${t.key}:${t.effect}`)
    expect(keys({})).toEqual([
      "node.kubernetes.io/not-ready:NoExecute",
      "node.kubernetes.io/unreachable:NoExecute",
      "node.kubernetes.io/disk-pressure:NoSchedule",
      "node.kubernetes.io/memory-pressure:NoSchedule",
      "node.kubernetes.io/pid-pressure:NoSchedule",
      "node.kubernetes.io/unschedulable:NoSchedule"
    ])
    expect(keys({ hostNetwork: true })).toContain("node.kubernetes.io/network-unavailable:NoSchedule")
  })

  it("replaces a user toleration of the same taint (so not-ready is tolerated forever) and keeps others", () => {
    const spec = {
      tolerations: [
        { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
        { key: "dedicated", operator: "Equal", value: "infra", effect: "NoSchedule" }
      ]
    }
    const out = NodeEligibility.withDaemonTolerations(spec)["tolerations"] as Array<any>
    expect(out.filter((t) => t.key === "node.kubernetes.io/not-ready")).toEqual([{ key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" }])
    expect(out).toContainEqual({ key: "dedicated", operator: "Equal", value: "infra", effect: "NoSchedule" })
    expect(out).toHaveLength(7)
  })

  it("pins a pod to a node by matchFields, replacing required terms and keeping the rest", () => {
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: "zone", operator: "In", values: ["a"] }] }] },
        preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: "disk", operator: "Exists" }] } }]
      },
      podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [] }
    }
    const pinned = NodeEligibility.withNodeNameAffinity(affinity, "n7") as any
    expect(pinned.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution).toEqual({
      nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: ["n7"] }] }]
    })
    expect(pinned.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution).toEqual(affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution)
    expect(pinned.podAntiAffinity).toEqual(affinity.podAntiAffinity)
    expect(NodeEligibility.targetNodeName({ spec: { affinity: pinned } })).toBe("n7")
    expect(NodeEligibility.targetNodeName({ spec: { nodeName: "n3", affinity: pinned } })).toBe("n3")
    expect(NodeEligibility.targetNodeName({ spec: {} })).toBeUndefined()
  })

  const template = (spec: Record<string, unknown> = {}) => ({ metadata: { labels: { app: "d" } }, spec: { containers: [{ name: "c", image: "i" }], ...spec } })
  const cases: ReadonlyArray<[string, Record<string, unknown>, Record<string, unknown>, Daemon.DaemonVerdict]> = [
    ["a plain node", template(), node("n1"), { shouldRun: true, shouldContinueRunning: true }],
    ["nodeSelector mismatch", template({ nodeSelector: { role: "edge" } }), node("n1"), { shouldRun: false, shouldContinueRunning: false }],
    ["nodeSelector match", template({ nodeSelector: { role: "edge" } }), node("n1", { role: "edge" }), { shouldRun: true, shouldContinueRunning: true }],
    ["template nodeName names another node", template({ nodeName: "n2" }), node("n1"), { shouldRun: false, shouldContinueRunning: false }],
    ["untolerated NoSchedule: no new pod, an existing one stays", template(), node("n1", {}, [{ key: "dedicated", effect: "NoSchedule" }]), { shouldRun: false, shouldContinueRunning: true }],
    ["untolerated NoExecute: none at all", template(), node("n1", {}, [{ key: "dedicated", effect: "NoExecute" }]), { shouldRun: false, shouldContinueRunning: false }],
    ["PreferNoSchedule does not repel", template(), node("n1", {}, [{ key: "dedicated", effect: "PreferNoSchedule" }]), { shouldRun: true, shouldContinueRunning: true }],
    ["tolerated by the template", template({ tolerations: [{ key: "dedicated", operator: "Exists" }] }), node("n1", {}, [{ key: "dedicated", effect: "NoExecute" }]), { shouldRun: true, shouldContinueRunning: true }],
    ["not-ready and unreachable NoExecute are tolerated automatically", template(), node("n1", {}, [{ key: "node.kubernetes.io/not-ready", effect: "NoExecute" }, { key: "node.kubernetes.io/unreachable", effect: "NoExecute" }]), { shouldRun: true, shouldContinueRunning: true }],
    ["not-ready NoSchedule is not", template(), node("n1", {}, [{ key: "node.kubernetes.io/not-ready", effect: "NoSchedule" }]), { shouldRun: false, shouldContinueRunning: true }],
    ["pressure and cordon taints are tolerated", template(), node("n1", {}, ["disk-pressure", "memory-pressure", "pid-pressure", "unschedulable"].map((k) => ({ key: `node.kubernetes.io/${k}`, effect: "NoSchedule" }))), { shouldRun: true, shouldContinueRunning: true }],
    ["network-unavailable only for hostNetwork", template(), node("n1", {}, [{ key: "node.kubernetes.io/network-unavailable", effect: "NoSchedule" }]), { shouldRun: false, shouldContinueRunning: true }],
    ["network-unavailable with hostNetwork", template({ hostNetwork: true }), node("n1", {}, [{ key: "node.kubernetes.io/network-unavailable", effect: "NoSchedule" }]), { shouldRun: true, shouldContinueRunning: true }]
  ]
  it.each(cases)("shouldRunDaemonPod: %s", (_what, t, n, want) => {
    expect(NodeEligibility.shouldRunDaemonPod(t, n)).toEqual(want)
  })
})
