import { describe, expect, it } from "vitest"
import { CycleState } from "../../../src/scheduler/Framework.js"
import * as NodeUnschedulable from "../../../src/scheduler/plugins/NodeUnschedulable.js"
import { manyNodes, node, pod, runFilter } from "./fixtures.js"

const key = "node.kubernetes.io/unschedulable"

describe("NodeUnschedulable", () => {
  const plugin = NodeUnschedulable.make()

  it.each([
    { case: "schedulable node, no tolerations", unschedulable: false, tolerations: [], want: "Success" },
    { case: "cordoned node, no tolerations", unschedulable: true, tolerations: [], want: "UnschedulableAndUnresolvable" },
    { case: "cordoned node, tolerated by key Exists", unschedulable: true, tolerations: [{ key, operator: "Exists", effect: "NoSchedule" }], want: "Success" },
    { case: "cordoned node, tolerated for every effect", unschedulable: true, tolerations: [{ key, operator: "Exists" }], want: "Success" },
    { case: "cordoned node, tolerate-everything toleration", unschedulable: true, tolerations: [{ operator: "Exists" }], want: "Success" },
    { case: "cordoned node, wrong effect", unschedulable: true, tolerations: [{ key, operator: "Exists", effect: "NoExecute" }], want: "UnschedulableAndUnresolvable" },
    { case: "cordoned node, other key", unschedulable: true, tolerations: [{ key: "other", operator: "Exists" }], want: "UnschedulableAndUnresolvable" },
    { case: "cordoned node, Equal with a value the taint lacks", unschedulable: true, tolerations: [{ key, value: "x", effect: "NoSchedule" }], want: "UnschedulableAndUnresolvable" }
  ])("$case", ({ unschedulable, tolerations, want }) => {
    const p = pod({ spec: { tolerations } })
    const n = node({ name: "n", unschedulable })
    // With PreFilter (a tolerating pod is skipped: Filter never runs) …
    const { preFilter, verdicts } = runFilter(plugin, p, [n])
    const viaFramework = preFilter?.status.code === "Skip" ? "Success" : verdicts.get("n")!.code
    expect(viaFramework).toBe(want)
    // … and Filter alone, when the profile does not enable its PreFilter.
    const alone = plugin.filter(new CycleState(), p, n)
    expect(alone.code).toBe(want)
    if (want !== "Success") expect(alone.reasons).toEqual(["node(s) were unschedulable"])
  })

  it("PreFilter skips a pod that tolerates the unschedulable taint", () => {
    expect(runFilter(plugin, pod({ spec: { tolerations: [{ key, operator: "Exists" }] } }), []).preFilter?.status.code).toBe("Skip")
    expect(runFilter(plugin, pod(), []).preFilter?.status.code).toBe("Success")
  })

  it("filters 5,000 nodes", () => {
    const all = manyNodes(5000, (i) => node({ name: `node-${i}`, unschedulable: i % 10 === 0 }))
    const { verdicts } = runFilter(plugin, pod(), all)
    expect([...verdicts.values()].filter((v) => v.code !== "Success")).toHaveLength(500)
  })
})
