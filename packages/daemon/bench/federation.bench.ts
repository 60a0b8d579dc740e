/**
 * `npm run bench -- federation`: a real `koder-fleet hub` process and simulated members.
 *
 * What is simulated: each member is an in-process Fleet kernel (core's TestCluster: the real API
 * pipeline over a memory store, no scheduler, no controllers) in this benchmark's process, with
 * `FLEET_BENCH_MEMBER_NODES` Node objects (Ready, 8 CPU / 32 GiB each) and no kubelets. What is
 * real: the hub (its own process, SQLite, HTTPS, mutual TLS) and each member's side of the
 * federation as `koder-fleet server --join-hub` runs it (HubJoin: CSR with the join token, the
 * hub's auto-approve rule, the member certificate, the tunnel, the member agent's heartbeat,
 * status and Works) — one per member, each with its own HTTPS connections to the hub.
 *
 *   federation.join.p99          a member's CSR seen on the hub → its MemberCluster Ready (watched
 *                                on the hub); members join at FLEET_BENCH_JOIN_RATE per second
 *   federation.status.staleness.p99
 *                                a pod bound on a member → the member's allocated CPU in its
 *                                MemberCluster status on the hub (watched); one change per member
 *   federation.hub.rss           the hub's resident memory with every member joined and reporting
 */
import { MemberAgent } from "@koder/fleet-core"
// TestCluster alone: the testing entry also brings the contract suites, which need vitest.
import * as TestCluster from "@koder/fleet-core/test-cluster"
import { Effect, Exit, Scope } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import type { IncomingMessage } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as HubJoin from "../src/federation/HubJoin.js"
import * as MemberTunnelLink from "../src/federation/MemberTunnelLink.js"
import { ascending, percentile, round, type Result } from "./BenchKit.js"
import * as BenchServer from "./BenchServer.js"

const members = Number(process.env["FLEET_BENCH_MEMBERS"] ?? 100)
const nodesPerMember = Number(process.env["FLEET_BENCH_MEMBER_NODES"] ?? 50)
const joinRate = Number(process.env["FLEET_BENCH_JOIN_RATE"] ?? 10)
const group = "/apis/federation.fleet.koder.dev/v1alpha1"

// HubJoin logs its progress with console.log: stdout carries only the results' JSON lines.
const stdout = process.stdout.write.bind(process.stdout)
console.log = (...args: Array<unknown>) => console.error(...args)
const print = (r: Result) => stdout(`${JSON.stringify(r)}\n`)

/** What the benchmark reads of the objects it watches. */
interface Watched {
  readonly metadata?: { readonly name?: string }
  readonly status?: { readonly conditions?: ReadonlyArray<{ readonly type: string; readonly status: string }>; readonly resources?: { readonly allocated?: Readonly<Record<string, string>> } }
}

/** Every event of a watch, as parsed objects, to `onEvent`, until the response ends. */
const follow = (response: IncomingMessage, onEvent: (type: string, object: Watched) => void) => {
  let buffered = ""
  response.setEncoding("utf8")
  response.on("data", (d: string) => {
    buffered += d
    for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
      const line = buffered.slice(0, nl)
      buffered = buffered.slice(nl + 1)
      if (line.trim() === "") continue
      const e = JSON.parse(line) as { type: string; object: Watched }
      onEvent(e.type, e.object)
    }
  })
}

const node = (name: string) => ({ apiVersion: "v1", kind: "Node", metadata: { name, labels: { "kubernetes.io/hostname": name } }, spec: {} })
const nodeStatus = {
  status: {
    capacity: { cpu: "8", memory: "32Gi", pods: "110" },
    allocatable: { cpu: "8", memory: "32Gi", pods: "110" },
    conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", lastHeartbeatTime: new Date().toISOString().replace(/\.\d+Z$/, "Z") }]
  }
}
const pod = (name: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { nodeName: "node-0", containers: [{ name: "app", image: "busybox", resources: { requests: { cpu: "100m", memory: "64Mi" } } }] }
})

