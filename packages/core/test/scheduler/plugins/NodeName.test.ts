import { describe, expect, it } from "vitest"
import { CycleState } from "../../../src/scheduler/Framework.js"
import * as NodeName from "../../../src/scheduler/plugins/NodeName.js"
import { manyNodes, node, pod, runFilter } from "./fixtures.js"

describe("NodeName", () => {
  const plugin = NodeName.make()
  const nodes = [node({ name: "a" }), node({ name: "b" })]

  it.each([
    { case: "no nodeName: every node", nodeName: undefined, want: { a: "Success", b: "Success" } },
    { case: "empty nodeName: every node", nodeName: "", want: { a: "Success", b: "Success" } },
    { case: "named node only", nodeName: "b", want: { a: "UnschedulableAndUnresolvable", b: "Success" } },
    { case: "a node that does not exist: none", nodeName: "z", want: { a: "UnschedulableAndUnresolvable", b: "UnschedulableAndUnresolvable" } }
  ])("Filter: $case", ({ nodeName, want }) => {
    const p = pod({ spec: nodeName === undefined ? {} : { nodeName } })
    const state = new CycleState()
    for (const n of nodes) {
      const verdict = plugin.filter(state, p, n)
      expect(verdict.code).toBe(want[n.name as "a" | "b"])
      if (verdict.code !== "Success") expect(verdict.reasons).toEqual(["node(s) didn't match the requested node name"])
    }
  })

  it("PreFilter narrows the cycle to the named node", () => {
    const { preFilter, verdicts } = runFilter(plugin, pod({ spec: { nodeName: "b" } }), nodes)
    expect(preFilter?.status.code).toBe("Success")
    expect([...(preFilter?.nodeNames ?? [])]).toEqual(["b"])
    expect([...verdicts.keys()]).toEqual(["b"])
  })

  it("PreFilter skips a pod that names no node", () => {
    const { preFilter } = runFilter(plugin, pod(), nodes)
    expect(preFilter?.status.code).toBe("Skip")
  })

  it("filters 5,000 nodes", () => {
    const all = manyNodes(5000, (i) => node({ name: `node-${i}` }))
    const p = pod({ spec: { nodeName: "node-4999" } })
    const state = new CycleState()
    const passed = all.filter((n) => plugin.filter(state, p, n).code === "Success")
    expect(passed.map((n) => n.name)).toEqual(["node-4999"])
  })
})
