import { describe, expect, it } from "@effect/vitest"
import { CycleState } from "../../../src/scheduler/Framework.js"
import * as InterPodAffinity from "../../../src/scheduler/plugins/InterPodAffinity.js"
import * as PodTopologySpread from "../../../src/scheduler/plugins/PodTopologySpread.js"
import * as Snapshot from "../../../src/scheduler/Snapshot.js"
import type { NodeInfo, PodInfo } from "../../../src/scheduler/Snapshot.js"
import { build, filterAll, filterNodes, hostname, node, nodeJson, pod, podJson, pods, random, scoreNodes, verdict, zone, zoned } from "./crossFixtures.js"

type Json = Record<string, unknown>

const plugin = (args: unknown = {}, handle: Json = {}) => build<PodTopologySpread.PodTopologySpread>(PodTopologySpread.factory, args, handle)

const foo = { app: "foo" }
const spread = (topologyKey: string, maxSkew: number, extra: Json = {}): Json => ({
  maxSkew,
  topologyKey,
  whenUnsatisfiable: "DoNotSchedule",
  labelSelector: { matchLabels: foo },
  ...extra
})
const soft = (topologyKey: string, maxSkew: number, extra: Json = {}): Json => spread(topologyKey, maxSkew, { whenUnsatisfiable: "ScheduleAnyway", ...extra })
const incoming = (constraints: ReadonlyArray<Json>, labels: Record<string, string> = foo, spec: Json = {}) =>
  pod({ name: "incoming", labels, spec: { topologySpreadConstraints: constraints, ...spec } })

const ok = "ok"
const skew = `Unschedulable: ${PodTopologySpread.reasonConstraintsNotMatch}`
const missing = `UnschedulableAndUnresolvable: ${PodTopologySpread.reasonMissingLabel}`
const noSchedule = [{ key: "dedicated", value: "x", effect: "NoSchedule" }]

