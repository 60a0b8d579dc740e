// The agent benchmark ([7/10]): pod startup latency in `koder-fleet dev` — one real process with
// the API (SQLite), controllers, scheduler, box (process driver) and agent. Pods are created over
// HTTPS while a watch is open; a pod's startup is its creation (the create call's start) to the
// first watch event showing it Running, as Kubernetes' pod startup SLI counts it (no image pulls
// here: the process driver runs `sleep`). One JSON line per result on stdout:
//   agent.pod_startup.p99   ms, 100 pods created 10 at a time (target ≤ 500 ms)
// with p50, max, the create rate and the dev process's CPU in `params`. Knobs:
//   FLEET_BENCH_PODS (100)  FLEET_BENCH_CONCURRENCY (10)
import { performance } from "node:perf_hooks"
import * as BenchServer from "./BenchServer.js"

const knob = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${name}: a positive integer, not ${JSON.stringify(process.env[name])}`)
  return v
}
const count = knob("FLEET_BENCH_PODS", 100)
const concurrency = knob("FLEET_BENCH_CONCURRENCY", 10)
const log = (m: string) => process.stderr.write(`agent bench: ${m}\n`)
const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
const round = (x: number) => Math.round(x * 10) / 10

const pod = (i: number) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: `bench-${i}`, labels: { bench: "startup" } },
  spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "sleep", image: "busybox", command: ["sleep", "3600"] }] }
})

const server = await BenchServer.start([], "dev")
try {
  const watchAgent = server.agent(1)
  const { status, response } = await server.stream("/api/v1/namespaces/default/pods?watch=true&labelSelector=bench%3Dstartup", watchAgent)
  if (status !== 200) throw new Error(`watch answered ${status}`)
  const created = new Map<string, number>()
  const running = new Map<string, number>()
  let buffer = ""
  let allRunning: () => void = () => {}
  const done = new Promise<void>((resolve) => (allRunning = resolve))
  response.setEncoding("utf8")
  response.on("data", (chunk: string) => {
    buffer += chunk
    const lines = buffer.split("\n")
    buffer = lines.pop()!
    const now = performance.now()
    for (const line of lines) {
      if (line.trim() === "") continue
      const event = JSON.parse(line) as { object: { metadata: { name: string }; status?: { phase?: string } } }
      const name = event.object.metadata.name
      if (event.object.status?.phase === "Running" && !running.has(name)) {
        running.set(name, now)
        if (running.size === count) allRunning()
      }
    }
  })
  const cpuBefore = server.cpuMs()
  const t0 = performance.now()
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++
        const started = performance.now()
        created.set(`bench-${i}`, started)
        const r = await server.send("POST", "/api/v1/namespaces/default/pods", pod(i))
        if (r.status !== 201) throw new Error(`create bench-${i}: ${r.status} ${r.body.toString()}`)
      }
    })
  )
  const createSeconds = (performance.now() - t0) / 1000
  const timeout = setTimeout(() => log(`only ${running.size}/${count} Running after 120 s`), 120_000)
  await Promise.race([done, new Promise((r) => setTimeout(r, 125_000))])
  clearTimeout(timeout)
  const cpuMs = (server.cpuMs() ?? 0) - (cpuBefore ?? 0)
  const latencies = [...running].map(([name, at]) => at - created.get(name)!).sort((a, b) => a - b)
  console.log(
    JSON.stringify({
      bench: "agent.pod_startup.p99",
      unit: "ms",
      value: latencies.length === count ? round(percentile(latencies, 99)) : null,
      params: {
        pods: count,
        running: running.size,
        concurrency,
        p50Ms: round(percentile(latencies, 50)),
        maxMs: round(latencies[latencies.length - 1] ?? NaN),
        createPodsPerSecond: round(count / createSeconds),
        devCpuMs: cpuMs,
        driver: "process",
        workload: "sleep 3600"
      }
    })
  )
  response.destroy()
  watchAgent.destroy()
  // Delete them all; the dev process's stop ends any that remain.
  await Promise.all([...created.keys()].map((name) => server.send("DELETE", `/api/v1/namespaces/default/pods/${name}`)))
} finally {
  await server.stop()
}
