/**
 * Control groups for the box's pods and containers: resource limits (memory, CPU, pids),
 * accounting (stats, OOM kills) and a reliable "every process of this container" (to kill
 * them all, and to list them), on cgroup v1 (a hierarchy per controller, as on this project's
 * CI machines) or v2 (one unified hierarchy).
 *
 * Layout: `<box base>/<sandbox id>/<container id>` in every hierarchy used, where the box base is
 * `kbox-<hash of the data dir>` under the cgroup the box itself runs in (a delegated subtree:
 * the box never writes outside what its own supervisor gave it, and two boxes with different
 * data dirs never share cgroups).
 */
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"

/** Which hierarchy is in use. */
export type Version = "none" | "v1" | "v2"

/** Limits to apply (a subset of Runtime.Resources). */
export interface Limits {
  readonly cpuMillis?: number
  readonly cpuRequestMillis?: number
  readonly memoryBytes?: number
  readonly pids?: number
}

/**
 * One step of making a cgroup, in order: make a directory (with any missing parent), or write a
 * setting (best effort, as `create` does: a file the kernel lacks is skipped).
 */
export type Step = { readonly mkdir: string } | { readonly write: readonly [file: string, value: string] }

/** Take `steps` here (directories made with their parents). */
const take = (steps: ReadonlyArray<Step>): void => {
  for (const s of steps) {
    if ("mkdir" in s) mkdirSync(s.mkdir, { recursive: true })
    else write(s.write[0], s.write[1])
  }
}

/** One accounting sample. */
export interface Sample {
  readonly cpuNanos: number
  readonly memoryUsageBytes: number
  readonly workingSetBytes: number
  readonly rssBytes: number
  readonly memoryLimitBytes: number | undefined
  readonly pids: number
}

/** The box's cgroups; `version: "none"` when unavailable (unprivileged, or not mounted). */
export interface Cgroups {
  readonly version: Version
  readonly limits: { readonly cpu: boolean; readonly memory: boolean; readonly pids: boolean }
  /**
   * Create a cgroup (and its parents) at `path` (`<sandbox>` or `<sandbox>/<container>`), with
   * limits, on the caller's thread.
   */
  readonly create: (path: string, limits: Limits | undefined) => Promise<void>
  /**
   * What `create` does, as steps for another process to take (its pod's existing parent levels
   * aside): the native holder makes its pod's cgroup and the native shim its container's, off the
   * box's thread, whose mkdirs would wait on the kernel's cgroup lock.
   */
  readonly steps: (path: string, limits: Limits | undefined) => ReadonlyArray<Step>
  /** The `cgroup.procs` files a process writes its pid into to join `path`. */
  readonly procsFiles: (path: string) => ReadonlyArray<string>
  /** The pids in `path` and below. */
  readonly pids: (path: string) => ReadonlyArray<number>
  /**
   * SIGKILL every process in `path` and below until none is left (or `deadlineMs` passes),
   * sparing those `spare` names (the caller kills them after: see ProcessDriver.killTree).
   */
  readonly killAll: (path: string, deadlineMs?: number, spare?: (pid: number) => boolean) => Promise<void>
  readonly sample: (path: string) => Sample | undefined
  /** Has the OOM killer killed a process of `path`? */
  readonly oomKilled: (path: string) => boolean
  /** Remove `path` and its children (they must be empty of processes). */
  readonly remove: (path: string) => void
  /** Remove the box's base cgroup if nothing is left in it (the box is closing). */
  readonly release: () => void
}

/** No cgroups: limits are ignored and the driver falls back to /proc. */
export const none: Cgroups = {
  version: "none",
  limits: { cpu: false, memory: false, pids: false },
  create: async () => undefined,
  steps: () => [],
  procsFiles: () => [],
  pids: () => [],
  killAll: async () => undefined,
  sample: () => undefined,
  oomKilled: () => false,
  remove: () => undefined,
  release: () => undefined
}

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const write = (file: string, value: string): boolean => {
  try {
    writeFileSync(file, value)
    return true
  } catch {
    return false
  }
}

const num = (text: string | undefined): number => {
  const n = Number(text?.trim())
  return Number.isFinite(n) ? n : 0
}

