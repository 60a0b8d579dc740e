import { describe, expect, it } from "vitest"
import * as Batch from "../../src/scheduler/OpportunisticBatching.js"
import { CycleState, type Framework } from "../../src/scheduler/Framework.js"
import * as Plugins from "../../src/scheduler/plugins/index.js"
import * as Profiles from "../../src/scheduler/Profiles.js"
import * as Schedule from "../../src/scheduler/Schedule.js"
import * as Snapshot from "../../src/scheduler/Snapshot.js"

// The real default profile: batching is about which of its plugins may be trusted node by node.
const built = Profiles.build(Profiles.defaultProfile, Plugins.registry, { schedulerName: Profiles.DefaultSchedulerName })
if (built._tag === "Left") throw new Error(built.left)
const framework: Framework = built.right

type Json = Record<string, unknown>

const nodeObject = (name: string, cpu = "4", spec: Json = {}, labels: Record<string, string> = {}) => ({
  metadata: { name, labels: { "kubernetes.io/hostname": name, ...labels } },
  spec,
  status: { allocatable: { cpu, memory: "16Gi", pods: "110" } }
})

let uid = 0
const podObject = (cpu = "500m", spec: Json = {}, extra: { labels?: Record<string, string>; status?: Json } = {}) => {
  const n = ++uid
  return {
    metadata: { name: `p${n}`, namespace: "default", uid: `u${n}`, labels: extra.labels ?? { app: "web" } },
    spec: { containers: [{ name: "c", image: "x", resources: { requests: { cpu, memory: "256Mi" } } }], ...spec },
    status: extra.status ?? {}
  }
}

/** A cache over `nodes`, some of them already carrying a bound pod of `preload` CPU. */
const cluster = (nodes: ReadonlyArray<Json>, preload: Record<string, string> = {}) => {
  const cache = Snapshot.Cache.make()
  for (const n of nodes) cache.addNode(n)
  for (const [node, cpu] of Object.entries(preload)) {
    const p = podObject(cpu)
    cache.addPod({ ...p, spec: { ...p.spec, nodeName: node }, status: { phase: "Running" } })
  }
  return cache
}

/** The best total a full cycle finds for `pod` on `snapshot`, and the total it gives `node`. */
const fullCycle = (pod: Snapshot.PodInfo, snapshot: Snapshot.Snapshot, node: string) => {
  const d = Schedule.schedule(framework, new CycleState(), pod, snapshot, { percentageOfNodesToScore: 100 })
  if (d._tag !== "Scheduled" || d.scores === undefined) throw new Error(`full cycle: ${JSON.stringify(d)}`)
  const totals = Array.from(d.scores.totals)
  return { best: Math.max(...totals), ofNode: totals[d.scores.nodes.indexOf(node)] }
}

/** Schedule `pods` one after another through `batch`, assuming each where it goes, at 1 ms apart. */
const place = (batch: Batch.Batch, cache: Snapshot.Cache, pods: ReadonlyArray<Json>, t0 = 0) =>
  pods.map((p, i) => {
    const pod = Snapshot.podInfo(p)
    const snapshot = cache.snapshot()
    const { decision } = batch.schedule(framework, pod, snapshot, { percentageOfNodesToScore: 100 }, t0 + i)
    if (decision._tag === "Scheduled") cache.assume(pod, decision.node)
    return { pod, snapshot, decision }
  })

const reused = (d: Schedule.Decision) => (d._tag === "Scheduled" ? d.reusedFrom : undefined)

