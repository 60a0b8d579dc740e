/**
 * A container's resource sample and process list, from its cgroup when it has one, else from the
 * process tree below its root process (/proc): the shape of metrics.k8s.io.
 */
import type { Runtime } from "@koder/fleet-core"
import type * as Cgroups from "./Cgroups.js"
import * as Procfs from "./Procfs.js"

/** The CPU time counted at the previous sample, to give a rate. */
export interface CpuMark {
  readonly nanos: number
  readonly at: number
}

/** Usage totals of a container now. */
export interface Usage {
  readonly cpuNanos: number
  readonly workingSetBytes: number
  readonly rssBytes: number
  readonly limitBytes: number | undefined
  readonly pids: number
}

/** Usage from a cgroup sample, or summed over the process tree below `root` when there is none. */
export const usageOf = (sample: Cgroups.Sample | undefined, root: number | undefined): Usage => {
  if (sample !== undefined)
    return {
      cpuNanos: sample.cpuNanos,
      workingSetBytes: sample.workingSetBytes,
      rssBytes: sample.rssBytes,
      limitBytes: sample.memoryLimitBytes,
      pids: sample.pids
    }
  const procs = root === undefined ? [] : Procfs.tree(root)
  let cpuNanos = 0
  let rss = 0
  for (const p of procs) {
    cpuNanos += ((p.utime + p.stime) * 1e9) / Procfs.clockTicksPerSecond
    rss += p.rssPages * Procfs.pageSize
  }
  return { cpuNanos, workingSetBytes: rss, rssBytes: rss, limitBytes: undefined, pids: procs.length }
}

/**
 * A sample at `at` (ms); the CPU rate is the average since `last` (or since `startedAt`). Returns
 * the mark the next sample measures from.
 */
export const statsOf = (
  usage: Usage,
  startedAt: string | undefined,
  last: CpuMark | undefined,
  at: number
): { readonly stats: Runtime.Stats; readonly mark: CpuMark } => {
  const since = last ?? { nanos: 0, at: Date.parse(startedAt ?? new Date(at).toISOString()) }
  const seconds = Math.max(0.001, (at - since.at) / 1000)
  const { cpuNanos, limitBytes } = usage
  return {
    stats: {
      timestamp: new Date(at).toISOString(),
      cpu: { usageCoreNanoSeconds: cpuNanos, usageNanoCores: Math.max(0, Math.round((cpuNanos - since.nanos) / seconds)) },
      memory: { workingSetBytes: usage.workingSetBytes, rssBytes: usage.rssBytes, ...(limitBytes === undefined ? {} : { limitBytes }) },
      pids: usage.pids
    },
    mark: { nanos: cpuNanos, at }
  }
}

/** The live (non-zombie) processes among `pids`. */
export const processesOf = (pids: ReadonlyArray<number>): Array<Runtime.Process> => {
  const out: Array<Runtime.Process> = []
  for (const pid of pids) {
    const s = Procfs.stat(pid)
    if (s === undefined || s.state === "Z") continue
    const io = Procfs.io(pid)
    out.push({
      pid,
      ppid: s.ppid,
      command: s.comm,
      args: Procfs.cmdline(pid),
      rssBytes: s.rssPages * Procfs.pageSize,
      state: s.state,
      ...(Number.isFinite(s.threads) && s.threads > 0 ? { threads: s.threads } : {}),
      ...(io === undefined ? {} : io)
    })
  }
  return out
}
