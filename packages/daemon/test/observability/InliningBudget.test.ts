import { describe, expect, it } from "vitest"
import * as InliningBudget from "../../src/observability/InliningBudget.js"

describe("InliningBudget.bytesFrom (FLEET_V8_INLINING_BUDGET)", () => {
  const cases: ReadonlyArray<readonly [string | undefined, string | undefined, number | undefined]> = [
    // dev lowers the budget by default; the other roles keep V8's.
    [undefined, "dev", InliningBudget.DefaultBytes],
    ["", "dev", InliningBudget.DefaultBytes],
    [undefined, "server", undefined],
    [undefined, "hub", undefined],
    [undefined, undefined, undefined],
    // The variable applies to any role; 0 is V8's own.
    ["100", "dev", 100],
    ["920", "server", 920],
    ["0", "dev", undefined],
    // Nonsense keeps the role's default rather than failing the start of a control plane.
    ["-5", "dev", InliningBudget.DefaultBytes],
    ["2.5", "server", undefined],
    ["lots", "dev", InliningBudget.DefaultBytes]
  ]
  it.each(cases)("%j for %j → %j", (value, role, want) => {
    expect(InliningBudget.bytesFrom(value, role)).toBe(want)
  })
})
