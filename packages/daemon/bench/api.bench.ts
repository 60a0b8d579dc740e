// The API server benchmark: a real `koder-fleet server` (SQLite, durable) over HTTPS, printing
// one JSON line per result on stdout (progress goes to stderr):
//   api.create.p50/p99  POST latency of pods created open-loop at a steady 500/s (target p99 ≤ 25 ms)
//   api.list.10k        one GET of a namespace's 10,000 pods (the create benchmark's, topped up),
//                       read and parsed, median of 5 (target ≤ 150 ms)
//   api.watch.p50/p99   write acknowledgement → delivery to each of 1,000 watchers (target p99 ≤ 20 ms)
// `FLEET_BENCH_ONLY=create,list,watch` picks measurements; `FLEET_BENCH_CPU_PROF=DIR` profiles the server.
import type { IncomingMessage } from "node:http"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { type BenchServer, log, start } from "./BenchServer.js"

// One client sends everything, so the per-client limit of 100 concurrent requests (a fairness
// guard) is raised: an overloaded server should show as latency here, not as 429s. (Under load
// the server also counts a finished request until its socket write completes, so 64 requests in
// flight can already be refused at the default limit.)
const maxRequestsInflight = 10_000

interface Result {
  readonly bench: string
  readonly unit: "ms"
  readonly value: number
  readonly params: Record<string, number | string>
}

const print = (result: Result) => console.log(JSON.stringify(result))

const round = (ms: number) => Math.round(ms * 100) / 100

/** Nearest-rank percentile of an ascending array. */
const percentile = (sorted: ArrayLike<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN

const ascending = (xs: Iterable<number>) => Float64Array.from(xs).sort()

/** A pod as a Deployment would make it: one container, labels, requests, a port. */
const pod = (namespace: string, name: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace, labels: { app: "web", tier: "frontend", "pod-template-hash": "7c9f8d6b5" } },
  spec: {
    containers: [
      {
        name: "web",
        image: "nginx:1.27.2",
        ports: [{ name: "http", containerPort: 80, protocol: "TCP" }],
        env: [{ name: "LOG_LEVEL", value: "info" }],
        resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "500m", memory: "256Mi" } }
      }
    ],
    restartPolicy: "Always"
  }
})

const expectStatus = (what: string, status: number, body: Buffer, ...ok: Array<number>) => {
  if (!ok.includes(status)) throw new Error(`${what}: HTTP ${status} ${body.toString().slice(0, 500)}`)
}

