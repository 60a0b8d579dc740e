import { describe, expect, it } from "vitest"
import { CycleState, type NodeScore } from "../../../src/scheduler/Framework.js"
import * as NodeAffinity from "../../../src/scheduler/plugins/NodeAffinityPlugin.js"
import { manyNodes, node, pod, runFilter, runScore } from "./fixtures.js"

const nodes = [
  node({ name: "a", labels: { zone: "z1", disk: "ssd", gen: "5" } }),
  node({ name: "b", labels: { zone: "z2", disk: "hdd", gen: "3" } }),
  node({ name: "c" })
]

const expr = (key: string, operator: string, values?: ReadonlyArray<string>) => ({ key, operator, ...(values === undefined ? {} : { values }) })
const names = (operator: string, values: ReadonlyArray<string>) => ({ key: "metadata.name", operator, values })
const required = (...terms: ReadonlyArray<Record<string, unknown>>) => ({
  affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } }
})
const preferred = (...terms: ReadonlyArray<{ weight: number; preference: Record<string, unknown> }>) => ({
  affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: terms } }
})

/** The names of the nodes that pass, running the points as the framework does. */
const passing = (plugin: ReturnType<typeof NodeAffinity.make>, spec: Record<string, unknown>): ReadonlyArray<string> => {
  const { preFilter, verdicts } = runFilter(plugin, pod({ spec }), nodes)
  if (preFilter?.status.code === "Skip") return nodes.map((n) => n.name)
  return [...verdicts].filter(([, v]) => v.code === "Success").map(([n]) => n)
}

