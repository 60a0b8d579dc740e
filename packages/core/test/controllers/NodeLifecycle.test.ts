import { describe, expect, it } from "vitest"
import * as NodeLifecycle from "../../src/controllers/NodeLifecycle.js"
import * as Metadata from "../../src/object/Metadata.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const at = (ms: number) => Metadata.rfc3339(ms)
const options: NodeLifecycle.Options = { nodeMonitorGracePeriodMs: 40_000, nodeStartupGracePeriodMs: 60_000 }

const node = (
  fields: {
    readonly ready?: "True" | "False" | "Unknown"
    readonly readySince?: number
    readonly taints?: ReadonlyArray<NodeLifecycle.Taint>
    readonly unschedulable?: boolean
    readonly created?: number
  } = {}
) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: "n1", creationTimestamp: at(fields.created ?? T0 - 3_600_000), resourceVersion: "7" },
  spec: { ...(fields.taints ? { taints: fields.taints } : {}), ...(fields.unschedulable ? { unschedulable: true } : {}) },
  status: {
    conditions:
      fields.ready === undefined
        ? []
        : [
            { type: "MemoryPressure", status: "False", lastHeartbeatTime: at(T0 - 60_000), lastTransitionTime: at(T0 - 3_600_000) },
            { type: "Ready", status: fields.ready, lastHeartbeatTime: at(T0 - 60_000), lastTransitionTime: at(fields.readySince ?? T0 - 3_600_000) }
          ]
  }
})

const pod = (name: string, fields: { readonly ready?: boolean; readonly readySince?: number; readonly tolerations?: ReadonlyArray<Record<string, unknown>>; readonly deleting?: boolean } = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", uid: name, ...(fields.deleting ? { deletionTimestamp: at(T0) } : {}) },
  spec: { nodeName: "n1", containers: [{ name: "c", image: "x" }], ...(fields.tolerations ? { tolerations: fields.tolerations } : {}) },
  status: { phase: "Running", conditions: [{ type: "Ready", status: fields.ready === false ? "False" : "True", lastTransitionTime: at(fields.readySince ?? T0 - 600_000) }] }
})

const zone = (z: Partial<NodeLifecycle.ZoneView> = {}): NodeLifecycle.ZoneView => ({ allDisrupted: false, tokenAvailable: true, msUntilToken: 0, ...z })
const unreachableNoExecute = (added: number): NodeLifecycle.Taint => ({ key: NodeLifecycle.unreachableTaint, effect: "NoExecute", timeAdded: at(added) })
const keys = (taints: ReadonlyArray<NodeLifecycle.Taint> | undefined) => (taints ?? []).map((t) => `${t.key}:${t.effect}`).sort()

describe("NodeLifecycle.health", () => {
  it("is what the node says until the grace period passes, then Unknown", () => {
    const n = node({ ready: "True" })
    expect(NodeLifecycle.health(n, T0, T0 + 40_000, options)).toMatchObject({ ready: "True", staleAtMs: T0 + 40_000 })
    const stale = NodeLifecycle.health(n, T0, T0 + 40_001, options)
    expect(stale.ready).toBe("Unknown")
    const ready = stale.conditions.find((c) => c.type === "Ready")!
    expect(ready).toMatchObject({ status: "Unknown", reason: "NodeStatusUnknown", message: "Kubelet stopped posting node status.", lastHeartbeatTime: at(T0 - 60_000) })
    expect(stale.conditions.map((c) => c.type).sort()).toEqual(["DiskPressure", "MemoryPressure", "PIDPressure", "Ready"])
    expect(stale.conditions.find((c) => c.type === "DiskPressure")).toMatchObject({ status: "Unknown", reason: "NodeStatusNeverUpdated" })
  })

  it("gives a node that never posted Ready the startup grace period from its creation", () => {
    const n = node({ created: T0 })
    expect(NodeLifecycle.health(n, T0 + 50_000, T0 + 59_000, options).conditions).toEqual([])
    const stale = NodeLifecycle.health(n, T0 + 50_000, T0 + 61_000, options)
    expect(stale.conditions.find((c) => c.type === "Ready")).toMatchObject({ status: "Unknown", reason: "NodeStatusNeverUpdated", message: "Kubelet never posted node status." })
  })
})

