/**
 * InterPodAffinity (upstream `interpodaffinity`): places a pod relative to the pods already in a
 * topology domain (a node, a zone: any node label named by `topologyKey`).
 *
 * Filter, from PreFilter's counts: every required affinity term needs a matching pod in the
 * node's domain (`node(s) didn't match pod affinity rules`, UnschedulableAndUnresolvable) — except
 * that a pod whose terms match itself may be the first of its kind when no pod anywhere matches;
 * no required anti-affinity term may have one (`node(s) didn't match pod anti-affinity rules`);
 * and no existing pod's required anti-affinity term that the pod matches may have its owner in
 * the node's domain (`node(s) didn't satisfy existing pods anti-affinity rules`). Score sums, per
 * domain, the weights of the pod's preferred terms matched by existing pods (anti-affinity
 * subtracts), the weights of existing pods' preferred terms the pod matches, and
 * `hardPodAffinityWeight` (default 1) per existing pod whose required affinity the pod matches;
 * then rescales min..max to 0..100. A term's namespaces default to its pod's own; a
 * `namespaceSelector` reads namespace labels through the `namespaceLabels` lookup of the handle
 * (or args) — `{}` selects every namespace without it.
 *
 * Departures: counts are kept incrementally across cycles (existing pods' terms grouped by term,
 * the pod's terms through PodTopologySpread's TopologyCountsCache), so PreFilter costs one pass
 * comparing node generations plus the pods on nodes that changed, and Filter is O(terms); the
 * answers are upstream's. Terms with a non-empty `namespaceSelector` on the incoming pod are
 * counted afresh each cycle (namespace labels can change under a cache). Without a
 * `namespaceLabels` lookup a non-empty `namespaceSelector` selects no namespace. Fleet's Pod model
 * has no `matchLabelKeys`/`mismatchLabelKeys` on affinity terms (upstream merges them at
 * admission). There are no PreFilterExtensions (AddPod/RemovePod) in the framework contract:
 * Filter recognises a what-if view of a node (a generation outside the snapshot's, as preemption
 * builds them) and counts that node's pods from the view instead, to the same effect.
 */
import type { JsonObject } from "../../object/Json.js"
import * as LabelSelector from "../../model/LabelSelector.js"
import type { Factory, FilterPlugin, Handle, PreFilterPlugin, PreScorePlugin, ScorePlugin, Status } from "../Framework.js"
import { MaxScore, status, success } from "../Framework.js"
import type { NodeInfo, PodInfo, Snapshot } from "../Snapshot.js"
import type { NodeChanges } from "./PodTopologySpread.js"
import { labelOf, TopologyCounts, TopologyCountsCache } from "./PodTopologySpread.js"
import { asArray, asObject, asString } from "../../object/Json.js"

/** The plugin's name in profiles (upstream's). */
export const name = "InterPodAffinity"

/** Filter's reason when a required affinity term has no matching pod in the node's domain. */
export const reasonAffinityRulesNotMatch = "node(s) didn't match pod affinity rules"

/** Filter's reason when a required anti-affinity term has a matching pod in the node's domain. */
export const reasonAntiAffinityRulesNotMatch = "node(s) didn't match pod anti-affinity rules"

/** Filter's reason when an existing pod's required anti-affinity term matches the pod. */
export const reasonExistingAntiAffinityRulesNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"

/** Labels of a namespace by name (undefined when unknown), for terms' `namespaceSelector`. */
export type NamespaceLabels = (namespace: string) => Readonly<Record<string, string>> | undefined

const selectorOf = (v: unknown): LabelSelector.LabelSelector | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as LabelSelector.LabelSelector) : undefined

// ---- Terms --------------------------------------------------------------------------------------

/** One parsed pod (anti-)affinity term. */
interface Term {
  /** Explicit namespaces, or the owning pod's when neither namespaces nor a selector is given. */
  readonly namespaces: ReadonlySet<string>
  /** `namespaceSelector: {}`: every namespace. */
  readonly allNamespaces: boolean
  /** A non-empty namespaceSelector. */
  readonly namespaceSelector: LabelSelector.Matcher | undefined
  readonly selector: LabelSelector.Matcher
  readonly topologyKey: string
  /** Preferred terms' weight (1 for required terms). */
  readonly weight: number
  /** Equal for terms that select the same pods in the same domains. */
  readonly signature: string
}