describe("NodeAffinity", () => {
  const plugin = NodeAffinity.make()

  describe("Filter", () => {
    it.each([
      { case: "nothing asked: every node", spec: {}, want: ["a", "b", "c"] },
      { case: "nodeSelector", spec: { nodeSelector: { zone: "z1" } }, want: ["a"] },
      { case: "nodeSelector on a label no node has", spec: { nodeSelector: { zone: "z9" } }, want: [] },
      { case: "empty nodeSelector", spec: { nodeSelector: {} }, want: ["a", "b", "c"] },
      { case: "In", spec: required({ matchExpressions: [expr("zone", "In", ["z1", "z2"])] }), want: ["a", "b"] },
      { case: "NotIn (a missing label is not in)", spec: required({ matchExpressions: [expr("zone", "NotIn", ["z1"])] }), want: ["b", "c"] },
      { case: "Exists", spec: required({ matchExpressions: [expr("disk", "Exists")] }), want: ["a", "b"] },
      { case: "DoesNotExist", spec: required({ matchExpressions: [expr("disk", "DoesNotExist")] }), want: ["c"] },
      { case: "Gt", spec: required({ matchExpressions: [expr("gen", "Gt", ["4"])] }), want: ["a"] },
      { case: "Lt", spec: required({ matchExpressions: [expr("gen", "Lt", ["4"])] }), want: ["b"] },
      { case: "expressions in a term AND", spec: required({ matchExpressions: [expr("zone", "In", ["z1", "z2"]), expr("disk", "In", ["ssd"])] }), want: ["a"] },
      { case: "terms OR", spec: required({ matchExpressions: [expr("zone", "In", ["z1"])] }, { matchExpressions: [expr("disk", "In", ["hdd"])] }), want: ["a", "b"] },
      { case: "no terms: no node", spec: required(), want: [] },
      { case: "an empty term matches no node", spec: required({ matchExpressions: [] }), want: [] },
      { case: "matchFields metadata.name", spec: required({ matchFields: [names("In", ["b"])] }), want: ["b"] },
      { case: "matchFields NotIn", spec: required({ matchFields: [names("NotIn", ["b"])] }), want: ["a", "c"] },
      { case: "nodeSelector and affinity must both hold", spec: { nodeSelector: { zone: "z1" }, ...required({ matchExpressions: [expr("disk", "In", ["hdd"])] }) }, want: [] }
    ])("$case", ({ spec, want }) => {
      expect(passing(plugin, spec)).toEqual(want)
    })

    it("rejects with upstream's reason, UnschedulableAndUnresolvable, with or without PreFilter", () => {
      const p = pod({ spec: { nodeSelector: { zone: "z1" } } })
      const want = { code: "UnschedulableAndUnresolvable", reasons: ["node(s) didn't match Pod's node affinity/selector"] }
      expect(runFilter(plugin, p, nodes).verdicts.get("b")).toMatchObject(want)
      expect(plugin.filter(new CycleState(), p, nodes[1]!)).toMatchObject(want)
      expect(plugin.filter(new CycleState(), p, nodes[0]!).code).toBe("Success")
    })
  })

  describe("PreFilter", () => {
    it.each([
      { case: "no affinity, no selector: Skip", spec: {}, code: "Skip", nodeNames: undefined },
      { case: "a selector only: no narrowing", spec: { nodeSelector: { zone: "z1" } }, code: "Success", nodeNames: undefined },
      { case: "a name", spec: required({ matchFields: [names("In", ["a"])] }), code: "Success", nodeNames: ["a"] },
      { case: "names in one term intersect", spec: required({ matchFields: [names("In", ["a", "b"]), names("In", ["b", "c"])] }), code: "Success", nodeNames: ["b"] },
      { case: "names across terms unite", spec: required({ matchFields: [names("In", ["a"])] }, { matchFields: [names("In", ["b"])] }), code: "Success", nodeNames: ["a", "b"] },
      {
        case: "a term without names leaves every node",
        spec: required({ matchFields: [names("In", ["a"])] }, { matchExpressions: [expr("zone", "In", ["z2"])] }),
        code: "Success",
        nodeNames: undefined
      },
      { case: "NotIn does not narrow", spec: required({ matchFields: [names("NotIn", ["a"])] }), code: "Success", nodeNames: undefined },
      { case: "a term naming no node, another naming one", spec: required({ matchFields: [names("In", ["a"]), names("In", ["b"])] }, { matchFields: [names("In", ["c"])] }), code: "Success", nodeNames: ["c"] },
      { case: "every term names no node: conflict", spec: required({ matchFields: [names("In", ["a"]), names("In", ["b"])] }), code: "UnschedulableAndUnresolvable", nodeNames: undefined }
    ])("$case", ({ spec, code, nodeNames }) => {
      const result = plugin.preFilter(new CycleState(), pod({ spec }), { nodes, get: () => undefined, withAffinityPods: [] })
      expect(result.status.code).toBe(code)
      if (code === "UnschedulableAndUnresolvable") expect(result.status.reasons).toEqual(["pod affinity terms conflict"])
      expect(result.nodeNames === undefined ? undefined : [...result.nodeNames].sort()).toEqual(nodeNames)
    })
  })

  describe("Score", () => {
    it.each([
      {
        case: "weights of matching terms, normalised to the highest",
        spec: preferred({ weight: 2, preference: { matchExpressions: [expr("zone", "In", ["z1"])] } }, { weight: 5, preference: { matchExpressions: [expr("disk", "In", ["hdd"])] } }),
        want: { a: 40, b: 100, c: 0 }
      },
      {
        case: "terms add up on one node",
        spec: preferred({ weight: 1, preference: { matchExpressions: [expr("zone", "In", ["z1"])] } }, { weight: 3, preference: { matchExpressions: [expr("disk", "Exists")] } }),
        want: { a: 100, b: 75, c: 0 }
      },
      {
        case: "matchFields preferences",
        spec: preferred({ weight: 10, preference: { matchFields: [names("In", ["c"])] } }),
        want: { a: 0, b: 0, c: 100 }
      },
      {
        case: "an empty preference matches nothing",
        spec: preferred({ weight: 10, preference: {} }, { weight: 1, preference: { matchExpressions: [expr("zone", "In", ["z2"])] } }),
        want: { a: 0, b: 100, c: 0 }
      },
      {
        case: "no node matches: all zero",
        spec: preferred({ weight: 10, preference: { matchExpressions: [expr("zone", "In", ["z9"])] } }),
        want: { a: 0, b: 0, c: 0 }
      }
    ])("$case", ({ spec, want }) => {
      expect(runScore(plugin, pod({ spec }), nodes)).toEqual(want)
    })

    it("PreScore skips a pod without preferred terms", () => {
      expect(runScore(plugin, pod(), nodes)).toMatchObject({ code: "Skip" })
      expect(runScore(plugin, pod({ spec: preferred({ weight: 0, preference: { matchExpressions: [expr("zone", "Exists")] } }) }), nodes)).toMatchObject({ code: "Skip" })
    })
  })

  describe("addedAffinity", () => {
    const enforced = NodeAffinity.factory(
      {
        addedAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [expr("zone", "Exists")] }] },
          preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 10, preference: { matchExpressions: [expr("zone", "In", ["z2"])] } }]
        }
      },
      { schedulerName: "s" }
    ) as ReturnType<typeof NodeAffinity.make>

    it("filters every pod, even one with no affinity of its own, with the scheduler-enforced reason", () => {
      const { preFilter, verdicts } = runFilter(enforced, pod(), nodes)
      expect(preFilter?.status.code).toBe("Success")
      expect(verdicts.get("a")?.code).toBe("Success")
      expect(verdicts.get("c")).toMatchObject({ code: "UnschedulableAndUnresolvable", reasons: ["node(s) didn't match scheduler-enforced node affinity"] })
    })

    it("adds its preferred terms to every pod's score", () => {
      expect(runScore(enforced, pod(), nodes)).toEqual({ a: 0, b: 100, c: 0 })
      const spec = preferred({ weight: 2, preference: { matchExpressions: [expr("zone", "In", ["z1"])] } })
      expect(runScore(enforced, pod({ spec }), nodes)).toEqual({ a: 20, b: 100, c: 0 })
    })

    it.each([
      { case: "not an object", args: 3, error: "must be an object" },
      { case: "required without terms", args: { addedAffinity: { requiredDuringSchedulingIgnoredDuringExecution: {} } }, error: "nodeSelectorTerms: Required value" },
      {
        case: "an unknown operator",
        args: { addedAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [expr("a", "Near")] }] } } },
        error: 'addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Near"'
      },
      {
        case: "a field other than metadata.name",
        args: { addedAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchFields: [{ key: "spec.x", operator: "In", values: ["a"] }] } }] } },
        error: "matchFields[0].key"
      }
    ])("rejects bad arguments: $case", ({ args, error }) => {
      const built = NodeAffinity.factory(args, { schedulerName: "s" })
      expect(typeof built).toBe("string")
      expect(built).toContain(error)
    })
  })

  it("defaultNormalizeScore follows upstream's integer scaling, reversed or not", () => {
    const scores = (...s: Array<number>): Array<NodeScore> => s.map((score, i) => ({ node: `n${i}`, score }))
    const run = (reverse: boolean, s: Array<NodeScore>) => (NodeAffinity.defaultNormalizeScore(100, reverse, s), s.map((x) => x.score))
    expect(run(false, scores(0, 1, 3))).toEqual([0, 33, 100])
    expect(run(true, scores(0, 1, 3))).toEqual([100, 67, 0])
    expect(run(false, scores(0, 0))).toEqual([0, 0])
    expect(run(true, scores(0, 0))).toEqual([100, 100])
  })

  it("filters and scores 5,000 nodes", () => {
    const all = manyNodes(5000, (i) => node({ name: `node-${i}`, labels: { zone: `z${i % 5}`, rack: `r${i % 50}` } }))
    const p = pod({
      spec: {
        nodeSelector: { zone: "z1" },
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [expr("rack", "NotIn", ["r1"])] }] },
            preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 5, preference: { matchExpressions: [expr("rack", "In", ["r6", "r11"])] } }]
          }
        }
      }
    })
    const { verdicts } = runFilter(plugin, p, all)
    const feasible = all.filter((n) => verdicts.get(n.name)!.code === "Success")
    expect(feasible).toHaveLength(900)
    const scores = runScore(plugin, p, feasible) as Record<string, number>
    expect(scores["node-6"]).toBe(100)
    expect(scores["node-16"]).toBe(0)
  })
})
