import { describe, expect, it } from "vitest"
import { CycleState, type Status, status, success } from "../../../src/scheduler/Framework.js"
import * as DefaultPreemption from "../../../src/scheduler/plugins/DefaultPreemption.js"
import * as Snapshot from "../../../src/scheduler/Snapshot.js"
import type { NodeInfo, PodInfo } from "../../../src/scheduler/Snapshot.js"

// ---- fixtures: API JSON through the real Snapshot constructors ---------------------------------

interface PodOpts {
  readonly cpu?: number
  readonly labels?: Record<string, string>
  readonly started?: string
  readonly spec?: Record<string, unknown>
  readonly status?: Record<string, unknown>
  readonly deleting?: boolean
  readonly namespace?: string
}

const pod = (name: string, priority: number, o: PodOpts = {}): PodInfo =>
  Snapshot.podInfo({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: o.namespace ?? "default", uid: `uid-${name}`, labels: o.labels ?? {}, ...(o.deleting ? { deletionTimestamp: "2024-05-01T10:00:00Z" } : {}) },
    spec: { containers: [{ name: "c", image: "x", resources: { requests: { cpu: `${o.cpu ?? 1000}m` } } }], priority, ...o.spec },
    status: { ...(o.started === undefined ? {} : { startTime: o.started }), ...o.status }
  })

const node = (name: string, cpu: number, pods: ReadonlyArray<PodInfo>): NodeInfo =>
  Snapshot.nodeInfo({ apiVersion: "v1", kind: "Node", metadata: { name }, status: { allocatable: { cpu: `${cpu}m`, memory: "8Gi", pods: "110" } } }, pods)

const snapshot = (nodes: ReadonlyArray<NodeInfo>) => Snapshot.make(nodes)

/** NodeResourcesFit's CPU check, enough for preemption: `Insufficient cpu`. */
const fitsCpu = (_state: CycleState, p: PodInfo, n: NodeInfo): Status =>
  n.requested.milliCpu + p.requests.milliCpu <= n.allocatable.milliCpu ? success : status("Unschedulable", "Insufficient cpu")

const unschedulableEverywhere = (nodes: ReadonlyArray<NodeInfo>, unresolvable: ReadonlyArray<string> = []) =>
  new Map(nodes.map((n) => [n.name, unresolvable.includes(n.name) ? status("UnschedulableAndUnresolvable", "node(s) had untolerated taint {dedicated: gpu}") : status("Unschedulable", "Insufficient cpu")]))

const run = (
  preemptor: PodInfo,
  nodes: ReadonlyArray<NodeInfo>,
  options: Partial<DefaultPreemption.Options> & { unresolvable?: ReadonlyArray<string> } = {}
) => {
  const plugin = DefaultPreemption.make({ filter: fitsCpu, random: () => 0, now: () => Date.parse("2024-05-01T12:00:00Z"), ...options })
  const r = plugin.postFilter(new CycleState(), preemptor, snapshot(nodes), unschedulableEverywhere(nodes, options.unresolvable))
  return { code: r.status.code, reasons: r.status.reasons, node: r.nominatedNode, victims: r.victims?.map((v) => v.name) }
}

// ---- PostFilter -----------------------------------------------------------------------------

