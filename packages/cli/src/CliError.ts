/**
 * The CLI's own failures (bad flags, unreadable files, a rollout that stalled). Server errors stay
 * core's `ApiError`; `Run.ts` prints either as one line and exits non-zero.
 */
import { Data } from "effect"

/** A failure to report as one line, with the process exit code (1 unless said). */
export class CliError extends Data.TaggedError("CliError")<{ readonly message: string; readonly exitCode?: number }> {}

/** A usage error: wrong arguments (exit code 2? kubectl uses 1; so do we, but says how to get help). */
export const usage = (message: string, command?: string): CliError =>
  new CliError({ message: command === undefined ? message : `${message}\nSee 'kfleet ${command} --help' for usage.` })
