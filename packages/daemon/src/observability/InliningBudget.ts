/**
 * How much bytecode V8's optimizing compiler (TurboFan) may inline into one function it optimizes.
 * A Fleet process runs a large body of code (Effect's runtime, the API pipeline, the agent and the
 * box) that turns hot piece by piece: under bursts of work, `koder-fleet dev` optimized about
 * 1,400 functions, most in its first 20 seconds, and V8's helper threads took 420–720 ms of CPU
 * per burst of 100 pod starts (about a sixth of a 2-core machine; perf: four fifths of it
 * compiling), in competition with the work itself. Deep Effect call chains make large inlined graphs that cost much to compile and gain
 * little. `koder-fleet dev`, where the compiler competes with the workloads for the same host,
 * lowers V8's cumulative budget (920 bytes of bytecode) to 250. In the agent benchmark on a 2-core
 * VM, two interleaved A/Bs of 3–4 runs a side (the flag on the command line, then set here) measured
 * V8's helper threads at 30% and 12% less CPU, the machine at 15% and 4% less, and the first
 * burst's p99 at about 20% and 8% lower; a warm process's main thread used no more CPU per burst.
 * The other roles keep V8's budget until the API and scheduler benchmarks say otherwise: their
 * hot loops run for hours, not for a burst.
 *
 * `FLEET_V8_INLINING_BUDGET` sets it for any role (0: V8's own). TurboFan reads the flag at each
 * compile, so it applies from the process's first optimization on, and to every thread.
 */
import { setFlagsFromString } from "node:v8"
import * as V8Setting from "../internal/v8Setting.js"

/** The default budget (bytes of bytecode inlined into one optimized function). */
export const DefaultBytes = 250

/**
 * The budget for `role` from `FLEET_V8_INLINING_BUDGET`, else the role's default (dev's, or V8's
 * for the others); undefined when V8 decides (0, or no default).
 */
export const bytesFrom = (value: string | undefined, role: string | undefined): number | undefined =>
  V8Setting.parse(value, role === "dev" ? DefaultBytes : undefined)

/** Apply the budget to this process (once, at start, before code turns hot). */
export const limit = (role: string | undefined, env: NodeJS.ProcessEnv = process.env): number | undefined => {
  const bytes = bytesFrom(env["FLEET_V8_INLINING_BUDGET"], role)
  if (bytes !== undefined) setFlagsFromString(`--max-inlined-bytecode-size-cumulative=${bytes}`)
  return bytes
}