describe("PodTopologySpread Filter", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly pod: PodInfo
    readonly nodes: ReadonlyArray<NodeInfo>
    readonly want: Record<string, string>
  }> = [
    {
      name: "zones 3 vs 1 with maxSkew 1: only the emptier zone",
      pod: incoming([spread(zone, 1)]),
      nodes: [zoned("a1", "A", pods(2, foo)), zoned("a2", "A", pods(1, foo)), zoned("b1", "B", pods(1, foo)), zoned("b2", "B")],
      want: { a1: skew, a2: skew, b1: ok, b2: ok }
    },
    {
      name: "a node without the topology key is unresolvable",
      pod: incoming([spread(zone, 1)]),
      nodes: [zoned("a1", "A"), node("x")],
      want: { a1: ok, x: missing }
    },
    {
      name: "per-node domains (hostname): 2, 1, 0 matching pods",
      pod: incoming([spread(hostname, 1)]),
      nodes: [node("n0", {}, pods(2, foo)), node("n1", {}, pods(1, foo)), node("n2")],
      want: { n0: skew, n1: skew, n2: ok }
    },
    {
      name: "a pod outside its own selector adds nothing to the skew",
      pod: incoming([spread(zone, 1)], { app: "bar" }),
      nodes: [zoned("a1", "A", pods(2, foo)), zoned("b1", "B", pods(1, foo))],
      want: { a1: ok, b1: ok }
    },
    {
      name: "pods of other namespaces are not counted",
      pod: incoming([spread(zone, 1)]),
      nodes: [zoned("a1", "A", pods(3, foo, { namespace: "other" })), zoned("b1", "B")],
      want: { a1: ok, b1: ok }
    },
    {
      name: "the same pods in the pod's namespace are",
      pod: incoming([spread(zone, 1)]),
      nodes: [zoned("a1", "A", pods(3, foo)), zoned("b1", "B")],
      want: { a1: skew, b1: ok }
    },
    {
      name: "terminating pods are not counted",
      pod: incoming([spread(zone, 1)]),
      nodes: [zoned("a1", "A", pods(2, foo, { metadata: { deletionTimestamp: "2024-01-01T00:00:00Z" } })), zoned("b1", "B")],
      want: { a1: ok, b1: ok }
    },
    {
      name: "nodeAffinityPolicy Honor (default): domains outside the pod's nodeSelector do not count",
      pod: incoming([spread(zone, 1)], foo, { nodeSelector: { [zone]: "A" } }),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("b1", "B")],
      want: { a1: ok, b1: ok }
    },
    {
      name: "nodeAffinityPolicy Ignore: they do",
      pod: incoming([spread(zone, 1, { nodeAffinityPolicy: "Ignore" })], foo, { nodeSelector: { [zone]: "A" } }),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("b1", "B")],
      want: { a1: skew, b1: ok }
    },
    {
      name: "nodeTaintsPolicy Ignore (default): a tainted domain counts",
      pod: incoming([spread(zone, 1)]),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("b1", "B", [], noSchedule)],
      want: { a1: skew, b1: ok }
    },
    {
      name: "nodeTaintsPolicy Honor: an untolerated tainted domain does not",
      pod: incoming([spread(zone, 1, { nodeTaintsPolicy: "Honor" })]),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("b1", "B", [], noSchedule)],
      want: { a1: ok, b1: ok }
    },
    {
      name: "nodeTaintsPolicy Honor: a tolerated taint keeps the domain",
      pod: incoming([spread(zone, 1, { nodeTaintsPolicy: "Honor" })], foo, { tolerations: [{ key: "dedicated", operator: "Exists" }] }),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("b1", "B", [], noSchedule)],
      want: { a1: skew, b1: ok }
    },
    {
      name: "enough domains for minDomains: the real minimum",
      pod: incoming([spread(zone, 1, { minDomains: 2 })]),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("b1", "B", pods(1, foo))],
      want: { a1: ok, b1: ok }
    },
    {
      name: "fewer domains than minDomains: the minimum is 0",
      pod: incoming([spread(zone, 1, { minDomains: 3 })]),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("b1", "B", pods(1, foo))],
      want: { a1: skew, b1: skew }
    },
    {
      name: "matchLabelKeys narrows the selector to the pod's own revision",
      pod: incoming([spread(zone, 1, { matchLabelKeys: ["rev"] })], { app: "foo", rev: "2" }),
      nodes: [zoned("a1", "A", pods(3, { app: "foo", rev: "1" })), zoned("b1", "B")],
      want: { a1: ok, b1: ok }
    },
    {
      name: "without matchLabelKeys every revision counts",
      pod: incoming([spread(zone, 1)], { app: "foo", rev: "2" }),
      nodes: [zoned("a1", "A", pods(3, { app: "foo", rev: "1" })), zoned("b1", "B")],
      want: { a1: skew, b1: ok }
    },
    {
      name: "two constraints: zone and hostname must both hold",
      pod: incoming([spread(zone, 1), spread(hostname, 1)]),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("a2", "A"), zoned("b1", "B")],
      want: { a1: skew, a2: skew, b1: ok }
    },
    {
      name: "a node lacking any constraint's key is unresolvable (and not a domain)",
      pod: incoming([spread(zone, 1), spread(hostname, 1)]),
      nodes: [zoned("a1", "A"), node("x", {}, pods(5, foo))],
      want: { a1: ok, x: missing }
    },
    {
      name: "an empty selector counts no pod (upstream), though the pod matches it",
      pod: incoming([spread(zone, 1, { labelSelector: {} })]),
      nodes: [zoned("a1", "A", pods(5, foo)), zoned("b1", "B")],
      want: { a1: ok, b1: ok }
    },
    {
      name: "no selector matches nothing",
      pod: incoming([spread(zone, 1, { labelSelector: undefined })]),
      nodes: [zoned("a1", "A", pods(5, foo)), zoned("b1", "B")],
      want: { a1: ok, b1: ok }
    },
    {
      name: "two constraints on one key with different selectors are counted apart",
      pod: incoming([spread(zone, 1), spread(zone, 1, { labelSelector: { matchLabels: { app: "bar" } } })]),
      nodes: [zoned("a1", "A", pods(2, { app: "bar" })), zoned("b1", "B")],
      want: { a1: skew, b1: ok }
    },
    {
      name: "maxSkew 2 tolerates a difference of 2",
      pod: incoming([spread(zone, 2)]),
      nodes: [zoned("a1", "A", pods(2, foo)), zoned("b1", "B", pods(1, foo))],
      want: { a1: ok, b1: ok }
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const run = filterNodes(plugin(), c.pod, c.nodes)
      expect(run.preFilter).toBe("ok")
      expect(run.verdicts).toEqual(c.want)
    })
  }

  it("skips pods without DoNotSchedule constraints", () => {
    const nodes = [zoned("a1", "A")]
    expect(filterNodes(plugin(), pod({ labels: foo }), nodes).preFilter).toBe("Skip: ")
    expect(filterNodes(plugin(), incoming([soft(zone, 1)]), nodes).preFilter).toBe("Skip: ")
  })

  it("answers Error when Filter runs without PreFilter, and when another PreFilter moved the counts on", () => {
    const p = plugin()
    const a1 = zoned("a1", "A")
    expect(verdict(p.filter(new CycleState(), incoming([spread(zone, 1)]), a1))).toMatch(/^Error: /)
    const first = new CycleState()
    p.preFilter(first, incoming([spread(zone, 1)]), Snapshot.make([a1]))
    p.preFilter(new CycleState(), incoming([spread(zone, 1)]), Snapshot.make([Snapshot.withPod(a1, pod({ labels: foo }))]))
    expect(verdict(p.filter(first, incoming([spread(zone, 1)]), a1))).toMatch(/stale/)
  })

  it("judges what-if views of a node (preemption) against the snapshot's counts", () => {
    const victims = pods(2, foo)
    const n0 = node("n0", {}, victims)
    const n1 = node("n1")
    const p = plugin()
    const me = incoming([spread(hostname, 1)])
    const state = new CycleState()
    p.preFilter(state, me, Snapshot.make([n0, n1]))
    expect(verdict(p.filter(state, me, n0))).toBe(skew)
    // One victim gone: 1 + 1 − 0 still exceeds 1; both gone: fits. Views carry fresh or negative generations.
    expect(verdict(p.filter(state, me, Snapshot.withoutPod(n0, Snapshot.podKey(victims[0]!))))).toBe(skew)
    expect(verdict(p.filter(state, me, { ...n0, pods: [], generation: -7 }))).toBe(ok)
    // A nominated pod added to the emptiest node raises the minimum it was alone at.
    const z = [zoned("a1", "A"), zoned("b1", "B", pods(2, foo))]
    const zs = new CycleState()
    const zpod = incoming([spread(zone, 1)])
    p.preFilter(zs, zpod, Snapshot.make(z))
    expect(verdict(p.filter(zs, zpod, z[0]!))).toBe(ok)
    // a1 with 3 more: A = 3, the minimum moves to B = 2: 3 + 1 − 2 = 2 > 1.
    const grown = [pod({ labels: foo }), pod({ labels: foo }), pod({ labels: foo })].reduce((n, x) => Snapshot.withPod(n, x), z[0]!)
    expect(verdict(p.filter(zs, zpod, grown))).toBe(skew)
    // B at 2 with maxSkew 2: 3 + 1 − 2 = 2 fits (a minimum left at 0 would not).
    const wide = incoming([spread(zone, 2)])
    const ws = new CycleState()
    p.preFilter(ws, wide, Snapshot.make(z))
    expect(verdict(p.filter(ws, wide, grown))).toBe(ok)
  })
})

