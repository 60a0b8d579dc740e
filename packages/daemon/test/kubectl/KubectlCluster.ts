/**
 * Test fixture of the kubectl suite: one real `koder-fleet dev` (API, controllers, scheduler, box
 * and agent; pods run as host processes) in a temporary data dir, and the real kubectl
 * (`/usr/bin/kubectl`, or `$KUBECTL`) pointed only at the kubeconfig that dev wrote: its HOME and
 * KUBECONFIG are the data dir's, so nothing in the user's ~/.kube is read or written.
 */
import { spawn as spawnProcess, type ChildProcess, type StdioOptions } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdir, mkdtemp, rm, writeFile as writeText } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

/** What one kubectl run printed and how it exited (-1: killed at its timeout). */
export interface KubectlResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Options of one kubectl run. */
export interface KubectlOptions {
  readonly stdin?: string | Uint8Array
  /** Kill kubectl after this long (default 30 s); the result then has code -1. */
  readonly timeoutMs?: number
  readonly env?: Readonly<Record<string, string>>
  readonly cwd?: string
}

/** Options of a long-running kubectl. */
export interface SpawnOptions {
  readonly env?: Readonly<Record<string, string>>
  /** Default: stdin ignored, stdout and stderr piped. */
  readonly stdio?: StdioOptions
}

/** A running dev cluster and kubectl bound to it. */
export interface KubectlCluster {
  /** The dev data dir. */
  readonly dir: string
  /** Path of the kubeconfig the dev process wrote. */
  readonly kubeconfig: string
  readonly fleet: FleetProcess
  /** Run kubectl --kubeconfig <kubeconfig> ...args; never throws on non-zero exit. */
  readonly kubectl: (args: ReadonlyArray<string>, options?: KubectlOptions) => Promise<KubectlResult>
  /** Like kubectl but throws (with stdout+stderr in the message) unless exit code 0; returns stdout. */
  readonly ok: (args: ReadonlyArray<string>, options?: KubectlOptions) => Promise<string>
  /** Start a long-running kubectl (port-forward, proxy, get -w, attach); killed by stop(). */
  readonly spawn: (args: ReadonlyArray<string>, options?: SpawnOptions) => ChildProcess
  /** Write `text` to `name` (a relative path, folders made) under the cluster's scratch folder; returns its absolute path. */
  readonly writeFile: (name: string, text: string) => Promise<string>
  /** Kill spawned kubectls, SIGTERM the dev process, remove the data dir. */
  readonly stop: () => Promise<void>
}

/** The kubectl the suite runs. */
export const kubectlPath: string = process.env["KUBECTL"] ?? "/usr/bin/kubectl"

/** Poll `check` until it returns something other than undefined/false, or fail after `ms`. */
export const poll = eventually

/** Poll a kubectl run until `accept` holds of its result; the error names the last output. */
export const pollKubectl = async (
  cluster: Pick<KubectlCluster, "kubectl">,
  args: ReadonlyArray<string>,
  accept: (r: KubectlResult) => boolean,
  ms = 20_000
): Promise<KubectlResult> => {
  let last: KubectlResult | undefined
  try {
    return await eventually(
      async () => {
        last = await cluster.kubectl(args, { timeoutMs: Math.min(ms, 20_000) })
        return accept(last) ? last : undefined
      },
      ms,
      `kubectl ${args.join(" ")}`
    )
  } catch (e) {
    throw new Error(`${(e as Error).message}; last run: ${describeResult(last)}`)
  }
}

// What each spawned kubectl printed since it started (filled by `spawn`).
const printed = new WeakMap<ChildProcess, { stdout: string; stderr: string }>()

/** Everything a kubectl started by `spawn` has printed so far. */
export const output = (child: ChildProcess): { readonly stdout: string; readonly stderr: string } => printed.get(child) ?? { stdout: "", stderr: "" }

/**
 * Wait until what a kubectl started by `spawn` printed since it started (stdout, or stderr with
 * `stream`) matches `pattern`; resolves with the match. Fails, naming its output, when the
 * process exits first or `ms` pass.
 */
export const waitForOutput = async (child: ChildProcess, pattern: RegExp, ms = 20_000, stream: "stdout" | "stderr" = "stdout"): Promise<RegExpExecArray> => {
  let exited: string | undefined
  // "close": its output streams are drained too, so nothing it printed is missed.
  const onExit = (code: number | null, signal: string | null) => (exited = String(code ?? signal))
  child.once("close", onExit)
  if (child.exitCode !== null || child.signalCode !== null) exited = String(child.exitCode ?? child.signalCode)
  try {
    return await eventually(
      () => {
        const m = pattern.exec(output(child)[stream])
        if (m !== null) return m
        if (exited !== undefined) throw new Error(`kubectl exited (${exited}) before printing ${pattern}`)
        return undefined
      },
      ms,
      `kubectl to print ${pattern}`
    )
  } catch (e) {
    const o = output(child)
    throw new Error(`${(e as Error).message}; stdout:\n${o.stdout}\nstderr:\n${o.stderr}`)
  } finally {
    child.off("close", onExit)
  }
}