describe("DefaultPreemption.postFilter", () => {
  const t = (h: number) => `2024-05-01T0${h}:00:00Z`
  const cases: ReadonlyArray<[string, PodInfo, ReadonlyArray<NodeInfo>, Partial<DefaultPreemption.Options> & { unresolvable?: ReadonlyArray<string> }, ReturnType<typeof run>]> = [
    [
      "evicts the lower-priority pod that is in the way",
      pod("p", 10, { cpu: 2000 }),
      [node("n1", 2000, [pod("low", 1, { cpu: 2000 })])],
      {},
      { code: "Success", reasons: [], node: "n1", victims: ["low"] }
    ],
    [
      "never evicts pods of equal or higher priority",
      pod("p", 10, { cpu: 2000 }),
      [node("n1", 2000, [pod("same", 10, { cpu: 2000 })])],
      {},
      { code: "Unschedulable", reasons: ["preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."], node: "", victims: undefined }
    ],
    [
      "does not try nodes whose verdict evictions cannot change",
      pod("p", 10, { cpu: 2000 }),
      [node("n1", 2000, [pod("low", 1, { cpu: 2000 })]), node("n2", 2000, [pod("high", 20, { cpu: 2000 })])],
      { unresolvable: ["n1"] },
      {
        code: "Unschedulable",
        reasons: ["preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."],
        node: "",
        victims: undefined
      }
    ],
    [
      "reports the filter's reason when evicting everyone is not enough",
      pod("p", 10, { cpu: 8000 }),
      [node("n1", 4000, [pod("low", 1, { cpu: 1000 })])],
      {},
      { code: "Unschedulable", reasons: ["preemption: 0/1 nodes are available: 1 Insufficient cpu."], node: "", victims: undefined }
    ],
    [
      "reprieves the most important victims that can stay",
      pod("p", 10, { cpu: 2000 }),
      [node("n1", 4000, [pod("p1", 1), pod("p4", 4), pod("p2", 2), pod("p3", 3)])],
      {},
      { code: "Success", reasons: [], node: "n1", victims: ["p2", "p1"] }
    ],
    [
      "among equal priorities, keeps the one that started first",
      pod("p", 10, { cpu: 1000 }),
      [node("n1", 2000, [pod("young", 1, { started: t(9) }), pod("old", 1, { started: t(1) })])],
      {},
      { code: "Success", reasons: [], node: "n1", victims: ["young"] }
    ],
    [
      "keeps a pod protected by a budget that allows no disruption, evicting another instead",
      pod("p", 10, { cpu: 1000 }),
      [node("n1", 2000, [pod("db", 1, { labels: { app: "db" }, started: t(9) }), pod("web", 1, { labels: { app: "web" }, started: t(1) })])],
      { pdbs: (ns) => (ns === "default" ? [{ selector: { matchLabels: { app: "db" } }, disruptionsAllowed: 0 }] : []) },
      { code: "Success", reasons: [], node: "n1", victims: ["web"] }
    ],
    [
      "a budget with room protects nothing; nor does one in another namespace or with an empty selector",
      pod("p", 10, { cpu: 1000 }),
      [node("n1", 2000, [pod("db", 1, { labels: { app: "db" }, started: t(9) }), pod("web", 1, { labels: { app: "web" }, started: t(1) })])],
      {
        pdbs: (ns) =>
          ns === "default"
            ? [
                { selector: { matchLabels: { app: "db" } }, disruptionsAllowed: 1 },
                { selector: {}, disruptionsAllowed: 0 }
              ]
            : [{ selector: { matchLabels: { app: "db" } }, disruptionsAllowed: 0 }]
      },
      { code: "Success", reasons: [], node: "n1", victims: ["db"] }
    ],
    [
      "a pod the budget already counts as disrupted is not protected again",
      pod("p", 10, { cpu: 1000 }),
      [node("n1", 2000, [pod("db", 1, { labels: { app: "db" }, started: t(9) }), pod("web", 1, { labels: { app: "web" }, started: t(1) })])],
      { pdbs: () => [{ selector: { matchLabels: { app: "db" } }, disruptionsAllowed: 0, disruptedPods: { db: "2024-05-01T11:00:00Z" } }] },
      { code: "Success", reasons: [], node: "n1", victims: ["db"] }
    ],
    [
      "prefers a node where no budget is violated",
      pod("p", 10, { cpu: 1000 }),
      [node("n1", 1000, [pod("db", 1, { labels: { app: "db" } })]), node("n2", 1000, [pod("web", 5, { labels: { app: "web" } })])],
      { pdbs: () => [{ selector: { matchLabels: { app: "db" } }, disruptionsAllowed: 0 }] },
      { code: "Success", reasons: [], node: "n2", victims: ["web"] }
    ],
    [
      "evicts through a budget when there is no other way",
      pod("p", 10, { cpu: 1000 }),
      [node("n1", 1000, [pod("db", 1, { labels: { app: "db" } })])],
      { pdbs: () => [{ selector: { matchLabels: { app: "db" } }, disruptionsAllowed: 0 }] },
      { code: "Success", reasons: [], node: "n1", victims: ["db"] }
    ],
    [
      "prefers the node whose most important victim is least important",
      pod("p", 10, { cpu: 1000 }),
      [node("n1", 1000, [pod("five", 5)]), node("n2", 1000, [pod("one", 1, { cpu: 500 }), pod("two", 2, { cpu: 500 })])],
      {},
      { code: "Success", reasons: [], node: "n2", victims: ["two", "one"] }
    ],
    [
      "a pod that never preempts does not",
      pod("p", 10, { cpu: 2000, spec: { preemptionPolicy: "Never" } }),
      [node("n1", 2000, [pod("low", 1, { cpu: 2000 })])],
      {},
      { code: "Unschedulable", reasons: ["preemption: not eligible due to preemptionPolicy=Never."], node: undefined, victims: undefined }
    ],
    [
      "a pod whose earlier victims are still terminating waits for them",
      pod("p", 10, { cpu: 2000, status: { nominatedNodeName: "n1" } }),
      [
        node("n1", 2000, [
          pod("going", 1, { cpu: 2000, deleting: true, status: { conditions: [{ type: "DisruptionTarget", status: "True", reason: "PreemptionByScheduler" }] } })
        ])
      ],
      {},
      { code: "Unschedulable", reasons: ["preemption: not eligible due to a terminating pod on the nominated node."], node: undefined, victims: undefined }
    ],
    [
      "a pod deleted for another reason does not block a new preemption",
      pod("p", 10, { cpu: 2000, status: { nominatedNodeName: "n1" } }),
      [node("n1", 2000, [pod("going", 1, { cpu: 2000, deleting: true })])],
      {},
      { code: "Success", reasons: [], node: "n1", victims: ["going"] }
    ],
    ["no nodes at all is an error", pod("p", 10), [], {}, { code: "Error", reasons: ["preemption: no nodes available"], node: undefined, victims: undefined }]
  ]
  it.each(cases)("%s", (_what, preemptor, nodes, options, want) => expect(run(preemptor, nodes, options)).toEqual(want))

  it("may preempt again once its nominated node can no longer take it at all", () => {
    const preemptor = pod("p", 10, { cpu: 2000, status: { nominatedNodeName: "n1" } })
    const terminating = pod("going", 1, { cpu: 2000, deleting: true, status: { conditions: [{ type: "DisruptionTarget", status: "True", reason: "PreemptionByScheduler" }] } })
    const nodes = [node("n1", 2000, [terminating]), node("n2", 2000, [pod("low", 1, { cpu: 2000 })])]
    expect(run(preemptor, nodes, { unresolvable: ["n1"] })).toEqual({ code: "Success", reasons: [], node: "n2", victims: ["low"] })
  })

  it("dry-runs only a sample of the candidate nodes, from a random offset", () => {
    const nodes = Array.from({ length: 300 }, (_, i) => node(`n${i}`, 1000, [pod(`low${i}`, 1)]))
    const seen: Array<string> = []
    const plugin = DefaultPreemption.make({
      filter: (s, p, n) => {
        if (!seen.includes(n.name)) seen.push(n.name)
        return fitsCpu(s, p, n)
      },
      random: (n) => (n === 300 ? 297 : 0),
      minCandidateNodesPercentage: 1,
      minCandidateNodesAbsolute: 5
    })
    const r = plugin.postFilter(new CycleState(), pod("p", 10), snapshot(nodes), unschedulableEverywhere(nodes))
    expect(seen).toEqual(["n297", "n298", "n299", "n0", "n1"])
    expect(r.nominatedNode).toBe("n297")
  })

  it("keeps dry-running past budget-violating candidates until one violates nothing", () => {
    const nodes = [
      node("n0", 1000, [pod("db0", 1, { labels: { app: "db" } })]),
      node("n1", 1000, [pod("db1", 1, { labels: { app: "db" } })]),
      node("n2", 1000, [pod("web", 1)])
    ]
    const r = run(pod("p", 10), nodes, { minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 1, pdbs: () => [{ selector: { matchLabels: { app: "db" } }, disruptionsAllowed: 0 }] })
    expect(r.node).toBe("n2")
  })
})