describe("Batch (opportunistic batching)", () => {
  it("places a run of identical pods where a full cycle scores highest, reusing the first pod's scores", () => {
    const nodes = Array.from({ length: 12 }, (_, i) => nodeObject(`n${i}`))
    const cache = cluster(nodes, { n0: "2", n3: "1500m", n7: "500m", n8: "3" })
    const batch = Batch.make()
    const placed = place(batch, cache, Array.from({ length: 40 }, () => podObject()))
    for (const { pod, snapshot, decision } of placed) {
      if (decision._tag !== "Scheduled") throw new Error(JSON.stringify(decision))
      const { best, ofNode } = fullCycle(pod, snapshot, decision.node)
      expect(ofNode).toBe(best)
    }
    const first = `default/${placed[0]!.pod.name}`
    expect(reused(placed[0]!.decision)).toBeUndefined()
    expect(placed.slice(1).every((p) => reused(p.decision) === first)).toBe(true)
    expect(batch.batched()).toBe(39)
    // The batch spread the pods as the scores say: LeastAllocated fills the emptiest nodes first.
    const onNode = (n: string) => placed.filter((p) => p.decision._tag === "Scheduled" && p.decision.node === n).length
    expect(onNode("n8")).toBeLessThan(onNode("n1"))
  })

  it("never overcommits a node: nodes that fill up drop out, and then the pod is unschedulable", () => {
    const nodes = Array.from({ length: 5 }, (_, i) => nodeObject(`n${i}`, "1"))
    const cache = cluster(nodes)
    const placed = place(Batch.make(), cache, Array.from({ length: 12 }, () => podObject("500m")))
    const scheduled = placed.filter((p) => p.decision._tag === "Scheduled")
    expect(scheduled).toHaveLength(10)
    for (const n of cache.snapshot().nodes) expect(n.requested.milliCpu).toBeLessThanOrEqual(1000)
    expect(placed.slice(10).map((p) => p.decision._tag)).toEqual(["Unschedulable", "Unschedulable"])
  })

  it("batches replicas with required anti-affinity and zone spread, judging those afresh for each", () => {
    // Nodes of different sizes, so the scores differ and the batch's order matters.
    const nodes = Array.from({ length: 12 }, (_, i) => nodeObject(`n${i}`, i % 4 === 0 ? "4" : "8", {}, { "topology.kubernetes.io/zone": `z${i % 3}` }))
    const cache = cluster(nodes)
    const selector = { matchLabels: { app: "web" } }
    const spec = {
      affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: selector, topologyKey: "kubernetes.io/hostname" }] } },
      topologySpreadConstraints: [{ maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "DoNotSchedule", labelSelector: selector }]
    }
    const placed = place(Batch.make(), cache, Array.from({ length: 14 }, () => podObject("500m", spec)))
    const scheduled = placed.filter((p) => p.decision._tag === "Scheduled")
    // Twelve nodes, one replica each: the last two fit nowhere.
    expect(scheduled).toHaveLength(12)
    expect(placed.slice(12).map((p) => p.decision._tag)).toEqual(["Unschedulable", "Unschedulable"])
    const where = scheduled.map((p) => (p.decision._tag === "Scheduled" ? p.decision.node : ""))
    expect(new Set(where).size).toBe(12)
    // After every placement, no zone is more than one replica ahead of another.
    const counts = [0, 0, 0]
    for (const n of where) {
      counts[Number(n.slice(1)) % 3]!++
      expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1)
    }
    expect(scheduled.filter((p) => reused(p.decision) !== undefined).length).toBeGreaterThanOrEqual(6)
  })

  it("keeps a spread batch going when the zone the spread allows has no node in its sample", () => {
    // 300 nodes in 3 zones, 100 scored per full cycle: a sample can miss the one zone allowed next.
    const nodes = Array.from({ length: 300 }, (_, i) => nodeObject(`n${i}`, "8", {}, { "topology.kubernetes.io/zone": `z${i % 3}` }))
    const cache = cluster(nodes)
    const selector = { matchLabels: { app: "web" } }
    const spec = {
      affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: selector, topologyKey: "kubernetes.io/hostname" }] } },
      topologySpreadConstraints: [{ maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "DoNotSchedule", labelSelector: selector }]
    }
    const batch = Batch.make()
    const counts = [0, 0, 0]
    const used = new Set<string>()
    for (let i = 0; i < 150; i++) {
      const pod = Snapshot.podInfo(podObject("500m", spec))
      const { decision } = batch.schedule(framework, pod, cache.snapshot(), { percentageOfNodesToScore: 10 }, i)
      if (decision._tag !== "Scheduled") throw new Error(JSON.stringify(decision))
      cache.assume(pod, decision.node)
      expect(used.has(decision.node)).toBe(false)
      used.add(decision.node)
      counts[Number(decision.node.slice(1)) % 3]!++
      expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1)
    }
    expect(batch.batched()).toBeGreaterThanOrEqual(140)
  })

  it("does not batch pods whose scores read other nodes, or that differ, or come too late", () => {
    const nodes = Array.from({ length: 6 }, (_, i) => nodeObject(`n${i}`, "8", {}, { "topology.kubernetes.io/zone": `z${i % 2}` }))
    const preferredAnti = {
      affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 10, podAffinityTerm: { labelSelector: { matchLabels: { app: "web" } }, topologyKey: "kubernetes.io/hostname" } }] } }
    }
    const softSpread = { topologySpreadConstraints: [{ maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway", labelSelector: { matchLabels: { app: "web" } } }] }
    const cases: ReadonlyArray<{ readonly name: string; readonly pods: ReadonlyArray<Json>; readonly gapMs?: number }> = [
      { name: "preferred anti-affinity", pods: [podObject("500m", preferredAnti), podObject("500m", preferredAnti)] },
      { name: "soft topology spread", pods: [podObject("500m", softSpread), podObject("500m", softSpread)] },
      { name: "different requests", pods: [podObject("500m"), podObject("600m")] },
      { name: "different tolerations", pods: [podObject("500m"), podObject("500m", { tolerations: [{ operator: "Exists" }] })] },
      { name: "a nominated node", pods: [podObject("500m"), podObject("500m", {}, { status: { nominatedNodeName: "n1" } })] },
      { name: "older than 500 ms", pods: [podObject("500m"), podObject("500m")], gapMs: Batch.MaxBatchAgeMs + 1 }
    ]
    for (const c of cases) {
      const cache = cluster(nodes)
      const batch = Batch.make()
      const decisions = c.pods.map((p, i) => {
        const pod = Snapshot.podInfo(p)
        const { decision } = batch.schedule(framework, pod, cache.snapshot(), {}, i * (c.gapMs ?? 1))
        if (decision._tag === "Scheduled") cache.assume(pod, decision.node)
        return decision
      })
      expect(decisions.map((d) => d._tag), c.name).toEqual(["Scheduled", "Scheduled"])
      expect(decisions.map(reused), c.name).toEqual([undefined, undefined])
    }
  })

  it("does not batch when a normalised score differs between nodes (a PreferNoSchedule taint)", () => {
    const tainted = { taints: [{ key: "spot", value: "true", effect: "PreferNoSchedule" }] }
    const nodes = [nodeObject("n0", "4", tainted), nodeObject("n1"), nodeObject("n2")]
    const cache = cluster(nodes)
    const placed = place(Batch.make(), cache, [podObject(), podObject(), podObject()])
    expect(placed.map((p) => reused(p.decision))).toEqual([undefined, undefined, undefined])
    // Untainted nodes first, as TaintToleration's score asks.
    expect(placed.map((p) => (p.decision._tag === "Scheduled" ? p.decision.node : "")).slice(0, 2).sort()).toEqual(["n1", "n2"])
  })

  it("explains a batched placement by the pod whose scores it reused", () => {
    const cache = cluster([nodeObject("n0"), nodeObject("n1"), nodeObject("n2")])
    const [a, b] = place(Batch.make(), cache, [podObject(), podObject()])
    const explanation = Schedule.explain(b!.decision)
    expect(explanation.result).toBe("Scheduled")
    expect(explanation.reusedScoresOf).toBe(`default/${a!.pod.name}`)
  })
})
