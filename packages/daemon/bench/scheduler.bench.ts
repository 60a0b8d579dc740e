// The scheduler benchmark ([6/10]): kube-scheduler's scheduler_perf workloads on the in-process
// cluster of SchedulerBenchCluster (real API pipeline, real SQLite store, simulated nodes). Pods
// are created while no scheduler runs; then the scheduler starts and the clock runs until every
// pod is bound ("from all pods created to all bound"). One JSON line per result on stdout:
//   scheduler.<case>.create               pods/s the API took the pods at (64 creates in flight)
//   scheduler.basic.<N>x<P>               pods/s, scheduler_perf's SchedulingBasic pod (target ≥ 2,500)
//   scheduler.spread.<N>x<P>              pods/s, each pod in a 100-replica app spread over 3 zones
//                                         (maxSkew 1) with required hostname anti-affinity (target ≥ 1,000)
//   scheduler.preemption.<N>              pods/s, scheduler_perf's PreemptionBasic: 4 low-priority pods
//                                         fill every node, then each of N/2 high-priority pods evicts 3
// `params` carry per-pod latency (e2e: scheduler start → bound, as scheduler_pod_scheduling_sli
// counts a pod queued before the scheduler ran; attempt: the last cycle's start → bound), peak RSS
// (target < 1.5 GiB, with the heap growth cap koder-fleet applies: FLEET_HEAP_GROWTH_PERCENT), CPU
// use, scheduler counters (`batched`: pods placed from an earlier cycle's scores) and store commits.
//
// Each case runs in a child process of its own, so its peak RSS is its own. Knobs:
//   FLEET_BENCH_NODES (5000)  FLEET_BENCH_PODS (50000, basic)  FLEET_BENCH_SPREAD_PODS (PODS / 5)
//   FLEET_BENCH_PREEMPTORS (NODES / 2)  FLEET_BENCH_ONLY=basic,spread,preemption
//   FLEET_BENCH_TIMEOUT_S (900, per scheduling window)
//   FLEET_BENCH_PERCENTAGE_OF_NODES_TO_SCORE (unset: the scheduler's adaptive default, 10% at 5,000 nodes)
//   FLEET_BENCH_CPU_PROF=DIR  write DIR/scheduler.<case>.cpuprofile covering the scheduling window only
//   FLEET_BENCH_HEAP_PROF=DIR write DIR/scheduler.<case>.heapprofile: allocation sampling, garbage included
// A quick run: FLEET_BENCH_NODES=500 FLEET_BENCH_PODS=5000 npm run bench -- scheduler
import { ApiClient, type Client, Scheduler, SchedulerPlugins, type SchedulerFramework } from "@koder/fleet-core"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { loadavg } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as HeapGrowth from "../src/v8/HeapGrowth.js"
import * as BenchCluster from "./SchedulerBenchCluster.js"

type JsonObject = Client.JsonObject