// ---- pieces --------------------------------------------------------------------------------

describe("DefaultPreemption.pickOne", () => {
  const now = Date.parse("2024-05-01T12:00:00Z")
  const c = (name: string, victims: ReadonlyArray<PodInfo>, pdbViolations = 0): DefaultPreemption.Candidate => ({ node: name, victims, pdbViolations })
  it.each<[string, ReadonlyArray<DefaultPreemption.Candidate>, string]>([
    ["fewest budget violations first", [c("a", [pod("x", 1)], 1), c("b", [pod("y", 100)], 0)], "b"],
    ["then the lowest highest-priority victim", [c("a", [pod("x", 5)]), c("b", [pod("y", 3), pod("z", 3)])], "b"],
    ["then the smallest sum of priorities", [c("a", [pod("x", 5), pod("w", 4)]), c("b", [pod("y", 5), pod("z", 1)])], "b"],
    ["sums are shifted so negative priorities do not favour more victims", [c("a", [pod("x", -5), pod("w", -5)]), c("b", [pod("y", -5)])], "b"],
    ["then the fewest victims", [c("a", [pod("x", 5), pod("w", 0), pod("v", 0)]), c("b", [pod("y", 5), pod("z", 0)])], "b"],
    [
      "then the latest start of the highest-priority victims",
      [c("a", [pod("x", 5, { started: "2024-05-01T01:00:00Z" })]), c("b", [pod("y", 5, { started: "2024-05-01T02:00:00Z" })])],
      "b"
    ],
    ["a victim that has not started counts as starting now", [c("a", [pod("x", 5, { started: "2024-05-01T02:00:00Z" })]), c("b", [pod("y", 5)])], "b"],
    ["then the first", [c("a", [pod("x", 5)]), c("b", [pod("y", 5)])], "a"]
  ])("%s", (_what, candidates, want) => expect(DefaultPreemption.pickOne(candidates, now)?.node).toBe(want))
})

