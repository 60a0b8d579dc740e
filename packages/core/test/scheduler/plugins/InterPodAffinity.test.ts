import { describe, expect, it } from "@effect/vitest"
import { CycleState } from "../../../src/scheduler/Framework.js"
import * as InterPodAffinity from "../../../src/scheduler/plugins/InterPodAffinity.js"
import * as Snapshot from "../../../src/scheduler/Snapshot.js"
import type { NodeInfo, PodInfo } from "../../../src/scheduler/Snapshot.js"
import { build, filterAll, filterNodes, hostname, node, pod, pods, random, scoreNodes, verdict, zone, zoned } from "./crossFixtures.js"

type Json = Record<string, unknown>
type Labels = Record<string, string>

const plugin = (args: unknown = {}, handle: Json = {}) => build<InterPodAffinity.InterPodAffinity>(InterPodAffinity.factory, args, handle)

const term = (matchLabels: Labels | undefined, topologyKey: string, extra: Json = {}): Json => ({
  ...(matchLabels === undefined ? {} : { labelSelector: { matchLabels } }),
  topologyKey,
  ...extra
})
const weighted = (weight: number, t: Json): Json => ({ weight, podAffinityTerm: t })

interface Terms {
  readonly affinity?: ReadonlyArray<Json>
  readonly anti?: ReadonlyArray<Json>
  readonly preferred?: ReadonlyArray<Json>
  readonly preferredAnti?: ReadonlyArray<Json>
}

/** A pod with the given (anti-)affinity terms. */
const withTerms = (labels: Labels, t: Terms, namespace = "default"): PodInfo =>
  pod({
    labels,
    namespace,
    spec: {
      affinity: {
        ...(t.affinity === undefined && t.preferred === undefined
          ? {}
          : { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: t.affinity ?? [], preferredDuringSchedulingIgnoredDuringExecution: t.preferred ?? [] } }),
        ...(t.anti === undefined && t.preferredAnti === undefined
          ? {}
          : { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: t.anti ?? [], preferredDuringSchedulingIgnoredDuringExecution: t.preferredAnti ?? [] } })
      }
    }
  })

const web = { app: "web" }
const db = { app: "db" }
const ok = "ok"
const affinityFails = `UnschedulableAndUnresolvable: ${InterPodAffinity.reasonAffinityRulesNotMatch}`
const antiFails = `Unschedulable: ${InterPodAffinity.reasonAntiAffinityRulesNotMatch}`
const existingFails = `Unschedulable: ${InterPodAffinity.reasonExistingAntiAffinityRulesNotMatch}`