/** `key value` lines (memory.stat, cpu.stat, memory.events, memory.oom_control). */
export const parseKeyValues = (text: string | undefined): Map<string, number> => {
  const out = new Map<string, number>()
  for (const line of (text ?? "").split("\n")) {
    const [k, v] = line.split(" ")
    if (k !== undefined && v !== undefined) out.set(k, Number(v))
  }
  return out
}

/** Mount points of cgroup hierarchies, from /proc/self/mountinfo. */
export const parseMountinfo = (
  text: string
): { readonly v1: Map<string, string>; readonly v2: string | undefined } => {
  const v1 = new Map<string, string>()
  let v2: string | undefined
  for (const line of text.split("\n")) {
    const [left, right] = line.split(" - ")
    if (left === undefined || right === undefined) continue
    const mountPoint = left.split(" ")[4]
    const [fstype, , superOptions] = right.split(" ")
    if (mountPoint === undefined) continue
    if (fstype === "cgroup2" && v2 === undefined) v2 = mountPoint
    if (fstype === "cgroup")
      for (const opt of (superOptions ?? "").split(","))
        if (["memory", "cpu", "cpuacct", "pids"].includes(opt) && !v1.has(opt)) v1.set(opt, mountPoint)
  }
  return { v1, v2 }
}

/** The process's own cgroup path per v1 controller, and its v2 path (`0::/path`). */
export const parseProcCgroup = (text: string): { readonly v1: Map<string, string>; readonly v2: string | undefined } => {
  const v1 = new Map<string, string>()
  let v2: string | undefined
  for (const line of text.split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line)
    if (!m) continue
    if (m[1] === "0" && m[2] === "") v2 = m[3]
    else for (const c of (m[2] ?? "").split(",")) v1.set(c, m[3] ?? "/")
  }
  return { v1, v2 }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** The box base name for a data dir. */
const baseName = (dataDir: string) => `kbox-${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`

/**
 * Find the cgroups this box may use. Needs root; prefers v1 controllers when the memory
 * controller is mounted as v1 (hybrid hosts), else v2 when its memory controller is available.
 */
export const detect = (dataDir: string): Cgroups => {
  if (process.getuid?.() !== 0) return none
  const mounts = parseMountinfo(read("/proc/self/mountinfo") ?? "")
  const own = parseProcCgroup(read("/proc/self/cgroup") ?? "")
  if (mounts.v1.has("memory")) return v1(mounts.v1, own.v1, baseName(dataDir))
  if (mounts.v2 !== undefined && (read(join(mounts.v2, "cgroup.controllers")) ?? "").includes("memory"))
    return v2(mounts.v2, own.v2 ?? "/", baseName(dataDir)) ?? none
  return none
}