const describeResult = (r: KubectlResult | undefined) => (r === undefined ? "none" : `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`)

// The suite tests kubectl against the API, not durability: on Linux the data dir goes to tmpfs.
const scratch = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()

// Several files each run their own dev at once: nothing may listen on a fixed port, and a test's
// dev stops quickly (its pods get at most 2 s).
const devFlags = [
  "--listen", "127.0.0.1:0",
  "--ingress-listen", "off",
  "--ingress-tls-listen", "off",
  "--dns-listen", "off",
  "--metrics-listen", "off",
  "--nodeport-address", "off",
  "--usage-interval", "1s",
  "--shutdown-grace", "2s"
]

/** Start `koder-fleet dev` in a temporary data dir (with `extraArgs`) and bind kubectl to it. */
export const startDev = async (extraArgs: ReadonlyArray<string> = []): Promise<KubectlCluster> => {
  const dir = await mkdtemp(join(scratch, "fleet-kubectl-"))
  const home = join(dir, "kubectl-home")
  await mkdir(home)
  const fleet = await start(["--data-dir", dir, "--node-name", "kubectl-node", ...devFlags, ...extraArgs], "dev", {}, 60_000).catch(async (e: unknown) => {
    await rm(dir, { recursive: true, force: true })
    throw e
  })
  const kubeconfig = fleet.kubeconfig
  const spawned = new Set<ChildProcess>()
  const environment = (env: Readonly<Record<string, string>> | undefined): NodeJS.ProcessEnv => ({ ...process.env, HOME: home, KUBECONFIG: kubeconfig, ...env })

  const kubectl = (args: ReadonlyArray<string>, options: KubectlOptions = {}) =>
    new Promise<KubectlResult>((resolve, reject) => {
      const child = spawnProcess(kubectlPath, ["--kubeconfig", kubeconfig, ...args], {
        env: environment(options.env),
        cwd: options.cwd ?? home,
        stdio: ["pipe", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      let timedOut = false
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
      const timer = setTimeout(() => {
        timedOut = true
        child.kill("SIGKILL")
      }, options.timeoutMs ?? 30_000)
      child.once("error", (e) => {
        clearTimeout(timer)
        reject(e)
      })
      child.once("close", (code) => {
        clearTimeout(timer)
        resolve({ code: timedOut ? -1 : (code ?? -1), stdout, stderr: timedOut ? `${stderr}\n(killed after ${options.timeoutMs ?? 30_000} ms)` : stderr })
      })
      // kubectl may exit before reading its input (a usage error): that is its answer, not ours.
      child.stdin.on("error", () => undefined)
      child.stdin.end(options.stdin)
    })

  const ok = async (args: ReadonlyArray<string>, options?: KubectlOptions) => {
    const r = await kubectl(args, options)
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${describeResult(r)}`)
    return r.stdout
  }

  const spawn = (args: ReadonlyArray<string>, options: SpawnOptions = {}) => {
    const child = spawnProcess(kubectlPath, ["--kubeconfig", kubeconfig, ...args], { env: environment(options.env), cwd: home, stdio: options.stdio ?? ["ignore", "pipe", "pipe"] })
    spawned.add(child)
    const record = { stdout: "", stderr: "" }
    printed.set(child, record)
    child.stdout?.on("data", (d: Buffer) => (record.stdout += d.toString()))
    child.stderr?.on("data", (d: Buffer) => (record.stderr += d.toString()))
    child.once("exit", () => spawned.delete(child))
    return child
  }

  const files = join(dir, "files")
  const writeFile = async (name: string, text: string) => {
    const path = join(files, name)
    await mkdir(dirname(path), { recursive: true })
    await writeText(path, text)
    return path
  }

  const stop = async () => {
    for (const child of spawned) child.kill("SIGKILL")
    if (fleet.child.exitCode === null && fleet.child.signalCode === null) {
      fleet.child.kill("SIGTERM")
      // Pods get 2 s (--shutdown-grace); past that and dev's own bound, it is killed.
      const late = setTimeout(() => fleet.child.kill("SIGKILL"), 20_000)
      await fleet.exited
      clearTimeout(late)
    }
    await rm(dir, { recursive: true, force: true })
  }

  return { dir, kubeconfig, fleet, kubectl, ok, spawn, writeFile, stop }
}