/** A pod's parsed affinity terms. */
interface PodTerms {
  readonly requiredAffinity: ReadonlyArray<Term>
  readonly requiredAnti: ReadonlyArray<Term>
  readonly preferredAffinity: ReadonlyArray<Term>
  readonly preferredAnti: ReadonlyArray<Term>
  readonly any: boolean
}

const noTerms: PodTerms = { requiredAffinity: [], requiredAnti: [], preferredAffinity: [], preferredAnti: [], any: false }

const parseTerm = (raw: Record<string, unknown>, namespace: string, weight: number): Term => {
  const listed = asArray(raw["namespaces"]).map(asString)
  const nsSelector = selectorOf(raw["namespaceSelector"])
  const namespaces = listed.length === 0 && nsSelector === undefined ? [namespace] : listed
  const allNamespaces = nsSelector !== undefined && LabelSelector.isEmpty(nsSelector)
  const selector = selectorOf(raw["labelSelector"])
  const topologyKey = asString(raw["topologyKey"])
  return {
    namespaces: new Set(namespaces),
    allNamespaces,
    namespaceSelector: nsSelector !== undefined && !allNamespaces ? LabelSelector.compile(nsSelector) : undefined,
    // An absent labelSelector selects no pod (upstream's labels.Nothing()).
    selector: LabelSelector.compile(selector),
    topologyKey,
    weight,
    signature: JSON.stringify([[...namespaces].sort(), nsSelector ?? null, selector ?? null, topologyKey])
  }
}

const requiredTerms = (group: unknown, namespace: string): ReadonlyArray<Term> =>
  asArray(asObject(group)["requiredDuringSchedulingIgnoredDuringExecution"]).map((t) => parseTerm(asObject(t), namespace, 1))

const preferredTerms = (group: unknown, namespace: string): ReadonlyArray<Term> =>
  asArray(asObject(group)["preferredDuringSchedulingIgnoredDuringExecution"])
    .map(asObject)
    .filter((w) => typeof w["weight"] === "number" && w["weight"] > 0)
    .map((w) => parseTerm(asObject(w["podAffinityTerm"]), namespace, w["weight"] as number))

// Pods are replaced, never mutated, so their parsed terms can be cached by object identity.
const termsCache = new WeakMap<JsonObject, PodTerms>()

/** A pod's parsed terms (cached per pod object). */
const termsOf = (pod: PodInfo): PodTerms => {
  let t = termsCache.get(pod.pod)
  if (t !== undefined) return t
  const affinity = asObject(pod.pod["spec"])["affinity"]
  if (affinity === undefined || affinity === null) t = noTerms
  else {
    const a = asObject(affinity)
    const ns = pod.namespace
    const requiredAffinity = requiredTerms(a["podAffinity"], ns)
    const requiredAnti = requiredTerms(a["podAntiAffinity"], ns)
    const preferredAffinity = preferredTerms(a["podAffinity"], ns)
    const preferredAnti = preferredTerms(a["podAntiAffinity"], ns)
    const any = requiredAffinity.length + requiredAnti.length + preferredAffinity.length + preferredAnti.length > 0
    t = any ? { requiredAffinity, requiredAnti, preferredAffinity, preferredAnti, any } : noTerms
  }
  termsCache.set(pod.pod, t)
  return t
}

/** Whether `term` selects a pod in `namespace` (whose labels are `nsLabels`) with `labels`. */
const termMatches = (
  term: Term,
  namespace: string,
  labels: Readonly<Record<string, string>>,
  nsLabels: Readonly<Record<string, string>> | undefined
): boolean =>
  (term.allNamespaces || term.namespaces.has(namespace) || (term.namespaceSelector !== undefined && nsLabels !== undefined && term.namespaceSelector(nsLabels))) &&
  term.selector(labels)

// ---- Existing pods' terms -----------------------------------------------------------------------

const RequiredAnti = 0
const RequiredAffinity = 1
const PreferredAffinity = 2
const PreferredAnti = 3
type Kind = typeof RequiredAnti | typeof RequiredAffinity | typeof PreferredAffinity | typeof PreferredAnti

/** One distinct term of existing pods: per domain, how many pods carry it (or their summed weights). */
interface Aggregate {
  readonly key: string
  readonly kind: Kind
  readonly term: Term
  readonly byValue: Map<string, number>
  total: number
}

