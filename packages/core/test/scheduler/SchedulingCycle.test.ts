import { describe, expect, it } from "@effect/vitest"
import * as SchedulingCycle from "../../src/scheduler/SchedulingCycle.js"
import * as Snapshot from "../../src/scheduler/Snapshot.js"
import { node, pod } from "./plugins/fixtures.js"

const snapshotOf = () => Snapshot.make([node({ name: "n1" }), node({ name: "n2" })])

describe("SchedulingCycle.withNominated", () => {
  const preemptor = { ...pod({ name: "preemptor" }), priority: 10 }
  const lower = { ...pod({ name: "lower", requests: { cpu: "1" } }), priority: 1 }
  const higher = { ...pod({ name: "higher", requests: { cpu: "1" } }), priority: 100 }
  it.each([
    { name: "no nominations: the same snapshot", nominations: {}, counted: { n1: [], n2: [] }, same: true },
    { name: "a nominated pod of higher priority is counted on its node", nominations: { n1: [higher] }, counted: { n1: ["higher"], n2: [] }, same: false },
    { name: "one of lower priority is not", nominations: { n1: [lower] }, counted: { n1: [], n2: [] }, same: true },
    { name: "the pod itself is not", nominations: { n2: [preemptor] }, counted: { n1: [], n2: [] }, same: true }
  ])("$name", ({ nominations, counted, same }) => {
    const snapshot = snapshotOf()
    const byNode = nominations as Record<string, ReadonlyArray<Snapshot.PodInfo>>
    const nodes = new Set(Object.keys(byNode))
    const out = SchedulingCycle.withNominated(snapshot, preemptor, nodes, (n) => byNode[n] ?? [])
    expect(out === snapshot).toBe(same)
    expect({ n1: out.get("n1")!.pods.map((p) => p.name), n2: out.get("n2")!.pods.map((p) => p.name) }).toEqual(counted)
    expect(out.nodes.map((n) => n.pods.length)).toEqual([counted.n1.length, counted.n2.length])
  })

  it("prunes nodes whose nominations are gone", () => {
    const nodes = new Set(["n1", "gone"])
    SchedulingCycle.withNominated(snapshotOf(), preemptor, nodes, () => [])
    expect([...nodes]).toEqual([])
  })
})