const createNamespace = async (server: BenchServer, name: string) => {
  const r = await server.send("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } })
  expectStatus(`create namespace ${name}`, r.status, r.body, 201)
}

/**
 * Call `fire(i)` for i in [0, total) at `rate` per second without waiting for anything `fire`
 * starts (open loop), returning how late each call was against its schedule (ms).
 */
const paced = (rate: number, total: number, fire: (i: number) => void) =>
  new Promise<Float64Array>((resolve) => {
    const lateness = new Float64Array(total)
    const t0 = performance.now()
    let sent = 0
    const tick = () => {
      const now = performance.now()
      const due = Math.min(total, Math.floor(((now - t0) * rate) / 1000) + 1)
      while (sent < due) {
        lateness[sent] = performance.now() - (t0 + (sent * 1000) / rate)
        fire(sent++)
      }
      if (sent < total) setTimeout(tick, 1)
      else resolve(lateness)
    }
    tick()
  })

/** Run `task(i)` for i in [0, n) with `inflight` in flight. */
const pool = async (n: number, inflight: number, task: (i: number) => Promise<void>) => {
  let next = 0
  const worker = async () => {
    while (next < n) await task(next++)
  }
  await Promise.all(Array.from({ length: Math.min(n, inflight) }, worker))
}

/** Measure the bench process's own event-loop delay around `body` (is the client keeping up?). */
const withLoopDelay = async <A>(body: () => Promise<A>): Promise<[A, number]> => {
  const h = monitorEventLoopDelay({ resolution: 5 })
  h.enable()
  try {
    const a = await body()
    return [a, h.percentile(99) / 1e6]
  } finally {
    h.disable()
  }
}

const cpuDelta = (server: BenchServer, before: number | undefined) => {
  const after = server.cpuMs()
  return before === undefined || after === undefined ? {} : { serverCpuMs: after - before }
}

/** The namespace of the create and list benchmarks' pods, and how many are in it. */
const pods = { namespace: "bench-pods", ready: false, created: 0 }

const podNamespace = async (server: BenchServer) => {
  if (!pods.ready) await createNamespace(server, pods.namespace)
  pods.ready = true
  return pods.namespace
}

// --- api.create ------------------------------------------------------------------------------

const create = async (server: BenchServer) => {
  const rate = 500
  const warmup = rate // the first second is not counted
  const total = warmup + rate * 10
  const namespace = await podNamespace(server)
  const first = pods.created
  pods.created += total
  log(`create: ${total} pods open-loop at ${rate}/s (first ${warmup} are warm-up)`)

  const latency = new Float64Array(total)
  let firstSend = 0
  let lastEnd = 0
  const failures: Array<string> = []
  const done: Array<Promise<void>> = []
  const cpu0 = server.cpuMs()
  const [lateness, loopP99] = await withLoopDelay(async () => {
    const lateness = await paced(rate, total, (i) => {
      const t = performance.now()
      if (i === warmup) firstSend = t
      done.push(
        server.send("POST", `/api/v1/namespaces/${namespace}/pods`, pod(namespace, `web-${first + i}`)).then(
          (r) => {
            latency[i] = r.end - t
            lastEnd = Math.max(lastEnd, r.end)
            if (r.status !== 201) failures.push(`HTTP ${r.status} ${r.body.toString().slice(0, 200)}`)
          },
          (e: Error) => {
            latency[i] = performance.now() - t
            failures.push(`#${i} after ${Math.round(latency[i])} ms: ${e.message}`)
          }
        )
      )
    })
    await Promise.all(done)
    return lateness
  })
  const counted = ascending(latency.subarray(warmup))
  const late = ascending(lateness.subarray(warmup))
  const params = {
    rate,
    requests: counted.length,
    // Creates per second the server actually completed over the counted part.
    achievedPerS: Math.round((counted.length * 1000) / (lastEnd - firstSend)),
    maxRequestsInflight,
    warmup,
    durationS: 10,
    maxMs: round(counted[counted.length - 1]!),
    sendLatenessP99Ms: round(percentile(late, 99)),
    clientLoopDelayP99Ms: round(loopP99),
    failed: failures.length,
    ...cpuDelta(server, cpu0)
  }
  print({ bench: "api.create.p50", unit: "ms", value: round(percentile(counted, 50)), params })
  print({ bench: "api.create.p99", unit: "ms", value: round(percentile(counted, 99)), params })
  if (failures.length > 0) throw new Error(`create: ${failures.length} of ${total} creates failed, e.g. ${failures.slice(0, 3).join("; ")}`)
}

// --- api.list.10k ----------------------------------------------------------------------------

const list = async (server: BenchServer) => {
  const objects = 10_000
  const repeats = 5
  // The namespace already holds the create benchmark's pods: top it up to `objects`.
  const namespace = await podNamespace(server)
  const first = pods.created
  const missing = Math.max(0, objects - first)
  pods.created += missing
  log(`list: creating ${missing} more pods (${first} exist), 64 in flight`)
  const t0 = performance.now()
  await pool(missing, 64, async (i) => {
    const r = await server.send("POST", `/api/v1/namespaces/${namespace}/pods`, pod(namespace, `web-${first + i}`))
    expectStatus("create", r.status, r.body, 201)
  })
  log(`list: created in ${Math.round(performance.now() - t0)} ms; listing ${repeats + 1} times (the first untimed)`)

  const path = `/api/v1/namespaces/${namespace}/pods`
  const times: Array<number> = []
  // Where a list's time goes: until the first byte (the server building the response), the
  // transfer, and the client's JSON.parse.
  const firstByte: Array<number> = []
  const transfer: Array<number> = []
  const parse: Array<number> = []
  let bytes = 0
  const cpu0 = server.cpuMs()
  for (let i = 0; i <= repeats; i++) {
    const t = performance.now()
    const r = await server.send("GET", path)
    expectStatus("list", r.status, r.body, 200)
    const parsed = JSON.parse(r.body.toString("utf8")) as { items: Array<unknown> }
    const done = performance.now()
    if (parsed.items.length !== objects) throw new Error(`list: ${parsed.items.length} items, expected ${objects}`)
    bytes = r.body.length
    if (i === 0) continue
    times.push(done - t)
    firstByte.push(r.firstByte - t)
    transfer.push(r.end - r.firstByte)
    parse.push(done - r.end)
  }
  const sorted = ascending(times)
  const median = (xs: Array<number>) => round(percentile(ascending(xs), 50))
  print({
    bench: "api.list.10k",
    unit: "ms",
    value: round(percentile(sorted, 50)),
    params: {
      items: objects,
      repeats,
      responseBytes: bytes,
      minMs: round(sorted[0]!),
      maxMs: round(sorted[sorted.length - 1]!),
      firstByteMs: median(firstByte),
      transferMs: median(transfer),
      parseMs: median(parse),
      ...cpuDelta(server, cpu0)
    }
  })
}

// --- api.watch -------------------------------------------------------------------------------

const watch = async (server: BenchServer) => {
  const watchers = 1000
  const rate = 20
  const writes = rate * 5
  const namespace = "bench-watch"
  await createNamespace(server, namespace)
  const base = `/api/v1/namespaces/${namespace}/configmaps`
  const current = await server.send("GET", base)
  expectStatus("list configmaps", current.status, current.body, 200)
  const resourceVersion = (JSON.parse(current.body.toString()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion

  // resourceVersion → receive times, one per watcher that saw it; acks as the writer saw them.
  const received = new Map<string, Array<number>>()
  const acked = new Map<string, number>()
  const problems: Array<string> = []
  const agent = server.agent(watchers + 16)
  const responses: Array<IncomingMessage> = []
  let closing = false

  const follow = (w: number, res: IncomingMessage) => {
    let pending = ""
    res.setEncoding("utf8")
    res.on("data", (chunk: string) => {
      const now = performance.now()
      pending += chunk
      let nl: number
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl)
        pending = pending.slice(nl + 1)
        if (line.length === 0) continue
        const event = JSON.parse(line) as { type: string; object: { metadata?: { resourceVersion?: string } } }
        const rv = event.object.metadata?.resourceVersion
        if (event.type === "ERROR" || rv === undefined) {
          problems.push(`watcher ${w}: ${line.slice(0, 300)}`)
          continue
        }
        let times = received.get(rv)
        if (times === undefined) received.set(rv, (times = []))
        times.push(now)
      }
    })
    res.on("end", () => {
      if (!closing) problems.push(`watcher ${w}: stream ended`)
    })
    res.on("error", (e) => {
      if (!closing) problems.push(`watcher ${w}: ${e.message}`)
    })
  }

  log(`watch: opening ${watchers} watches from resourceVersion ${resourceVersion}`)
  const t0 = performance.now()
  await pool(watchers, 50, async (w) => {
    const { status, response } = await server.stream(`${base}?watch=true&resourceVersion=${resourceVersion}`, agent)
    if (status !== 200) {
      let body = ""
      for await (const d of response) body += String(d)
      throw new Error(`watch ${w}: HTTP ${status} ${body.slice(0, 300)}`)
    }
    responses.push(response)
    follow(w, response)
  })
  log(`watch: ${watchers} watches open in ${Math.round(performance.now() - t0)} ms; ${writes} configmap creates at ${rate}/s`)

  const failures: Array<string> = []
  const done: Array<Promise<void>> = []
  const writeLatency: Array<number> = []
  const cpu0 = server.cpuMs()
  const [, loopP99] = await withLoopDelay(async () => {
    await paced(rate, writes, (i) => {
      const body = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `w-${i}`, namespace, labels: { app: "bench" } }, data: { index: String(i), payload: "x".repeat(256) } }
      const t = performance.now()
      done.push(
        server.send("POST", base, body).then(
          (r) => {
            if (r.status !== 201) return void failures.push(`HTTP ${r.status} ${r.body.toString().slice(0, 200)}`)
            writeLatency.push(r.end - t)
            acked.set((JSON.parse(r.body.toString()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion, r.end)
          },
          (e: Error) => void failures.push(e.message)
        )
      )
    })
    await Promise.all(done)
    // Let the last events arrive (everything should be in within a second; wait up to 10).
    const deadline = Date.now() + 10_000
    const complete = () => [...acked.keys()].every((rv) => (received.get(rv)?.length ?? 0) >= watchers)
    while (!complete() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  })
  const serverCpu = cpuDelta(server, cpu0)
  closing = true
  for (const res of responses) res.destroy()
  agent.destroy()
  if (failures.length > 0) throw new Error(`watch: ${failures.length} of ${writes} writes failed, e.g. ${failures[0]}`)

  const delays: Array<number> = []
  let missing = 0
  let early = 0
  for (const [rv, ack] of acked) {
    const times = received.get(rv) ?? []
    missing += Math.max(0, watchers - times.length)
    for (const t of times) {
      // A watcher may hear of a write before its writer reads the acknowledgement: count it as 0.
      if (t < ack) early++
      delays.push(Math.max(0, t - ack))
    }
  }
  const sorted = ascending(delays)
  const expected = writes * watchers
  const params = {
    watchers,
    writes,
    rate,
    expected,
    delivered: delays.length,
    missing,
    deliveredBeforeAck: early,
    maxMs: round(sorted[sorted.length - 1] ?? NaN),
    // The writes' own latency (send → acknowledgement): fan-out work delays them too.
    writeP99Ms: round(percentile(ascending(writeLatency), 99)),
    clientLoopDelayP99Ms: round(loopP99),
    ...serverCpu
  }
  print({ bench: "api.watch.p50", unit: "ms", value: round(percentile(sorted, 50)), params })
  print({ bench: "api.watch.p99", unit: "ms", value: round(percentile(sorted, 99)), params })
  if (missing > 0 || problems.length > 0 || delays.length !== expected) {
    throw new Error(`watch: ${missing} of ${expected} deliveries missing; ${problems.length} stream problems${problems.length > 0 ? `, e.g. ${problems[0]}` : ""}`)
  }
}

// --- main ------------------------------------------------------------------------------------

const all = { create, list, watch }
const only = (process.env["FLEET_BENCH_ONLY"] ?? "create,list,watch").split(",").filter((s) => s.length > 0)
for (const name of only) if (!(name in all)) throw new Error(`FLEET_BENCH_ONLY: unknown measurement ${JSON.stringify(name)}`)

const fail = (e: unknown) => {
  log(`FAILED: ${e instanceof Error ? e.message : String(e)}`)
  process.exit(1)
}

log("starting koder-fleet server")
const server = await start(["--max-requests-inflight", String(maxRequestsInflight)]).catch(fail)
try {
  for (const name of only) await all[name as keyof typeof all](server)
} catch (e) {
  await server.stop()
  fail(e)
}
await server.stop()
