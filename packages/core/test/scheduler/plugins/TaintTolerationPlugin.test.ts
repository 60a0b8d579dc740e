import { describe, expect, it } from "vitest"
import { CycleState } from "../../../src/scheduler/Framework.js"
import * as TaintToleration from "../../../src/scheduler/plugins/TaintTolerationPlugin.js"
import { manyNodes, node, pod, runFilter, runScore } from "./fixtures.js"

const gpu = { key: "dedicated", value: "gpu", effect: "NoSchedule" }

describe("TaintToleration", () => {
  const plugin = TaintToleration.make()

  describe("Filter", () => {
    it.each([
      { case: "no taints", taints: [], tolerations: [], want: undefined },
      { case: "untolerated NoSchedule", taints: [gpu], tolerations: [], want: "node(s) had untolerated taint {dedicated: gpu}" },
      { case: "tolerated by Equal", taints: [gpu], tolerations: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }], want: undefined },
      { case: "tolerated by Exists", taints: [gpu], tolerations: [{ key: "dedicated", operator: "Exists" }], want: undefined },
      { case: "Equal with another value", taints: [gpu], tolerations: [{ key: "dedicated", value: "cpu" }], want: "node(s) had untolerated taint {dedicated: gpu}" },
      { case: "toleration for another effect", taints: [gpu], tolerations: [{ key: "dedicated", value: "gpu", effect: "NoExecute" }], want: "node(s) had untolerated taint {dedicated: gpu}" },
      { case: "untolerated NoExecute", taints: [{ key: "k", value: "v", effect: "NoExecute" }], tolerations: [], want: "node(s) had untolerated taint {k: v}" },
      { case: "PreferNoSchedule never filters", taints: [{ key: "k", value: "v", effect: "PreferNoSchedule" }], tolerations: [], want: undefined },
      { case: "a taint without a value", taints: [{ key: "node.kubernetes.io/not-ready", effect: "NoSchedule" }], tolerations: [], want: "node(s) had untolerated taint {node.kubernetes.io/not-ready: }" },
      {
        case: "the first untolerated taint is reported",
        taints: [{ key: "a", value: "1", effect: "PreferNoSchedule" }, { key: "b", value: "2", effect: "NoSchedule" }, { key: "c", value: "3", effect: "NoSchedule" }],
        tolerations: [],
        want: "node(s) had untolerated taint {b: 2}"
      }
    ])("$case", ({ taints, tolerations, want }) => {
      const p = pod({ spec: { tolerations } })
      const n = node({ name: "n", taints })
      for (const verdict of [runFilter(plugin, p, [n]).verdicts.get("n")!, plugin.filter(new CycleState(), p, n)]) {
        if (want === undefined) expect(verdict.code).toBe("Success")
        else expect(verdict).toMatchObject({ code: "UnschedulableAndUnresolvable", reasons: [want] })
      }
    })

    it("reuses one verdict per taint across cycles", () => {
      const n = node({ name: "n", taints: [gpu] })
      expect(plugin.filter(new CycleState(), pod(), n)).toBe(plugin.filter(new CycleState(), pod(), n))
    })
  })

  describe("Score", () => {
    const prefer = (key: string) => ({ key, value: "x", effect: "PreferNoSchedule" })

    it.each([
      {
        case: "fewer intolerable PreferNoSchedule taints score higher (normalised, reversed)",
        tolerations: [],
        taints: { n0: [], n1: [prefer("a")], n2: [prefer("a"), prefer("b")], n3: [gpu] },
        want: { n0: 100, n1: 50, n2: 0, n3: 100 }
      },
      {
        case: "tolerated PreferNoSchedule taints do not count",
        tolerations: [{ key: "a", operator: "Exists", effect: "PreferNoSchedule" }],
        taints: { n0: [prefer("a")], n1: [prefer("b")], n2: [], n3: [prefer("a"), prefer("b")] },
        want: { n0: 100, n1: 0, n2: 100, n3: 0 }
      },
      {
        case: "a toleration without an effect tolerates PreferNoSchedule",
        tolerations: [{ key: "a", operator: "Exists" }],
        taints: { n0: [prefer("a")], n1: [], n2: [], n3: [] },
        want: { n0: 100, n1: 100, n2: 100, n3: 100 }
      },
      {
        case: "a NoSchedule toleration does not tolerate PreferNoSchedule",
        tolerations: [{ key: "a", operator: "Exists", effect: "NoSchedule" }],
        taints: { n0: [prefer("a")], n1: [], n2: [], n3: [] },
        want: { n0: 0, n1: 100, n2: 100, n3: 100 }
      },
      {
        case: "three counts scale with integer arithmetic",
        tolerations: [],
        taints: { n0: [prefer("a")], n1: [prefer("a"), prefer("b")], n2: [prefer("a"), prefer("b"), prefer("c")], n3: [] },
        want: { n0: 67, n1: 34, n2: 0, n3: 100 }
      }
    ])("$case", ({ tolerations, taints, want }) => {
      const nodes = Object.entries(taints).map(([name, t]) => node({ name, taints: t }))
      expect(runScore(plugin, pod({ spec: { tolerations } }), nodes)).toEqual(want)
    })
  })

  it("filters and scores 5,000 nodes", () => {
    const all = manyNodes(5000, (i) =>
      node({ name: `node-${i}`, taints: i % 3 === 0 ? [gpu] : i % 3 === 1 ? [{ key: "p", value: "x", effect: "PreferNoSchedule" }] : [] })
    )
    const p = pod()
    const { verdicts } = runFilter(plugin, p, all)
    const feasible = all.filter((n) => verdicts.get(n.name)!.code === "Success")
    expect(feasible).toHaveLength(3333)
    const scores = runScore(plugin, p, feasible) as Record<string, number>
    expect(scores["node-1"]).toBe(0)
    expect(scores["node-2"]).toBe(100)
  })
})
