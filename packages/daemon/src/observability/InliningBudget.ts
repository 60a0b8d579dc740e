/**
 * How much bytecode V8's optimizing compiler (TurboFan) may inline into one function it optimizes.
 * A Fleet process runs a large body of code (Effect's runtime, the API pipeline, the agent and the
 * box) that turns hot piece by piece: under a burst of work, `koder-fleet dev` optimized about
 * 1,500 functions over its first 20 seconds, and V8's compiler threads took 400–600 ms of CPU per
 * burst of 100 pod starts (a fifth of the machine on 2 cores), in competition with the work
 * itself. Deep Effect call chains make large inlined graphs that cost much to compile and gain
 * little. Fleet lowers V8's cumulative budget (920 bytes of bytecode) to 250: measured in the
 * agent benchmark (interleaved, 4 runs each), the compiler threads' CPU fell by about 30%, the
 * machine's by about 15%, and the first burst's p99 from about 830 to 630 ms, while a warm
 * process's main thread used no more CPU per burst than with V8's budget.
 *
 * `FLEET_V8_INLINING_BUDGET` changes it (0: V8's own). TurboFan reads the flag at each compile,
 * so it applies from the process's first optimization on, and to every thread of the process.
 */
import { setFlagsFromString } from "node:v8"

/** The default budget (bytes of bytecode inlined into one optimized function). */
export const DefaultBytes = 250

/** The budget from `FLEET_V8_INLINING_BUDGET`, or the default; undefined when it is 0 (V8 decides). */
export const bytesFrom = (value: string | undefined): number | undefined => {
  if (value === undefined || value.trim() === "") return DefaultBytes
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0) return DefaultBytes
  return n === 0 ? undefined : n
}

/** Apply the budget to this process (once, at start, before code turns hot). */
export const limit = (env: NodeJS.ProcessEnv = process.env): number | undefined => {
  const bytes = bytesFrom(env["FLEET_V8_INLINING_BUDGET"])
  if (bytes !== undefined) setFlagsFromString(`--max-inlined-bytecode-size-cumulative=${bytes}`)
  return bytes
}
