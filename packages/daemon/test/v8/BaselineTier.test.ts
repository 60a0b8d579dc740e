import { describe, expect, it } from "vitest"
import * as BaselineTier from "../../src/v8/BaselineTier.js"

describe("BaselineTier.settingFrom (FLEET_V8_ALWAYS_SPARKPLUG)", () => {
  const cases: ReadonlyArray<readonly [string | undefined, string | undefined, boolean]> = [
    // dev compiles every function with Sparkplug at its first call; the other roles keep V8's tiering.
    [undefined, "dev", true],
    ["", "dev", true],
    [undefined, "server", false],
    [undefined, "agent", false],
    [undefined, undefined, false],
    // The variable turns it on or off for any role.
    ["1", "server", true],
    ["0", "dev", false],
    [" 1 ", "hub", true],
    // Nonsense keeps the role's default rather than failing the start of a control plane.
    ["yes", "dev", true],
    ["2", "server", false]
  ]
  it.each(cases)("%j for %j → %j", (value, role, want) => {
    expect(BaselineTier.settingFrom(value, role)).toBe(want)
  })
})
