import { describe, expect, it } from "vitest"
import { CycleState, type Status } from "../../../src/scheduler/Framework.js"
import * as NodeResourcesFit from "../../../src/scheduler/plugins/NodeResourcesFit.js"
import type { NodeInfo } from "../../../src/scheduler/Snapshot.js"
import { manyNodes, node, pod, runFilter, runScore } from "./fixtures.js"

const handle = { schedulerName: "default-scheduler" }
const build = (args: unknown) => {
  const plugin = NodeResourcesFit.factory(args, handle)
  if (typeof plugin === "string") throw new Error(plugin)
  return plugin as ReturnType<typeof NodeResourcesFit.make>
}

const allocatable = { cpu: "10", memory: "20", pods: "32", "ephemeral-storage": "20", "example.com/aaa": "5", "hugepages-2Mi": "0" }
const least = [
  { utilization: 0, score: 10 },
  { utilization: 100, score: 0 }
]
const most = [
  { utilization: 0, score: 0 },
  { utilization: 100, score: 10 }
]
const busy = (requests: Record<string, string>, alloc: Record<string, string> = allocatable): NodeInfo => node({ name: "n", allocatable: alloc }, [pod({ requests })])

describe("NodeResourcesFit", () => {
  describe("Filter", () => {
    const plugin = NodeResourcesFit.make()

    it.each([
      { case: "a pod requesting nothing fits a full node", pod: {}, node: busy({ cpu: "10", memory: "20" }), reasons: [] },
      { case: "fits", pod: { cpu: "1", memory: "1" }, node: busy({ cpu: "5", memory: "5" }), reasons: [] },
      { case: "fits exactly", pod: { cpu: "5", memory: "15" }, node: busy({ cpu: "5", memory: "5" }), reasons: [] },
      { case: "too much cpu", pod: { cpu: "6", memory: "1" }, node: busy({ cpu: "5", memory: "5" }), reasons: ["Insufficient cpu"] },
      { case: "too much memory", pod: { cpu: "1", memory: "16" }, node: busy({ cpu: "5", memory: "5" }), reasons: ["Insufficient memory"] },
      { case: "too much of both: every reason", pod: { cpu: "6", memory: "16" }, node: busy({ cpu: "5", memory: "5" }), reasons: ["Insufficient cpu", "Insufficient memory"] },
      { case: "milli-CPU counts", pod: { cpu: "5001m" }, node: busy({ cpu: "5" }), reasons: ["Insufficient cpu"] },
      { case: "too much ephemeral storage", pod: { "ephemeral-storage": "11" }, node: busy({ "ephemeral-storage": "10" }), reasons: ["Insufficient ephemeral-storage"] },
      { case: "an extended resource", pod: { "example.com/aaa": "3" }, node: busy({ "example.com/aaa": "3" }), reasons: ["Insufficient example.com/aaa"] },
      { case: "an extended resource the node lacks", pod: { "example.com/bbb": "1" }, node: busy({}), reasons: ["Insufficient example.com/bbb"] },
      { case: "hugepages the node lacks", pod: { "hugepages-2Mi": "1" }, node: busy({}), reasons: ["Insufficient hugepages-2Mi"] },
      {
        case: "every shortfall, scalars by name",
        pod: { cpu: "11", memory: "21", "ephemeral-storage": "21", "example.com/zzz": "1", "example.com/aaa": "6" },
        node: busy({}),
        reasons: ["Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage", "Insufficient example.com/aaa", "Insufficient example.com/zzz"]
      }
    ])("$case", ({ pod: requests, node: n, reasons }) => {
      const p = pod({ requests })
      for (const verdict of [runFilter(plugin, p, [n]).verdicts.get("n")!, plugin.filter(new CycleState(), p, n)]) {
        if (reasons.length === 0) expect(verdict.code).toBe("Success")
        else expect(verdict).toEqual({ code: "Unschedulable", reasons })
      }
    })

    it.each([
      { case: "no room for a pod", pod: {}, reasons: ["Too many pods"] },
      { case: "no room for a pod nor its cpu", pod: { cpu: "11" }, reasons: ["Too many pods", "Insufficient cpu"] }
    ])("pod count: $case", ({ pod: requests, reasons }) => {
      const n = node({ name: "n", allocatable: { ...allocatable, pods: "1" } }, [pod()])
      expect(runFilter(plugin, pod({ requests }), [n]).verdicts.get("n")).toEqual({ code: "Unschedulable", reasons })
    })

    it("uses the pod's effective requests (the largest init container)", () => {
      const p = pod({ requests: { cpu: "1" }, spec: { initContainers: [{ name: "i", image: "x", resources: { requests: { cpu: "6" } } }] } })
      expect(runFilter(plugin, p, [busy({ cpu: "5" })]).verdicts.get("n")?.reasons).toEqual(["Insufficient cpu"])
    })

    it.each([
      { case: "ignoredResources skips that extended resource", args: { ignoredResources: ["example.com/bbb"] }, requests: { "example.com/bbb": "1" }, reasons: [] },
      { case: "ignoredResourceGroups skips the domain", args: { ignoredResourceGroups: ["example.com"] }, requests: { "example.com/bbb": "1", "example.com/ccc": "1" }, reasons: [] },
      { case: "other resources are still checked", args: { ignoredResources: ["example.com/bbb"] }, requests: { "example.com/bbb": "1", "example.com/ccc": "1" }, reasons: ["Insufficient example.com/ccc"] },
      { case: "only extended resources can be ignored", args: { ignoredResources: ["hugepages-2Mi"] }, requests: { "hugepages-2Mi": "1" }, reasons: ["Insufficient hugepages-2Mi"] }
    ])("$case", ({ args, requests, reasons }) => {
      const verdict: Status = runFilter(build(args), pod({ requests }), [busy({})]).verdicts.get("n")!
      expect(verdict.reasons).toEqual(reasons)
    })
  })

  describe("Score", () => {
    const sized = (name: string, cpu: string, memory: string, pods: ReadonlyArray<Record<string, string>> = [], extra: Record<string, string> = {}) =>
      node({ name, allocatable: { cpu, memory, pods: "110", ...extra } }, pods.map((requests) => pod({ requests })))
    const twoNodes = [sized("n1", "4", "10000"), sized("n2", "6", "10000")]
    const want3000 = pod({ requests: { cpu: "3", memory: "5000" } })
    const rtcr = (shape: ReadonlyArray<{ utilization: number; score: number }>, resources?: ReadonlyArray<{ name: string; weight: number }>) => ({
      scoringStrategy: { type: "RequestedToCapacityRatio", requestedToCapacityRatio: { shape }, ...(resources ? { resources } : {}) }
    })

    it.each([
      { case: "LeastAllocated (default): differently sized nodes", args: undefined, p: want3000, nodes: twoNodes, want: { n1: 37, n2: 50 } },
      {
        case: "LeastAllocated: pods already there count",
        args: undefined,
        p: want3000,
        nodes: [sized("n1", "10", "20000", [{ cpu: "3", memory: "0" }]), sized("n2", "10", "20000", [{ cpu: "3", memory: "5000" }])],
        want: { n1: 57, n2: 45 }
      },
      { case: "LeastAllocated: over capacity scores 0", args: undefined, p: pod({ requests: { cpu: "5", memory: "5000" } }), nodes: twoNodes, want: { n1: 25, n2: 33 } },
      { case: "MostAllocated", args: { scoringStrategy: { type: "MostAllocated" } }, p: want3000, nodes: twoNodes, want: { n1: 62, n2: 50 } },
      { case: "MostAllocated: over capacity is capped", args: { scoringStrategy: { type: "MostAllocated" } }, p: pod({ requests: { cpu: "5", memory: "5000" } }), nodes: twoNodes, want: { n1: 75, n2: 66 } },
      {
        case: "MostAllocated: weights",
        args: { scoringStrategy: { type: "MostAllocated", resources: [{ name: "cpu", weight: 3 }, { name: "memory", weight: 1 }] } },
        p: want3000,
        nodes: twoNodes,
        want: { n1: 68, n2: 50 }
      },
      { case: "RequestedToCapacityRatio: a decreasing shape (rounded mean)", args: rtcr(least), p: want3000, nodes: twoNodes, want: { n1: 38, n2: 50 } },
      { case: "RequestedToCapacityRatio: an increasing shape", args: rtcr(most), p: want3000, nodes: twoNodes, want: { n1: 63, n2: 50 } },
      { case: "RequestedToCapacityRatio: weights", args: rtcr(most, [{ name: "cpu", weight: 3 }, { name: "memory", weight: 1 }]), p: want3000, nodes: twoNodes, want: { n1: 69, n2: 50 } },
      {
        case: "RequestedToCapacityRatio: a zero score leaves its resource out",
        args: rtcr(most),
        p: pod({ requests: { cpu: "3", memory: "0" } }),
        nodes: twoNodes,
        want: { n1: 75, n2: 50 }
      },
      {
        case: "RequestedToCapacityRatio: a three-point shape",
        args: rtcr([
          { utilization: 0, score: 0 },
          { utilization: 50, score: 10 },
          { utilization: 100, score: 5 }
        ]),
        p: want3000,
        nodes: twoNodes,
        want: { n1: 88, n2: 100 }
      },
      {
        case: "an extended resource the pod requests is scored with its weight",
        args: { scoringStrategy: { type: "LeastAllocated", resources: [{ name: "cpu", weight: 1 }, { name: "memory", weight: 1 }, { name: "example.com/gpu", weight: 2 }] } },
        p: pod({ requests: { cpu: "2", memory: "5000", "example.com/gpu": "1" } }),
        nodes: [sized("n1", "4", "10000", [], { "example.com/gpu": "4" }), sized("n2", "4", "10000")],
        want: { n1: 62, n2: 50 }
      },
      {
        case: "an extended resource the pod does not request is left out",
        args: { scoringStrategy: { type: "LeastAllocated", resources: [{ name: "cpu", weight: 1 }, { name: "memory", weight: 1 }, { name: "example.com/gpu", weight: 2 }] } },
        p: pod({ requests: { cpu: "2", memory: "5000" } }),
        nodes: [sized("n1", "4", "10000", [], { "example.com/gpu": "4" })],
        want: { n1: 50 }
      }
    ])("$case", ({ args, p, nodes, want }) => {
      const plugin = build(args)
      expect(runScore(plugin, p, nodes)).toEqual(want)
      // Score alone (PreScore not enabled) agrees.
      for (const n of nodes) expect(plugin.score(new CycleState(), p, n)).toBe(want[n.name as keyof typeof want])
    })

    describe("non-zero requests: a container without a CPU or memory request counts 100m / 200Mi", () => {
      const n = (pods: ReadonlyArray<Record<string, string>> = []) => [sized("n", "1", "1Gi", pods)]
      it.each([
        { case: "a best-effort pod on an empty node", p: pod(), nodes: n(), want: 85 },
        { case: "a best-effort pod next to a best-effort pod", p: pod(), nodes: n([{}]), want: 70 },
        { case: "a missing memory request counts 200Mi", p: pod({ requests: { cpu: "500m" } }), nodes: n(), want: 65 },
        { case: "an explicit zero memory request stays zero", p: pod({ requests: { cpu: "500m", memory: "0" } }), nodes: n(), want: 75 }
      ])("$case", ({ p, nodes, want }) => {
        expect(runScore(NodeResourcesFit.make(), p, nodes)).toEqual({ n: want })
      })
    })

    it("interpolates the shape truncating toward zero, as Go's integer division", () => {
      const shape = [
        { utilization: 0, score: 0 },
        { utilization: 50, score: 100 },
        { utilization: 100, score: 30 }
      ]
      expect([0, 25, 50, 75, 76, 100, 120].map((p) => NodeResourcesFit.brokenLinear(shape, p))).toEqual([0, 50, 100, 65, 64, 30, 30])
    })
  })

  describe("arguments", () => {
    it("defaults to LeastAllocated on cpu and memory", () => {
      expect(NodeResourcesFit.parseArgs(undefined)).toEqual(NodeResourcesFit.defaultArgs)
      expect(NodeResourcesFit.parseArgs({})).toEqual(NodeResourcesFit.defaultArgs)
      expect(NodeResourcesFit.parseArgs({ scoringStrategy: { type: "MostAllocated", resources: [] } })).toMatchObject({
        scoringStrategy: { type: "MostAllocated", resources: NodeResourcesFit.defaultResources }
      })
      expect(NodeResourcesFit.parseArgs({ scoringStrategy: { type: "MostAllocated", resources: [{ name: "cpu" }] } })).toMatchObject({
        scoringStrategy: { resources: [{ name: "cpu", weight: 1 }] }
      })
    })

    it.each([
      { case: "not an object", args: "x", error: "must be an object" },
      {
        case: "an unknown strategy",
        args: { scoringStrategy: { type: "Random" } },
        error: 'scoringStrategy.type: Unsupported value: "Random": supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'
      },
      { case: "a weight over 100", args: { scoringStrategy: { type: "LeastAllocated", resources: [{ name: "cpu", weight: 101 }] } }, error: "resource weight of cpu not in valid range (0, 100]" },
      { case: "a negative weight", args: { scoringStrategy: { type: "LeastAllocated", resources: [{ name: "cpu", weight: -1 }] } }, error: "scoringStrategy.resources[0].weight" },
      { case: "RequestedToCapacityRatio without a shape", args: { scoringStrategy: { type: "RequestedToCapacityRatio" } }, error: "must be specified when type is RequestedToCapacityRatio" },
      { case: "an empty shape", args: { scoringStrategy: { type: "RequestedToCapacityRatio", requestedToCapacityRatio: { shape: [] } } }, error: "at least one point must be specified" },
      {
        case: "a shape out of order",
        args: { scoringStrategy: { type: "RequestedToCapacityRatio", requestedToCapacityRatio: { shape: [{ utilization: 50, score: 1 }, { utilization: 10, score: 2 }] } } },
        error: "values must be sorted in increasing order"
      },
      {
        case: "a shape score over 10",
        args: { scoringStrategy: { type: "RequestedToCapacityRatio", requestedToCapacityRatio: { shape: [{ utilization: 50, score: 11 }] } } },
        error: "score: Invalid value: 11: not in valid range [0, 10]"
      },
      { case: "a shape with another strategy", args: { scoringStrategy: { type: "LeastAllocated", requestedToCapacityRatio: { shape: least } } }, error: "must be nil when type is not RequestedToCapacityRatio" },
      { case: "a resource group with a slash", args: { ignoredResourceGroups: ["example.com/x"] }, error: "resource group name can't contain '/'" },
      { case: "an invalid ignored resource name", args: { ignoredResources: ["bad name!"] }, error: "ignoredResources[0]" }
    ])("rejects $case", ({ args, error }) => {
      const built = NodeResourcesFit.factory(args, handle)
      expect(typeof built).toBe("string")
      expect(built).toContain(error)
    })
  })

  it("filters and scores 5,000 nodes", () => {
    const all = manyNodes(5000, (i) => node({ name: `node-${i}`, allocatable: { cpu: "8", memory: "32Gi", pods: "110", "example.com/gpu": "2" } }, i % 4 === 0 ? [pod({ requests: { cpu: "7" } })] : []))
    const p = pod({ requests: { cpu: "2", memory: "1Gi", "example.com/gpu": "1" } })
    for (const type of ["LeastAllocated", "MostAllocated"]) {
      const plugin = build({ scoringStrategy: { type, resources: [{ name: "cpu", weight: 1 }, { name: "memory", weight: 1 }, { name: "example.com/gpu", weight: 1 }] } })
      const { verdicts } = runFilter(plugin, p, all)
      const feasible = all.filter((n) => verdicts.get(n.name)!.code === "Success")
      expect(feasible).toHaveLength(3750)
      const scores = runScore(plugin, p, feasible) as Record<string, number>
      expect(Object.keys(scores)).toHaveLength(3750)
    }
  })
})
