/**
 * The audit log (DESIGN §10): one JSON line per mutating request (time, user, groups, verb,
 * resource, namespace, name, response code, latency, client; `impersonatedUser` when the caller
 * acted as another user, `user` and `groups` being the caller's), appended to a file in the data dir
 * and rotated by size (`audit.log` → `audit.log.1` → … up to `maxBackups`). Records carry no
 * request or response bodies, so no secret value can reach the log.
 */
import type { ApiServer } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { closeSync, existsSync, fstatSync, openSync, renameSync, rmSync, writeSync } from "node:fs"
import { ConfigError, describe } from "../DaemonError.js"

/** Where and how much. */
export interface Options {
  readonly file: string
  /** Rotate when the file would grow beyond this (default 100 MiB). */
  readonly maxBytes: number
  /** Rotated files kept (default 5). */
  readonly maxBackups: number
}

/** A sink for `ApiServer`'s audit records, closed with its scope. */
export const make = (options: Options): Effect.Effect<(record: ApiServer.AuditRecord) => void, ConfigError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        let fd = openSync(options.file, "a", 0o600)
        let size = fstatSync(fd).size
        const rotate = () => {
          closeSync(fd)
          rmSync(`${options.file}.${options.maxBackups}`, { force: true })
          for (let i = options.maxBackups - 1; i >= 1; i--) {
            if (existsSync(`${options.file}.${i}`)) renameSync(`${options.file}.${i}`, `${options.file}.${i + 1}`)
          }
          if (options.maxBackups > 0) renameSync(options.file, `${options.file}.1`)
          else rmSync(options.file, { force: true })
          fd = openSync(options.file, "a", 0o600)
          size = 0
        }
        const write = (record: ApiServer.AuditRecord) => {
          const line = `${JSON.stringify(record)}\n`
          const bytes = Buffer.byteLength(line)
          try {
            if (size > 0 && size + bytes > options.maxBytes) rotate()
            writeSync(fd, line)
            size += bytes
          } catch (e) {
            // The request has been answered; losing its audit line is reported, never fatal.
            console.error(`koder-fleet server: audit log: ${describe(e)}`)
          }
        }
        return { write, close: () => closeSync(fd) }
      },
      catch: (e) => new ConfigError({ message: `audit log ${options.file}: ${describe(e)}` })
    }),
    (log) => Effect.sync(() => log.close())
  ).pipe(Effect.map((log) => log.write))
