import { Cause, Effect, Exit, FiberId } from "effect"
import { describe, expect, it } from "vitest"
import { RoleExit } from "../src/DaemonError.js"
import * as RoleRuntime from "../src/RoleRuntime.js"

describe("RoleRuntime.exitCode: a role's Exit → the process's exit code", () => {
  const interrupt = Cause.interrupt(FiberId.none)
  const cases: ReadonlyArray<readonly [string, Exit.Exit<unknown, unknown>, number]> = [
    ["success", Exit.void, 0],
    ["interrupted by a signal", Exit.failCause(interrupt), 0],
    ["bad flags", Exit.fail(new RoleExit({ code: 2 })), 2],
    ["a reported failure", Exit.fail(new RoleExit({ code: 1 })), 1],
    // The box finishes its own stop uninterruptibly: its code wins over the interruption.
    ["a code after an interruption", Exit.failCause(Cause.sequential(Cause.fail(new RoleExit({ code: 3 })), interrupt)), 3],
    ["any other failure", Exit.fail({ message: "boom" }), 1],
    ["a defect", Exit.die(new Error("bug")), 1],
    ["a defect while interrupted", Exit.failCause(Cause.sequential(interrupt, Cause.die(new Error("finalizer")))), 1]
  ]
  it.each(cases)("%s", (_, exit, code) => {
    expect(RoleRuntime.exitCode(exit)).toBe(code)
  })
})

describe("RoleRuntime.reportFailure", () => {
  const run = <E extends { readonly message: string }>(program: Effect.Effect<void, E>) => {
    const lines: Array<string> = []
    const error = console.error
    console.error = (line: string) => void lines.push(line)
    try {
      return { exit: Effect.runSyncExit(program.pipe(RoleRuntime.reportFailure("server"))), lines }
    } finally {
      console.error = error
    }
  }

  it("prints a failure's message as the role and turns it into exit code 1", () => {
    const { exit, lines } = run(Effect.fail({ message: "cannot listen on 127.0.0.1:1" }))
    expect(RoleRuntime.exitCode(exit)).toBe(1)
    expect(lines).toEqual(["koder-fleet server: cannot listen on 127.0.0.1:1"])
  })

  it("leaves an interruption alone: nothing printed, exit code 0", () => {
    const { exit, lines } = run(Effect.interrupt)
    expect(RoleRuntime.exitCode(exit)).toBe(0)
    expect(lines).toEqual([])
  })
})
