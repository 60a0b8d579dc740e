/** `--shim auto|sh` on `koder-fleet box` and `koder-fleet dev`: the default, the choice, a clear error. */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Box from "../../src/box/Box.js"
import * as Dev from "../../src/Dev.js"

describe("--shim", () => {
  it.each([
    { args: [], shim: "auto" },
    { args: ["--shim", "auto"], shim: "auto" },
    { args: ["--shim", "sh"], shim: "sh" },
    { args: ["--shim=sh"], shim: "sh" }
  ])("box $args → $shim", ({ args, shim }) => {
    const config = Box.parseFlags(["--data-dir", "/tmp/x", ...args])
    if (typeof config === "string") throw new Error(config)
    expect(config.shim).toBe(shim)
  })

  it("box: anything else is refused, naming the flag and the choices", () => {
    expect(Box.parseFlags(["--shim", "native"])).toBe('--shim "native": expected auto or sh')
  })

  it.each([
    { args: [], shim: "auto" },
    { args: ["--shim", "sh"], shim: "sh" },
    { args: ["--shim=auto"], shim: "auto" }
  ])("dev $args → $shim", ({ args, shim }) => {
    const config = Dev.parseFlags(["--data-dir", "/tmp/x", ...args], {})
    if (Either.isLeft(config)) throw new Error(config.left.message)
    expect(config.right.shim).toBe(shim)
  })

  it("dev: anything else is refused", () => {
    const config = Dev.parseFlags(["--shim", "bash"], {})
    expect(Either.isLeft(config) && config.left.message).toBe('--shim "bash": expected auto or sh')
  })
})
