// The scale benchmark (`npm run bench -- scale`): one real `koder-fleet server` (SQLite, durable)
// holding Kubernetes' published limits — 5,000 nodes and 150,000 pods — printing one JSON line
// per result on stdout (progress on stderr):
//   scale.rss.mb          the server's resident memory at rest with that state (target < 2 GiB)
//   scale.list.pods.ms    a list of every pod, and of one namespace of 3,000 (targets < 3 s, < 150 ms)
//   scale.api.mutate.p99  pod create/delete latency under 20 mutations/s of churn (target < 50 ms)
//   scale.watch.p99       the same churn delivered to 1,000 watchers (acknowledgement → event),
//                         the writes' own p99 under that fan-out in its params
//   scale.startup.s       server restart to ready with that state (target < 20 s)
//
// Nodes are simulated as scheduler_perf and kubemark's density runs do without kubelets: Node
// objects that registered Ready, and pods already bound to them (created with `spec.nodeName`).
// Nothing heartbeats, so the node-lifecycle controller is disabled: it would (correctly) declare
// all 5,000 nodes lost 40 s in. `FLEET_SCALE_NODES` / `FLEET_SCALE_PODS` shrink the run.
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { log, start, type BenchServer } from "./BenchServer.js"
import { ascending, createNamespace, cpuDelta, expectStatus, paced, percentile, pod, pool, print, round, watchFanout, withLoopDelay } from "./BenchKit.js"
import { nodeObject } from "./SchedulerBenchCluster.js"

const nodes = Number(process.env["FLEET_SCALE_NODES"] ?? 5_000)
const pods = Number(process.env["FLEET_SCALE_PODS"] ?? 150_000)
const perNamespace = 3_000
const namespaces = Math.ceil(pods / perNamespace)
const flags = ["--max-requests-inflight", "10000", "--disable-controllers", "node-lifecycle"]

const populate = async (server: BenchServer) => {
  const t0 = performance.now()
  const now = new Date().toISOString()
  await pool(nodes, 32, async (i) => {
    const r = await server.send("POST", "/api/v1/nodes", nodeObject({ name: `node-${i}`, pods: "110" }, now))
    expectStatus("create node", r.status, r.body, 201)
  })
  log(`${nodes} nodes in ${Math.round(performance.now() - t0)} ms`)
  for (let n = 0; n < namespaces; n++) await createNamespace(server, `scale-${n}`)
  const t1 = performance.now()
  let done = 0
  await pool(pods, 64, async (i) => {
    const namespace = `scale-${Math.floor(i / perNamespace)}`
    const body = pod(namespace, `web-${i}`)
    const r = await server.send("POST", `/api/v1/namespaces/${namespace}/pods`, { ...body, spec: { ...body.spec, nodeName: `node-${i % nodes}` } })
    expectStatus("create pod", r.status, r.body, 201)
    if (++done % 10_000 === 0) log(`${done} pods (${Math.round((done * 1000) / (performance.now() - t1))}/s)`)
  })
  const seconds = (performance.now() - t1) / 1000
  log(`${pods} pods in ${seconds.toFixed(1)} s (${Math.round(pods / seconds)}/s)`)
  return { populateS: round(seconds), createsPerS: Math.round(pods / seconds) }
}

/** Wait until the server's memory stops growing (watch caches settled, garbage collected). */
const atRest = async (server: BenchServer) => {
  let last = server.rssMiB()?.now ?? 0
  for (let i = 0; i < 30; i++) {
    await new Promise((r) => setTimeout(r, 1000))
    const now = server.rssMiB()?.now ?? 0
    if (Math.abs(now - last) < 8) return
    last = now
  }
}

const rss = async (server: BenchServer, populated: Record<string, number>) => {
  await atRest(server)
  const m = server.rssMiB()
  if (m === undefined) return log("rss: no /proc here; skipped")
  print({ bench: "scale.rss.mb", unit: "MiB", value: m.now, params: { nodes, pods, peakMiB: m.peak, ...populated } })
}

const timedList = async (server: BenchServer, path: string, expected: number) => {
  const t = performance.now()
  const r = await server.send("GET", path)
  expectStatus(`list ${path}`, r.status, r.body, 200)
  const items = (JSON.parse(r.body.toString("utf8")) as { items: Array<unknown> }).items.length
  const ms = performance.now() - t
  if (items !== expected) throw new Error(`list ${path}: ${items} items, expected ${expected}`)
  return { ms, firstByteMs: r.firstByte - t, bytes: r.body.length }
}

const lists = async (server: BenchServer) => {
  const cpu0 = server.cpuMs()
  const all: Array<Awaited<ReturnType<typeof timedList>>> = []
  for (let i = 0; i < 3; i++) all.push(await timedList(server, "/api/v1/pods", pods))
  const sorted = ascending(all.map((l) => l.ms))
  print({
    bench: "scale.list.pods.ms",
    unit: "ms",
    value: round(percentile(sorted, 50)),
    params: { scope: "all", items: pods, repeats: 3, maxMs: round(sorted[2]!), firstByteMs: round(all[0]!.firstByteMs), responseBytes: all[0]!.bytes, ...cpuDelta(server, cpu0) }
  })
  const one: Array<number> = []
  for (let i = 0; i < 11; i++) {
    const l = await timedList(server, `/api/v1/namespaces/scale-${i % namespaces}/pods`, Math.min(perNamespace, pods))
    if (i > 0) one.push(l.ms)
  }
  const oneSorted = ascending(one)
  print({
    bench: "scale.list.pods.ms",
    unit: "ms",
    value: round(percentile(oneSorted, 50)),
    params: { scope: "namespace", items: Math.min(perNamespace, pods), repeats: one.length, p99Ms: round(percentile(oneSorted, 99)) }
  })
}