describe("PodTopologySpread Score", () => {
  it.each([
    {
      name: "hostname, maxSkew 1: fewer matching pods score higher (weight ln(3 + 2))",
      pod: incoming([soft(hostname, 1)]),
      nodes: [node("n0"), node("n1", {}, pods(1, foo)), node("n2", {}, pods(2, foo))],
      // raw: 0, round(1.609) = 2, round(3.219) = 3 → 100·(3 + 0 − s)/3
      want: { n0: 100, n1: 33, n2: 0 }
    },
    {
      name: "zones: counts per domain (A 2, B 1, C 0)",
      pod: incoming([soft(zone, 1)]),
      nodes: [zoned("a1", "A", pods(2, foo)), zoned("a2", "A"), zoned("b1", "B", pods(1, foo)), zoned("c1", "C")],
      want: { a1: 0, a2: 0, b1: 33, c1: 100 }
    },
    {
      name: "a node missing the key is ignored (0) and not a domain",
      pod: incoming([soft(zone, 1)]),
      nodes: [zoned("a1", "A", pods(1, foo)), zoned("b1", "B"), node("x")],
      want: { a1: 0, b1: 100, x: 0 }
    },
    {
      name: "maxSkew − 1 is added to every raw score, softening the differences",
      pod: incoming([soft(hostname, 3)]),
      nodes: [node("n0"), node("n1", {}, pods(1, foo))],
      // raw: 2, round(1.386 + 2) = 3 → 100·(3 + 2 − s)/3
      want: { n0: 100, n1: 66 }
    },
    {
      name: "nothing matches anywhere: every node 100",
      pod: incoming([soft(hostname, 1)]),
      nodes: [node("n0"), node("n1")],
      want: { n0: 100, n1: 100 }
    }
  ])("$name", ({ pod: p, nodes, want }) => {
    expect(scoreNodes(plugin(), p, nodes)).toEqual({ preScore: "ok", scores: want })
  })

  it("weights domains by the feasible nodes only, but counts pods on every node", () => {
    const nodes = [zoned("a1", "A", pods(1, foo)), zoned("a2", "A", pods(3, foo)), zoned("b1", "B")]
    // Only a1 and b1 feasible: A still holds 4 → raw a1 = round(4·ln 4) = 6, b1 = 0.
    expect(scoreNodes(plugin(), incoming([soft(zone, 1)]), nodes, [nodes[0]!, nodes[2]!]).scores).toEqual({ a1: 0, b1: 100 })
  })

  it("skips pods with no ScheduleAnyway constraint and no default", () => {
    expect(scoreNodes(plugin(), incoming([spread(zone, 1)]), [zoned("a1", "A")]).preScore).toBe("Skip: ")
    expect(scoreNodes(plugin(), pod({ labels: foo }), [zoned("a1", "A")]).preScore).toBe("Skip: ")
  })

  it("System defaulting spreads a ReplicaSet's pods by hostname (maxSkew 3) and zone (maxSkew 5), zone-less nodes by hostname only", () => {
    const owned = pod({ labels: foo, metadata: { ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs", uid: "u", controller: true }] } })
    const nodes = [zoned("a1", "A", pods(1, foo)), zoned("a2", "A"), node("x")]
    // hostname weight ln 5, zone weight ln 4 (domains A and the zone-less ""):
    // a1 = round(1·1.609 + 2 + 1·1.386 + 4) = 9, a2 = round(2 + 1.386 + 4) = 7, x = 2.
    expect(scoreNodes(plugin(), owned, nodes)).toEqual({ preScore: "ok", scores: { a1: 22, a2: 44, x: 100 } })
  })

  it("the default selector comes from the handle when given, else from a controller's pod labels less per-pod ones", () => {
    const p = pod({ labels: { app: "foo", "controller-revision-hash": "h", "statefulset.kubernetes.io/pod-name": "web-0" }, metadata: { ownerReferences: [{ kind: "StatefulSet", name: "web", uid: "u", controller: true }] } })
    expect(PodTopologySpread.ownerLabelsSelector(p)).toEqual({ matchLabels: { app: "foo" } })
    expect(PodTopologySpread.ownerLabelsSelector(pod({ labels: foo, metadata: { ownerReferences: [{ kind: "Job", name: "j", uid: "u", controller: true }] } }))).toBeUndefined()
    const nodes = [node("n0", {}, pods(2, { tier: "web" })), node("n1")]
    const withLookup = plugin({}, { defaultSelector: () => ({ matchLabels: { tier: "web" } }) })
    // hostname maxSkew 3, weight ln 4: n0 = round(2·1.386 + 2) = 5, n1 = 2 → 100·(5 + 2 − s)/5.
    expect(scoreNodes(withLookup, pod({ labels: { tier: "web" } }), nodes).scores).toEqual({ n0: 40, n1: 100 })
  })

  it("List defaulting applies the args' constraints, DoNotSchedule ones at Filter", () => {
    const p = plugin(
      { defaultingType: "List", defaultConstraints: [{ maxSkew: 1, topologyKey: zone, whenUnsatisfiable: "DoNotSchedule" }] },
      { defaultSelector: () => ({ matchLabels: foo }) }
    )
    const run = filterNodes(p, pod({ labels: foo }), [zoned("a1", "A", pods(2, foo)), zoned("b1", "B")])
    expect(run.verdicts).toEqual({ a1: skew, b1: ok })
    // A pod with its own constraints ignores the defaults.
    expect(filterNodes(p, incoming([soft(zone, 1)]), [zoned("a1", "A", pods(2, foo)), zoned("b1", "B")]).preFilter).toBe("Skip: ")
  })
})

describe("PodTopologySpread factory", () => {
  it.each([
    [{ defaultingType: "Bogus" }, /defaultingType: Unsupported value/],
    [{ defaultingType: "System", defaultConstraints: [{ maxSkew: 1, topologyKey: zone, whenUnsatisfiable: "DoNotSchedule" }] }, /must be empty/],
    [{ defaultingType: "List", defaultConstraints: [{ maxSkew: 0, topologyKey: zone, whenUnsatisfiable: "DoNotSchedule" }] }, /maxSkew/],
    [{ defaultingType: "List", defaultConstraints: [{ maxSkew: 1, topologyKey: "", whenUnsatisfiable: "DoNotSchedule" }] }, /topologyKey/],
    [{ defaultingType: "List", defaultConstraints: [{ maxSkew: 1, topologyKey: zone, whenUnsatisfiable: "Maybe" }] }, /whenUnsatisfiable/],
    [{ defaultingType: "List", defaultConstraints: [{ maxSkew: 1, topologyKey: zone, whenUnsatisfiable: "DoNotSchedule", labelSelector: {} }] }, /must not define a selector/],
    [
      {
        defaultingType: "List",
        defaultConstraints: [
          { maxSkew: 1, topologyKey: zone, whenUnsatisfiable: "DoNotSchedule" },
          { maxSkew: 2, topologyKey: zone, whenUnsatisfiable: "DoNotSchedule" }
        ]
      },
      /Duplicate/
    ]
  ])("refuses %j", (args, message) => {
    const built = PodTopologySpread.factory(args, { schedulerName: "s" })
    expect(typeof built).toBe("string")
    expect(built as string).toMatch(message)
  })
})

// ---- Incremental counts against recounting -----------------------------------------------------

describe("PodTopologySpread incremental counting", () => {
  it("answers as a fresh plugin through pods and nodes coming, going and relabelled", () => {
    const rnd = random(7)
    const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(rnd() * xs.length)]!
    const zones = ["A", "B", "C"]
    const randomPod = () =>
      pod({
        labels: { app: pick(["foo", "bar"]), rev: pick(["1", "2"]) },
        namespace: pick(["default", "default", "other"]),
        ...(rnd() < 0.1 ? { metadata: { deletionTimestamp: "2024-01-01T00:00:00Z" } } : {})
      })
    const makeNode = (i: number) => (i % 7 === 6 ? node(`n${i}`, {}, [], i % 2 === 0 ? noSchedule : undefined) : zoned(`n${i}`, pick(zones), [], i % 3 === 0 ? noSchedule : undefined))
    let nodes: Array<NodeInfo> = Array.from({ length: 10 }, (_, i) => makeNode(i))
    let nextNode = nodes.length
    const probes = [
      incoming([spread(zone, 1), soft(hostname, 2)]),
      incoming([spread(hostname, 1, { nodeTaintsPolicy: "Honor", matchLabelKeys: ["rev"] }), soft(zone, 1)], { app: "foo", rev: "1" }),
      incoming([spread(zone, 1, { minDomains: 4 }), spread(zone, 2, { labelSelector: { matchLabels: { app: "bar" } } })], foo, { nodeSelector: { [zone]: "A" } }),
      incoming([soft(zone, 1, { nodeAffinityPolicy: "Ignore" }), soft(hostname, 1)])
    ]
    const live = plugin()
    for (let step = 0; step < 150; step++) {
      const r = rnd()
      const i = Math.floor(rnd() * nodes.length)
      const n = nodes[i]!
      if (r < 0.45) nodes[i] = Snapshot.withPod(n, randomPod())
      else if (r < 0.7 && n.pods.length > 0) nodes[i] = Snapshot.withoutPod(n, Snapshot.podKey(pick(n.pods)))
      else if (r < 0.8) nodes[i] = zoned(n.name, pick(zones), n.pods)
      else if (r < 0.88 && nodes.length > 3) nodes = nodes.filter((_, j) => j !== i)
      else if (r < 0.95) nodes.push(makeNode(nextNode++))
      else nodes = [...nodes].reverse()
      for (const p of probes) {
        const got = filterNodes(live, p, nodes)
        const want = filterNodes(plugin(), p, nodes)
        expect(got.verdicts, `step ${step}`).toEqual(want.verdicts)
        expect(scoreNodes(live, p, nodes), `step ${step}`).toEqual(scoreNodes(plugin(), p, nodes))
      }
    }
  })
})

describe("PodTopologySpread following a Cache's snapshot deltas", () => {
  it("answers as a fresh plugin while snapshots say only what changed, are skipped, or come from elsewhere", () => {
    const rnd = random(11)
    const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(rnd() * xs.length)]!
    const zones = ["A", "B", "C"]
    const cache = Snapshot.Cache.make()
    const nodeNames: Array<string> = []
    const podsOn = new Map<string, Json>()
    let nextNode = 0
    const addNode = () => {
      const name = `n${nextNode++}`
      nodeNames.push(name)
      cache.addNode(nodeJson(name, { [zone]: pick(zones) }))
    }
    for (let i = 0; i < 8; i++) addNode()
    const probes = [incoming([spread(zone, 1), soft(hostname, 2)]), incoming([spread(hostname, 1), soft(zone, 1)], { app: "foo", rev: "1" })]
    const live = plugin()
    for (let step = 0; step < 200; step++) {
      const r = rnd()
      if (r < 0.45 && nodeNames.length > 0) {
        const p = podJson({ labels: { app: pick(["foo", "bar"]) }, spec: { nodeName: pick(nodeNames) } })
        podsOn.set(String((p["metadata"] as Json)["uid"]), p)
        cache.addPod(p)
      } else if (r < 0.7 && podsOn.size > 0) {
        const uid = pick([...podsOn.keys()])
        cache.removePod(podsOn.get(uid)!)
        podsOn.delete(uid)
      } else if (r < 0.8 && nodeNames.length > 0) {
        cache.updateNode(nodeJson(pick(nodeNames), { [zone]: pick(zones) }))
      } else if (r < 0.87 && nodeNames.length > 3) {
        const name = pick(nodeNames)
        nodeNames.splice(nodeNames.indexOf(name), 1)
        cache.removeNode(nodeJson(name))
      } else {
        addNode()
      }
      // Some changes pile up over two steps (a snapshot nobody synced in between is skipped).
      if (rnd() < 0.2) continue
      const fromCache = cache.snapshot()
      // Now and then a snapshot without a delta, as preemption's what-if views and tests make.
      const snapshot = rnd() < 0.1 ? Snapshot.make(fromCache.nodes) : fromCache
      for (const p of probes) {
        const got = filterAll(live, p, snapshot)
        const want = filterAll(plugin(), p, Snapshot.make(snapshot.nodes))
        expect(got.verdicts, `step ${step}`).toEqual(want.verdicts)
      }
    }
  })
})

// ---- Scale ---------------------------------------------------------------------------------------

describe("PodTopologySpread and InterPodAffinity at scale", () => {
  it("run PreFilter + Filter over 5,000 nodes carrying 10,000 pods, placing pods one by one, and keep the zone skew", () => {
    const zones = 10
    const web = { app: "web" }
    const podSpec = {
      topologySpreadConstraints: [spread(zone, 1, { labelSelector: { matchLabels: web } }), soft(hostname, 1, { labelSelector: { matchLabels: web } })],
      affinity: {
        podAntiAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: hostname, labelSelector: { matchLabels: { app: "db" } } }],
          preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 10, podAffinityTerm: { topologyKey: hostname, labelSelector: { matchLabels: web } } }]
        }
      }
    }
    let nodes: Array<NodeInfo> = Array.from({ length: 5000 }, (_, i) => {
      const on = [pod({ labels: web, spec: podSpec }), pod({ labels: web, spec: podSpec })]
      if (i % 50 === 0) on.push(pod({ labels: { app: "db" } }))
      return zoned(`node-${i}`, `z${i % zones}`, on)
    })
    const spreadPlugin = plugin()
    const affinity = build<InterPodAffinity.InterPodAffinity>(InterPodAffinity.factory)
    const placed = new Map<string, number>()
    for (let k = 0; k < 200; k++) {
      const p = pod({ labels: web, spec: podSpec })
      const snapshot = Snapshot.make(nodes)
      const state = new CycleState()
      expect(spreadPlugin.preFilter(state, p, snapshot).status.code).toBe("Success")
      expect(affinity.preFilter(state, p, snapshot).status.code).toBe("Success")
      let chosen = -1
      for (let i = 0; i < nodes.length; i++) {
        const n = nodes[i]!
        const fits = spreadPlugin.filter(state, p, n).code === "Success" && affinity.filter(state, p, n).code === "Success"
        if (fits && chosen < 0) chosen = i
      }
      expect(chosen).toBeGreaterThanOrEqual(0)
      const target = nodes[chosen]!
      expect(target.pods.some((x) => x.labels["app"] === "db")).toBe(false)
      nodes = nodes.slice()
      nodes[chosen] = Snapshot.withPod(target, p)
      const z = target.labels[zone]!
      placed.set(z, (placed.get(z) ?? 0) + 1)
    }
    // The zones started even, so DoNotSchedule with maxSkew 1 keeps them within one pod.
    const counts = Array.from({ length: zones }, (_, i) => placed.get(`z${i}`) ?? 0)
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1)
    expect(filterAll(spreadPlugin, pod({ labels: web, spec: podSpec }), Snapshot.make(nodes)).preFilter).toBe("ok")
  }, 120_000)
})