const readyOf = (mc: Watched) => (mc.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True")
const allocatedCpu = (mc: Watched): string | undefined => mc.status?.resources?.allocated?.["cpu"]

const main = async () => {
  const dir = await mkdtemp(join(tmpdir(), "fleet-federation-bench-"))
  const hub = await BenchServer.start(["--metrics-listen", "off", "--auto-approve-members", "sim-\\d+"], "hub")
  const scope = Effect.runSync(Scope.make())
  try {
    const m = /--hub-token (\S+) --hub-ca-hash (\S+)/.exec(hub.stdout())
    if (m === null) throw new Error(`no join line in the hub's output:\n${hub.stdout()}`)
    const [token, caHash] = [m[1]!, m[2]!]

    // What the hub shows, as it shows it: CSRs and MemberClusters watched.
    const csrSeen = new Map<string, number>()
    const readyAt = new Map<string, number>()
    const changedAt = new Map<string, number>()
    const watcher = hub.agent(4)
    const csrs = await hub.stream("/apis/certificates.k8s.io/v1/certificatesigningrequests?watch=1", watcher)
    follow(csrs.response, (type, o) => {
      const member = /^member-(sim-\d+)-/.exec(o.metadata?.name ?? "")?.[1]
      if (type === "ADDED" && member !== undefined && !csrSeen.has(member)) csrSeen.set(member, performance.now())
    })
    const mcs = await hub.stream(`${group}/memberclusters?watch=1`, watcher)
    follow(mcs.response, (_type, o) => {
      const name = o.metadata?.name ?? ""
      if (readyOf(o) && !readyAt.has(name)) readyAt.set(name, performance.now())
      if (allocatedCpu(o) === "100m" && !changedAt.has(name)) changedAt.set(name, performance.now())
    })

    // The members: a kernel with its nodes each, then its federation side, joined at the pace asked.
    const kernels: Array<TestCluster.TestCluster> = []
    const startedAt = performance.now()
    for (let i = 0; i < members; i++) {
      const cluster = await Effect.runPromise(TestCluster.make({ nodes: 0, scheduler: false }).pipe(Scope.extend(scope)))
      for (let j = 0; j < nodesPerMember; j++) {
        await Effect.runPromise(cluster.client.create(node(`node-${j}`)))
        await Effect.runPromise(cluster.client.patch({ apiVersion: "v1", kind: "Node" }, undefined, `node-${j}`, "merge", nodeStatus, "status"))
      }
      kernels.push(cluster)
      const settings: HubJoin.Settings = { hub: hub.url, token, caHash, member: `sim-${i}` }
      Effect.runFork(
        HubJoin.run(settings, {
          dataDir: join(dir, `sim-${i}`),
          region: `r${i % 5}`,
          local: cluster.client,
          answer: MemberTunnelLink.localAnswer(cluster.handle, cluster.adminToken),
          version: HubJoin.fleetVersion
        }).pipe(Scope.extend(scope))
      )
      const due = startedAt + ((i + 1) * 1000) / joinRate
      const wait = due - performance.now()
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    }
    const deadline = Date.now() + 120_000
    while (readyAt.size < members && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
    if (readyAt.size < members) throw new Error(`only ${readyAt.size} of ${members} members Ready within 120 s`)
    const joins = ascending([...readyAt].map(([name, at]) => at - (csrSeen.get(name) ?? at)))
    const params = { members, nodesPerMember, joinRatePerSecond: joinRate, heartbeatMs: MemberAgent.defaultHeartbeatMs }
    print({ bench: "federation.join.p99", unit: "ms", value: round(percentile(joins, 99)), params: { ...params, p50Ms: round(percentile(joins, 50)), maxMs: round(joins[joins.length - 1]!), targetMs: 5000 } })

    // Staleness: one change per member, 10 per second, each timed to its appearance on the hub.
    const madeAt = new Map<string, number>()
    for (let i = 0; i < members; i++) {
      madeAt.set(`sim-${i}`, performance.now())
      await Effect.runPromise(kernels[i]!.client.create(pod("probe")))
      await new Promise((r) => setTimeout(r, 100))
    }
    const until = Date.now() + 60_000
    while (changedAt.size < members && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
    const stale = ascending([...madeAt].map(([name, at]) => (changedAt.get(name) ?? Infinity) - at))
    print({ bench: "federation.status.staleness.p99", unit: "ms", value: round(percentile(stale, 99)), params: { ...params, p50Ms: round(percentile(stale, 50)), seen: changedAt.size, targetMs: 2000 } })

    // The hub holding every member: let a heartbeat round pass, then read its memory.
    await new Promise((r) => setTimeout(r, MemberAgent.defaultHeartbeatMs + 2000))
    const rss = hub.rssMiB()
    if (rss !== undefined) print({ bench: "federation.hub.rss", unit: "MiB", value: rss.now, params: { ...params, peakMiB: rss.peak, targetMiB: 1024 } })
    csrs.response.destroy()
    mcs.response.destroy()
    watcher.destroy()
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await hub.stop()
    await rm(dir, { recursive: true, force: true })
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e)
    process.exit(1)
  }
)
