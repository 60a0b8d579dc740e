// The agent benchmark ([7/10]): pod startup latency in `koder-fleet dev` — one real process with
// the API (SQLite), controllers, scheduler, box (process driver) and agent. Pods are created over
// HTTPS while a watch is open; a pod's startup is its creation (the create call's start) to the
// first watch event showing it Running, as Kubernetes' pod startup SLI counts it (no image pulls
// here: the process driver runs `sleep`); the creates go over keep-alive connections opened before
// the clock starts. One JSON line per result on stdout:
//   agent.pod_startup.p99         ms, 100 pods created 10 at a time, a burst (target ≤ 500 ms)
//   agent.pod_startup_warm.p99    ms, the burst again in the same process, once per extra burst
//                                 asked for (FLEET_BENCH_BURSTS > 1; `params.burst` counts): the
//                                 API's code is optimized by then, so its creates come faster
//   agent.pod_startup_paced.p99   ms, 100 more created at a steady 5 per second, as Kubernetes'
//                                 density tests create their latency pods (the SLI measures
//                                 latency, not throughput)
// with p50, max, where the p99 pod's kind of time went (`stagesP99Ms`: the create call, create →
// bound to the node, bound → Running; each stage's own p99, so they need not add up), the create
// rate, the dev process's CPU (also by thread: main, fleet-node, and V8's and libuv's helpers as
// "node"), its main thread's time on a CPU and waiting for one, the whole machine's CPU (the
// pods' processes too) and this benchmark client's own CPU (`benchClientCpuMs`) in `params`. Knobs:
//   FLEET_BENCH_PODS (100)  FLEET_BENCH_CONCURRENCY (10)  FLEET_BENCH_RATE (5)  FLEET_BENCH_BURSTS (1)
//   FLEET_BENCH_DEV_FLAGS (extra `koder-fleet dev` flags, space-separated)
//   FLEET_BENCH_NODE_FLAGS (extra Node/V8 flags for the dev process, space-separated)
//   FLEET_BENCH_TIMELINE=FILE (each phase's pods, one line each, into FILE.<phase>: name, then ms
//                             from the phase's start to its create call, the answer, bound, Running)
import { writeFileSync } from "node:fs"
import { performance } from "node:perf_hooks"
import * as BenchServer from "./BenchServer.js"