interface Contribution {
  readonly agg: Aggregate
  readonly value: string
  readonly amount: number
}

/**
 * Existing pods' terms grouped by (kind, term), kept up to date one changed node at a time: each
 * cycle matches the incoming pod against the distinct terms (a handful per workload), not
 * against every pod.
 */
class ExistingTerms {
  readonly aggregates = new Map<string, Aggregate>()
  private readonly perNode = new Map<string, ReadonlyArray<Contribution>>()
  private synced = -1

  refresh(snapshot: Snapshot, changes: NodeChanges): void {
    const tick = changes.tick
    if (this.synced === tick) return
    const replayed = this.synced >= 0 && changes.forEachSince(this.synced, (n) => this.update(n, snapshot.get(n)))
    if (!replayed) {
      this.aggregates.clear()
      this.perNode.clear()
      // Only nodes carrying a pod with (anti-)affinity contribute.
      for (const n of snapshot.withAffinityPods) this.update(n.name, n)
    }
    this.synced = tick
  }

  /** What node `nodeName`'s pods add to `agg` in the snapshot. */
  contribution(nodeName: string, agg: Aggregate): number {
    let n = 0
    for (const c of this.perNode.get(nodeName) ?? []) if (c.agg === agg) n += c.amount
    return n
  }

  private update(nodeName: string, node: NodeInfo | undefined): void {
    const old = this.perNode.get(nodeName)
    if (old !== undefined) {
      this.perNode.delete(nodeName)
      for (const c of old) this.apply(c, -1)
    }
    if (node === undefined) return
    let list: Array<Contribution> | undefined
    for (const p of node.pods) {
      const t = termsOf(p)
      if (!t.any) continue
      list ??= []
      this.collect(list, node, RequiredAnti, t.requiredAnti)
      this.collect(list, node, RequiredAffinity, t.requiredAffinity)
      this.collect(list, node, PreferredAffinity, t.preferredAffinity)
      this.collect(list, node, PreferredAnti, t.preferredAnti)
    }
    if (list !== undefined && list.length > 0) this.perNode.set(nodeName, list)
  }

  private collect(list: Array<Contribution>, node: NodeInfo, kind: Kind, terms: ReadonlyArray<Term>): void {
    for (const term of terms) {
      const value = labelOf(node.labels, term.topologyKey)
      if (value === undefined) continue
      const key = `${kind}\u0000${term.signature}`
      let agg = this.aggregates.get(key)
      if (agg === undefined) {
        agg = { key, kind, term, byValue: new Map(), total: 0 }
        this.aggregates.set(key, agg)
      }
      const c: Contribution = { agg, value, amount: term.weight }
      list.push(c)
      this.apply(c, 1)
    }
  }

  private apply(c: Contribution, sign: 1 | -1): void {
    const agg = c.agg
    const next = (agg.byValue.get(c.value) ?? 0) + sign * c.amount
    if (next === 0) agg.byValue.delete(c.value)
    else agg.byValue.set(c.value, next)
    agg.total += sign * c.amount
    // Amounts are positive, so a zero total means no pod carries the term any more.
    if (agg.total === 0 && this.aggregates.get(agg.key) === agg) this.aggregates.delete(agg.key)
  }
}

// ---- The plugin ---------------------------------------------------------------------------------

/** The plugin's arguments (upstream `InterPodAffinityArgs`, plus the namespace label lookup). */
export interface Args {
  /** Score per existing pod whose required affinity the incoming pod matches (0–100, default 1). */
  readonly hardPodAffinityWeight?: number
  /** Skip existing pods' preferred terms unless the incoming pod has preferred terms itself. */
  readonly ignorePreferredTermsOfExistingPods?: boolean
  readonly namespaceLabels?: NamespaceLabels
}

/** What the factory reads from its handle beyond the framework's. */
export interface AffinityHandle extends Handle {
  readonly namespaceLabels?: NamespaceLabels
}

interface DomainCounts {
  readonly key: string
  readonly byValue: ReadonlyMap<string, number>
  readonly counts: TopologyCounts
}

