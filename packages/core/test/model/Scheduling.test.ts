// scheduling.k8s.io/v1 PriorityClass: decoding, registration, defaults, validation and update rules.
import { Either, Option } from "effect"
import { describe, expect, it } from "vitest"
import { Kinds, Scheduling } from "../../src/model/index.js"
import { createErrors } from "./harness.js"

const pc = (fields: Record<string, unknown> = {}, name = "high") => ({
  apiVersion: "scheduling.k8s.io/v1",
  kind: "PriorityClass",
  metadata: { name },
  value: 1000,
  ...fields
})

const decoded = (o: Record<string, unknown>): Scheduling.PriorityClass => {
  const r = Kinds.decodeAny(o, { strict: true })
  if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left))
  return r.right.object as Scheduling.PriorityClass
}

describe("PriorityClass kind", () => {
  it("is registered cluster-scoped as priorityclasses, short name pc", () => {
    const info = Option.getOrThrow(Kinds.resourceFor("scheduling.k8s.io", "pc"))
    expect([info.kind, info.plural, info.namespaced, info.apiVersion]).toEqual(["PriorityClass", "priorityclasses", false, "scheduling.k8s.io/v1"])
    expect(Option.getOrThrow(Kinds.resolveName("priorityclass")).kind).toBe("PriorityClass")
  })

  it("decodes a full class strictly", () => {
    const full = pc({ globalDefault: true, description: "batch work", preemptionPolicy: "Never" })
    expect(decoded(full)).toEqual(full)
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["a missing value", { value: undefined }, "value: Required value"],
    ["a fractional value", { value: 1.5 }, "value: Invalid value: 1.5: must be an integer"],
    ["a value beyond int32", { value: 2 ** 31 }, "value: Invalid value: 2147483648: must be between -2147483648 and 2147483647, inclusive"],
    ["an unknown preemption policy", { preemptionPolicy: "Sometimes" }, 'preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"'],
    ["a non-boolean globalDefault", { globalDefault: "yes" }, 'globalDefault: Invalid value: "yes": expected boolean']
  ])("refuses %s", (_what, fields, message) => {
    const body = JSON.parse(JSON.stringify(pc(fields)))
    expect(createErrors(body).join("\n")).toContain(message)
  })

  it("defaults the preemption policy to PreemptLowerPriority and keeps a given one", () => {
    expect(Scheduling.defaults(pc())).toEqual({ ...pc(), preemptionPolicy: "PreemptLowerPriority" })
    const never = pc({ preemptionPolicy: "Never" })
    expect(Scheduling.defaults(never)).toBe(never)
  })

  it("ships the two built-in classes with kube-apiserver's values", () => {
    expect(Scheduling.systemPriorityClasses.map((c) => [c.metadata.name, c.value, c.preemptionPolicy, c.globalDefault ?? false])).toEqual([
      ["system-node-critical", 2000001000, "PreemptLowerPriority", false],
      ["system-cluster-critical", 2000000000, "PreemptLowerPriority", false]
    ])
    for (const c of Scheduling.systemPriorityClasses) expect(Scheduling.validatePriorityClass(c)).toEqual([])
  })
})

describe("validatePriorityClass", () => {
  const reserved = "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: "
  it.each<[string, Record<string, unknown>, string, ReadonlyArray<string>]>([
    ["a user class at the highest user value", { value: 1_000_000_000 }, "high", []],
    ["a negative user value", { value: -5 }, "low", []],
    ["a user class above 1e9", { value: 1_000_000_001 }, "high", ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]],
    ["an unknown system- name", { value: 10 }, "system-mine", [`metadata.name: ${reserved}system-mine is not a known system priority class`]],
    ["a built-in name with another value", { value: 5 }, "system-node-critical", [`metadata.name: ${reserved}value of system-node-critical PriorityClass must be 2000001000`]],
    [
      "a built-in name marked default",
      { value: 2_000_000_000, globalDefault: true },
      "system-cluster-critical",
      [`metadata.name: ${reserved}globalDefault of system-cluster-critical PriorityClass must be false`]
    ],
    ["a built-in class as shipped (above the user limit)", { value: 2_000_000_000 }, "system-cluster-critical", []]
  ])("%s", (_what, fields, name, errors) => {
    expect(Scheduling.validatePriorityClass(decoded(pc(fields, name))).map((e) => `${e.path}: ${e.message}`)).toEqual(errors)
  })
})

describe("validatePriorityClassUpdate", () => {
  const old = decoded(pc({ preemptionPolicy: "PreemptLowerPriority", description: "a" }))
  it.each<[string, Record<string, unknown>, ReadonlyArray<string>]>([
    ["a new description and globalDefault", { preemptionPolicy: "PreemptLowerPriority", description: "b", globalDefault: true }, []],
    ["a new value", { value: 2000, preemptionPolicy: "PreemptLowerPriority" }, ["value: Forbidden: may not be changed in an update."]],
    ["a new preemption policy", { preemptionPolicy: "Never" }, ['preemptionPolicy: Invalid value: "Never": field is immutable']]
  ])("%s", (_what, fields, errors) => {
    expect(Scheduling.validatePriorityClassUpdate(decoded(pc(fields)), old).map((e) => `${e.path}: ${e.message}`)).toEqual(errors)
  })
})
