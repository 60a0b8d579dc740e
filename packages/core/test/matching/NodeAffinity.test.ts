import { describe, expect, it } from "@effect/vitest"
import * as NodeAffinity from "../../src/matching/NodeAffinity.js"

const node = { metadata: { name: "n1", labels: { zone: "a", gpu: "true" } } }
const term = (expressions: ReadonlyArray<object>, fields: ReadonlyArray<object> = []) => ({ matchExpressions: expressions, matchFields: fields })

describe("NodeAffinity.matchesTerm", () => {
  it.each([
    { name: "In", term: term([{ key: "zone", operator: "In", values: ["a", "b"] }]), yes: true },
    { name: "NotIn", term: term([{ key: "zone", operator: "NotIn", values: ["a"] }]), yes: false },
    { name: "Exists", term: term([{ key: "gpu", operator: "Exists" }]), yes: true },
    { name: "DoesNotExist", term: term([{ key: "gpu", operator: "DoesNotExist" }]), yes: false },
    { name: "every expression (AND)", term: term([{ key: "zone", operator: "In", values: ["a"] }, { key: "ssd", operator: "Exists" }]), yes: false },
    { name: "matchFields on metadata.name", term: term([], [{ key: "metadata.name", operator: "In", values: ["n1"] }]), yes: true },
    { name: "an empty term matches no node", term: term([]), yes: false }
  ])("$name", ({ term: t, yes }) => {
    expect(NodeAffinity.matchesTerm(t, node)).toBe(yes)
  })
})

describe("NodeAffinity.matchesNodeSelector", () => {
  it.each([
    { selector: { zone: "a" }, yes: true },
    { selector: { zone: "b" }, yes: false },
    { selector: { missing: "" }, yes: false },
    { selector: undefined, yes: true }
  ])("$selector: $yes", ({ selector, yes }) => {
    expect(NodeAffinity.matchesNodeSelector(selector, node)).toBe(yes)
  })

  it("terms are ORed; a node without labels has none", () => {
    const terms = { nodeSelectorTerms: [term([{ key: "zone", operator: "In", values: ["z"] }]), term([{ key: "gpu", operator: "Exists" }])] }
    expect(NodeAffinity.matchesNodeSelectorTerms(terms, node)).toBe(true)
    expect(NodeAffinity.matchesNodeSelectorTerms(terms, { metadata: { name: "bare" } })).toBe(false)
  })
})