interface PreFilterState {
  readonly tick: number
  readonly maxGeneration: number
  /** The incoming pod's namespace labels (for what-if views' pods' terms). */
  readonly nsLabels: Readonly<Record<string, string>> | undefined
  readonly affinity: ReadonlyArray<DomainCounts>
  /** No pod anywhere matches all the required affinity terms. */
  readonly noAffinityMatches: boolean
  /** The pod matches all its own required affinity terms. */
  readonly selfMatch: boolean
  readonly anti: ReadonlyArray<DomainCounts>
  readonly existingAnti: ReadonlyArray<Aggregate>
}

interface ScorePart {
  readonly key: string
  readonly byValue: ReadonlyMap<string, number>
  readonly multiplier: number
}

interface PreScoreState {
  readonly parts: ReadonlyArray<ScorePart>
}

const filterKey = `PreFilter${name}`
const scoreKey = `PreScore${name}`
const snapshotKey = `${name}/snapshot`

const skip: Status = status("Skip")
const affinityFails: Status = status("UnschedulableAndUnresolvable", reasonAffinityRulesNotMatch)
const antiFails: Status = status("Unschedulable", reasonAntiAffinityRulesNotMatch)
const existingFails: Status = status("Unschedulable", reasonExistingAntiAffinityRulesNotMatch)
const noState: Status = status("Error", `reading "${filterKey}" from cycleState: not found`)
const stale: Status = status("Error", `${name}: cycle state is stale (PreFilter ran for another snapshot since)`)
const always = (): boolean => true

/** The plugin, as a profile builds it. */
export type InterPodAffinity = PreFilterPlugin & FilterPlugin & PreScorePlugin & ScorePlugin

interface Counting {
  readonly cache: TopologyCountsCache
  readonly existing: ExistingTerms
  readonly snapshot: Snapshot
}