describe("InterPodAffinity Filter", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly pod: PodInfo
    readonly nodes: ReadonlyArray<NodeInfo>
    readonly want: Record<string, string>
    readonly handle?: Json
  }> = [
    {
      name: "affinity: only the domain holding a matching pod",
      pod: withTerms(web, { affinity: [term(db, zone)] }),
      nodes: [zoned("a1", "A", pods(1, db)), zoned("a2", "A"), zoned("b1", "B")],
      want: { a1: ok, a2: ok, b1: affinityFails }
    },
    {
      name: "affinity: a node without the topology key fails",
      pod: withTerms(web, { affinity: [term(db, zone)] }),
      nodes: [zoned("a1", "A", pods(1, db)), node("x", {}, pods(1, db))],
      want: { a1: ok, x: affinityFails }
    },
    {
      name: "affinity: the first of a self-affine group goes anywhere with the key",
      pod: withTerms(web, { affinity: [term(web, zone)] }),
      nodes: [zoned("a1", "A"), zoned("b1", "B"), node("x")],
      want: { a1: ok, b1: ok, x: affinityFails }
    },
    {
      name: "affinity: once one of the group exists, only its domain",
      pod: withTerms(web, { affinity: [term(web, zone)] }),
      nodes: [zoned("a1", "A"), zoned("b1", "B", pods(1, web))],
      want: { a1: affinityFails, b1: ok }
    },
    {
      name: "affinity: no exception for a pod its own terms do not select",
      pod: withTerms(web, { affinity: [term(db, zone)] }),
      nodes: [zoned("a1", "A"), zoned("b1", "B")],
      want: { a1: affinityFails, b1: affinityFails }
    },
    {
      name: "affinity: every term must be matched by one and the same pod",
      pod: withTerms(web, { affinity: [term(db, zone), term({ tier: "cache" }, zone)] }),
      nodes: [zoned("a1", "A", [pod({ labels: db }), pod({ labels: { tier: "cache" } })]), zoned("b1", "B", pods(1, { app: "db", tier: "cache" }))],
      want: { a1: affinityFails, b1: ok }
    },
    {
      name: "affinity: terms select in the pod's own namespace by default",
      pod: withTerms(web, { affinity: [term(db, zone)] }),
      nodes: [zoned("a1", "A", pods(1, db, { namespace: "data" })), zoned("b1", "B")],
      want: { a1: affinityFails, b1: affinityFails }
    },
    {
      name: "affinity: listed namespaces",
      pod: withTerms(web, { affinity: [term(db, zone, { namespaces: ["data"] })] }),
      nodes: [zoned("a1", "A", pods(1, db, { namespace: "data" })), zoned("b1", "B")],
      want: { a1: ok, b1: affinityFails }
    },
    {
      name: "affinity: namespaceSelector {} selects every namespace",
      pod: withTerms(web, { affinity: [term(db, zone, { namespaceSelector: {} })] }),
      nodes: [zoned("a1", "A", pods(1, db, { namespace: "data" })), zoned("b1", "B")],
      want: { a1: ok, b1: affinityFails }
    },
    {
      name: "affinity: namespaceSelector by namespace labels from the handle's lookup",
      pod: withTerms(web, { affinity: [term(db, zone, { namespaceSelector: { matchLabels: { team: "a" } } })] }),
      nodes: [zoned("a1", "A", pods(1, db, { namespace: "data" })), zoned("b1", "B", pods(1, db, { namespace: "other" }))],
      handle: { namespaceLabels: (ns: string) => (ns === "data" ? { team: "a" } : { team: "b" }) },
      want: { a1: ok, b1: affinityFails }
    },
    {
      name: "affinity: namespaceSelector without a lookup selects no namespace",
      pod: withTerms(web, { affinity: [term(db, zone, { namespaceSelector: { matchLabels: { team: "a" } } })] }),
      nodes: [zoned("a1", "A", pods(1, db, { namespace: "data" })), zoned("b1", "B")],
      want: { a1: affinityFails, b1: affinityFails }
    },
    {
      name: "anti-affinity by hostname: not beside a matching pod",
      pod: withTerms(web, { anti: [term(web, hostname)] }),
      nodes: [node("n1", {}, pods(1, web)), node("n2"), node("n3", {}, pods(1, db))],
      want: { n1: antiFails, n2: ok, n3: ok }
    },
    {
      name: "anti-affinity by zone: the whole zone",
      pod: withTerms(web, { anti: [term(web, zone)] }),
      nodes: [zoned("a1", "A", pods(1, web)), zoned("a2", "A"), zoned("b1", "B"), node("x")],
      want: { a1: antiFails, a2: antiFails, b1: ok, x: ok }
    },
    {
      name: "anti-affinity: pods of another namespace do not count",
      pod: withTerms(web, { anti: [term(web, hostname)] }),
      nodes: [node("n1", {}, pods(1, web, { namespace: "other" })), node("n2")],
      want: { n1: ok, n2: ok }
    },
    {
      name: "anti-affinity: a term without labelSelector selects no pod",
      pod: withTerms(web, { anti: [term(undefined, hostname)] }),
      nodes: [node("n1", {}, pods(1, web)), node("n2")],
      want: { n1: ok, n2: ok }
    },
    {
      name: "anti-affinity: a term with an empty labelSelector selects every pod",
      pod: withTerms(web, { anti: [{ labelSelector: {}, topologyKey: hostname }] }),
      nodes: [node("n1", {}, pods(1, db)), node("n2")],
      want: { n1: antiFails, n2: ok }
    },
    {
      name: "existing pods' anti-affinity keeps the pod out of their domain",
      pod: pod({ labels: web }),
      nodes: [node("n1", {}, [withTerms(db, { anti: [term(web, hostname)] })]), node("n2")],
      want: { n1: existingFails, n2: ok }
    },
    {
      name: "existing pods' anti-affinity by zone",
      pod: pod({ labels: web }),
      nodes: [zoned("a1", "A", [withTerms(db, { anti: [term(web, zone)] })]), zoned("a2", "A"), zoned("b1", "B")],
      want: { a1: existingFails, a2: existingFails, b1: ok }
    },
    {
      name: "existing pods' anti-affinity with namespaceSelector reads the incoming pod's namespace labels",
      pod: pod({ labels: web, namespace: "front" }),
      nodes: [node("n1", {}, [withTerms(db, { anti: [term(web, hostname, { namespaceSelector: { matchLabels: { public: "yes" } } })] })]), node("n2")],
      handle: { namespaceLabels: (ns: string) => (ns === "front" ? { public: "yes" } : {}) },
      want: { n1: existingFails, n2: ok }
    },
    {
      name: "replicas with anti-affinity to each other: one per node",
      pod: withTerms(web, { anti: [term(web, hostname)] }),
      nodes: [node("n1", {}, [withTerms(web, { anti: [term(web, hostname)] })]), node("n2")],
      want: { n1: antiFails, n2: ok }
    },
    {
      name: "affinity, anti-affinity and existing anti-affinity together: the first failure is reported",
      pod: withTerms(web, { affinity: [term(db, zone)], anti: [term(web, hostname)] }),
      nodes: [
        zoned("a1", "A", pods(1, db)),
        zoned("a2", "A", pods(1, web)),
        zoned("a3", "A", [withTerms({ app: "batch" }, { anti: [term(web, hostname)] })]),
        zoned("b1", "B")
      ],
      want: { a1: ok, a2: antiFails, a3: existingFails, b1: affinityFails }
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const run = filterNodes(plugin({}, c.handle ?? {}), c.pod, c.nodes)
      expect(run.preFilter).toBe("ok")
      expect(run.verdicts).toEqual(c.want)
    })
  }

  it("skips a pod with no required terms that no existing anti-affinity selects", () => {
    expect(filterNodes(plugin(), pod({ labels: web }), [node("n1", {}, pods(2, web))]).preFilter).toBe("Skip: ")
    // Another namespace's anti-affinity defaults to that namespace.
    const other = [node("n1", {}, [withTerms(db, { anti: [term(web, hostname)] }, "other")])]
    expect(filterNodes(plugin(), pod({ labels: web }), other).preFilter).toBe("Skip: ")
    expect(filterNodes(plugin(), pod({ labels: web, namespace: "other" }), other).verdicts).toEqual({ n1: existingFails })
  })

  it("answers Error when Filter runs without PreFilter, and when another PreFilter moved the counts on", () => {
    const p = plugin()
    const me = withTerms(web, { anti: [term(web, hostname)] })
    const n1 = node("n1")
    expect(verdict(p.filter(new CycleState(), me, n1))).toMatch(/^Error: /)
    const first = new CycleState()
    p.preFilter(first, me, Snapshot.make([n1]))
    p.preFilter(new CycleState(), me, Snapshot.make([Snapshot.withPod(n1, pod({ labels: web }))]))
    expect(verdict(p.filter(first, me, n1))).toMatch(/stale/)
  })

  it("judges what-if views of a node (preemption) by the view's pods", () => {
    const p = plugin()
    const victim = pod({ labels: web })
    const n1 = node("n1", {}, [victim])
    const n2 = node("n2", {}, [withTerms(db, { anti: [term({ app: "api" }, hostname)] })])
    const n3 = node("n3", {}, pods(1, db))
    const nodes = [n1, n2, n3]
    // Anti-affinity: without the victim, n1 fits.
    const anti = withTerms({ app: "api" }, { anti: [term(web, hostname)] })
    const s1 = new CycleState()
    p.preFilter(s1, anti, Snapshot.make(nodes))
    expect(verdict(p.filter(s1, anti, n1))).toBe(antiFails)
    expect(verdict(p.filter(s1, anti, { ...n1, pods: [], generation: -3 }))).toBe(ok)
    // Existing anti-affinity: without its owner, n2 fits; a nominated pod carrying one closes n3.
    expect(verdict(p.filter(s1, anti, n2))).toBe(existingFails)
    expect(verdict(p.filter(s1, anti, Snapshot.withoutPod(n2, Snapshot.podKey(n2.pods[0]!))))).toBe(ok)
    expect(verdict(p.filter(s1, anti, n3))).toBe(ok)
    expect(verdict(p.filter(s1, anti, Snapshot.withPod(n3, withTerms({ app: "x" }, { anti: [term({ app: "api" }, hostname)] }))))).toBe(existingFails)
    // Affinity: without the only matching pod, n3 no longer fits (and nothing else matches, but the pod is not self-affine).
    const aff = withTerms(web, { affinity: [term(db, hostname)] })
    const s2 = new CycleState()
    p.preFilter(s2, aff, Snapshot.make(nodes))
    expect(verdict(p.filter(s2, aff, n3))).toBe(ok)
    expect(verdict(p.filter(s2, aff, { ...n3, pods: [], generation: -4 }))).toBe(affinityFails)
  })
})