const v1 = (mounts: Map<string, string>, own: Map<string, string>, base: string): Cgroups => {
  // One directory per controller; with `cpu,cpuacct` co-mounted two names share one directory.
  const dirs = new Map<string, string>()
  for (const [controller, mountPoint] of mounts) dirs.set(controller, join(mountPoint, own.get(controller) ?? "/", base))
  const unique = () => [...new Set(dirs.values())]
  const dir = (controller: string, path: string) => {
    const d = dirs.get(controller)
    return d === undefined ? undefined : join(d, path)
  }
  const pidsIn = (d: string): Array<number> => {
    const out: Array<number> = []
    const walk = (p: string) => {
      for (const line of (read(join(p, "cgroup.procs")) ?? "").split("\n")) if (line !== "") out.push(Number(line))
      try {
        for (const e of readdirSync(p, { withFileTypes: true })) if (e.isDirectory()) walk(join(p, e.name))
      } catch {
        // gone
      }
    }
    walk(d)
    return out
  }
  const anchor = () => dirs.get("pids") ?? dirs.get("memory")!
  const self: Cgroups = {
    version: "v1",
    limits: { cpu: dirs.has("cpu"), memory: dirs.has("memory"), pids: dirs.has("pids") },
    // On this thread: a cgroup's mkdir is a few microseconds of the kernel's, less than a trip
    // through the thread pool.
    create: async (path, limits) => take(self.steps(path, limits)),
    steps: (path, limits) => {
      const out: Array<Step> = unique().map((d) => ({ mkdir: join(d, path) }))
      const set = (file: string, value: string) => out.push({ write: [file, value] })
      const mem = dir("memory", path)
      if (mem !== undefined && limits?.memoryBytes !== undefined) {
        set(join(mem, "memory.limit_in_bytes"), String(Math.floor(limits.memoryBytes)))
        // Without swap accounting this file is absent (the write is skipped); with it, swap must
        // not hide the limit.
        set(join(mem, "memory.memsw.limit_in_bytes"), String(Math.floor(limits.memoryBytes)))
      }
      const cpu = dir("cpu", path)
      if (cpu !== undefined) {
        if (limits?.cpuMillis !== undefined) {
          set(join(cpu, "cpu.cfs_period_us"), "100000")
          set(join(cpu, "cpu.cfs_quota_us"), String(Math.max(1000, Math.round(limits.cpuMillis * 100))))
        }
        if (limits?.cpuRequestMillis !== undefined)
          set(join(cpu, "cpu.shares"), String(Math.max(2, Math.round((limits.cpuRequestMillis * 1024) / 1000))))
      }
      const pids = dir("pids", path)
      if (pids !== undefined && limits?.pids !== undefined) set(join(pids, "pids.max"), String(limits.pids))
      return out
    },
    procsFiles: (path) => unique().map((d) => join(d, path, "cgroup.procs")),
    pids: (path) => pidsIn(join(anchor(), path)),
    killAll: async (path, deadlineMs = 5_000, spare = () => false) => {
      const end = Date.now() + deadlineMs
      // No cgroup.kill in v1: kill what is there until nothing is (a forking process may add
      // a child between the read and the kill; the pids limit bounds how long that can go on).
      for (;;) {
        const pids = pidsIn(join(anchor(), path)).filter((pid) => !spare(pid))
        if (pids.length === 0 || Date.now() > end) return
        for (const pid of pids) {
          try {
            process.kill(pid, "SIGKILL")
          } catch {
            // already gone
          }
        }
        await sleep(10)
      }
    },
    sample: (path) => {
      const mem = dir("memory", path)
      if (mem === undefined || !existsSync(mem)) return undefined
      const stat = parseKeyValues(read(join(mem, "memory.stat")))
      const usage = num(read(join(mem, "memory.usage_in_bytes")))
      const limit = num(read(join(mem, "memory.limit_in_bytes")))
      const cpuacct = dir("cpuacct", path)
      const pids = dir("pids", path)
      return {
        cpuNanos: cpuacct === undefined ? 0 : num(read(join(cpuacct, "cpuacct.usage"))),
        memoryUsageBytes: usage,
        workingSetBytes: Math.max(0, usage - (stat.get("total_inactive_file") ?? 0)),
        rssBytes: stat.get("total_rss") ?? 0,
        // An unset v1 limit reads as a huge page-aligned number.
        memoryLimitBytes: limit > 0 && limit < 2 ** 62 ? limit : undefined,
        pids: pids === undefined ? pidsIn(join(anchor(), path)).length : num(read(join(pids, "pids.current")))
      }
    },
    oomKilled: (path) => {
      const mem = dir("memory", path)
      return mem !== undefined && (parseKeyValues(read(join(mem, "memory.oom_control"))).get("oom_kill") ?? 0) > 0
    },
    remove: (path) => {
      for (const d of unique()) removeTree(join(d, path))
    },
    release: () => {
      for (const d of unique()) if (pidsIn(d).length === 0) removeTree(d)
    }
  }
  return self
}

/** rmdir a cgroup and its children, deepest first (cgroup dirs hold only pseudo-files). */
const removeTree = (d: string) => {
  try {
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) removeTree(join(d, e.name))
    rmdirSync(d)
  } catch {
    // gone, or still busy: a later remove retries
  }
}

