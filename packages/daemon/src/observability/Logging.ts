/**
 * The daemon's log stream: Effect's logger replaced by one that writes a line per record to
 * stderr, as JSON (one object per line: time, level, msg, the record's annotations such as
 * `requestId`, the error) when stderr is not a terminal, or as readable text on a terminal.
 * stdout keeps the human banner (listening address, kubeconfig, one-time tokens).
 *
 *   Effect.log* (core and daemon) ─▶ minimum level ─▶ redact ─▶ JSON | text ─▶ stderr
 *
 * Flags, for every role: `--log-format json|text` and `--log-level debug|info|warn|error`
 * (default: json off a terminal, text on one; info). `main` takes them off the command line
 * before the role parses the rest (`extractFlags`) and the role runs under `provide`.
 *
 * With JSON, what roles still write with `console.error`/`console.warn` (start-up warnings, "draining")
 * becomes a JSON record at level warn too, so every line of stderr parses.
 *
 * Nothing secret is written: annotations whose names say they hold credentials are replaced, and
 * messages are scrubbed of bearer tokens, JWTs and join tokens, whatever code logged them.
 */
import { Cause, Effect, Either, type FiberId, HashMap, Layer, type List, Logger, LogLevel } from "effect"
import { format as formatArgs } from "node:util"

/** How the daemon logs. */
export interface Settings {
  readonly format: "json" | "text"
  readonly level: LogLevel.LogLevel
}

const levels: Readonly<Record<string, LogLevel.LogLevel>> = { debug: LogLevel.Debug, info: LogLevel.Info, warn: LogLevel.Warning, warning: LogLevel.Warning, error: LogLevel.Error }

/** The flags' help lines. */
export const usage = `
  --log-format json|text       the log stream on stderr (default: json, text on a terminal)
  --log-level LEVEL            debug, info, warn or error (default info)`

/** The defaults: text on a terminal, else JSON; info. */
export const defaults = (isTty: boolean = process.stderr.isTTY === true): Settings => ({ format: isTty ? "text" : "json", level: LogLevel.Info })

/** Take `--log-format` and `--log-level` off `args` (both `--flag v` and `--flag=v`). */
export const extractFlags = (args: ReadonlyArray<string>, base: Settings = defaults()): Either.Either<{ readonly settings: Settings; readonly rest: ReadonlyArray<string> }, string> => {
  const rest: Array<string> = []
  let format: string | undefined
  let level: string | undefined
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    const m = /^--(log-format|log-level)(?:=(.*))?$/.exec(a)
    if (m === null) {
      rest.push(a)
      continue
    }
    const value = m[2] ?? args[++i]
    if (value === undefined) return Either.left(`--${m[1]} needs a value`)
    if (m[1] === "log-format") format = value
    else level = value
  }
  if (format !== undefined && format !== "json" && format !== "text") return Either.left(`--log-format ${JSON.stringify(format)}: expected json or text`)
  const parsedLevel = level === undefined ? base.level : levels[level.toLowerCase()]
  if (parsedLevel === undefined) return Either.left(`--log-level ${JSON.stringify(level)}: expected debug, info, warn or error`)
  return Either.right({ settings: { format: (format as Settings["format"] | undefined) ?? base.format, level: parsedLevel }, rest })
}

// Credentials by shape: `Bearer x`, JWTs (ServiceAccount and OIDC tokens), join tokens `<id6>.<secret32>`.
const bearer = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi
const jwt = /\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g
const joinToken = /\b[a-z0-9]{6}\.[a-z0-9]{32}\b/g
const secretKey = /token|password|passwd|secret|authorization|credential|cookie|private/i

/** Scrub credentials out of a text. */
export const redact = (text: string): string =>
  text.replace(bearer, "$1 <redacted>").replace(jwt, "<redacted-jwt>").replace(joinToken, "<redacted-join-token>")

const render = (value: unknown): unknown => {
  if (typeof value === "string") return redact(value)
  if (value instanceof Error) return redact(value.message)
  if (typeof value === "object" && value !== null) {
    try {
      return JSON.parse(redact(JSON.stringify(value))) as unknown
    } catch {
      return redact(String(value))
    }
  }
  return value
}

