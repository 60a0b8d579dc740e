/**
 * The process's own series, computed at every scrape under the names every Prometheus client
 * library uses (`process_*`), plus Node's heap and event-loop delay (`nodejs_*`): CPU seconds,
 * resident and virtual memory, open and maximum file descriptors, start time.
 *
 * Written here rather than taken from prom-client's default collectors: those live in
 * prom-client's own registry (a second registry to merge at every scrape) and are a handful of
 * `/proc` reads this module does in as many lines.
 */
import type { MetricRegistry } from "@koder/fleet-core"
import { readdirSync, readFileSync } from "node:fs"
import { monitorEventLoopDelay } from "node:perf_hooks"

const gauge = (name: string, help: string, value: number | undefined): ReadonlyArray<MetricRegistry.Family> =>
  value === undefined ? [] : [{ type: "gauge", name, help, series: [{ labels: [], value }] }]
const counter = (name: string, help: string, value: number): MetricRegistry.Family => ({ type: "counter", name, help, series: [{ labels: [], value }] })

const attempt = <A>(read: () => A): A | undefined => {
  try {
    return read()
  } catch {
    return undefined
  }
}

/** Virtual memory size from `/proc/self/stat` (field 23, bytes); undefined off Linux. */
const virtualMemory = (): number | undefined =>
  attempt(() => {
    const stat = readFileSync("/proc/self/stat", "utf8")
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return Number(fields[20])
  })

const maxFds = (): number | undefined =>
  attempt(() => {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"))
    return m === null ? undefined : Number(m[1])
  })

const openFds = (): number | undefined => attempt(() => readdirSync("/proc/self/fd").length)

/** Add the process families to `registry`; answers a function that removes them. */
export const register = (registry: MetricRegistry.Registry): (() => void) => {
  const startTime = Math.round(Date.now() / 1000 - process.uptime())
  const loop = monitorEventLoopDelay({ resolution: 20 })
  loop.enable()
  const limit = maxFds()
  const remove = registry.register(() => {
    const cpu = process.cpuUsage()
    const memory = process.memoryUsage()
    const families: Array<MetricRegistry.Family> = [
      counter("process_cpu_user_seconds_total", "Total user CPU time spent in seconds.", cpu.user / 1e6),
      counter("process_cpu_system_seconds_total", "Total system CPU time spent in seconds.", cpu.system / 1e6),
      counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", (cpu.user + cpu.system) / 1e6),
      ...gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", startTime),
      ...gauge("process_resident_memory_bytes", "Resident memory size in bytes.", memory.rss),
      ...gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", virtualMemory()),
      ...gauge("process_open_fds", "Number of open file descriptors.", openFds()),
      ...gauge("process_max_fds", "Maximum number of open file descriptors.", limit),
      ...gauge("nodejs_heap_size_used_bytes", "V8 heap in use, in bytes.", memory.heapUsed),
      ...gauge("nodejs_heap_size_total_bytes", "V8 heap allocated, in bytes.", memory.heapTotal),
      ...gauge("nodejs_external_memory_bytes", "Memory of C++ objects bound to JavaScript objects, in bytes.", memory.external),
      ...gauge("nodejs_eventloop_lag_p99_seconds", "99th percentile of the event loop's delay since the last scrape, in seconds.", loop.count === 0 ? 0 : loop.percentile(99) / 1e9),
      ...gauge("nodejs_eventloop_lag_max_seconds", "Longest event loop delay since the last scrape, in seconds.", loop.count === 0 ? 0 : loop.max / 1e9)
    ]
    loop.reset()
    return families
  })
  return () => {
    remove()
    loop.disable()
  }
}