describe("NodeLifecycle zones", () => {
  const states: ReadonlyArray<[number, number, NodeLifecycle.ZoneState]> = [
    [3, 0, "Normal"],
    [2, 1, "Normal"],
    [1, 2, "Normal"],
    [0, 3, "FullDisruption"],
    [2, 3, "PartialDisruption"],
    [3, 3, "Normal"],
    [0, 0, "Normal"]
  ]
  it.each(states)("%i ready, %i not ready → %s", (ready, notReady, state) => expect(NodeLifecycle.zoneState(ready, notReady)).toBe(state))

  const rates: ReadonlyArray<[NodeLifecycle.ZoneState, number, number]> = [
    ["Normal", 10, 0.1],
    ["FullDisruption", 10, 0.1],
    ["PartialDisruption", 10, 0],
    ["PartialDisruption", 51, 0.01]
  ]
  it.each(rates)("%s with %i nodes taints at %f/s", (state, size, rate) => expect(NodeLifecycle.zoneRate(state, size)).toBe(rate))

  it("keys zones by region and zone labels", () => {
    const labelled = { metadata: { labels: { "topology.kubernetes.io/region": "eu", "topology.kubernetes.io/zone": "eu-1a" } } }
    expect(NodeLifecycle.zoneOf(labelled)).toBe("eu:\u0000:eu-1a")
    expect(NodeLifecycle.zoneOf({ metadata: {} })).toBe("")
  })
})

describe("NodeLifecycle.evictionTime", () => {
  const taint = [{ key: NodeLifecycle.unreachableTaint, effect: "NoExecute" }]
  const cases: ReadonlyArray<[string, ReadonlyArray<Record<string, unknown>>, number | undefined]> = [
    ["no toleration: at once", [], T0],
    ["tolerated for 300 s", [{ key: NodeLifecycle.unreachableTaint, operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 }], T0 + 300_000],
    ["tolerated forever", [{ key: NodeLifecycle.unreachableTaint, operator: "Exists", effect: "NoExecute" }], undefined],
    ["tolerationSeconds 0: at once", [{ key: NodeLifecycle.unreachableTaint, operator: "Exists", tolerationSeconds: 0 }], T0],
    ["everything tolerated for 5 s", [{ operator: "Exists", tolerationSeconds: 5 }], T0 + 5_000],
    ["another taint's toleration does not help", [{ key: NodeLifecycle.notReadyTaint, operator: "Exists", effect: "NoExecute" }], T0]
  ]
  it.each(cases)("%s", (_what, tolerations, expected) => expect(NodeLifecycle.evictionTime(pod("p", { tolerations }), taint, T0)).toBe(expected))

  it("uses the smallest tolerationSeconds of the tolerations used, and none without NoExecute taints", () => {
    const two = [...taint, { key: "dedicated", effect: "NoExecute", value: "x" }]
    const tolerations = [
      { key: NodeLifecycle.unreachableTaint, operator: "Exists", tolerationSeconds: 30 },
      { key: "dedicated", operator: "Equal", value: "x", tolerationSeconds: 10 }
    ]
    expect(NodeLifecycle.evictionTime(pod("p", { tolerations }), two, T0)).toBe(T0 + 10_000)
    expect(NodeLifecycle.evictionTime(pod("p"), [], T0)).toBeUndefined()
  })
})

