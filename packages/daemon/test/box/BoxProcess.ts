/**
 * Test fixture: a real `koder-fleet box` child process on a real socket, and a real kbox-client
 * talking to it. No mocks: what the agent runs against.
 */
import type { Runtime } from "@koder/fleet-core"
import { KboxClient } from "@koder/fleet-kbox-client"
import { Effect, Exit, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync, readdirSync, readlinkSync } from "node:fs"
import { fileURLToPath } from "node:url"

const main = fileURLToPath(new URL("../../src/main.ts", import.meta.url))

/** A running box process. */
export interface BoxProcess {
  readonly child: ChildProcess
  readonly socketPath: string
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<number | string>
  /** SIGTERM (or `signal`) and wait for the exit. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | string>
}

/** Poll `check` until it returns something truthy or `ms` pass. */
export const eventually = async <A>(
  check: () => A | undefined | false | Promise<A | undefined | false>,
  ms = 10_000,
  what = "condition"
): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v !== undefined && v !== false) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** Start `koder-fleet box` and wait for its serving line. */
export const startBox = async (args: ReadonlyArray<string>): Promise<BoxProcess> => {
  const child = spawn(process.execPath, ["--conditions=@koder/source", "--import", "tsx", main, "box", ...args], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()))
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? -1))
  )
  let gone: number | string | undefined
  void exited.then((c) => (gone = c))
  const m = await eventually(
    () => {
      if (gone !== undefined) throw new Error(`box exited (${gone}) before serving:\n${out}\n${err}`)
      return /serving the kbox API on (\S+) /.exec(out) ?? undefined
    },
    30_000,
    "the serving line"
  )
  return {
    child,
    socketPath: m[1]!,
    stdout: () => out,
    stderr: () => err,
    exited,
    stop: async (signal = "SIGTERM") => {
      if (gone === undefined) child.kill(signal)
      return exited
    }
  }
}

/** A kbox client and a promise-returning runner for its effects. */
export interface Client {
  readonly rt: Runtime.RuntimeService
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  /** Run and return the failure (the test expects one). */
  readonly fail: <A, E>(effect: Effect.Effect<A, E>) => Promise<E>
  readonly close: () => Promise<void>
}

/** Connect a kbox-client to a socket. */
export const connect = async (socketPath: string): Promise<Client> => {
  const scope = Effect.runSync(Scope.make())
  const rt = await Effect.runPromise(Scope.extend(KboxClient.make({ socketPath }), scope))
  return {
    rt,
    run: (effect) => Effect.runPromise(effect),
    fail: async (effect) => {
      const exit = await Effect.runPromiseExit(effect)
      if (Exit.isSuccess(exit)) throw new Error(`expected a failure, got ${JSON.stringify(exit.value)}`)
      if (exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit.cause)}`)
      return exit.cause.error
    },
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** Live processes whose command line contains `marker` (a unique word the test put in argv). */
export const processesWith = (marker: string): Array<number> => {
  const out: Array<number> = []
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8")
      const stat = readFileSync(`/proc/${name}/stat`, "utf8")
      if (cmd.includes(marker) && !/\) Z /.test(stat)) out.push(Number(name))
    } catch {
      // gone
    }
  }
  return out
}

/** Is this pid a live (non-zombie) process? */
export const alive = (pid: number): boolean => {
  try {
    return !/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return false
  }
}

/** A unique word to find a test's processes by. */
export const marker = (name: string) => `kboxtest-${name}-${Math.random().toString(36).slice(2, 8)}`

/** The spec of a sandbox for a pod. */
export const podSpec = (name: string, labels: Record<string, string> = {}): Runtime.SandboxSpec => ({
  podUid: `uid-${name}-${Math.random().toString(36).slice(2, 8)}`,
  name,
  namespace: "default",
  network: "host",
  labels
})

/** The spec of a container running a shell script, with `mark` as the script's $0 (to find it in /proc). */
export const shSpec = (
  sandboxId: string,
  name: string,
  script: string,
  mark: string,
  extra: Partial<Runtime.ContainerSpec> = {}
): Runtime.ContainerSpec => ({
  sandboxId,
  name,
  attempt: 0,
  command: ["sh", "-c", script, mark],
  ...extra
})

/** Is this pid a container shim (the supervisor outside the container)? */
/**
 * The pid 1 of `pid`'s pid namespace (its pod's holder), as the host sees it: the process in the
 * same namespace whose innermost pid is 1.
 */
export const holderOf = (pid: number): number | undefined => {
  const ns = (p: number | string) => {
    try {
      return readlinkSync(`/proc/${p}/ns/pid`)
    } catch {
      return undefined
    }
  }
  const target = ns(pid)
  if (target === undefined) return undefined
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || ns(name) !== target) continue
    try {
      const nspid = /^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${name}/status`, "utf8"))?.[1]?.trim().split(/\s+/)
      if (nspid !== undefined && nspid.length > 1 && nspid.at(-1) === "1") return Number(name)
    } catch {
      // gone
    }
  }
  return undefined
}

export const isShim = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("\0shim\0")
  } catch {
    return false
  }
}