const make = (hardPodAffinityWeight: number, ignorePreferredOfExisting: boolean, namespaceLabels: NamespaceLabels | undefined): InterPodAffinity => {
  const shared = { cache: new TopologyCountsCache(), existing: new ExistingTerms() }
  const nsLabelsOf = (namespace: string) => namespaceLabels?.(namespace)

  /** Brings the shared counts up to `snapshot` (or, with none, counts `nodes` in throwaway ones). */
  const counting = (snapshot: Snapshot | undefined, nodes: ReadonlyArray<NodeInfo>): Counting => {
    const c =
      snapshot !== undefined
        ? { ...shared, snapshot }
        : {
            cache: new TopologyCountsCache(),
            existing: new ExistingTerms(),
            snapshot: { nodes, get: (n: string) => nodes.find((x) => x.name === n), withAffinityPods: nodes }
          }
    c.cache.sync(c.snapshot)
    c.existing.refresh(c.snapshot, c.cache.changes)
    return c
  }

  /** Per domain of `key`: pods matching all of `terms`. */
  const countsFor = (c: Counting, terms: ReadonlyArray<Term>, key: string): TopologyCounts => {
    const cacheable = terms.every((t) => t.namespaceSelector === undefined)
    // Namespace labels are read once per namespace per count.
    const memo = cacheable ? undefined : new Map<string, Readonly<Record<string, string>> | undefined>()
    const nsLabels = (ns: string) => {
      if (memo === undefined) return undefined
      if (!memo.has(ns)) memo.set(ns, nsLabelsOf(ns))
      return memo.get(ns)
    }
    const countOn = (node: NodeInfo): number => {
      let n = 0
      for (const p of node.pods) {
        let all = true
        for (const t of terms) {
          if (!termMatches(t, p.namespace, p.labels, t.namespaceSelector === undefined ? undefined : nsLabels(p.namespace))) {
            all = false
            break
          }
        }
        if (all) n++
      }
      return n
    }
    if (!cacheable) {
      const fresh = new TopologyCounts(key, always, countOn)
      fresh.rebuild(c.snapshot.nodes)
      return fresh
    }
    const signature = `${terms.map((t) => t.signature).join("\u0001")}\u0000${key}`
    return c.cache.counts(signature, c.snapshot, () => new TopologyCounts(key, always, countOn))
  }

  return {
    name,
    preFilter: (state, pod, snapshot) => {
      // PreScore has no snapshot parameter; it reads the cycle's from here.
      state.write(snapshotKey, snapshot)
      const terms = termsOf(pod)
      // Without terms of its own and with no pod anywhere having any, nothing can match: skip
      // without bringing the shared counts up to this snapshot (they catch up when next needed).
      if (terms.requiredAffinity.length === 0 && terms.requiredAnti.length === 0 && snapshot.withAffinityPods.length === 0) return { status: skip }
      const c = counting(snapshot, snapshot.nodes)
      const nsLabels = nsLabelsOf(pod.namespace)
      const existingAnti: Array<Aggregate> = []
      for (const agg of c.existing.aggregates.values()) {
        if (agg.kind === RequiredAnti && termMatches(agg.term, pod.namespace, pod.labels, nsLabels)) existingAnti.push(agg)
      }
      if (terms.requiredAffinity.length === 0 && terms.requiredAnti.length === 0 && existingAnti.length === 0) return { status: skip }
      let noAffinityMatches = true
      const affinity = terms.requiredAffinity.map((t): DomainCounts => {
        const counts = countsFor(c, terms.requiredAffinity, t.topologyKey)
        if (counts.total > 0) noAffinityMatches = false
        return { key: t.topologyKey, byValue: counts.byValue, counts }
      })
      const anti = terms.requiredAnti.map((t): DomainCounts => {
        const counts = countsFor(c, [t], t.topologyKey)
        return { key: t.topologyKey, byValue: counts.byValue, counts }
      })
      const selfMatch = terms.requiredAffinity.length > 0 && terms.requiredAffinity.every((t) => termMatches(t, pod.namespace, pod.labels, nsLabels))
      const tick = c.cache.changes.tick
      const s: PreFilterState = { tick, maxGeneration: c.cache.changes.maxGeneration, nsLabels, affinity, noAffinityMatches, selfMatch, anti, existingAnti }
      state.write(filterKey, s)
      return { status: success }
    },

    filter: (state, pod, node) => {
      const s = state.read<PreFilterState>(filterKey)
      if (s === undefined) return noState
      // The counts are shared across cycles; a later PreFilter may have moved them on.
      if (s.tick !== shared.cache.changes.tick) return stale
      // A what-if view (preemption without victims, with nominated pods) is counted against the
      // snapshot's node: upstream's AddPod/RemovePod.
      if (node.generation < 0 || node.generation > s.maxGeneration) return filterView(s, shared.existing, pod, node)
      const labels = node.labels
      if (s.affinity.length > 0) {
        let podsExist = true
        for (const a of s.affinity) {
          const value = labelOf(labels, a.key)
          // Every topology key must be on the node, first pod or not.
          if (value === undefined) return affinityFails
          if ((a.byValue.get(value) ?? 0) <= 0) podsExist = false
        }
        // The first of a group of pods with affinity to each other may go anywhere with the keys.
        if (!podsExist && !(s.noAffinityMatches && s.selfMatch)) return affinityFails
      }
      for (const a of s.anti) {
        const value = labelOf(labels, a.key)
        if (value !== undefined && (a.byValue.get(value) ?? 0) > 0) return antiFails
      }
      for (const agg of s.existingAnti) {
        const value = labelOf(labels, agg.term.topologyKey)
        if (value !== undefined && (agg.byValue.get(value) ?? 0) > 0) return existingFails
      }
      return success
    },

    preScore: (state, pod, nodes) => {
      if (nodes.length === 0) return skip
      const terms = termsOf(pod)
      const hasPreferred = terms.preferredAffinity.length + terms.preferredAnti.length > 0
      if (ignorePreferredOfExisting && !hasPreferred) return skip
      const snapshot = state.read<Snapshot>(snapshotKey)
      if (!hasPreferred && snapshot !== undefined && snapshot.withAffinityPods.length === 0) return skip
      const c = counting(snapshot, nodes)
      const parts: Array<ScorePart> = []
      // Only terms some pod matches score (upstream skips when none does).
      const add = (key: string, counts: { readonly byValue: ReadonlyMap<string, number>; readonly total: number }, multiplier: number) => {
        if (counts.total > 0) parts.push({ key, byValue: counts.byValue, multiplier })
      }
      for (const t of terms.preferredAffinity) add(t.topologyKey, countsFor(c, [t], t.topologyKey), t.weight)
      for (const t of terms.preferredAnti) add(t.topologyKey, countsFor(c, [t], t.topologyKey), -t.weight)
      const nsLabels = nsLabelsOf(pod.namespace)
      for (const agg of c.existing.aggregates.values()) {
        if (agg.kind === RequiredAnti || (agg.kind === RequiredAffinity && hardPodAffinityWeight === 0)) continue
        if (!termMatches(agg.term, pod.namespace, pod.labels, nsLabels)) continue
        // Aggregates of preferred terms already sum their weights; required ones count pods.
        add(agg.term.topologyKey, agg, agg.kind === RequiredAffinity ? hardPodAffinityWeight : agg.kind === PreferredAffinity ? 1 : -1)
      }
      if (parts.length === 0) return skip
      state.write(scoreKey, { parts } satisfies PreScoreState)
      return success
    },

    score: (state, _pod, node) => {
      const s = state.read<PreScoreState>(scoreKey)
      if (s === undefined) return 0
      let score = 0
      for (const p of s.parts) {
        const value = labelOf(node.labels, p.key)
        if (value !== undefined) score += p.multiplier * (p.byValue.get(value) ?? 0)
      }
      return score
    },

    normalize: (state, _pod, scores) => {
      const s = state.read<PreScoreState>(scoreKey)
      if (s === undefined || s.parts.length === 0) return
      let min = Infinity
      let max = -Infinity
      for (const sc of scores) {
        if (sc.score > max) max = sc.score
        if (sc.score < min) min = sc.score
      }
      const diff = max - min
      for (const sc of scores) sc.score = diff > 0 ? Math.trunc(MaxScore * ((sc.score - min) / diff)) : 0
    }
  }
}

