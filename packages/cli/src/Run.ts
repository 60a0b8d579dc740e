/**
 * What every command runs in: the global flags (`--kubeconfig`, `--context`, `-n`, `--server`,
 * `--token`), the terminal (colours and spinners only on a TTY, and never with `NO_COLOR`), and
 * the runner that turns a command's Effect into an exit code — a failure is one line on stderr
 * (`error: <the Status message>`), exit code 1, as kubectl's.
 */
import { readFileSync } from "node:fs"
import { ApiError } from "@koder/fleet-core"
import { Cause, Effect, Exit, Option } from "effect"
import pc from "picocolors"
import { CliError } from "./CliError.js"
import * as Connection from "./Connection.js"
import * as Kubeconfig from "./Kubeconfig.js"
import * as Resources from "./Resources.js"

/** Global flags (commander's option names). */
export interface Globals {
  readonly kubeconfig?: string
  readonly context?: string
  readonly namespace?: string
  readonly server?: string
  readonly token?: string
  readonly insecureSkipTlsVerify?: boolean
}

/** The terminal a command writes to. */
export interface Terminal {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
  /** Standard output is a terminal: colours, spinners and progress redraws are allowed. */
  readonly tty: boolean
  readonly bold: (s: string) => string
  readonly green: (s: string) => string
  readonly red: (s: string) => string
  readonly yellow: (s: string) => string
  readonly dim: (s: string) => string
  /** Standard input, read to the end (`apply -f -`). */
  readonly stdin: () => string
}

/** The process's terminal. */
export const terminal = (): Terminal => {
  const tty = process.stdout.isTTY === true && process.env["NO_COLOR"] === undefined && process.env["TERM"] !== "dumb"
  const c = pc.createColors(tty)
  return {
    out: (t) => void process.stdout.write(t),
    err: (t) => void process.stderr.write(t),
    tty,
    bold: c.bold,
    green: c.green,
    red: c.red,
    yellow: c.yellow,
    dim: c.dim,
    stdin: () => readFileSync(0, "utf8")
  }
}

/** A spinner on a TTY (redrawn in place); nothing otherwise. */
export const spinner = (t: Terminal) => {
  const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
  let text = ""
  let i = 0
  const timer = t.tty
    ? setInterval(() => {
        i = (i + 1) % frames.length
        t.err(`\r\x1b[2K${t.dim(frames[i]!)} ${text}`)
      }, 100)
    : undefined
  timer?.unref()
  return {
    update: (s: string) => void (text = s),
    stop: () => {
      if (timer !== undefined) {
        clearInterval(timer)
        t.err("\r\x1b[2K")
      }
    }
  }
}

/** Everything a command needs about where it talks to. */
export interface Session {
  readonly conn: Connection.Connection
  readonly namespace: string
  /** `-n` was given explicitly. */
  readonly explicitNamespace: boolean
  readonly resources: () => Effect.Effect<ReadonlyArray<Resources.ResourceInfo>, ApiError.ApiError>
}

/**
 * Prints each server warning once per command as kubectl does (`Warning: <text>` on stderr;
 * repeats, e.g. the same deprecation for every object applied, are dropped).
 */
export const warningWriter = (t: Terminal): ((text: string) => void) => {
  const seen = new Set<string>()
  return (text) => {
    if (seen.has(text)) return
    seen.add(text)
    t.err(`${t.yellow("Warning:")} ${text}\n`)
  }
}

/** Connect as the flags and the kubeconfig say; server warnings go to `t`'s stderr. */
export const session = (g: Globals, t?: Terminal): Session => {
  const config = Kubeconfig.load(g.kubeconfig)
  const target = Kubeconfig.resolve(config, {
    kubeconfig: g.kubeconfig,
    context: g.context,
    namespace: g.namespace,
    server: g.server,
    token: g.token,
    insecureSkipTlsVerify: g.insecureSkipTlsVerify
  })
  const conn = Connection.make(target, t === undefined ? {} : { onWarning: warningWriter(t) })
  let cached: ReadonlyArray<Resources.ResourceInfo> | undefined
  return {
    conn,
    namespace: target.namespace,
    explicitNamespace: g.namespace !== undefined,
    resources: () => (cached !== undefined ? Effect.succeed(cached) : Effect.tap(Resources.discover(conn), (r) => Effect.sync(() => (cached = r))))
  }
}

/** The one line a failure prints. */
export const describeFailure = (e: unknown): { readonly message: string; readonly exitCode: number } => {
  if (e instanceof ApiError.ApiError) return { message: e.message, exitCode: 1 }
  if (e instanceof CliError) return { message: e.message, exitCode: e.exitCode ?? 1 }
  if (e instanceof Error) return { message: e.message, exitCode: 1 }
  return { message: String(e), exitCode: 1 }
}

/**
 * Run a command's Effect; print a failure as one line; answer the exit code. `signal` interrupts
 * it (a test ending `logs -f`).
 */
export const run = async (t: Terminal, program: Effect.Effect<unknown, unknown>, close?: () => Promise<void>, signal?: AbortSignal): Promise<number> => {
  const exit = await Effect.runPromiseExit(program, signal === undefined ? undefined : { signal })
  await close?.().catch(() => undefined)
  if (Exit.isSuccess(exit)) return 0
  if (Cause.isInterruptedOnly(exit.cause)) return signal?.aborted ? 0 : 130
  const failure = Option.getOrElse(Cause.failureOption(exit.cause), () => Cause.squash(exit.cause))
  const { message, exitCode } = describeFailure(failure)
  if (message !== "") t.err(`${t.red("error:")} ${message}\n`)
  return exitCode
}