const messageText = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return redact(parts.map((p) => (typeof p === "string" ? p : p instanceof Error ? p.message : JSON.stringify(p))).join(" "))
}

const levelName = (level: LogLevel.LogLevel): string => (level._tag === "Warning" ? "warn" : level.label.toLowerCase())

/** One record as a JSON object (what `--log-format json` writes). */
export const toJson = (record: {
  readonly date: Date
  readonly logLevel: LogLevel.LogLevel
  readonly message: unknown
  readonly annotations: HashMap.HashMap<string, unknown>
  readonly cause: Cause.Cause<unknown>
  readonly fiberId: FiberId.FiberId
  readonly spans: List.List<{ readonly label: string; readonly startTime: number }>
}): Record<string, unknown> => {
  const out: Record<string, unknown> = { time: record.date.toISOString(), level: levelName(record.logLevel), msg: messageText(record.message) }
  for (const [k, v] of HashMap.toEntries(record.annotations)) out[k] = secretKey.test(k) ? "<redacted>" : render(v)
  if (!Cause.isEmpty(record.cause)) out["error"] = redact(Cause.pretty(record.cause))
  const now = record.date.getTime()
  for (const span of record.spans) out[`${span.label}Ms`] = now - span.startTime
  return out
}

const textValue = (v: unknown) => {
  const s = typeof v === "string" ? v : JSON.stringify(v)
  return /[\s"=]/.test(s) ? JSON.stringify(s) : s
}

/** A logger writing `settings.format` lines to `write` (default: stderr). */
export const make = (settings: Settings, write: (line: string) => void = (line) => void process.stderr.write(`${line}\n`)): Logger.Logger<unknown, void> =>
  Logger.make((options) => {
    const record = toJson(options)
    if (settings.format === "json") return write(JSON.stringify(record))
    const { time, level, msg, ...rest } = record
    const extra = Object.entries(rest)
      .map(([k, v]) => `${k}=${textValue(v)}`)
      .join(" ")
    write(`${String(time)} ${String(level).toUpperCase().padEnd(5)} ${String(msg)}${extra === "" ? "" : ` ${extra}`}`)
  })

/** Effect's default logger replaced, at `settings.level`. */
export const layer = (settings: Settings, write?: (line: string) => void): Layer.Layer<never> =>
  Layer.merge(Logger.replace(Logger.defaultLogger, make(settings, write)), Logger.minimumLogLevel(settings.level))

let current: Settings | undefined

/** The process's settings, when main has set them (a worker thread is given them). */
export const settings = (): Settings | undefined => current

/** Set the process's settings (main does, from the command line). */
export const configure = (settings: Settings): void => {
  current = settings
}

/**
 * Run a role's program with the process's log settings: Effect's logger replaced and, with JSON,
 * the console's error stream captured while it runs (flag errors before it and the exit reason
 * after it stay plain text for whoever reads the terminal or the unit's status).
 */
export const provide = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const settings = current ?? defaults()
  return Effect.acquireUseRelease(
    Effect.sync(() => captureConsole(settings)),
    () => Effect.provide(effect, layer(settings)),
    (restore) => Effect.sync(restore)
  )
}

/**
 * With JSON, make `console.error` and `console.warn` write JSON records (level warn), redacted;
 * answers a function that puts them back.
 */
export const captureConsole = (settings: Settings, write: (line: string) => void = (line) => void process.stderr.write(`${line}\n`)): (() => void) => {
  if (settings.format !== "json") return () => {}
  const saved = { error: console.error, warn: console.warn }
  const asRecord = (...args: ReadonlyArray<unknown>) => write(JSON.stringify({ time: new Date().toISOString(), level: "warn", msg: redact(formatArgs(...args)) }))
  console.error = asRecord
  console.warn = asRecord
  return () => {
    console.error = saved.error
    console.warn = saved.warn
  }
}