describe("NodeLifecycle.decide", () => {
  const fresh = T0 - 1_000
  const stale = T0 - 41_000
  type Case = {
    readonly what: string
    readonly node: ReturnType<typeof node>
    readonly probeMs: number
    readonly zone?: Partial<NodeLifecycle.ZoneView>
    readonly ready: string | undefined
    readonly taints: ReadonlyArray<string> | "unchanged"
    readonly tookToken?: boolean
    readonly conditionsChange?: boolean
    readonly requeueAfterMs?: number
  }
  const cases: ReadonlyArray<Case> = [
    { what: "a healthy node: nothing, look again when the grace period ends", node: node({ ready: "True" }), probeMs: fresh, ready: "True", taints: "unchanged", requeueAfterMs: 39_001 },
    {
      what: "a silent node: Unknown, unreachable NoSchedule and (token) NoExecute",
      node: node({ ready: "True" }),
      probeMs: stale,
      ready: "Unknown",
      taints: [`${NodeLifecycle.unreachableTaint}:NoExecute`, `${NodeLifecycle.unreachableTaint}:NoSchedule`],
      tookToken: true,
      conditionsChange: true
    },
    {
      what: "a silent node without a token waits for one",
      node: node({ ready: "True" }),
      probeMs: stale,
      zone: { tokenAvailable: false, msUntilToken: 7_000 },
      ready: "Unknown",
      taints: [`${NodeLifecycle.unreachableTaint}:NoSchedule`],
      tookToken: false,
      conditionsChange: true,
      requeueAfterMs: 7_000
    },
    {
      what: "every zone disrupted: no NoExecute taint, the old one removed",
      node: node({ ready: "Unknown", taints: [unreachableNoExecute(T0 - 5_000), { key: NodeLifecycle.unreachableTaint, effect: "NoSchedule" }] }),
      probeMs: stale,
      zone: { allDisrupted: true },
      ready: "Unknown",
      taints: [`${NodeLifecycle.unreachableTaint}:NoSchedule`],
      conditionsChange: true
    },
    {
      what: "Ready False after Unknown: not-ready swapped in without a token",
      node: node({ ready: "False", taints: [unreachableNoExecute(T0 - 5_000), { key: NodeLifecycle.unreachableTaint, effect: "NoSchedule" }] }),
      probeMs: fresh,
      zone: { tokenAvailable: false, msUntilToken: 9_000 },
      ready: "False",
      taints: [`${NodeLifecycle.notReadyTaint}:NoExecute`, `${NodeLifecycle.notReadyTaint}:NoSchedule`],
      tookToken: false,
      requeueAfterMs: 39_001
    },
    {
      what: "Ready again: the controller's taints go, the user's stay",
      node: node({ ready: "True", taints: [unreachableNoExecute(T0 - 5_000), { key: NodeLifecycle.unreachableTaint, effect: "NoSchedule" }, { key: "dedicated", effect: "NoSchedule" }] }),
      probeMs: fresh,
      ready: "True",
      taints: ["dedicated:NoSchedule"],
      requeueAfterMs: 39_001
    },
    {
      what: "a cordoned node gets the unschedulable taint",
      node: node({ ready: "True", unschedulable: true }),
      probeMs: fresh,
      ready: "True",
      taints: [`${NodeLifecycle.unschedulableTaint}:NoSchedule`],
      requeueAfterMs: 39_001
    },
    {
      what: "a node that never posted Ready is left alone until its startup grace ends",
      node: node({ created: T0 - 10_000 }),
      probeMs: fresh,
      ready: undefined,
      taints: "unchanged",
      requeueAfterMs: 50_001
    }
  ]
  it.each(cases)("$what", (c) => {
    const d = NodeLifecycle.decide({ node: c.node, probeMs: c.probeMs, pods: [], zone: zone(c.zone) }, T0, options)
    expect(d.ready).toBe(c.ready)
    if (c.taints === "unchanged") expect(d.taints).toBeUndefined()
    else expect(keys(d.taints)).toEqual([...c.taints].sort())
    expect(d.tookToken).toBe(c.tookToken ?? false)
    expect(d.conditions !== undefined).toBe(c.conditionsChange ?? false)
    expect(d.requeueAfterMs).toBe(c.requeueAfterMs)
  })

  it("stamps a new NoExecute taint with the time it was added", () => {
    const d = NodeLifecycle.decide({ node: node({ ready: "True" }), probeMs: stale, pods: [], zone: zone() }, T0, options)
    expect(d.taints!.find((t) => t.effect === "NoExecute")!.timeAdded).toBe(at(T0))
    expect(d.becameNotReady).toBe(true)
  })

  it("evicts untolerating pods at once and tolerating ones after their tolerationSeconds", () => {
    const n = node({ ready: "Unknown", readySince: T0 - 1_000, taints: [unreachableNoExecute(T0 - 1_000), { key: NodeLifecycle.unreachableTaint, effect: "NoSchedule" }] })
    const toleration = (seconds?: number) => [{ key: NodeLifecycle.unreachableTaint, operator: "Exists", effect: "NoExecute", ...(seconds === undefined ? {} : { tolerationSeconds: seconds }) }]
    const pods = [
      pod("bare"),
      pod("soon", { tolerations: toleration(3) }),
      pod("past", { tolerations: toleration(1) }),
      pod("forever", { tolerations: toleration() }),
      pod("going", { deleting: true })
    ]
    const d = NodeLifecycle.decide({ node: n, probeMs: stale, pods, zone: zone() }, T0, options)
    expect(d.evict.map((p: any) => p.metadata.name).sort()).toEqual(["bare", "past"])
    expect(d.requeueAfterMs).toBe(2_000)
    expect(d.markNotReady.map((p: any) => p.metadata.name).sort()).toEqual(["bare", "forever", "past", "soon"])
  })

  it("evicts nothing in full disruption, and marks only pods that were Ready before the node stopped", () => {
    const n = node({ ready: "Unknown", readySince: T0 - 1_000, taints: [unreachableNoExecute(T0 - 100_000)] })
    const pods = [pod("old"), pod("after", { readySince: T0 }), pod("unready", { ready: false })]
    const d = NodeLifecycle.decide({ node: n, probeMs: stale, pods, zone: zone({ allDisrupted: true }) }, T0, options)
    expect(d.evict).toEqual([])
    expect(d.markNotReady.map((p: any) => p.metadata.name)).toEqual(["old"])
  })

  it("counts the eviction deadline of a taint without timeAdded from when it was first seen", () => {
    const n = node({ ready: "True", taints: [{ key: "maintenance", effect: "NoExecute" }] })
    const pods = [pod("p", { tolerations: [{ key: "maintenance", operator: "Exists", tolerationSeconds: 10 }] })]
    const d = NodeLifecycle.decide({ node: n, probeMs: fresh, pods, zone: zone(), taintsSeenMs: new Map([["maintenance:NoExecute", T0 - 4_000]]) }, T0, options)
    expect(d.evict).toEqual([])
    expect(d.requeueAfterMs).toBe(6_000)
  })
})
