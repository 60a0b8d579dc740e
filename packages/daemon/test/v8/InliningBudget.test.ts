import { describe, expect, it } from "vitest"
import * as InliningBudget from "../../src/v8/InliningBudget.js"

describe("InliningBudget.settingFrom (FLEET_V8_INLINING_BUDGET)", () => {
  const cases: ReadonlyArray<readonly [string | undefined, string | undefined, InliningBudget.Setting]> = [
    // dev turns inlining off by default; the other roles keep V8's.
    [undefined, "dev", "off"],
    ["", "dev", "off"],
    [undefined, "server", undefined],
    [undefined, "hub", undefined],
    [undefined, undefined, undefined],
    // The variable applies to any role, inlining on with that budget; 0 is V8's own.
    ["100", "dev", 100],
    ["920", "server", 920],
    ["0", "dev", undefined],
    // Nonsense keeps the role's default rather than failing the start of a control plane.
    ["-5", "dev", "off"],
    ["2.5", "server", undefined],
    ["lots", "dev", "off"]
  ]
  it.each(cases)("%j for %j → %j", (value, role, want) => {
    expect(InliningBudget.settingFrom(value, role)).toBe(want)
  })
})