const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const knob = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${name}: a positive integer, not ${JSON.stringify(process.env[name])}`)
  return v
}
const nodeCount = knob("FLEET_BENCH_NODES", 5000)
const basicPods = knob("FLEET_BENCH_PODS", 50_000)
const spreadPods = knob("FLEET_BENCH_SPREAD_PODS", Math.max(1, Math.round(basicPods / 5)))
// Half the nodes, not scheduler_perf's one per node: 5,000 preemptors take ~6 minutes here (14
// pods/s), which would push the default run past 10 minutes.
const preemptors = knob("FLEET_BENCH_PREEMPTORS", Math.max(1, Math.round(nodeCount / 2)))
const timeoutMs = knob("FLEET_BENCH_TIMEOUT_S", 900) * 1000
// kube-scheduler's percentageOfNodesToScore (unset: the scheduler's default, adaptive as upstream).
const percentageOfNodesToScore = process.env["FLEET_BENCH_PERCENTAGE_OF_NODES_TO_SCORE"] === undefined ? undefined : knob("FLEET_BENCH_PERCENTAGE_OF_NODES_TO_SCORE", 0)
const createInflight = 64
const zones = ["zone-a", "zone-b", "zone-c"]
// Replicas per app of the spread case: 100, or fewer on clusters too small for that many
// pods each on its own node.
const appReplicas = Math.min(100, nodeCount)

const log = (message: string) => process.stderr.write(`scheduler bench: ${message}\n`)
const line = (result: Record<string, unknown>) => console.log(JSON.stringify(result))
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits
const mib = (bytes: number) => Math.round(bytes / 2 ** 20)

/** Nearest-rank percentile of an ascending array. */
const percentile = (sorted: Float64Array, p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!)

const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const metaOf = (o: JsonObject) => obj(o["metadata"])
const nodeNameOf = (o: JsonObject) => {
  const n = obj(o["spec"])["nodeName"]
  return typeof n === "string" && n !== "" ? n : undefined
}

/** scheduler_perf's pause container: one port, requests equal to limits. */
const container = (cpu: string) => ({
  name: "pause",
  image: "registry.k8s.io/pause:3.10",
  ports: [{ containerPort: 80 }],
  resources: { requests: { cpu, memory: "500Mi" }, limits: { cpu, memory: "500Mi" } }
})

/** One benchmark: nodes, what exists before, the pods it times, and what must hold after. */
interface Case {
  readonly name: string
  readonly bench: string
  readonly nodes: ReadonlyArray<BenchCluster.NodeSpec>
  readonly pods: number
  readonly pod: (namespace: string, i: number) => JsonObject
  readonly setup?: (cluster: BenchCluster.BenchCluster) => Effect.Effect<Record<string, number | string>, unknown>
  /** A violated constraint, given the measured pods as bound (undefined: all good). */
  readonly verify?: (pods: ReadonlyArray<JsonObject>, cluster: BenchCluster.BenchCluster) => string | undefined
  readonly params: Record<string, number | string>
}

const plainNodes = (n: number) => Array.from({ length: n }, (_, i): BenchCluster.NodeSpec => ({ name: `node-${i}` }))

const basic: Case = {
  name: "basic",
  bench: `scheduler.basic.${nodeCount}x${basicPods}`,
  nodes: plainNodes(nodeCount),
  pods: basicPods,
  pod: (namespace, i) => ({ apiVersion: "v1", kind: "Pod", metadata: { name: `pod-${i}`, namespace }, spec: { containers: [container("100m")] } }),
  params: { workload: "scheduler_perf SchedulingBasic pod (100m, 500Mi, port 80) on 4-cpu nodes" }
}

const appOf = (i: number) => `app-${Math.floor(i / appReplicas)}`

/** Every app's pods on distinct nodes, and no zone more than maxSkew (1) ahead of another. */
const verifySpread = (pods: ReadonlyArray<JsonObject>, cluster: BenchCluster.BenchCluster) => {
  const zoneOf = new Map(cluster.informers.for({ apiVersion: "v1", kind: "Node" }).list().map((n) => [String(metaOf(n)["name"]), String(obj(metaOf(n)["labels"])["topology.kubernetes.io/zone"])]))
  const apps = new Map<string, { nodes: Set<string>; zones: Map<string, number> }>()
  for (const p of pods) {
    const app = String(obj(metaOf(p)["labels"])["app"])
    const node = nodeNameOf(p)!
    let a = apps.get(app)
    if (a === undefined) apps.set(app, (a = { nodes: new Set(), zones: new Map(zones.map((z) => [z, 0])) }))
    if (a.nodes.has(node)) return `${app} has two pods on ${node}`
    a.nodes.add(node)
    const z = zoneOf.get(node)!
    a.zones.set(z, a.zones.get(z)! + 1)
  }
  for (const [app, a] of apps) {
    const counts = [...a.zones.values()]
    if (Math.max(...counts) - Math.min(...counts) > 1) return `${app} is spread ${counts.join("/")} over the zones (maxSkew 1)`
  }
  return undefined
}

const spread: Case = {
  name: "spread",
  bench: `scheduler.spread.${nodeCount}x${spreadPods}`,
  nodes: Array.from({ length: nodeCount }, (_, i) => ({ name: `node-${i}`, labels: { "topology.kubernetes.io/zone": zones[i % zones.length]! } })),
  pods: spreadPods,
  pod: (namespace, i) => {
    const selector = { matchLabels: { app: appOf(i) } }
    return {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `pod-${i}`, namespace, labels: { app: appOf(i) } },
      spec: {
        topologySpreadConstraints: [{ maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "DoNotSchedule", labelSelector: selector }],
        affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: selector, topologyKey: "kubernetes.io/hostname" }] } },
        containers: [container("100m")]
      }
    }
  },
  verify: verifySpread,
  params: { workload: `apps of ${appReplicas} replicas: zone spread (maxSkew 1, DoNotSchedule, ${zones.length} zones) + required hostname anti-affinity` }
}

const lowPerNode = 4

const preemption: Case = {
  name: "preemption",
  bench: `scheduler.preemption.${nodeCount}`,
  nodes: plainNodes(nodeCount),
  pods: preemptors,
  pod: (namespace, i) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `high-${i}`, namespace },
    spec: { priorityClassName: "bench-high", containers: [container("3000m")] }
  }),
  // scheduler_perf's initPods: low-priority pods (grace 0, as its template) filling every node;
  // bound at creation (spec.nodeName), which leaves the store as scheduling them would.
  setup: (cluster) =>
    Effect.gen(function* () {
      const client = cluster.client
      yield* client.create({ apiVersion: "scheduling.k8s.io/v1", kind: "PriorityClass", metadata: { name: "bench-low" }, value: 0 })
      yield* client.create({ apiVersion: "scheduling.k8s.io/v1", kind: "PriorityClass", metadata: { name: "bench-high" }, value: 10 })
      yield* client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "bench-low" } })
      const low = nodeCount * lowPerNode
      const t = performance.now()
      yield* Effect.forEach(
        Array.from({ length: low }, (_, i) => i),
        (i) =>
          client.create({
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name: `low-${i}`, namespace: "bench-low" },
            spec: { priorityClassName: "bench-low", nodeName: `node-${Math.floor(i / lowPerNode)}`, terminationGracePeriodSeconds: 0, containers: [container("900m")] }
          }),
        { concurrency: createInflight, discard: true }
      )
      log(`preemption: ${low} low-priority pods bound in ${Math.round(performance.now() - t)} ms`)
      return { lowPriorityPods: low }
    }),
  verify: (_pods, cluster) => {
    // No node is over its 4 cpus (the victims really left before their preemptor came).
    const used = new Map<string, number>()
    for (const p of cluster.informers.for(PodRef).list()) {
      const node = nodeNameOf(p)
      if (node === undefined || metaOf(p)["deletionTimestamp"] !== undefined) continue
      const cpu = String(obj(obj(obj((obj(p["spec"])["containers"] as Array<unknown>)[0])["resources"])["requests"])["cpu"])
      used.set(node, (used.get(node) ?? 0) + (cpu.endsWith("m") ? Number(cpu.slice(0, -1)) : Number(cpu) * 1000))
    }
    for (const [node, milli] of used) if (milli > 4000) return `${node} holds ${milli}m of 4000m cpu`
    return undefined
  },
  params: { workload: "scheduler_perf PreemptionBasic: 4 × 900m low-priority pods per 4-cpu node, each 3000m high-priority pod evicts 3" }
}

const cases: ReadonlyArray<Case> = [basic, spread, preemption]

/**
 * The plugin registry with every PreFilter wrapped to note when a pod's scheduling cycle began
 * (the first PreFilter call with a new CycleState), for the attempt latency.
 */
const timedRegistry = (cycleStart: Map<string, number>): SchedulerFramework.Registry => {
  const seen = new WeakSet<SchedulerFramework.CycleState>()
  return Object.fromEntries(
    Object.entries(SchedulerPlugins.registry).map(([name, factory]): [string, SchedulerFramework.Factory] => [
      name,
      (args, handle) => {
        const plugin = factory(args, handle)
        if (typeof plugin === "string" || !("preFilter" in plugin)) return plugin
        const inner = plugin as SchedulerFramework.PreFilterPlugin
        return Object.create(inner, {
          preFilter: {
            value: (state: SchedulerFramework.CycleState, pod: SchedulerFramework.QueuedPodInfo["pod"], snapshot: Parameters<SchedulerFramework.PreFilterPlugin["preFilter"]>[2]) => {
              if (!seen.has(state)) {
                seen.add(state)
                cycleStart.set(pod.uid, performance.now())
              }
              return inner.preFilter(state, pod, snapshot)
            }
          }
        }) as SchedulerFramework.Plugin
      }
    ])
  )
}

/** The client with its `pods/binding` calls timed (start → response). */
const timedClient = (client: Client.Client, calls: Array<number>): Client.Client => ({
  ...client,
  createSubresource: (ref, namespace, name, subresource, body) => {
    if (subresource !== "binding") return client.createSubresource(ref, namespace, name, subresource, body)
    return Effect.suspend(() => {
      const t = performance.now()
      return Effect.ensuring(client.createSubresource(ref, namespace, name, subresource, body), Effect.sync(() => calls.push(performance.now() - t)))
    })
  }
})

/**
 * Profile the scheduling window when asked: `FLEET_BENCH_CPU_PROF=DIR` writes
 * DIR/scheduler.<case>.cpuprofile, `FLEET_BENCH_HEAP_PROF=DIR` a sampling heap profile counting
 * every allocation, garbage included (DIR/scheduler.<case>.heapprofile: where the churn comes from).
 * Returns the function that stops them and writes the files.
 */
const startProfiles = async (caseName: string): Promise<() => Promise<void>> => {
  const cpuDir = process.env["FLEET_BENCH_CPU_PROF"]
  const heapDir = process.env["FLEET_BENCH_HEAP_PROF"]
  if (cpuDir === undefined && heapDir === undefined) return async () => undefined
  const session = new Session()
  session.connect()
  if (cpuDir !== undefined) {
    await session.post("Profiler.enable")
    await session.post("Profiler.start")
  }
  if (heapDir !== undefined) {
    await session.post("HeapProfiler.enable")
    await session.post("HeapProfiler.startSampling", { samplingInterval: 64 * 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
  }
  return async () => {
    const write = (dir: string, ext: string, data: unknown) => {
      const file = join(dir, `scheduler.${caseName}.${ext}`)
      writeFileSync(file, JSON.stringify(data))
      log(`${ext} of the scheduling window: ${file}`)
    }
    if (cpuDir !== undefined) write(cpuDir, "cpuprofile", (await session.post("Profiler.stop")).profile)
    if (heapDir !== undefined) write(heapDir, "heapprofile", (await session.post("HeapProfiler.stopSampling")).profile)
    session.disconnect()
  }
}

const runCase = (c: Case) =>
  Effect.scoped(
    Effect.gen(function* () {
      // Sampled every 50 ms over the whole case (setup included): RSS, and the JS heap, to tell
      // the two apart when RSS runs high.
      const peak = { rss: 0, heapUsed: 0 }
      const sample = () => {
        const m = process.memoryUsage()
        peak.rss = Math.max(peak.rss, m.rss)
        peak.heapUsed = Math.max(peak.heapUsed, m.heapUsed)
      }
      sample()
      const sampler = setInterval(sample, 50)
      yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(sampler)))

      const cluster = yield* BenchCluster.make()
      let t = performance.now()
      yield* BenchCluster.addNodes(cluster, c.nodes)
      log(`${c.name}: ${c.nodes.length} nodes registered in ${Math.round(performance.now() - t)} ms`)
      const setupParams = c.setup === undefined ? {} : yield* c.setup(cluster)

      // Track the measured pods: when each is first seen bound.
      const namespace = "bench"
      yield* cluster.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } })
      const pods = cluster.informers.for(PodRef)
      yield* pods.synced
      const seen = new Set<string>()
      const boundAt = new Map<string, number>()
      const unsubscribe = pods.subscribe((change) => {
        const m = metaOf(change.object)
        if (m["namespace"] !== namespace || change.type === "DELETED") return
        const uid = String(m["uid"])
        seen.add(uid)
        if (!boundAt.has(uid) && nodeNameOf(change.object) !== undefined) boundAt.set(uid, performance.now())
      })
      yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))

      t = performance.now()
      yield* Effect.forEach(
        Array.from({ length: c.pods }, (_, i) => i),
        (i) => cluster.client.create(c.pod(namespace, i)),
        { concurrency: createInflight, discard: true }
      )
      const createMs = performance.now() - t
      line({ bench: `scheduler.${c.name}.create`, unit: "pods/s", value: Math.round((c.pods * 1000) / createMs), params: { pods: c.pods, inflight: createInflight, seconds: round(createMs / 1000, 1) } })
      if (!(yield* pods.waitUntil(() => seen.size >= c.pods, 120_000))) return yield* Effect.fail(new Error(`the pod informer saw ${seen.size} of ${c.pods} pods`))
      if (boundAt.size > 0) return yield* Effect.fail(new Error(`${boundAt.size} pods were bound before the scheduler started`))

      // The scheduling window: start the scheduler, wait until every pod is bound.
      const cycleStart = new Map<string, number>()
      const bindCalls: Array<number> = []
      const stopProfile = yield* Effect.promise(() => startProfiles(c.name))
      const load0 = loadavg()[0]!
      const rss0 = process.memoryUsage().rss
      const cpu0 = process.cpuUsage()
      const t0 = performance.now()
      const { metrics, done } = yield* Effect.scoped(
        Effect.gen(function* () {
          const running = yield* Scheduler.start({
            informers: cluster.informers,
            registry: timedRegistry(cycleStart),
            ...(percentageOfNodesToScore === undefined ? {} : { percentageOfNodesToScore })
          }).pipe(Effect.provideService(ApiClient.ApiClient, timedClient(cluster.client, bindCalls)))
          cluster.explain = running.explain
          // Progress on stderr every 15 s: long runs should show where they are and how memory moves.
          const progress = setInterval(() => {
            const m = running.metrics()
            const mem = process.memoryUsage()
            log(
              `${c.name}: ${Math.round((performance.now() - t0) / 1000)} s: ${boundAt.size}/${c.pods} bound, ${m.attempts} attempts, ` +
                `queue ${JSON.stringify(m.queue)}, rss ${mib(mem.rss)} MiB, heap ${mib(mem.heapUsed)} MiB`
            )
          }, 15_000)
          const done = yield* Effect.ensuring(pods.waitUntil(() => boundAt.size >= c.pods, timeoutMs), Effect.sync(() => clearInterval(progress)))
          return { metrics: running.metrics(), done }
        })
      )
      const t1 = performance.now()
      const cpu = process.cpuUsage(cpu0)
      yield* Effect.promise(stopProfile)
      const windowMs = t1 - t0

      const e2e = new Float64Array(boundAt.size)
      const attempt = new Float64Array(boundAt.size)
      let k = 0
      for (const [uid, at] of boundAt) {
        e2e[k] = at - t0
        attempt[k++] = at - (cycleStart.get(uid) ?? t0)
      }
      e2e.sort()
      attempt.sort()
      const binds = Float64Array.from(bindCalls).sort()
      const stats = yield* cluster.store.stats
      const measured = pods.list(namespace)
      const violation = done ? c.verify?.(measured, cluster) : undefined
      line({
        bench: c.bench,
        unit: "pods/s",
        value: Math.round((boundAt.size * 1000) / windowMs),
        params: {
          ...c.params,
          nodes: c.nodes.length,
          pods: c.pods,
          ...setupParams,
          ...(percentageOfNodesToScore === undefined ? {} : { percentageOfNodesToScore }),
          bound: boundAt.size,
          seconds: round(windowMs / 1000, 1),
          e2eP50Ms: round(percentile(e2e, 50), 1),
          e2eP99Ms: round(percentile(e2e, 99), 1),
          attemptP50Ms: round(percentile(attempt, 50)),
          attemptP99Ms: round(percentile(attempt, 99)),
          bindCallP50Ms: round(percentile(binds, 50)),
          bindCallP99Ms: round(percentile(binds, 99)),
          peakRssMiB: (sample(), mib(peak.rss)),
          peakHeapUsedMiB: mib(peak.heapUsed),
          rssAtStartMiB: mib(rss0),
          // 100 = one core busy for the whole window (the process is one JavaScript thread plus GC).
          cpuPercent: Math.round(((cpu.user + cpu.system) / 1000 / windowMs) * 100),
          loadAvg1m: round(load0, 1),
          attempts: metrics.attempts,
          scheduled: metrics.scheduled,
          unschedulable: metrics.unschedulable,
          errors: metrics.errors,
          preemptions: metrics.preemptions,
          batched: metrics.batched,
          storeCommits: stats.commits,
          storeMutations: stats.committed,
          ...(c.name === "preemption" ? { lowPriorityPodsLeft: pods.list("bench-low").length } : {})
        }
      })
      if (!done) return yield* Effect.fail(new Error(`${c.name}: ${boundAt.size} of ${c.pods} pods bound after ${timeoutMs / 1000} s`))
      if (violation !== undefined) return yield* Effect.fail(new Error(`${c.name}: ${violation}`))
    })
  )

const fail = (e: unknown) => {
  log(`FAILED: ${e instanceof Error ? e.message : String(e)}`)
  process.exit(1)
}

const caseName = process.env["FLEET_BENCH_CASE"]
if (caseName !== undefined) {
  // A child: run one case. A signal exits normally, so exit hooks remove the store's directory.
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130))
  // The heap growth cap `koder-fleet` runs with (FLEET_HEAP_GROWTH_PERCENT; peak RSS depends on it).
  HeapGrowth.limit()
  const c = cases.find((x) => x.name === caseName)
  if (c === undefined) fail(new Error(`FLEET_BENCH_CASE: unknown case ${caseName}`))
  else await Effect.runPromise(runCase(c)).catch(fail)
} else {
  const only = (process.env["FLEET_BENCH_ONLY"] ?? cases.map((c) => c.name).join(",")).split(",").filter((s) => s.length > 0)
  for (const name of only) if (!cases.some((c) => c.name === name)) fail(new Error(`FLEET_BENCH_ONLY: unknown case ${JSON.stringify(name)}`))
  for (const knob of ["FLEET_BENCH_CPU_PROF", "FLEET_BENCH_HEAP_PROF"]) if (process.env[knob] !== undefined) mkdirSync(process.env[knob], { recursive: true })
  let failed = false
  for (const name of only) {
    log(`${name}: starting (${nodeCount} nodes)`)
    const ok = await new Promise<boolean>((resolve) => {
      const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], { env: { ...process.env, FLEET_BENCH_CASE: name }, stdio: "inherit" })
      child.on("error", () => resolve(false))
      child.on("exit", (code, signal) => resolve(code === 0 && signal === null))
    })
    if (!ok) failed = true
  }
  if (failed) process.exit(1)
}
