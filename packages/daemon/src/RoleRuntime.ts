/**
 * How a role runs: its program is the main fiber of `NodeRuntime.runMain`, on the time-sliced
 * fiber scheduler (`v8/EventLoopScheduler`, provided as a Layer). SIGINT/SIGTERM interrupt that
 * fiber, so the role stops through its finalizers (`Shutdown` bounds how long that may take), and
 * the process's exit code comes from the fiber's Exit:
 *
 *   success, or interrupted by a signal ─▶ 0
 *   RoleExit(code) (the role has said why) ─▶ code        any other failure or defect ─▶ 1
 *
 * The process always exits once the fiber is done: a stopped role must not linger on a stray handle.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Option } from "effect"
import { RoleExit } from "./DaemonError.js"
import * as EventLoopScheduler from "./v8/EventLoopScheduler.js"

/** The exit code for a role's Exit (see the module comment). */
export const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit)) return 0
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure) && failure.value instanceof RoleExit) return failure.value.code
  return Cause.isInterruptedOnly(exit.cause) ? 0 : 1
}

/**
 * A role's failure printed as `koder-fleet <role>: <message>` (a failure's `message`, else the
 * pretty cause) and turned into `RoleExit(1)`; an interruption stays one.
 */
export const reportFailure =
  (role: string) =>
  <A, E extends { readonly message: string }, R>(program: Effect.Effect<A, E, R>): Effect.Effect<A, RoleExit, R> =>
    Effect.catchAllCause(program, (cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      const failure = Cause.failureOption(cause).pipe(Option.match({ onNone: () => Cause.pretty(cause), onSome: (e) => e.message }))
      console.error(`koder-fleet ${role}: ${failure}`)
      return Effect.fail(new RoleExit({ code: 1 }))
    })

/** Run `program` as this process's main fiber (see the module comment); the process exits when it ends. */
export const run = (program: Effect.Effect<void, RoleExit>): void =>
  NodeRuntime.runMain(Effect.provide(program, EventLoopScheduler.layer()), {
    // Each role prints its own failures, and its log lines go through `Logging`'s logger.
    disableErrorReporting: true,
    disablePrettyLogger: true,
    teardown: (exit) => process.exit(exitCode(exit))
  })
