import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as AgentRole from "../../src/agent/AgentRole.js"

describe("koder-fleet agent --network-policy-strict", () => {
  it.each([
    [["--server", "https://10.0.0.1:9300"], false],
    [["--server", "https://10.0.0.1:9300", "--network-policy-strict"], true]
  ])("%j → strict %s", (args, strict) => {
    const parsed = AgentRole.parseFlags(args, {})
    expect(Either.isRight(parsed) && parsed.right.networkPolicyStrict).toBe(strict)
  })

  it("is a switch, not a value", () => {
    expect(Either.isLeft(AgentRole.parseFlags(["--server", "https://x", "--network-policy-strict=yes"], {}))).toBe(true)
    expect(AgentRole.usage).toContain("--network-policy-strict")
  })
})
