import { describe, expect, it } from "vitest"
import { CycleState } from "../../../src/scheduler/Framework.js"
import * as BalancedAllocation from "../../../src/scheduler/plugins/BalancedAllocation.js"
import { manyNodes, node, pod, runScore } from "./fixtures.js"

const handle = { schedulerName: "default-scheduler" }
const build = (args: unknown) => {
  const plugin = BalancedAllocation.factory(args, handle)
  if (typeof plugin === "string") throw new Error(plugin)
  return plugin as ReturnType<typeof BalancedAllocation.make>
}
const sized = (name: string, allocatable: Record<string, string>, pods: ReadonlyArray<Record<string, string>> = []) =>
  node({ name, allocatable: { pods: "110", ...allocatable } }, pods.map((requests) => pod({ requests })))
const withGpu = { resources: [{ name: "cpu", weight: 1 }, { name: "memory", weight: 1 }, { name: "example.com/gpu", weight: 1 }] }

describe("NodeResourcesBalancedAllocation", () => {
  it.each([
    {
      case: "two resources: (1 - |f1 - f2| / 2) × 100, truncated",
      args: undefined,
      requests: { cpu: "3", memory: "5000" },
      nodes: [sized("n1", { cpu: "4", memory: "10000" }), sized("n2", { cpu: "6", memory: "10000" })],
      want: { n1: 87, n2: 100 }
    },
    {
      case: "pods already there count by their actual requests (a best-effort pod adds nothing)",
      args: undefined,
      requests: { cpu: "500m", memory: "256Mi" },
      nodes: [sized("n1", { cpu: "1", memory: "1Gi" }, [{}]), sized("n2", { cpu: "1", memory: "1Gi" }, [{ memory: "256Mi" }])],
      want: { n1: 87, n2: 100 }
    },
    {
      case: "a fraction over 1 counts as 1",
      args: undefined,
      requests: { cpu: "5", memory: "5000" },
      nodes: [sized("n1", { cpu: "4", memory: "10000" })],
      want: { n1: 75 }
    },
    {
      case: "three resources: the standard deviation",
      args: withGpu,
      requests: { cpu: "2", memory: "2500", "example.com/gpu": "3" },
      nodes: [sized("n1", { cpu: "4", memory: "10000", "example.com/gpu": "4" })],
      want: { n1: 79 }
    },
    {
      case: "a scalar the pod does not request is left out",
      args: withGpu,
      requests: { cpu: "2", memory: "5000" },
      nodes: [sized("n1", { cpu: "4", memory: "10000", "example.com/gpu": "4" })],
      want: { n1: 100 }
    },
    {
      case: "a resource the node lacks is left out (one fraction: no deviation)",
      args: undefined,
      requests: { cpu: "1", memory: "5000" },
      nodes: [sized("n1", { cpu: "4" })],
      want: { n1: 100 }
    }
  ])("$case", ({ args, requests, nodes, want }) => {
    const plugin = build(args)
    const p = pod({ requests })
    expect(runScore(plugin, p, nodes)).toEqual(want)
    for (const n of nodes) expect(plugin.score(new CycleState(), p, n)).toBe(want[n.name as keyof typeof want])
  })

  it("PreScore skips a pod that requests none of the scored resources", () => {
    const nodes = [sized("n1", { cpu: "4", memory: "10000" })]
    expect(runScore(BalancedAllocation.make(), pod(), nodes)).toMatchObject({ code: "Skip" })
    expect(runScore(BalancedAllocation.make(), pod({ requests: { "example.com/x": "1" } }), nodes)).toMatchObject({ code: "Skip" })
  })

  it.each([
    { case: "a weight other than 1", args: { resources: [{ name: "cpu", weight: 2 }] }, error: "resources[0].weight: Invalid value: 2: must be 1" },
    { case: "a resource twice", args: { resources: [{ name: "cpu", weight: 1 }, { name: "cpu", weight: 1 }] }, error: 'resources[1].name: Duplicate value: "cpu"' },
    { case: "not an object", args: [], error: "must be an object" }
  ])("rejects $case", ({ args, error }) => {
    expect(BalancedAllocation.factory(args, handle)).toContain(error)
  })

  it("defaults to cpu and memory, weight 1", () => {
    expect(BalancedAllocation.parseArgs(undefined)).toEqual({ resources: [{ name: "cpu", weight: 1 }, { name: "memory", weight: 1 }] })
    expect(BalancedAllocation.parseArgs({ resources: [{ name: "cpu" }] })).toEqual({ resources: [{ name: "cpu", weight: 1 }] })
  })

  it("scores 5,000 nodes", () => {
    const all = manyNodes(5000, (i) => sized(`node-${i}`, { cpu: "8", memory: "16Gi", "example.com/gpu": "8" }, i % 2 === 0 ? [{ cpu: "4" }] : []))
    const scores = runScore(build(withGpu), pod({ requests: { cpu: "1", memory: "2Gi", "example.com/gpu": "1" } }), all) as Record<string, number>
    expect(Object.keys(scores)).toHaveLength(5000)
    expect(scores["node-1"]).toBe(100)
    expect(scores["node-0"]).toBeLessThan(100)
  })
})