const knob = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${name}: a positive integer, not ${JSON.stringify(process.env[name])}`)
  return v
}
const count = knob("FLEET_BENCH_PODS", 100)
const concurrency = knob("FLEET_BENCH_CONCURRENCY", 10)
const rate = knob("FLEET_BENCH_RATE", 5)
const bursts = knob("FLEET_BENCH_BURSTS", 1)
const log = (m: string) => process.stderr.write(`agent bench: ${m}\n`)
const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
const round = (x: number) => Math.round(x * 10) / 10

const pod = (name: string, phase: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, labels: { bench: "startup", phase } },
  spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "sleep", image: "busybox", command: ["sleep", "3600"] }] }
})

/** How a phase sends its creates: `concurrency` at a time, or one every 1/`rate` s. */
type Load = { readonly concurrency: number } | { readonly rate: number }

/** Create `count` pods of `phase` under `load` with a watch open; startup latency per pod. */
const measure = async (server: BenchServer.BenchServer, phase: string, load: Load) => {
  const watchAgent = server.agent(1)
  const { status, response } = await server.stream(`/api/v1/namespaces/default/pods?watch=true&labelSelector=phase%3D${phase}`, watchAgent)
  if (status !== 200) throw new Error(`watch answered ${status}`)
  const created = new Map<string, number>()
  const running = new Map<string, number>()
  const answered = new Map<string, number>()
  const bound = new Map<string, number>()
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
      const event = JSON.parse(line) as { object: { metadata: { name: string }; spec?: { nodeName?: string }; status?: { phase?: string } } }
      const name = event.object.metadata.name
      if (event.object.spec?.nodeName !== undefined && !bound.has(name)) bound.set(name, now)
      if (event.object.status?.phase === "Running" && !running.has(name)) {
        running.set(name, now)
        if (running.size === count) allRunning()
      }
    }
  })
  const create = async (i: number) => {
    const name = `${phase}-${i}`
    created.set(name, performance.now())
    const r = await server.send("POST", "/api/v1/namespaces/default/pods", pod(name, phase))
    answered.set(name, r.end)
    if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${r.body.toString()}`)
  }
  // The client's connections are open before the clock starts, as a client's pool is: otherwise
  // the first wave of creates also waits for `concurrency` TLS handshakes (server and client on the
  // same 2 cores), a cost of this client's connecting, not of starting a pod.
  const sockets = "concurrency" in load ? load.concurrency : 1
  await Promise.all(Array.from({ length: sockets }, () => server.send("GET", "/api/v1/namespaces/default/pods?limit=1")))
  const cpuBefore = server.cpuMs()
  const mainBefore = server.mainThread()
  const threadsBefore = server.threadsCpuMs()
  const machineBefore = BenchServer.machineCpuMs()
  const clientBefore = process.cpuUsage()
  const t0 = performance.now()
  if ("concurrency" in load) {
    let next = 0
    await Promise.all(
      Array.from({ length: load.concurrency }, async () => {
        while (next < count) await create(next++)
      })
    )
  } else {
    const sent: Array<Promise<void>> = []
    for (let i = 0; i < count; i++) {
      const due = t0 + (i * 1000) / load.rate
      const wait = due - performance.now()
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
      sent.push(create(i))
    }
    await Promise.all(sent)
  }
  const createSeconds = (performance.now() - t0) / 1000
  const timeout = setTimeout(() => log(`${phase}: only ${running.size}/${count} Running after 120 s`), 120_000)
  let giveUp: NodeJS.Timeout | undefined
  await Promise.race([done, new Promise((r) => (giveUp = setTimeout(r, 125_000)))])
  clearTimeout(timeout)
  clearTimeout(giveUp)
  const cpuMs = (server.cpuMs() ?? 0) - (cpuBefore ?? 0)
  const mainAfter = server.mainThread()
  const threadsAfter = server.threadsCpuMs()
  const machineAfter = BenchServer.machineCpuMs()
  const client = process.cpuUsage(clientBefore)
  response.destroy()
  watchAgent.destroy()
  const timeline = process.env["FLEET_BENCH_TIMELINE"]
  if (timeline !== undefined && timeline !== "") {
    const at = (m: ReadonlyMap<string, number>, name: string) => (m.has(name) ? Math.round(m.get(name)! - t0) : "-")
    const rows = [...created.keys()].map((n) => [n, at(created, n), at(answered, n), at(bound, n), at(running, n)].join(" "))
    writeFileSync(`${timeline}.${phase}`, rows.join("\n") + "\n")
  }
  const latencies = [...running].map(([name, at]) => at - created.get(name)!).sort((a, b) => a - b)
  /** The p99 of `to - from` over the pods that have both. */
  const stage = (from: ReadonlyMap<string, number>, to: ReadonlyMap<string, number>) => {
    const spans = [...to].flatMap(([name, at]) => (from.has(name) ? [at - from.get(name)!] : [])).sort((a, b) => a - b)
    return spans.length === 0 ? null : round(percentile(spans, 99))
  }
  return {
    value: latencies.length === count ? round(percentile(latencies, 99)) : null,
    params: {
      pods: count,
      running: running.size,
      ...load,
      p50Ms: round(percentile(latencies, 50)),
      maxMs: round(latencies[latencies.length - 1] ?? NaN),
      stagesP99Ms: { create: stage(created, answered), bind: stage(created, bound), start: stage(bound, running) },
      createPodsPerSecond: round(count / createSeconds),
      devCpuMs: cpuMs,
      ...(mainBefore && mainAfter ? { devMainRunMs: mainAfter.runMs - mainBefore.runMs, devMainWaitMs: mainAfter.waitMs - mainBefore.waitMs } : {}),
      ...(threadsBefore && threadsAfter
        ? { devThreadsCpuMs: Object.fromEntries(Object.entries(threadsAfter).map(([name, ms]) => [name, ms - (threadsBefore[name] ?? 0)])) }
        : {}),
      ...(machineBefore !== undefined && machineAfter !== undefined ? { machineCpuMs: machineAfter - machineBefore } : {}),
      benchClientCpuMs: Math.round((client.user + client.system) / 1000),
      driver: "process",
      workload: "sleep 3600"
    },
    names: [...created.keys()]
  }
}

/** Delete a phase's pods and wait until they are gone (the node holds 110 pods: phases must not add up). */
const clear = async (server: BenchServer.BenchServer, phase: string, names: ReadonlyArray<string>) => {
  await Promise.all(names.map((name) => server.send("DELETE", `/api/v1/namespaces/default/pods/${name}`)))
  const deadline = Date.now() + 120_000
  for (;;) {
    const r = await server.send("GET", `/api/v1/namespaces/default/pods?labelSelector=phase%3D${phase}`)
    if ((JSON.parse(r.body.toString()) as { items: Array<unknown> }).items.length === 0) return
    if (Date.now() > deadline) throw new Error(`${phase}: pods still there 120 s after their deletion`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** Wait for dev's node to be Ready: it registers a moment after the API answers. */
const nodeReady = async (server: BenchServer.BenchServer) => {
  const deadline = Date.now() + 60_000
  for (;;) {
    const r = await server.send("GET", "/api/v1/nodes")
    const nodes = (JSON.parse(r.body.toString()) as { items?: Array<{ status?: { conditions?: Array<{ type: string; status: string }> } }> }).items ?? []
    if (nodes.some((n) => n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"))) return
    if (Date.now() > deadline) throw new Error("no Ready node 60 s after dev started")
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const server = await BenchServer.start(BenchServer.envWords("FLEET_BENCH_DEV_FLAGS"), "dev")
try {
  await nodeReady(server)
  for (let b = 0; b < bursts; b++) {
    const burst = await measure(server, "burst", { concurrency })
    const bench = b === 0 ? "agent.pod_startup.p99" : "agent.pod_startup_warm.p99"
    console.log(JSON.stringify({ bench, unit: "ms", value: burst.value, params: { ...burst.params, ...(b > 0 ? { burst: b + 1 } : {}) } }))
    await clear(server, "burst", burst.names)
  }
  const paced = await measure(server, "paced", { rate })
  console.log(JSON.stringify({ bench: "agent.pod_startup_paced.p99", unit: "ms", value: paced.value, params: paced.params }))
  await clear(server, "paced", paced.names)
} finally {
  await server.stop()
}