/**
 * Pod churn in `namespace`: write i creates pod i when even (unbound: the scheduler binds it) and
 * deletes the pod the previous write created when odd, once that create is done.
 */
const churnWriter = (server: BenchServer, namespace: string, prefix: string) => {
  const path = `/api/v1/namespaces/${namespace}/pods`
  const created = new Map<string, Promise<unknown>>()
  return async (i: number) => {
    const name = `${prefix}-${i - (i % 2)}`
    if (i % 2 === 0) {
      const sent = server.send("POST", path, pod(namespace, name))
      created.set(name, sent.catch(() => undefined))
      const response = await sent
      expectStatus("create pod", response.status, response.body, 201)
      return { response, key: `ADDED/${name}` }
    }
    await created.get(name)
    const sentAt = performance.now()
    const response = await server.send("DELETE", `${path}/${name}`, { apiVersion: "v1", kind: "DeleteOptions", gracePeriodSeconds: 0 })
    expectStatus("delete pod", response.status, response.body, 200)
    return { response, key: `DELETED/${name}`, sentAt }
  }
}

const rate = 20
const churnSeconds = 30

/** 20 pod creates and deletes per second for 30 s (the Kubernetes SLO's churn): their latency. */
const mutate = async (server: BenchServer) => {
  const namespace = "scale-churn"
  await createNamespace(server, namespace)
  const write = churnWriter(server, namespace, "mutate")
  const total = rate * churnSeconds
  log(`mutate: ${total} pod creates and deletes at ${rate}/s`)
  const latency: Array<number> = []
  const failures: Array<string> = []
  const done: Array<Promise<void>> = []
  const cpu0 = server.cpuMs()
  const [, loopP99] = await withLoopDelay(async () => {
    await paced(rate, total, (i) => {
      const t = performance.now()
      done.push(
        write(i).then(
          ({ response, sentAt }) => void latency.push(response.end - (sentAt ?? t)),
          (e: Error) => void failures.push(e.message)
        )
      )
    })
    await Promise.all(done)
  })
  if (failures.length > 0) throw new Error(`mutate: ${failures.length} of ${total} writes failed, e.g. ${failures[0]}`)
  const sorted = ascending(latency)
  print({
    bench: "scale.api.mutate.p99",
    unit: "ms",
    value: round(percentile(sorted, 99)),
    params: { nodes, pods, rate, writes: total, p50Ms: round(percentile(sorted, 50)), maxMs: round(sorted[sorted.length - 1]!), clientLoopDelayP99Ms: round(loopP99), ...cpuDelta(server, cpu0) }
  })
}

/** The same churn watched by 1,000 watchers of its namespace: acknowledgement → delivery. */
const watch = async (server: BenchServer) => {
  const namespace = "scale-churn"
  log(`watch: 1000 watches of the churn namespace's pods; ${rate * churnSeconds} creates and deletes at ${rate}/s`)
  const { delays, params } = await watchFanout(server, {
    watchers: 1000,
    rate,
    writes: rate * churnSeconds,
    path: `/api/v1/namespaces/${namespace}/pods`,
    write: churnWriter(server, namespace, "watched"),
    keyOf: (event) => (event.type === "ADDED" || event.type === "DELETED" ? `${event.type}/${event.object.metadata?.name ?? ""}` : undefined)
  })
  print({ bench: "scale.watch.p99", unit: "ms", value: round(percentile(delays, 99)), params: { ...params, nodes, pods, p50Ms: round(percentile(delays, 50)) } })
}

const restart = async (server: BenchServer, dataDir: string) => {
  await server.stop()
  const t0 = performance.now()
  const again = await start(flags, "server", dataDir)
  const listening = performance.now()
  for (const deadline = Date.now() + 120_000; ; ) {
    const r = await again.send("GET", "/readyz")
    if (r.status === 200) break
    if (Date.now() > deadline) throw new Error(`restart: /readyz still answers ${r.status} after 120 s`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const ready = performance.now()
  await timedList(again, `/api/v1/namespaces/scale-0/pods`, Math.min(perNamespace, pods))
  print({
    bench: "scale.startup.s",
    unit: "s",
    value: round((ready - t0) / 1000),
    params: { nodes, pods, listeningS: round((listening - t0) / 1000), rssMiB: again.rssMiB()?.now ?? NaN }
  })
  return again
}

const fail = (e: unknown) => {
  log(`FAILED: ${e instanceof Error ? e.message : String(e)}`)
  process.exit(1)
}

const dataDir = await mkdtemp(join(tmpdir(), "fleet-scale-bench-"))
log(`scale: ${nodes} nodes, ${pods} pods in ${namespaces} namespaces (data ${dataDir})`)
let server = await start(flags, "server", dataDir).catch(fail)
try {
  const populated = await populate(server)
  await rss(server, populated)
  await lists(server)
  await mutate(server)
  await watch(server)
  server = await restart(server, dataDir)
} catch (e) {
  await server.stop()
  await rm(dataDir, { recursive: true, force: true })
  fail(e)
}
await server.stop()
await rm(dataDir, { recursive: true, force: true })
