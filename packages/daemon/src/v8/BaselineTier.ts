/**
 * Whether a function is compiled by Sparkplug, V8's baseline compiler, at its first call rather
 * than after a while in the interpreter. Sparkplug translates bytecode to machine code in one pass
 * on the calling thread, with no optimization and next to no compile time; its code does what the
 * bytecode does without the interpreter's dispatch of each instruction.
 *
 * A fresh `koder-fleet dev` meets its first burst of work with nearly all of its code cold: the API
 * pipeline, Effect's runtime, the agent and the box each run a few hundred times in that burst,
 * mostly interpreted, while TurboFan (see InliningBudget) has yet to pick them up. Compiling them
 * at once makes that first burst faster for a little more memory at rest (the measurements:
 * docs/performance.md, "V8: Sparkplug at first call").
 *
 * dev turns it on; the other roles keep V8's tiering, whose hot paths have hours to warm up.
 * `FLEET_V8_ALWAYS_SPARKPLUG=1` (or `0`) turns it on (off) for any role. V8 reads the flag when it
 * compiles a function, so it applies to every function first called after the start, on every
 * thread.
 */
import { setFlagsFromString } from "node:v8"

/** Whether functions start in Sparkplug code (true) or V8 decides (false). */
export type Setting = boolean

/** dev's default. */
export const DevDefault: Setting = true

/** The setting for `role` from `FLEET_V8_ALWAYS_SPARKPLUG`, else the role's default (on for dev only). */
export const settingFrom = (value: string | undefined, role: string | undefined): Setting => {
  const v = value?.trim()
  if (v === "1") return true
  if (v === "0") return false
  // Unset or nonsense: the role's default, rather than failing a process's start.
  return role === "dev" ? DevDefault : false
}

/** Apply the setting to this process (once, at start, before code is first called). */
export const apply = (role: string | undefined, env: NodeJS.ProcessEnv = process.env): Setting => {
  const setting = settingFrom(env["FLEET_V8_ALWAYS_SPARKPLUG"], role)
  if (setting) setFlagsFromString("--always-sparkplug")
  return setting
}
