import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as AgentRole from "../../src/agent/AgentRole.js"
import * as Dev from "../../src/Dev.js"

describe("--allow-unenforced-limits and dev's --cgroups", () => {
  it.each([
    [["--server", "https://10.0.0.1:9300"], false],
    [["--server", "https://10.0.0.1:9300", "--allow-unenforced-limits"], true]
  ])("agent %j → allow %s", (args, allow) => {
    const parsed = AgentRole.parseFlags(args, {})
    expect(Either.isRight(parsed) && parsed.right.allowUnenforcedLimits).toBe(allow)
    expect(AgentRole.usage).toContain("--allow-unenforced-limits")
  })

  it("dev: off and auto by default; the switch and --cgroups none taken, the rest left to the server", () => {
    const plain = Dev.parseFlags(["--data-dir", "/tmp/x"], {})
    expect(Either.isRight(plain) && [plain.right.allowUnenforcedLimits, plain.right.cgroups]).toEqual([false, "auto"])
    const set = Dev.parseFlags(["--data-dir", "/tmp/x", "--allow-unenforced-limits", "--cgroups", "none"], {})
    expect(Either.isRight(set) && [set.right.allowUnenforcedLimits, set.right.cgroups]).toEqual([true, "none"])
    expect(Dev.usage).toContain("--allow-unenforced-limits")
  })

  it("dev: refuses a --cgroups that is neither auto nor none, naming the flag", () => {
    const bad = Dev.parseFlags(["--data-dir", "/tmp/x", "--cgroups", "v2"], {})
    expect(Either.isLeft(bad) && bad.left.message).toBe('--cgroups "v2": expected auto or none')
  })
})