describe("DefaultPreemption arguments", () => {
  it.each<[number, number, number, number]>([
    [50, 10, 100, 50],
    [1000, 10, 100, 100],
    [5000, 10, 100, 500],
    [5000, 0, 10, 10],
    [5000, 100, 0, 5000]
  ])("%i nodes at %i%% and at least %i: %i dry runs", (n, pct, abs, want) =>
    expect(DefaultPreemption.numCandidates(n, { minCandidateNodesPercentage: pct, minCandidateNodesAbsolute: abs })).toBe(want)
  )

  it.each<[unknown, string | DefaultPreemption.Args]>([
    [undefined, { minCandidateNodesPercentage: 10, minCandidateNodesAbsolute: 100 }],
    [{ minCandidateNodesAbsolute: 5 }, { minCandidateNodesPercentage: 10, minCandidateNodesAbsolute: 5 }],
    [{ minCandidateNodesPercentage: 120 }, "minCandidateNodesPercentage: Invalid value: 120: not in valid range [0, 100]"],
    [{ minCandidateNodesAbsolute: -1 }, "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"],
    [
      { minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0 },
      "[minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute, minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage]"
    ]
  ])("parses %j", (raw, want) => expect(DefaultPreemption.parseArgs(raw)).toEqual(want))

  it("the registered factory reads the filter and budgets from the handle when it runs", () => {
    const handle: { schedulerName: string; runFilter?: DefaultPreemption.PreemptionHandle["runFilter"] } = { schedulerName: "default-scheduler" }
    const plugin = DefaultPreemption.factory({}, handle)
    if (typeof plugin === "string") throw new Error(plugin)
    const nodes = [node("n1", 1000, [pod("low", 1)])]
    const postFilter = (plugin as ReturnType<typeof DefaultPreemption.make>).postFilter
    // Not bound yet: every dry run errs, so preemption errs.
    expect(postFilter(new CycleState(), pod("p", 10), snapshot(nodes), unschedulableEverywhere(nodes)).status.code).toBe("Error")
    handle.runFilter = fitsCpu
    expect(postFilter(new CycleState(), pod("p", 10), snapshot(nodes), unschedulableEverywhere(nodes)).victims?.map((v) => v.name)).toEqual(["low"])
    expect(DefaultPreemption.factory({ minCandidateNodesAbsolute: -1 }, handle)).toContain("not in valid range")
  })
})

describe("DefaultPreemption helpers", () => {
  it("dry-runs on what-if views: the filter sees the victims gone, the snapshot's node is untouched", () => {
    const low = pod("low", 1, { cpu: 500, spec: { containers: [{ name: "c", image: "x", resources: { requests: { cpu: "500m" } }, ports: [{ containerPort: 80, hostPort: 8080 }] }] } })
    const n = node("n1", 1000, [low, pod("high", 20, { cpu: 500 })])
    const seen: Array<[ReadonlyArray<string>, number, ReadonlyArray<string>]> = []
    const plugin = DefaultPreemption.make({
      filter: (state, p, view) => {
        seen.push([view.pods.map((x) => x.name), view.requested.milliCpu, [...view.usedPorts]])
        return fitsCpu(state, p, view)
      }
    })
    const r = plugin.postFilter(new CycleState(), pod("p", 10, { cpu: 500 }), snapshot([n]), unschedulableEverywhere([n]))
    expect(r.victims?.map((v) => v.name)).toEqual(["low"])
    expect(seen).toEqual([
      [["high"], 500, []],
      [["high", "low"], 1000, ["TCP/0.0.0.0/8080"]]
    ])
    expect(n.pods.map((x) => x.name)).toEqual(["low", "high"])
  })

  it("gives victims the condition and lists the nominations to clear", () => {
    expect(DefaultPreemption.victimCondition("default-scheduler")).toEqual({
      type: "DisruptionTarget",
      status: "True",
      reason: "PreemptionByScheduler",
      message: "default-scheduler: preempting to accommodate a higher priority pod"
    })
    const p = pod("p", 10)
    expect(DefaultPreemption.nominationsToClear(p, [p, pod("lower", 5), pod("higher", 20), pod("same", 10)]).map((x) => x.name)).toEqual(["lower"])
  })
})