describe("InterPodAffinity Score", () => {
  it.each([
    {
      name: "preferred affinity: weight × matching pods per domain",
      pod: withTerms(web, { preferred: [weighted(5, term(db, zone))] }),
      nodes: [zoned("a1", "A", pods(2, db)), zoned("b1", "B", pods(1, db)), zoned("c1", "C")],
      args: {},
      want: { a1: 100, b1: 50, c1: 0 }
    },
    {
      name: "preferred anti-affinity subtracts",
      pod: withTerms(web, { preferredAnti: [weighted(5, term(web, hostname))] }),
      nodes: [node("n0", {}, pods(2, web)), node("n1", {}, pods(1, web)), node("n2")],
      args: {},
      want: { n0: 0, n1: 50, n2: 100 }
    },
    {
      name: "both: affinity by zone, anti-affinity by hostname",
      pod: withTerms(web, { preferred: [weighted(4, term(db, zone))], preferredAnti: [weighted(2, term(web, hostname))] }),
      nodes: [zoned("a1", "A", [pod({ labels: db }), pod({ labels: web })]), zoned("a2", "A"), zoned("b1", "B")],
      args: {},
      want: { a1: 50, a2: 100, b1: 0 }
    },
    {
      name: "existing pods' preferred affinity the pod matches",
      pod: pod({ labels: web }),
      nodes: [zoned("a1", "A", [withTerms({ app: "cache" }, { preferred: [weighted(7, term(web, zone))] })]), zoned("a2", "A"), zoned("b1", "B")],
      args: {},
      want: { a1: 100, a2: 100, b1: 0 }
    },
    {
      name: "existing pods' preferred anti-affinity the pod matches",
      pod: pod({ labels: web }),
      nodes: [zoned("a1", "A", [withTerms({ app: "cache" }, { preferredAnti: [weighted(3, term(web, zone))] })]), zoned("b1", "B")],
      args: {},
      want: { a1: 0, b1: 100 }
    },
    {
      name: "existing pods' required affinity counts hardPodAffinityWeight (default 1)",
      pod: pod({ labels: web }),
      nodes: [zoned("a1", "A", [withTerms({ app: "sidecar" }, { affinity: [term(web, zone)] })]), zoned("b1", "B")],
      args: {},
      want: { a1: 100, b1: 0 }
    },
    {
      name: "hardPodAffinityWeight against a preferred weight",
      pod: pod({ labels: web }),
      nodes: [
        zoned("a1", "A", [withTerms({ app: "sidecar" }, { affinity: [term(web, zone)] })]),
        zoned("b1", "B", [withTerms({ app: "cache" }, { preferred: [weighted(5, term(web, zone))] })]),
        zoned("c1", "C")
      ],
      args: { hardPodAffinityWeight: 10 },
      want: { a1: 100, b1: 50, c1: 0 }
    },
    {
      name: "a term's namespaces limit what it counts",
      pod: withTerms(web, { preferred: [weighted(5, term(db, zone, { namespaces: ["data"] }))] }),
      nodes: [zoned("a1", "A", pods(3, db)), zoned("b1", "B", pods(1, db, { namespace: "data" }))],
      args: {},
      want: { a1: 0, b1: 100 }
    }
  ])("$name", ({ pod: p, nodes, args, want }) => {
    expect(scoreNodes(plugin(args), p, nodes)).toEqual({ preScore: "ok", scores: want })
  })

  it("skips when nothing would score: no terms matched, hardPodAffinityWeight 0, or existing preferences ignored", () => {
    const nodes = [zoned("a1", "A", [withTerms({ app: "sidecar" }, { affinity: [term(web, zone)], preferred: [weighted(3, term(web, zone))] })]), zoned("b1", "B")]
    expect(scoreNodes(plugin(), withTerms(web, { preferred: [weighted(5, term({ app: "none" }, zone))] }), [zoned("a1", "A")]).preScore).toBe("Skip: ")
    expect(scoreNodes(plugin({ hardPodAffinityWeight: 0 }), pod({ labels: web }), [nodes[0]!, nodes[1]!]).scores).toEqual({ a1: 100, b1: 0 })
    expect(scoreNodes(plugin({ ignorePreferredTermsOfExistingPods: true }), pod({ labels: web }), nodes).preScore).toBe("Skip: ")
    // With preferences of its own, the pod still gets the existing pods' terms.
    const own = withTerms(web, { preferred: [weighted(1, term({ app: "none" }, zone))] })
    expect(scoreNodes(plugin({ ignorePreferredTermsOfExistingPods: true }), own, nodes).scores).toEqual({ a1: 100, b1: 0 })
    expect(scoreNodes(plugin({ hardPodAffinityWeight: 0 }), pod({ labels: web }), [zoned("a1", "A", [withTerms({ app: "s" }, { affinity: [term(web, zone)] })])]).preScore).toBe("Skip: ")
  })

  it("equal raw scores normalise to 0", () => {
    const p = withTerms(web, { preferred: [weighted(5, term(db, zone))] })
    expect(scoreNodes(plugin(), p, [zoned("a1", "A", pods(1, db)), zoned("a2", "A")]).scores).toEqual({ a1: 0, a2: 0 })
  })
})

