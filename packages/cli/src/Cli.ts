/**
 * The seam between commander and the commands: each `commands/*.ts` module registers its verbs on
 * the program and, when one runs, asks `act` for a `Session` (connected as the global flags say)
 * and returns an Effect; `act` runs it and turns failures into one line and an exit code.
 */
import type { Command } from "commander"
import { Effect } from "effect"
import type { Client } from "@koder/fleet-core"
import * as Run from "./Run.js"
import type { ResourceInfo } from "./Resources.js"

/** What a command module gets. */
export interface Env {
  readonly t: Run.Terminal
  /** Run `f` against a connected session. */
  readonly act: (command: Command, f: (s: Run.Session, t: Run.Terminal) => Effect.Effect<unknown, unknown>) => Promise<void>
  /** Run `f` without a connection (config, completion). */
  readonly local: (f: (t: Run.Terminal) => Effect.Effect<unknown, unknown>) => Promise<void>
}

/**
 * An Env writing to `t` and reporting each command's exit code to `exit` (the real process sets
 * `process.exitCode`; tests record it). `signal` interrupts a running command.
 */
export const env = (t: Run.Terminal = Run.terminal(), exit: (code: number) => void = (code) => void (process.exitCode = code), signal?: AbortSignal): Env => ({
  t,
  act: async (command, f) => {
    let s: Run.Session
    try {
      s = Run.session(command.optsWithGlobals() as Run.Globals, t)
    } catch (e) {
      return exit(await Run.run(t, Effect.fail(e)))
    }
    exit(await Run.run(t, Effect.suspend(() => f(s, t)), () => s.conn.close(), signal))
  },
  local: async (f) => exit(await Run.run(t, Effect.suspend(() => f(t)), undefined, signal))
})

/** A ResourceRef for the typed client. */
export const refOf = (r: ResourceInfo): Client.ResourceRef => ({ apiVersion: r.apiVersion, plural: r.plural, namespaced: r.namespaced })

/** Examples block for `--help`, kubectl-style. */
export const examples = (command: Command, lines: string): Command =>
  command.addHelpText("after", `\nExamples:\n${lines.replace(/^\n/, "").replace(/\s+$/, "")}\n`)

/** Commander's collector for a repeatable option. */
export const collect = (value: string, previous: ReadonlyArray<string> = []): Array<string> => [...previous, value]

type Json = Record<string, unknown>

/** `obj` of unknown JSON. */
export const obj = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {})
/** `arr` of unknown JSON. */
export const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])
/** An object's metadata. */
export const meta = (o: unknown): Json => obj(obj(o)["metadata"])
/** A string field, or "". */
export const str = (v: unknown): string => (v === undefined || v === null ? "" : String(v))
