/**
 * How much TurboFan, V8's optimizing compiler, may inline into one function it optimizes. A Fleet
 * process runs a large body of code (Effect's runtime, the API pipeline, the agent and the box)
 * that turns hot piece by piece, most of it in a fresh process's first bursts of work, and V8's
 * helper threads compile it in competition with the work itself. Deep Effect call chains make
 * large inlined graphs that cost much to compile and gain little.
 *
 * `koder-fleet dev`, where the compiler competes with the workloads for the same host, turns
 * TurboFan's inlining off: a lower cumulative budget already saved compiler CPU and shortened the
 * first burst, and no inlining saved more (the measurements: docs/performance.md, "V8: TurboFan
 * inlining"). The other roles keep V8's inlining until the API and scheduler benchmarks say
 * otherwise: their hot loops run for hours, not for a burst.
 *
 * `FLEET_V8_INLINING_BUDGET` sets a cumulative budget in bytes for any role, inlining on (0: V8's
 * own budget). TurboFan reads these flags at each compile, so they apply from the process's first
 * optimization on, and to every thread.
 */
import { setFlagsFromString } from "node:v8"
import * as V8Setting from "./V8Setting.js"

/** A role's inlining: off, a cumulative budget (bytes of bytecode inlined into one optimized function), or V8's own (undefined). */
export type Setting = "off" | number | undefined

/** dev's default. */
export const DevDefault: Setting = "off"

/** The setting for `role` from `FLEET_V8_INLINING_BUDGET`, else the role's default (dev's, or V8's for the others). */
export const settingFrom = (value: string | undefined, role: string | undefined): Setting => {
  const bytes = V8Setting.parse(value, -1)
  return bytes === -1 ? (role === "dev" ? DevDefault : undefined) : bytes
}

/** Apply the setting to this process (once, at start, before code turns hot). */
export const limit = (role: string | undefined, env: NodeJS.ProcessEnv = process.env): Setting => {
  const setting = settingFrom(env["FLEET_V8_INLINING_BUDGET"], role)
  if (setting === "off") setFlagsFromString("--no-turbo-inlining")
  else if (setting !== undefined) setFlagsFromString(`--max-inlined-bytecode-size-cumulative=${setting}`)
  return setting
}
