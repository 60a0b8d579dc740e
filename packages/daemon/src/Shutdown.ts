/**
 * Bounded shutdown for every role (issue 29 item 8). On SIGINT/SIGTERM a role stops gracefully
 * (`RoleRuntime`: the signal interrupts its main fiber, and its finalizers run: the server drains,
 * dev stops its pods, the agent and the box leave their containers for the next start); this
 * module makes sure that never takes longer than promised:
 *
 *   first SIGINT/SIGTERM ─▶ the role's graceful stop (pods get min(their grace, --shutdown-grace))
 *                        └▶ deadline: --shutdown-grace + 15 s ─▶ hard stop ─▶ exit 1
 *   second SIGINT/SIGTERM ─▶ hard stop now ─▶ exit 1
 *
 * The hard stop runs what the role registered (`onHardStop`: dev SIGKILLs every process of its
 * pods and their holders, `box/HardStop.ts`), synchronously, then the process exits: a process
 * that is stuck (a hung drain, a busy node thread, containers adopted after a crash) cannot keep
 * its workloads alive past the deadline. It is installed by `main.ts` before the role starts, so
 * its listeners run before the roles' own.
 */
import { Either } from "effect"

/** How long pods get to stop by default (Kubernetes' default terminationGracePeriodSeconds). */
export const defaultGraceMs = 30_000

/** What the deadline adds to the grace: time to drain the API and close the store once pods are gone. */
export const marginMs = 15_000

/** The flag's line in every role's help. */
export const usage = `
  --shutdown-grace DUR   the longest a pod gets to stop on SIGINT/SIGTERM (default 30s); the process
                         exits within that plus 15s whatever happens, and a second signal stops
                         at once (dev: every pod's processes and holders SIGKILLed first)`

let graceMs = defaultGraceMs
let received: NodeJS.Signals | undefined
const hardStops = new Set<() => void>()

/** The configured grace in milliseconds. */
export const grace = (): number => graceMs

/** The first SIGINT/SIGTERM this process received (after `install`), if any: what a role says it is stopping for. */
export const signalled = (): NodeJS.Signals | undefined => received

/** The deadline after the first signal, in milliseconds. */
export const deadline = (): number => graceMs + marginMs

/** Parse a duration as the server's flags take it (`30s`, `500ms`, `2m`, a bare number of seconds). */
export const parseDuration = (text: string): number | undefined => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim())
  if (m === null) return undefined
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? "s") as "ms" | "s" | "m" | "h"]
}

/** Take `--shutdown-grace` out of a role's arguments: the grace and the rest, or what is wrong. */
export const extractFlag = (args: ReadonlyArray<string>): Either.Either<{ readonly graceMs: number; readonly rest: ReadonlyArray<string> }, string> => {
  const rest: Array<string> = []
  let text: string | undefined
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === "--shutdown-grace") {
      text = args[++i] ?? ""
    } else if (a.startsWith("--shutdown-grace=")) text = a.slice("--shutdown-grace=".length)
    else rest.push(a)
  }
  if (text === undefined) return Either.right({ graceMs: defaultGraceMs, rest })
  const ms = parseDuration(text)
  return ms === undefined ? Either.left(`--shutdown-grace ${JSON.stringify(text)}: expected a duration such as 30s, 500ms or 2m`) : Either.right({ graceMs: ms, rest })
}

/** Set the grace (from the flag). */
export const configure = (ms: number): void => {
  graceMs = ms
}

/** Register what a hard stop must do before the process exits (synchronous); the returned function unregisters it. */
export const onHardStop = (stop: () => void): (() => void) => {
  hardStops.add(stop)
  return () => void hardStops.delete(stop)
}

const hardStop = (log: (line: string) => void) => {
  for (const stop of hardStops) {
    try {
      stop()
    } catch (e) {
      log(`hard stop: ${e instanceof Error ? e.message : String(e)}`)
    }
  }
}

/** Arm the deadline on the first SIGINT/SIGTERM and answer a second one with a hard stop (see the module comment). */
export const install = (role: string, log: (line: string) => void = (line) => console.error(`koder-fleet ${role}: ${line}`)): void => {
  let first = true
  const on = (signal: NodeJS.Signals) => {
    if (first) {
      first = false
      received = signal
      const timer = setTimeout(() => {
        log(`not stopped ${Math.round(deadline() / 1000)} s after ${signal} (--shutdown-grace ${Math.round(graceMs / 1000)}s + ${marginMs / 1000}s): killing what is left and exiting`)
        hardStop(log)
        process.exit(1)
      }, deadline())
      // The deadline never keeps a process alive that has finished stopping.
      timer.unref()
      return
    }
    log(`second ${signal}: killing what is left and exiting now`)
    hardStop(log)
    process.exit(1)
  }
  process.on("SIGINT", on)
  process.on("SIGTERM", on)
}
