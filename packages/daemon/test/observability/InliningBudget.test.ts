import { describe, expect, it } from "vitest"
import * as InliningBudget from "../../src/observability/InliningBudget.js"

describe("InliningBudget.bytesFrom (FLEET_V8_INLINING_BUDGET)", () => {
  const cases: ReadonlyArray<readonly [string | undefined, number | undefined]> = [
    [undefined, InliningBudget.DefaultBytes],
    ["", InliningBudget.DefaultBytes],
    ["100", 100],
    ["920", 920],
    ["0", undefined],
    // Nonsense keeps the default rather than failing the start of a control plane.
    ["-5", InliningBudget.DefaultBytes],
    ["2.5", InliningBudget.DefaultBytes],
    ["lots", InliningBudget.DefaultBytes]
  ]
  it.each(cases)("%j → %j", (value, want) => {
    expect(InliningBudget.bytesFrom(value)).toBe(want)
  })
})
