/**
 * The launcher: a small resident process the box keeps as a child to start the processes that
 * must outlive it (container shims, pod holders). Node's `spawn` forks the whole box, which costs
 * a few to tens of milliseconds under load and serialises every start on the event loop; forking
 * a small process costs a fraction of that. The box writes "<token> <arg> <file>" lines; what
 * the file started answers "<token> <fields...>" on the launcher's stdout, a pipe to the box.
 *
 * Two launchers speak this protocol:
 * - the native shim's (`fleet-shim launcher SH`, NativeShim.ts): starts one child per line,
 *   without a fork (`native/fleet-shim.c`'s spawn), which runs a native launch file as the same
 *   program again (a container's shim; a pod's holder, started in the pod's new namespaces) or
 *   hands an sh script to `SH`; it is the parent of what it starts and reaps it;
 * - `sh` (`launcherScript`, without the native shim): double-forks and sources the file there
 *   with `$1` the token and `$2` the arg (so the started process is nobody's child and never waits
 *   as a zombie for a launcher that has no reason to reap it; sourced, not run by a new `sh`, as
 *   an exec costs more than the fork).
 *
 * The launcher runs in a session (and process group) of its own, and so does everything it
 * starts: a Ctrl-C or a hang-up of the box's terminal never reaches a shim or a pod holder. If the
 * box dies, the launcher reads end of file and exits; what it started lives on.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createInterface } from "node:readline"

/**
 * The launcher's loop. Lines are "<token> <arg> <file>": the file is the rest of the line (a path
 * may hold spaces), `arg` a word without any (`-` for none).
 */
export const launcherScript = `while read -r token arg file; do
  ( (set -- "$token" "$arg"; . "$file") </dev/null 2>/dev/null &)
done
`

/** Quote a string for sh, whatever it holds (but NUL, which argv and env cannot hold). */
export const quote = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`

/** Starts scripts through a resident shell. */
export class Launcher {
  private child: ChildProcess | undefined
  private readonly pending = new Map<string, (fields: Array<string>) => void>()
  /** Tokens only pair an answer with its request on a private pipe: a counter will do. */
  private seq = 0

  /** `native`: the native shim's path, whose launcher hands what is not a native launch to `sh`. */
  constructor(
    private readonly sh: string,
    private readonly native?: string
  ) {}

  private ensure(): ChildProcess {
    if (this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null) return this.child
    const child = spawn(this.native ?? this.sh, this.native === undefined ? ["-c", launcherScript, "launcher"] : ["launcher", this.sh], {
      stdio: ["pipe", "pipe", "ignore"],
      // A session of its own, for the launcher and all it starts (see above).
      detached: true,
      // The started scripts set their whole environment themselves.
      env: {},
      cwd: "/"
    })
    child.stdin!.on("error", () => undefined)
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const [token, ...fields] = line.split(" ")
      const resolve = token === undefined ? undefined : this.pending.get(token)
      if (resolve) {
        this.pending.delete(token!)
        resolve(fields)
      }
    })
    child.once("exit", () => {
      if (this.child === child) this.child = undefined
    })
    // It must not keep the box alive on its own.
    child.unref()
    ;(child.stdout as unknown as { unref?: () => void }).unref?.()
    this.child = child
    return child
  }

  /**
   * Source `file` with `$1` a token and `$2` `arg`, detached; resolve with the fields it answered,
   * or `undefined` when it did not answer within `timeoutMs` (it failed before answering). `arg`
   * holds no whitespace.
   */
  run(file: string, arg = "-", timeoutMs = 10_000): Promise<Array<string> | undefined> {
    const token = `t${(this.seq++).toString(36)}`
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(token)
        resolve(undefined)
      }, timeoutMs)
      this.pending.set(token, (fields) => {
        clearTimeout(timer)
        resolve(fields)
      })
      this.ensure().stdin!.write(`${token} ${arg} ${file}\n`)
    })
  }

  /** Stop the launcher (what it started keeps running). */
  close(): void {
    this.child?.stdin?.end()
    this.child = undefined
  }
}
