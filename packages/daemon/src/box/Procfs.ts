/**
 * Reading processes from /proc for the box: identity that survives pid reuse (pid + start time
 * in clock ticks since boot), process trees by parent, session and process group, CPU and
 * memory when there are no cgroups. Synchronous on purpose: each read is a few hundred bytes
 * from a pseudo-filesystem, faster than a round trip through the thread pool.
 */
import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"

/** The kernel's fixed unit of /proc times (USER_HZ is 100 on every Linux architecture). */
export const clockTicksPerSecond = 100

/** Bytes per page, for /proc/<pid>/statm. */
export const pageSize: number = (() => {
  try {
    const n = Number(execFileSync("getconf", ["PAGESIZE"], { encoding: "utf8" }).trim())
    return Number.isInteger(n) && n > 0 ? n : 4096
  } catch {
    return 4096
  }
})()

/** The fields of /proc/<pid>/stat the box uses. */
export interface Stat {
  readonly pid: number
  readonly comm: string
  /** `R`, `S`, `D`, `Z` (zombie: dead but not reaped), `T`, ... */
  readonly state: string
  readonly ppid: number
  readonly pgid: number
  readonly sid: number
  /** User and system CPU time, in clock ticks. */
  readonly utime: number
  readonly stime: number
  /** Start time in clock ticks after boot: with the pid, a process's identity. */
  readonly startTime: number
  /** Resident set in pages. */
  readonly rssPages: number
  readonly threads: number
}

/** Parse a /proc/<pid>/stat line (the command name may hold spaces and parentheses). */
export const parseStat = (text: string): Stat | undefined => {
  const open = text.indexOf("(")
  const close = text.lastIndexOf(")")
  if (open < 0 || close < open) return undefined
  const f = text.slice(close + 2).trim().split(" ")
  // f[0] is field 3 (state); field n is f[n - 3].
  const num = (field: number) => Number(f[field - 3])
  return {
    pid: Number(text.slice(0, open).trim()),
    comm: text.slice(open + 1, close),
    state: f[0] ?? "?",
    ppid: num(4),
    pgid: num(5),
    sid: num(6),
    utime: num(14),
    stime: num(15),
    startTime: num(22),
    rssPages: num(24),
    threads: num(20)
  }
}

/** A process's storage I/O (/proc/<pid>/io, readable by root); `undefined` when it cannot be read. */
export const io = (pid: number): { readonly readBytes: number; readonly writeBytes: number } | undefined => {
  try {
    const text = readFileSync(`/proc/${pid}/io`, "utf8")
    const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(text)?.[1] ?? Number.NaN)
    const readBytes = field("read_bytes")
    const writeBytes = field("write_bytes")
    return Number.isFinite(readBytes) && Number.isFinite(writeBytes) ? { readBytes, writeBytes } : undefined
  } catch {
    return undefined
  }
}

/** The stat of a live process; `undefined` when it is gone. */
export const stat = (pid: number): Stat | undefined => {
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return undefined
  }
}

/**
 * Is this exact process (pid and start time) still alive? A zombie counts as dead: it has
 * exited and only waits for its parent to read the status.
 */
export const isAlive = (pid: number, startTime?: number): boolean => {
  const s = stat(pid)
  if (s === undefined || s.state === "Z" || s.state === "X") return false
  return startTime === undefined || s.startTime === startTime
}

/** A process by pid and start time: a pid the kernel reused is another process. */
export interface ProcessId {
  readonly pid: number
  readonly startTime: number
}

/** The identity of a live process; undefined for no pid, a bad one, or one that is gone. */
export const processId = (pid: number | undefined): ProcessId | undefined => {
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return undefined
  const s = stat(pid)
  return s === undefined ? undefined : { pid, startTime: s.startTime }
}

/** Is this exact process still alive? */
export const alive = (p: ProcessId | undefined): p is ProcessId => p !== undefined && isAlive(p.pid, p.startTime)

/** Signal this exact process if it is alive; whether the signal was sent. */
export const signal = (p: ProcessId | undefined, sig: NodeJS.Signals | number): boolean => {
  if (!alive(p)) return false
  try {
    process.kill(p.pid, sig)
    return true
  } catch {
    return false
  }
}

let snapshot: { readonly at: number; readonly stats: Array<Stat> } | undefined

/**
 * Every live process's stat. A scan reads every /proc/<pid>/stat, so scans within a few
 * milliseconds of each other (many containers being killed at once) share one.
 */
export const all = (maxAgeMs = 5): Array<Stat> => {
  const now = Date.now()
  if (snapshot !== undefined && now - snapshot.at <= maxAgeMs) return snapshot.stats
  const out: Array<Stat> = []
  for (const name of readdirSync("/proc")) {
    const c = name.charCodeAt(0)
    if (c < 48 || c > 57) continue
    const s = stat(Number(name))
    if (s !== undefined) out.push(s)
  }
  snapshot = { at: now, stats: out }
  return out
}

/** Direct children of a process (via /proc/<pid>/task/*\/children). */
export const children = (pid: number): Array<number> => {
  const out: Array<number> = []
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim()
      if (text !== "") for (const c of text.split(" ")) out.push(Number(c))
    }
  } catch {
    // gone
  }
  return out
}

/**
 * The processes of a container without cgroups: everything in its session or process group
 * (the workload runs as a session leader, so `sid == root`), and every descendant of the root
 * even if it started a session of its own.
 */
export const tree = (root: number, stats: ReadonlyArray<Stat> = all()): Array<Stat> => {
  const byParent = new Map<number, Array<Stat>>()
  for (const s of stats) {
    const list = byParent.get(s.ppid)
    if (list) list.push(s)
    else byParent.set(s.ppid, [s])
  }
  const seen = new Map<number, Stat>()
  const visit = (s: Stat) => {
    if (seen.has(s.pid)) return
    seen.set(s.pid, s)
    for (const c of byParent.get(s.pid) ?? []) visit(c)
  }
  for (const s of stats) if (s.pid === root || s.sid === root || s.pgid === root) visit(s)
  return [...seen.values()].filter((s) => s.state !== "Z")
}

/** argv of a process (empty when unreadable, e.g. a kernel thread or gone). */
export const cmdline = (pid: number): Array<string> => {
  try {
    const text = readFileSync(`/proc/${pid}/cmdline`, "utf8")
    return text.split("\0").filter((a, i, all) => a !== "" || i < all.length - 1)
  } catch {
    return []
  }
}

/** This boot's identity: a process recorded under another boot id is certainly gone. */
export const bootId = (): string => {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  } catch {
    return "unknown"
  }
}

/** Wall-clock boot time in ms (from /proc/stat `btime`), to turn start ticks into dates. */
export const bootTimeMs = (): number => {
  try {
    const m = /^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"))
    return m ? Number(m[1]) * 1000 : 0
  } catch {
    return 0
  }
}

/** SIGKILL what `list` returns until it returns nothing (bounded: a fork bomb hits its pids limit). */
export const killUntilGone = async (list: () => ReadonlyArray<Stat>): Promise<void> => {
  for (let i = 0; i < 100; i++) {
    const procs = list()
    if (procs.length === 0) return
    for (const p of procs) {
      try {
        process.kill(p.pid, "SIGKILL")
      } catch {
        // gone
      }
    }
    await new Promise<void>((r) => setTimeout(r, 10))
  }
}