/** How many more matching pods the view `node` has than the snapshot's node had. */
const viewDelta = (counts: TopologyCounts, node: NodeInfo): number => {
  const recorded = counts.recorded(node.name)
  return recorded === undefined ? 0 : counts.countOn(node) - recorded
}

/** Filter on a what-if view of a node: the counts with this node's pods replaced by the view's. */
const filterView = (s: PreFilterState, existing: ExistingTerms, pod: PodInfo, node: NodeInfo): Status => {
  const labels = node.labels
  if (s.affinity.length > 0) {
    let podsExist = true
    let noMatches = true
    for (const a of s.affinity) {
      const value = labelOf(labels, a.key)
      if (value === undefined) return affinityFails
      const delta = viewDelta(a.counts, node)
      if ((a.byValue.get(value) ?? 0) + delta <= 0) podsExist = false
      if (a.counts.total + delta > 0) noMatches = false
    }
    if (!podsExist && !(noMatches && s.selfMatch)) return affinityFails
  }
  for (const a of s.anti) {
    const value = labelOf(labels, a.key)
    if (value !== undefined && (a.byValue.get(value) ?? 0) + viewDelta(a.counts, node) > 0) return antiFails
  }
  // Other nodes' pods in the domain still count; this node's are the view's.
  for (const agg of s.existingAnti) {
    const value = labelOf(labels, agg.term.topologyKey)
    if (value !== undefined && (agg.byValue.get(value) ?? 0) - existing.contribution(node.name, agg) > 0) return existingFails
  }
  for (const p of node.pods) {
    for (const t of termsOf(p).requiredAnti) {
      if (labelOf(labels, t.topologyKey) !== undefined && termMatches(t, pod.namespace, pod.labels, s.nsLabels)) return existingFails
    }
  }
  return success
}

/**
 * Builds the plugin. Args: `hardPodAffinityWeight` (0–100, default 1),
 * `ignorePreferredTermsOfExistingPods`; `namespaceLabels` from the handle or the args.
 */
export const factory: Factory = (args, handle) => {
  const a = asObject(args)
  const weight = a["hardPodAffinityWeight"] ?? 1
  if (typeof weight !== "number" || !Number.isInteger(weight) || weight < 0 || weight > 100) {
    return `hardPodAffinityWeight: Invalid value: ${JSON.stringify(weight)}: not in valid range [0-100]`
  }
  const ignore = a["ignorePreferredTermsOfExistingPods"] ?? false
  if (typeof ignore !== "boolean") return `ignorePreferredTermsOfExistingPods: Invalid value: ${JSON.stringify(ignore)}: must be a boolean`
  const fromArgs = typeof a["namespaceLabels"] === "function" ? (a["namespaceLabels"] as NamespaceLabels) : undefined
  return make(weight, ignore, (handle as AffinityHandle).namespaceLabels ?? fromArgs)
}