const v2 = (mountPoint: string, own: string, base: string): Cgroups | undefined => {
  // v2's "no internal processes" rule: a cgroup that hands controllers to children holds no
  // processes itself. Unless the box runs in the root cgroup, it moves itself into a leaf
  // `kbox-supervisor` beside its pods' base, then enables the controllers in its own cgroup.
  let home = join(mountPoint, own)
  if (own !== "/" && own !== "") {
    if (own.endsWith("/kbox-supervisor")) home = join(mountPoint, own.slice(0, -"/kbox-supervisor".length))
    else {
      mkdirSync(join(home, "kbox-supervisor"), { recursive: true })
      if (!write(join(home, "kbox-supervisor", "cgroup.procs"), String(process.pid))) return undefined
    }
  }
  const available = (read(join(home, "cgroup.controllers")) ?? "").split(" ").map((s) => s.trim())
  const wanted = ["memory", "cpu", "pids"].filter((c) => available.includes(c))
  const enable = (d: string) => write(join(d, "cgroup.subtree_control"), wanted.map((c) => `+${c}`).join(" "))
  if (!enable(home)) return undefined
  const root = join(home, base)
  mkdirSync(root, { recursive: true })
  enable(root)
  const pidsIn = (d: string): Array<number> => {
    const out: Array<number> = []
    const walk = (p: string) => {
      for (const line of (read(join(p, "cgroup.procs")) ?? "").split("\n")) if (line !== "") out.push(Number(line))
      try {
        for (const e of readdirSync(p, { withFileTypes: true })) if (e.isDirectory()) walk(join(p, e.name))
      } catch {
        // gone
      }
    }
    walk(d)
    return out
  }
  const self: Cgroups = {
    version: "v2",
    limits: { cpu: wanted.includes("cpu"), memory: wanted.includes("memory"), pids: wanted.includes("pids") },
    create: async (path, limits) => {
      // Every level but the leaf passes the controllers down.
      const parts = path.split("/")
      let d = root
      for (const part of parts.slice(0, -1)) {
        d = join(d, part)
        mkdirSync(d, { recursive: true })
      }
      take(self.steps(path, limits))
    },
    steps: (path, limits) => {
      const parent = join(root, dirname(path))
      const d = join(root, path)
      const out: Array<Step> = []
      const set = (file: string, value: string) => out.push({ write: [file, value] })
      if (parent !== root) set(join(parent, "cgroup.subtree_control"), wanted.map((c) => `+${c}`).join(" "))
      out.push({ mkdir: d })
      if (limits?.memoryBytes !== undefined) {
        set(join(d, "memory.max"), String(Math.floor(limits.memoryBytes)))
        set(join(d, "memory.swap.max"), "0")
      }
      if (limits?.cpuMillis !== undefined) set(join(d, "cpu.max"), `${Math.max(1000, Math.round(limits.cpuMillis * 100))} 100000`)
      if (limits?.cpuRequestMillis !== undefined) {
        const shares = Math.max(2, Math.round((limits.cpuRequestMillis * 1024) / 1000))
        set(join(d, "cpu.weight"), String(Math.min(10000, 1 + Math.round(((shares - 2) * 9999) / 262142))))
      }
      if (limits?.pids !== undefined) set(join(d, "pids.max"), String(limits.pids))
      return out
    },
    procsFiles: (path) => [join(root, path, "cgroup.procs")],
    pids: (path) => pidsIn(join(root, path)),
    killAll: async (path, deadlineMs = 5_000, spare = () => false) => {
      const d = join(root, path)
      const end = Date.now() + deadlineMs
      const hasKill = existsSync(join(d, "cgroup.kill"))
      for (;;) {
        const all = pidsIn(d)
        const pids = all.filter((pid) => !spare(pid))
        if (pids.length === 0 || Date.now() > end) return
        if (hasKill && pids.length === all.length) write(join(d, "cgroup.kill"), "1")
        else
          for (const pid of pids) {
            try {
              process.kill(pid, "SIGKILL")
            } catch {
              // already gone
            }
          }
        await sleep(10)
      }
    },
    sample: (path) => {
      const d = join(root, path)
      if (!existsSync(d)) return undefined
      const stat = parseKeyValues(read(join(d, "memory.stat")))
      const usage = num(read(join(d, "memory.current")))
      const max = read(join(d, "memory.max"))?.trim()
      return {
        cpuNanos: (parseKeyValues(read(join(d, "cpu.stat"))).get("usage_usec") ?? 0) * 1000,
        memoryUsageBytes: usage,
        workingSetBytes: Math.max(0, usage - (stat.get("inactive_file") ?? 0)),
        rssBytes: stat.get("anon") ?? 0,
        memoryLimitBytes: max === undefined || max === "max" ? undefined : Number(max),
        pids: num(read(join(d, "pids.current")))
      }
    },
    oomKilled: (path) => (parseKeyValues(read(join(root, path, "memory.events"))).get("oom_kill") ?? 0) > 0,
    remove: (path) => removeTree(join(root, path)),
    release: () => {
      if (pidsIn(root).length === 0) removeTree(root)
    }
  }
  return self
}
