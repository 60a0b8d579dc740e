import { describe, expect, it } from "vitest"
import * as Json from "../../src/object/Json.js"

describe("Json readers", () => {
  const values: ReadonlyArray<readonly [string, unknown]> = [
    ["undefined", undefined],
    ["null", null],
    ["string", "a"],
    ["number", 3],
    ["NaN", Number.NaN],
    ["array", ["a", 1, "b"]],
    ["object", { a: 1 }]
  ]
  it.each(values)("reads %s", (label, v) => {
    expect(Json.isJsonObject(v)).toBe(label === "object")
    expect(Json.asObject(v)).toEqual(label === "object" ? v : {})
    expect(Json.asArray(v)).toEqual(label === "array" ? v : [])
    expect(Json.asString(v)).toBe(label === "string" ? v : "")
    expect(Json.asFiniteNumber(v)).toBe(label === "number" ? v : undefined)
    expect(Json.asStrings(v)).toEqual(label === "array" ? ["a", "b"] : [])
  })
})

describe("stableJson and jsonEqual", () => {
  const cases: ReadonlyArray<readonly [unknown, unknown, boolean]> = [
    [{ a: 1, b: 2 }, { b: 2, a: 1 }, true],
    [{ a: 1, b: undefined }, { a: 1 }, true],
    [[1, 2], [2, 1], false],
    [{ a: [{ x: 1 }] }, { a: [{ x: 1 }] }, true],
    [{ a: 1 }, { a: "1" }, false],
    [null, {}, false]
  ]
  it.each(cases)("%j vs %j", (a, b, equal) => {
    expect(Json.jsonEqual(a, b)).toBe(equal)
    expect(Json.stableJson(a) === Json.stableJson(b)).toBe(equal)
  })
})
