import { describe, expect, it } from "vitest"
import * as HeapGrowth from "../../src/v8/HeapGrowth.js"

describe("HeapGrowth.percentFrom (FLEET_HEAP_GROWTH_PERCENT)", () => {
  const cases: ReadonlyArray<readonly [string | undefined, number | undefined]> = [
    [undefined, HeapGrowth.DefaultPercent],
    ["", HeapGrowth.DefaultPercent],
    ["50", 50],
    ["300", 300],
    ["0", undefined],
    // Nonsense keeps the default rather than failing the start of a control plane.
    ["-5", HeapGrowth.DefaultPercent],
    ["1.5", HeapGrowth.DefaultPercent],
    ["lots", HeapGrowth.DefaultPercent]
  ]
  it.each(cases)("%j → %j", (value, want) => {
    expect(HeapGrowth.percentFrom(value)).toBe(want)
  })
})