describe("InterPodAffinity factory", () => {
  it.each([
    [{ hardPodAffinityWeight: 101 }, /hardPodAffinityWeight: Invalid value: 101: not in valid range \[0-100\]/],
    [{ hardPodAffinityWeight: -1 }, /not in valid range/],
    [{ hardPodAffinityWeight: "5" }, /not in valid range/],
    [{ ignorePreferredTermsOfExistingPods: "yes" }, /must be a boolean/]
  ])("refuses %j", (args, message) => {
    const built = InterPodAffinity.factory(args, { schedulerName: "s" })
    expect(typeof built).toBe("string")
    expect(built as string).toMatch(message)
  })

  it("takes namespaceLabels from the args too", () => {
    const p = plugin({ namespaceLabels: () => ({ team: "a" }) })
    const me = withTerms(web, { affinity: [term(db, zone, { namespaceSelector: { matchLabels: { team: "a" } } })] })
    expect(filterNodes(p, me, [zoned("a1", "A", pods(1, db, { namespace: "data" })), zoned("b1", "B")]).verdicts).toEqual({ a1: ok, b1: affinityFails })
  })
})

describe("InterPodAffinity incremental counting", () => {
  it("answers as a fresh plugin through pods and nodes coming, going and relabelled", () => {
    const rnd = random(11)
    const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(rnd() * xs.length)]!
    const zones = ["A", "B", "C"]
    const apps = ["web", "db", "cache"]
    const randomPod = (): PodInfo => {
      const labels = { app: pick(apps) }
      const ns = pick(["default", "default", "other"])
      const r = rnd()
      if (r < 0.5) return pod({ labels, namespace: ns })
      return withTerms(
        labels,
        {
          ...(r < 0.65 ? { anti: [term({ app: pick(apps) }, pick([hostname, zone]))] } : {}),
          ...(r >= 0.65 && r < 0.75 ? { affinity: [term({ app: pick(apps) }, zone)] } : {}),
          ...(r >= 0.75 && r < 0.9 ? { preferred: [weighted(1 + Math.floor(rnd() * 10), term({ app: pick(apps) }, pick([hostname, zone])))] } : {}),
          ...(r >= 0.9 ? { preferredAnti: [weighted(1 + Math.floor(rnd() * 10), term({ app: pick(apps) }, zone, { namespaces: ["default", "other"] }))] } : {})
        },
        ns
      )
    }
    const makeNode = (i: number) => (i % 6 === 5 ? node(`n${i}`) : zoned(`n${i}`, pick(zones)))
    let nodes: Array<NodeInfo> = Array.from({ length: 9 }, (_, i) => makeNode(i))
    let nextNode = nodes.length
    const probes = [
      withTerms(web, { affinity: [term(db, zone)], anti: [term(web, hostname)] }),
      withTerms(web, { affinity: [term(web, zone), term({ app: "web" }, hostname)] }),
      withTerms(db, { preferred: [weighted(3, term(web, zone))], preferredAnti: [weighted(5, term(db, hostname))] }),
      pod({ labels: { app: "cache" } }),
      pod({ labels: web, namespace: "other" })
    ]
    const live = plugin({ hardPodAffinityWeight: 3 })
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
        const fresh = plugin({ hardPodAffinityWeight: 3 })
        expect(filterNodes(live, p, nodes).verdicts, `step ${step}`).toEqual(filterNodes(fresh, p, nodes).verdicts)
        expect(scoreNodes(live, p, nodes), `step ${step}`).toEqual(scoreNodes(plugin({ hardPodAffinityWeight: 3 }), p, nodes))
      }
    }
  })
})

