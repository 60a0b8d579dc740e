/**
 * Test fixture for isolated network mode (root): simulated hosts as network namespaces on a test
 * bridge, `koder-fleet` roles started inside them, and a cleanup that leaves nothing behind —
 * even after a crashed earlier run. Every name carries a per-run id, and the run's owner pid is
 * recorded in /tmp, so leftovers of dead runs are told from a run in progress:
 *   netns  fltiso-<run>-<host>      links (root ns)  fi<run>br, fi<run>v<n>
 *   pods   hostname fltiso-<run>-…  (their holder's argv ends with it: found and killed by that)
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const main = fileURLToPath(new URL("../../src/main.ts", import.meta.url))

/** A run's names. */
export interface Run {
  readonly id: string
  readonly netns: (host: string) => string
  readonly bridge: string
  readonly veth: (n: number) => string
  /** A pod name (and hostname) cleanup can find. */
  readonly pod: (name: string) => string
}

const ownerFile = (id: string) => `/tmp/fltiso-${id}.owner`

const sh = (file: string, args: ReadonlyArray<string>) => execFileSync(file, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
const trySh = (file: string, args: ReadonlyArray<string>) => {
  try {
    return sh(file, args)
  } catch {
    return ""
  }
}

/** Start a run: names unique to it, and its owner recorded. */
export const newRun = (): Run => {
  const id = randomBytes(2).toString("hex")
  writeFileSync(ownerFile(id), String(process.pid))
  return {
    id,
    netns: (host) => `fltiso-${id}-${host}`,
    bridge: `fi${id}br`,
    veth: (n) => `fi${id}v${n}`,
    pod: (name) => `fltiso-${id}-${name}`
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const runIsLive = (id: string) => {
  const owner = Number(existsSync(ownerFile(id)) ? readFileSync(ownerFile(id), "utf8") : NaN)
  return Number.isInteger(owner) && owner !== process.pid && alive(owner)
}

/** Kill every process of a pod whose hostname starts with `prefix` (its holder, pid 1 of the pod, takes the rest). */
const killPods = (prefix: string) => {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue
    let argv: Array<string>
    try {
      argv = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0").filter((a) => a !== "")
    } catch {
      continue
    }
    if (argv.at(-2) === "holder" && argv.at(-1)?.startsWith(prefix)) trySh("kill", ["-9", d])
  }
}

/** Remove everything of run `id`: processes in its namespaces, its pods, namespaces and links. */
export const cleanupRun = (id: string): void => {
  for (const ns of trySh("ip", ["netns", "list"]).split("\n").map((l) => l.split(" ")[0] ?? "")) {
    if (!ns.startsWith(`fltiso-${id}-`)) continue
    for (const pid of trySh("ip", ["netns", "pids", ns]).split("\n").filter((p) => p !== "")) trySh("kill", ["-9", pid])
  }
  killPods(`fltiso-${id}-`)
  for (const ns of trySh("ip", ["netns", "list"]).split("\n").map((l) => l.split(" ")[0] ?? "")) if (ns.startsWith(`fltiso-${id}-`)) trySh("ip", ["netns", "del", ns])
  for (const line of trySh("ip", ["-o", "link", "show"]).split("\n")) {
    const name = /^\d+: ([^:@]+)/.exec(line)?.[1]
    if (name !== undefined && name.startsWith(`fi${id}`)) trySh("ip", ["link", "del", name])
  }
  rmSync(ownerFile(id), { force: true })
}

/** Remove what crashed earlier runs left (runs whose owner is gone). */
export const cleanupLeftovers = (): void => {
  const ids = new Set<string>()
  for (const ns of trySh("ip", ["netns", "list"]).split("\n")) {
    const m = /^fltiso-([0-9a-f]{4})-/.exec(ns)
    if (m) ids.add(m[1]!)
  }
  for (const line of trySh("ip", ["-o", "link", "show"]).split("\n")) {
    const m = /^\d+: fi([0-9a-f]{4})(?:br|v\d)/.exec(line)
    if (m) ids.add(m[1]!)
  }
  for (const f of readdirSync("/tmp")) {
    const m = /^fltiso-([0-9a-f]{4})\.owner$/.exec(f)
    if (m) ids.add(m[1]!)
  }
  for (const id of ids) if (!runIsLive(id)) cleanupRun(id)
}

/** The test bridge in the root namespace, with `address` (CIDR) for the server. */
export const createBridge = (run: Run, address: string): void => {
  sh("ip", ["link", "add", run.bridge, "type", "bridge"])
  sh("ip", ["addr", "add", address, "dev", run.bridge])
  sh("ip", ["link", "set", run.bridge, "up"])
}

/** A bare simulated host: a network namespace with its loopback up. */
export const createNetns = (run: Run, host: string): string => {
  const ns = run.netns(host)
  sh("ip", ["netns", "add", ns])
  sh("ip", ["-n", ns, "link", "set", "lo", "up"])
  return ns
}

/** A simulated host: a netns linked to the test bridge by a veth (`eth0` inside, `address` on it). */
export const createHost = (run: Run, host: string, n: number, address: string): string => {
  const ns = run.netns(host)
  sh("ip", ["netns", "add", ns])
  sh("ip", ["link", "add", run.veth(n), "type", "veth", "peer", "name", "eth0", "netns", ns])
  sh("ip", ["link", "set", run.veth(n), "master", run.bridge, "up"])
  sh("ip", ["-n", ns, "addr", "add", address, "dev", "eth0"])
  sh("ip", ["-n", ns, "link", "set", "eth0", "up"])
  sh("ip", ["-n", ns, "link", "set", "lo", "up"])
  return ns
}

/** A `koder-fleet` process in a network namespace, its output kept. */
export interface InNetns {
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<number | string>
  /** Resolves once stdout matches `pattern` (rejects if the process exits first or after `ms`). */
  readonly waitFor: (pattern: RegExp, ms?: number) => Promise<RegExpExecArray>
}

/** Start `koder-fleet <role> ...args` inside network namespace `ns` (`ip netns exec`). */
export const spawnIn = (ns: string, role: string, args: ReadonlyArray<string>): InNetns => {
  const child = spawn("ip", ["netns", "exec", ns, process.execPath, "--conditions=@koder/source", "--import", "tsx", main, role, ...args], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()))
  let code: number | string | undefined
  const exited = new Promise<number | string>((resolve) => child.once("exit", (c, s) => resolve((code = c ?? s ?? -1))))
  const waitFor = async (pattern: RegExp, ms = 30_000) => {
    const end = Date.now() + ms
    for (;;) {
      const m = pattern.exec(out)
      if (m) return m
      if (code !== undefined) throw new Error(`${role} in ${ns} exited (${code}) before ${pattern}:\n${out}\n${err}`)
      if (Date.now() > end) throw new Error(`${role} in ${ns}: no ${pattern} within ${ms} ms:\n${out}\n${err}`)
      await new Promise((r) => setTimeout(r, 25))
    }
  }
  return { child, stdout: () => out, stderr: () => err, exited, waitFor }
}

/** Run a command inside a namespace, answering its output. */
export const inNetns = (ns: string, argv: ReadonlyArray<string>): string => sh("ip", ["netns", "exec", ns, ...argv])
