import { describe, expect, it } from "vitest"
import * as V8Setting from "../../src/v8/V8Setting.js"

describe("V8Setting.parse (the grammar of FLEET_HEAP_GROWTH_PERCENT and FLEET_V8_INLINING_BUDGET)", () => {
  const cases: ReadonlyArray<readonly [string | undefined, number | undefined, number | undefined]> = [
    [undefined, 7, 7],
    ["", 7, 7],
    ["  ", 7, 7],
    ["0", 7, undefined],
    ["250", 7, 250],
    [" 42 ", 7, 42],
    ["-1", 7, 7],
    ["1.5", 7, 7],
    ["lots", undefined, undefined]
  ]
  it.each(cases)("%j (fallback %j) → %j", (value, fallback, want) => {
    expect(V8Setting.parse(value, fallback)).toBe(want)
  })
})