describe("InterPodAffinity on a cache's snapshots", () => {
  it("skips pods without terms while no pod has any, and counts right once one does", () => {
    const cache = Snapshot.Cache.make()
    for (const name of ["n1", "n2", "n3"]) cache.addNode({ metadata: { name, labels: { [hostname]: name } }, status: { allocatable: { cpu: "4", pods: "110" } } })
    const bind = (p: PodInfo, nodeName: string) => cache.addPod({ ...p.pod, spec: { ...(p.pod["spec"] as Json), nodeName } })
    const live = plugin()
    const plain = pod({ labels: web })
    // Snapshots go by with plain pods only: the plugin has nothing to do for a pod without terms.
    for (const [i, n] of ["n1", "n2", "n1"].entries()) {
      expect(filterAll(live, plain, cache.snapshot()).preFilter, `snapshot ${i}`).toBe("Skip: ")
      bind(pod({ labels: web }), n)
    }
    // A pod that keeps web pods off its node arrives; a web pod without terms must now avoid n2.
    bind(withTerms(db, { anti: [term(web, hostname)] }), "n2")
    const snapshot = cache.snapshot()
    const seen = filterAll(live, plain, snapshot)
    expect(seen.verdicts).toEqual({ n1: ok, n2: existingFails, n3: ok })
    expect(seen.verdicts).toEqual(filterAll(plugin(), plain, snapshot).verdicts)
    // A pod with terms of its own is counted against every pod placed while the plugin skipped.
    const spread = withTerms(web, { anti: [term(web, hostname)] })
    expect(filterAll(live, spread, snapshot).verdicts).toEqual({ n1: antiFails, n2: antiFails, n3: ok })
  })
})
