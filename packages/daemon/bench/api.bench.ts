// The API server benchmark: a real `koder-fleet server` (SQLite, durable) over HTTPS, printing
// one JSON line per result on stdout (progress goes to stderr):
//   api.create.p50/p99  POST latency of pods created open-loop at a steady 500/s (target p99 ≤ 25 ms)
//   api.list.10k        one GET of a namespace's 10,000 pods (the create benchmark's, topped up),
//                       read and parsed, median of 5 (target ≤ 150 ms)
//   api.watch.p50/p99   write acknowledgement → delivery to each of 1,000 watchers (target p99 ≤ 20 ms)
// `FLEET_BENCH_ONLY=create,list,watch` picks measurements; `FLEET_BENCH_CPU_PROF=DIR` profiles the server.
import { type BenchServer, log, start } from "./BenchServer.js"
import { ascending, createNamespace, cpuDelta, expectStatus, paced, percentile, pod, pool, print, round, watchFanout, withLoopDelay } from "./BenchKit.js"

// One client sends everything, so the per-client limit of 100 concurrent requests (a fairness
// guard) is raised: an overloaded server should show as latency here, not as 429s. (Under load
// the server also counts a finished request until its socket write completes, so 64 requests in
// flight can already be refused at the default limit.)
const maxRequestsInflight = 10_000

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
  const namespace = "bench-watch"
  await createNamespace(server, namespace)
  const path = `/api/v1/namespaces/${namespace}/configmaps`
  log("watch: 1000 watches of a namespace's configmaps, 100 creates at 20/s")
  const { delays, params } = await watchFanout(server, {
    watchers: 1000,
    rate: 20,
    writes: 100,
    path,
    write: async (i) => {
      const body = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `w-${i}`, namespace, labels: { app: "bench" } }, data: { index: String(i), payload: "x".repeat(256) } }
      const response = await server.send("POST", path, body)
      expectStatus("create configmap", response.status, response.body, 201)
      return { response, key: `ADDED/w-${i}` }
    },
    keyOf: (event) => `${event.type}/${event.object.metadata?.name ?? ""}`
  })
  print({ bench: "api.watch.p50", unit: "ms", value: round(percentile(delays, 50)), params })
  print({ bench: "api.watch.p99", unit: "ms", value: round(percentile(delays, 99)), params })
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
// The watch fan-out's 1,000 watchers come from one client too: past the default 250 per client.
const server = await start(["--max-requests-inflight", String(maxRequestsInflight), "--max-watches-inflight", "1000"]).catch(fail)
try {
  for (const name of only) await all[name as keyof typeof all](server)
} catch (e) {
  await server.stop()
  fail(e)
}
await server.stop()
