/**
 * PodTopologySpread (upstream `podtopologyspread`): spreads pods matching a constraint's selector
 * evenly over the domains of its `topologyKey`. PreFilter counts matching pods per domain over the
 * eligible nodes (the pod's node affinity/selector when `nodeAffinityPolicy: Honor`, the default;
 * its NoSchedule/NoExecute tolerations when `nodeTaintsPolicy: Honor`; every constraint key
 * present), with `minDomains` and `matchLabelKeys`; Filter rejects a node where
 * `matching + self − global minimum > maxSkew` for a `DoNotSchedule` constraint; Score favours
 * less crowded domains for `ScheduleAnyway` constraints, weighting each by log(domains + 2), and
 * normalises as upstream (fewest matching pods → 100).
 *
 * Departures: counts are kept incrementally across cycles (`TopologyCountsCache`, below) instead of
 * recounting every pod each cycle, so PreFilter costs O(nodes changed since the last cycle) plus
 * one cheap pass comparing node generations; the answers are upstream's. Counts are per
 * constraint (as upstream ≥ 1.30), not per topology key. System defaulting
 * (`defaultingType: System`: hostname maxSkew 3, zone maxSkew 5, both ScheduleAnyway) needs the
 * selectors of the Services/ReplicaSets/StatefulSets that own a pod; the factory takes a
 * `defaultSelector(pod)` lookup in its handle, and without one falls back to the pod's own labels
 * (less per-pod labels) when a ReplicaSet, ReplicationController or StatefulSet controls it —
 * pods selected only by a Service get no default spreading. `List` defaulting takes
 * `defaultConstraints` from the args, as upstream. There are no PreFilterExtensions
 * (AddPod/RemovePod) in the framework contract: Filter recognises a what-if view of a node (a
 * generation outside the snapshot's, as preemption builds them) and recounts that node's pods
 * against the snapshot's, to the same effect.
 */
import type { JsonObject } from "../../object/Json.js"
import * as LabelSelector from "../../model/LabelSelector.js"
import type {
  Factory,
  FilterPlugin,
  Handle,
  NodeScore,
  PreFilterPlugin,
  PreScorePlugin,
  ScorePlugin,
  Status
} from "../Framework.js"
import { MaxScore, status, success } from "../Framework.js"
import { matchesNodeSelectorAndAffinity } from "../../matching/NodeAffinity.js"
import type { NodeInfo, PodInfo, Snapshot } from "../Snapshot.js"
import { tolerationsOf, untoleratedTaint } from "../../matching/TaintToleration.js"
import { asArray, asObject, asString } from "../../object/Json.js"
import * as Views from "../../object/Views.js"

/** The plugin's name in profiles (upstream's). */
export const name = "PodTopologySpread"

/** The well-known node label for the node's own domain (counted per node at Score, as upstream). */
export const hostnameLabel = "kubernetes.io/hostname"

/** The well-known node label for zones. */
export const zoneLabel = "topology.kubernetes.io/zone"

/** Filter's reason when the skew would exceed `maxSkew`. */
export const reasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"

/** Filter's reason when the node lacks a constraint's topology key. */
export const reasonMissingLabel = `${reasonConstraintsNotMatch} (missing required label)`

const hasOwn = Object.prototype.hasOwnProperty

/**
 * A node label's value, or undefined. Label values are strings; what a plain object inherits
 * (`constructor`, a valid label key) is not, so the type test stands in for an own-property check.
 */
export const labelOf = (labels: Readonly<Record<string, string>>, key: string): string | undefined => {
  const v: unknown = labels[key]
  return typeof v === "string" ? v : undefined
}

// ---- Incremental counting (shared with InterPodAffinity) ----------------------------------------

interface Seen {
  readonly name: string
  node: NodeInfo
  generation: number
  pods: ReadonlyArray<PodInfo>
  podCount: number
  labels: Readonly<Record<string, string>>
  taints: unknown
}

/**
 * Which nodes changed between the snapshots of successive cycles, as a log of node names, so
 * derived counts recompute only those. A Cache snapshot that follows the one synced before says
 * what changed (its `delta`): those names are logged as they are. Otherwise (a snapshot from
 * elsewhere, or one skipped) one pass compares each node's generation (and the identity of its
 * pod list, labels and taints) with what the last pass saw; nodes added, changed or removed are
 * logged. A pass after deltas may log names the deltas already did: consumers replay idempotently.
 */
export class NodeChanges {
  private readonly seen = new Map<string, Seen>()
  // Entries in last snapshot's node order: when the order is unchanged (the common case) the pass
  // needs no map lookups.
  private readonly order: Array<Seen | undefined> = []
  private log: Array<string> = []
  private logStart = 0
  private last: Snapshot | undefined
  private lastId = -1
  private maxGen = 0

  /**
   * The highest node generation in the last synced snapshot. Generations are global and only
   * grow (what-if views from preemption are negative), so a NodeInfo with a generation outside
   * 0..maxGeneration is not one of the snapshot's: a view whose pods differ from the counts'.
   */
  get maxGeneration(): number {
    return this.maxGen
  }

  /** The position after the last logged change; consumers remember it to ask what changed since. */
  get tick(): number {
    return this.logStart + this.log.length
  }

  /** Log what changed in `snapshot` since the previous one synced. */
  sync(snapshot: Snapshot): void {
    if (snapshot === this.last) return
    this.last = snapshot
    const delta = snapshot.delta
    if (delta !== undefined && this.lastId >= 0 && delta.previous === this.lastId) {
      this.lastId = delta.id
      for (const name of delta.names) this.log.push(name)
      if (delta.maxGeneration > this.maxGen) this.maxGen = delta.maxGeneration
      this.trim(delta.names.length, snapshot.nodes.length)
      return
    }
    this.lastId = delta?.id ?? -1
    this.walk(snapshot.nodes)
  }

  private walk(nodes: ReadonlyArray<NodeInfo>): void {
    const before = this.log.length
    const order = this.order
    let maxGen = 0
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i]!
      if (n.generation > maxGen) maxGen = n.generation
      let s = order[i]
      if (s === undefined || s.name !== n.name) s = this.seen.get(n.name)
      if (s === undefined) {
        s = { name: n.name, node: n, generation: n.generation, pods: n.pods, podCount: n.pods.length, labels: n.labels, taints: n.taints }
        this.seen.set(n.name, s)
        this.log.push(n.name)
      } else if (s.node !== n || s.generation !== n.generation) {
        const same = s.generation === n.generation && s.pods === n.pods && s.podCount === n.pods.length && s.labels === n.labels && s.taints === n.taints
        if (!same) this.log.push(n.name)
        s.node = n
        s.generation = n.generation
        s.pods = n.pods
        s.podCount = n.pods.length
        s.labels = n.labels
        s.taints = n.taints
      }
      // The steady state writes nothing per node: one array slot at most.
      if (order[i] !== s) order[i] = s
    }
    order.length = nodes.length
    this.maxGen = maxGen
    // More names seen than nodes now: some left (rare), found with one more pass.
    if (this.seen.size > nodes.length) {
      const present = new Set<string>()
      for (const n of nodes) present.add(n.name)
      for (const name of this.seen.keys()) {
        if (!present.has(name)) {
          this.seen.delete(name)
          this.log.push(name)
        }
      }
    }
    this.trim(this.log.length - before, nodes.length)
  }

  private trim(changed: number, nodes: number): void {
    // A bulk change (the first snapshot, a resync) is cheaper to rebuild from than to replay:
    // forget the log so every consumer rebuilds. Otherwise keep the log bounded.
    if (changed > nodes / 2 || this.log.length > 2 * nodes + 1024) {
      this.logStart += this.log.length
      this.log = []
    }
  }

  /**
   * Calls `f` with every node name logged at or after `tick` (a name may repeat); false, without
   * calling it, when the log no longer reaches back that far (the consumer must rebuild).
   */
  forEachSince(tick: number, f: (name: string) => void): boolean {
    if (tick < this.logStart) return false
    for (let i = tick - this.logStart; i < this.log.length; i++) f(this.log[i]!)
    return true
  }
}

/**
 * Pods matching some predicate, counted per value of one node label (a topology domain) over
 * the nodes that have the label and pass an eligibility test, kept up to date one node at a time.
 * Every domain with an eligible node is present (count possibly 0), so `domains` is upstream's
 * domain count and `min()` its critical-path minimum.
 */
export class TopologyCounts {
  /** Matching pods per domain. */
  readonly byValue = new Map<string, number>()
  /** Matching pods over all domains. */
  total = 0
  /** The NodeChanges tick these counts reflect (-1: never built). */
  synced = -1
  private readonly nodesIn = new Map<string, number>()
  private readonly perNode = new Map<string, { readonly value: string; readonly count: number }>()
  // histogram[c]: how many domains hold exactly c matching pods; gives the minimum in O(1)
  // amortised as counts move.
  private histogram: Array<number> = []
  private minHint = 0

  constructor(
    readonly topologyKey: string,
    private readonly eligible: (node: NodeInfo) => boolean,
    /** Matching pods on one node (also used on what-if views). */
    readonly countOn: (node: NodeInfo) => number
  ) {}

  /** The pods counted on node `nodeName`, or undefined when the node is not counted (no label, not eligible). */
  recorded(nodeName: string): number | undefined {
    return this.perNode.get(nodeName)?.count
  }

  /** What `min()` would be were domain `value` to hold `count` pods (what-if views in preemption). */
  minReplacing(value: string, count: number): number {
    const min = this.min()
    const old = this.byValue.get(value)
    if (old === undefined || count <= min) return Math.min(min, count)
    if (old !== min || (this.histogram[min] ?? 0) > 1) return min
    // The domain was alone at the minimum and grew: the next smallest count, if below `count`.
    for (let c = min + 1; c < count; c++) if ((this.histogram[c] ?? 0) > 0) return c
    return count
  }

  /** How many domains have an eligible node. */
  get domains(): number {
    return this.nodesIn.size
  }

  /** The fewest matching pods in any domain; Infinity when there is no domain. */
  min(): number {
    if (this.nodesIn.size === 0) return Infinity
    const h = this.histogram
    while (this.minHint < h.length && (h[this.minHint] ?? 0) === 0) this.minHint++
    if (this.minHint < h.length) return this.minHint
    // Unreachable while minHint never passes the smallest count; recover rather than spin.
    this.minHint = h.findIndex((n) => (n ?? 0) > 0)
    return this.minHint
  }

  /** Recount from scratch. */
  rebuild(nodes: ReadonlyArray<NodeInfo>): void {
    this.byValue.clear()
    this.nodesIn.clear()
    this.perNode.clear()
    this.histogram = []
    this.minHint = 0
    this.total = 0
    for (const n of nodes) this.update(n.name, n)
  }

  /** Replace one node's contribution (`node` undefined: the node is gone). */
  update(nodeName: string, node: NodeInfo | undefined): void {
    const old = this.perNode.get(nodeName)
    if (old !== undefined) {
      this.perNode.delete(nodeName)
      this.move(old.value, -1, -old.count)
    }
    if (node === undefined) return
    const value = labelOf(node.labels, this.topologyKey)
    if (value === undefined || !this.eligible(node)) return
    const count = this.countOn(node)
    this.perNode.set(nodeName, { value, count })
    this.move(value, 1, count)
  }

  private move(value: string, dNodes: number, dCount: number): void {
    const before = this.byValue.get(value)
    if (before !== undefined) this.histogram[before]!--
    this.total += dCount
    const nodes = (this.nodesIn.get(value) ?? 0) + dNodes
    if (nodes === 0) {
      this.nodesIn.delete(value)
      this.byValue.delete(value)
      return
    }
    const after = (before ?? 0) + dCount
    this.nodesIn.set(value, nodes)
    this.byValue.set(value, after)
    this.histogram[after] = (this.histogram[after] ?? 0) + 1
    if (after < this.minHint) this.minHint = after
  }
}

/**
 * A plugin's TopologyCounts by signature (selector, namespaces, key, eligibility), least recently
 * used evicted, all brought up to date against the cycle's snapshot through one NodeChanges.
 */
export class TopologyCountsCache {
  /** The node change log every cached count replays. */
  readonly changes = new NodeChanges()
  private readonly entries = new Map<string, TopologyCounts>()

  constructor(private readonly capacity = 32) {}

  /** Log what changed in `snapshot` (once per cycle, before `counts`). */
  sync(snapshot: Snapshot): void {
    this.changes.sync(snapshot)
  }

  /** The counts for `signature` (made by `make` when absent), current for `snapshot`. */
  counts(signature: string, snapshot: Snapshot, make: () => TopologyCounts): TopologyCounts {
    let c = this.entries.get(signature)
    if (c === undefined) {
      c = make()
      if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!)
    } else {
      this.entries.delete(signature)
    }
    this.entries.set(signature, c)
    this.refresh(c, snapshot)
    return c
  }

  /** Bring `c` up to date for `snapshot` (replaying the change log, or rebuilding). */
  refresh(c: TopologyCounts, snapshot: Snapshot): void {
    const tick = this.changes.tick
    if (c.synced === tick) return
    const replayed = c.synced >= 0 && this.changes.forEachSince(c.synced, (n) => c.update(n, snapshot.get(n)))
    if (!replayed) c.rebuild(snapshot.nodes)
    c.synced = tick
  }
}

// ---- Constraints --------------------------------------------------------------------------------

type Action = "DoNotSchedule" | "ScheduleAnyway"

interface Constraint {
  readonly maxSkew: number
  readonly topologyKey: string
  readonly minDomains: number
  readonly honorAffinity: boolean
  readonly honorTaints: boolean
  readonly matcher: LabelSelector.Matcher
  /** Upstream counts no pods for an empty selector (`{}`) though the pod itself matches it. */
  readonly countsNothing: boolean
  readonly selectorKey: string
}

const systemDefaults: ReadonlyArray<JsonObject> = [
  { maxSkew: 3, topologyKey: hostnameLabel, whenUnsatisfiable: "ScheduleAnyway" },
  { maxSkew: 5, topologyKey: zoneLabel, whenUnsatisfiable: "ScheduleAnyway" }
]

const positiveInt = (v: unknown, fallback: number): number => (typeof v === "number" && Number.isInteger(v) && v > 0 ? v : fallback)

/** One constraint of `action`, its selector merged with the pod's values for `matchLabelKeys`. */
const parseConstraint = (c: Record<string, unknown>, pod: PodInfo, selector: LabelSelector.LabelSelector | undefined): Constraint => {
  let merged = selector
  const keys = asArray(c["matchLabelKeys"]).map(asString)
  if (merged !== undefined && keys.length > 0) {
    const extra: Array<LabelSelector.Requirement> = []
    for (const k of keys) {
      const v = labelOf(pod.labels, k)
      if (v !== undefined) extra.push({ key: k, operator: "In", values: [v] })
    }
    if (extra.length > 0) merged = { ...merged, matchExpressions: [...(merged.matchExpressions ?? []), ...extra] }
  }
  return {
    maxSkew: positiveInt(c["maxSkew"], 1),
    topologyKey: asString(c["topologyKey"]),
    minDomains: positiveInt(c["minDomains"], 1),
    honorAffinity: c["nodeAffinityPolicy"] !== "Ignore",
    honorTaints: c["nodeTaintsPolicy"] === "Honor",
    matcher: LabelSelector.compile(merged),
    countsNothing: merged !== undefined && LabelSelector.isEmpty(merged),
    selectorKey: merged === undefined ? "nil" : JSON.stringify(merged)
  }
}

const selectorOf = (v: unknown): LabelSelector.LabelSelector | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as LabelSelector.LabelSelector) : undefined

/** Labels unique to one pod, left out of the fallback default selector. */
const perPodLabels = new Set(["statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index", "controller-revision-hash"])
const defaultOwnerKinds = new Set(["ReplicaSet", "ReplicationController", "StatefulSet"])

/**
 * The fallback for upstream's DefaultSelector when the runtime gives none: the pod's labels
 * (less per-pod ones) when a ReplicaSet, ReplicationController or StatefulSet controls it —
 * every sibling carries its template's labels, which include the owner's selector.
 */
export const ownerLabelsSelector = (pod: PodInfo): LabelSelector.LabelSelector | undefined => {
  const owner = asArray(asObject(pod.pod["metadata"])["ownerReferences"]).map(asObject).find((r) => r["controller"] === true)
  if (owner === undefined || !defaultOwnerKinds.has(asString(owner["kind"]))) return undefined
  const matchLabels: Record<string, string> = {}
  for (const [k, v] of Object.entries(pod.labels)) if (!perPodLabels.has(k)) matchLabels[k] = v
  return { matchLabels }
}

const podSpec = (pod: PodInfo): Record<string, unknown> => asObject(pod.pod["spec"])

const isTerminating = (p: PodInfo): boolean => {
  return Views.pod(p.pod).metadata?.deletionTimestamp != null
}

/** Pods on `node` in `namespace` matching, skipping terminating pods (upstream #87621). */
const countMatching = (node: NodeInfo, namespace: string, c: Constraint): number => {
  if (c.countsNothing) return 0
  let n = 0
  const pods = node.pods
  for (let i = 0; i < pods.length; i++) {
    const p = pods[i]!
    if (p.namespace === namespace && c.matcher(p.labels) && !isTerminating(p)) n++
  }
  return n
}

const hasAllKeys = (labels: Readonly<Record<string, string>>, keys: ReadonlyArray<string>): boolean => {
  for (let i = 0; i < keys.length; i++) if (!hasOwn.call(labels, keys[i]!)) return false
  return true
}

const doNotScheduleTaint = (t: { readonly effect?: unknown }): boolean => t.effect === "NoSchedule" || t.effect === "NoExecute"

/** The counts for constraint `c` of `pod`, over nodes that have all `keys`. */
const countsFor = (cache: TopologyCountsCache, snapshot: Snapshot, pod: PodInfo, c: Constraint, keys: ReadonlyArray<string>): TopologyCounts => {
  const spec = podSpec(pod)
  const affinity = c.honorAffinity ? JSON.stringify([spec["nodeSelector"], asObject(asObject(spec["affinity"])["nodeAffinity"])["requiredDuringSchedulingIgnoredDuringExecution"]]) : "-"
  const tolerations = c.honorTaints ? JSON.stringify(spec["tolerations"] ?? []) : "-"
  const signature = [pod.namespace, c.selectorKey, c.topologyKey, keys.join("\n"), affinity, tolerations].join("\u0000")
  return cache.counts(signature, snapshot, () => {
    const tolerationList = tolerationsOf(spec)
    const eligible = (node: NodeInfo): boolean =>
      hasAllKeys(node.labels, keys) &&
      (!c.honorAffinity || matchesNodeSelectorAndAffinity(pod.pod, node.node)) &&
      (!c.honorTaints || untoleratedTaint(node.taints, tolerationList, doNotScheduleTaint) === undefined)
    return new TopologyCounts(c.topologyKey, eligible, (node) => countMatching(node, pod.namespace, c))
  })
}

// ---- The plugin ---------------------------------------------------------------------------------

/** The plugin's arguments (upstream `PodTopologySpreadArgs`). */
export interface Args {
  readonly defaultingType?: "System" | "List"
  readonly defaultConstraints?: ReadonlyArray<JsonObject>
}

/** What the factory reads from its handle beyond the framework's: the selector default constraints apply to. */
export interface SpreadHandle extends Handle {
  /** Upstream's DefaultSelector: the Services, ReplicationController, ReplicaSet or StatefulSet selecting the pod, merged; undefined for none. */
  readonly defaultSelector?: (pod: PodInfo) => LabelSelector.LabelSelector | undefined
}

interface FilterConstraint {
  readonly key: string
  readonly maxSkew: number
  readonly minMatch: number
  /** Fewer domains than minDomains: the minimum is 0 whatever the counts. */
  readonly minIsZero: boolean
  readonly selfMatch: number
  readonly byValue: ReadonlyMap<string, number>
  readonly counts: TopologyCounts
}

interface PreFilterState {
  readonly tick: number
  readonly maxGeneration: number
  readonly constraints: ReadonlyArray<FilterConstraint>
}

interface ScoreConstraint {
  readonly key: string
  readonly maxSkew: number
  readonly weight: number
  /** Per-domain counts; undefined for the hostname key, counted on the node at Score. */
  readonly byValue: ReadonlyMap<string, number> | undefined
  readonly constraint: Constraint
}

interface PreScoreState {
  readonly namespace: string
  readonly constraints: ReadonlyArray<ScoreConstraint>
  readonly ignored: ReadonlySet<string>
}

const filterKey = `PreFilter${name}`
const scoreKey = `PreScore${name}`
const snapshotKey = `${name}/snapshot`

const skip: Status = status("Skip")
const missingLabel: Status = status("UnschedulableAndUnresolvable", reasonMissingLabel)
const notMatch: Status = status("Unschedulable", reasonConstraintsNotMatch)
const noState: Status = status("Error", `reading "${filterKey}" from cycleState: not found`)
const stale: Status = status("Error", `${name}: cycle state is stale (PreFilter ran for another snapshot since)`)

/** The plugin, as a profile builds it. */
export type PodTopologySpread = PreFilterPlugin & FilterPlugin & PreScorePlugin & ScorePlugin

const make = (
  defaults: ReadonlyArray<JsonObject>,
  systemDefaulted: boolean,
  defaultSelector: (pod: PodInfo) => LabelSelector.LabelSelector | undefined
): PodTopologySpread => {
  const cache = new TopologyCountsCache()

  const constraintsOf = (pod: PodInfo, action: Action): ReadonlyArray<Constraint> => {
    const own = asArray(podSpec(pod)["topologySpreadConstraints"]).map(asObject)
    if (own.length > 0) return own.filter((c) => c["whenUnsatisfiable"] === action).map((c) => parseConstraint(c, pod, selectorOf(c["labelSelector"])))
    const wanted = defaults.filter((c) => c["whenUnsatisfiable"] === action)
    if (wanted.length === 0) return []
    const selector = defaultSelector(pod)
    if (selector === undefined || LabelSelector.isEmpty(selector)) return []
    return wanted.map((c) => parseConstraint(c, pod, selector))
  }

  return {
    name,
    preFilter: (state, pod, snapshot) => {
      // PreScore has no snapshot parameter; it reads the cycle's from here.
      state.write(snapshotKey, snapshot)
      const constraints = constraintsOf(pod, "DoNotSchedule")
      if (constraints.length === 0) return { status: skip }
      cache.sync(snapshot)
      const keys = constraints.map((c) => c.topologyKey)
      const out: Array<FilterConstraint> = constraints.map((c) => {
        const counts = countsFor(cache, snapshot, pod, c, keys)
        // Fewer eligible domains than minDomains: the global minimum is taken as 0.
        const minIsZero = counts.domains < c.minDomains
        return {
          key: c.topologyKey,
          maxSkew: c.maxSkew,
          minMatch: minIsZero ? 0 : counts.min(),
          minIsZero,
          selfMatch: c.matcher(pod.labels) ? 1 : 0,
          byValue: counts.byValue,
          counts
        }
      })
      state.write(filterKey, { tick: cache.changes.tick, maxGeneration: cache.changes.maxGeneration, constraints: out } satisfies PreFilterState)
      return { status: success }
    },

    filter: (state, _pod, node) => {
      const s = state.read<PreFilterState>(filterKey)
      if (s === undefined) return noState
      // The counts are shared across cycles; a later PreFilter may have moved them on.
      if (s.tick !== cache.changes.tick) return stale
      // A what-if view (preemption without victims, with nominated pods) is counted against the
      // snapshot's node: upstream's AddPod/RemovePod.
      const view = node.generation < 0 || node.generation > s.maxGeneration
      const labels = node.labels
      const constraints = s.constraints
      for (let i = 0; i < constraints.length; i++) {
        const c = constraints[i]!
        const value = labelOf(labels, c.key)
        if (value === undefined) return missingLabel
        let count = c.byValue.get(value) ?? 0
        let min = c.minMatch
        if (view) {
          const recorded = c.counts.recorded(node.name)
          const delta = recorded === undefined ? 0 : c.counts.countOn(node) - recorded
          if (delta !== 0) {
            count += delta
            if (!c.minIsZero) min = c.counts.minReplacing(value, count)
          }
        }
        if (count + c.selfMatch - min > c.maxSkew) return notMatch
      }
      return success
    },

    preScore: (state, pod, nodes) => {
      if (nodes.length === 0) return skip
      const constraints = constraintsOf(pod, "ScheduleAnyway")
      if (constraints.length === 0) return skip
      const snapshot = state.read<Snapshot>(snapshotKey)
      // Without PreFilter's snapshot (PreFilter not enabled), count over the scored nodes only,
      // in a throwaway cache so the shared one keeps tracking whole snapshots.
      const scope: Snapshot = snapshot ?? { nodes, get: (n) => nodes.find((x) => x.name === n), withAffinityPods: [] }
      const counter = snapshot === undefined ? new TopologyCountsCache() : cache
      counter.sync(scope)
      // Only explicit (or List-defaulted) constraints require every key: with System defaults a
      // node without a zone label is still spread by hostname.
      const requireAll = asArray(podSpec(pod)["topologySpreadConstraints"]).length > 0 || !systemDefaulted
      const keys = requireAll ? constraints.map((c) => c.topologyKey) : []
      const ignored = new Set<string>()
      const domains = constraints.map(() => new Set<string>())
      for (const n of nodes) {
        if (!hasAllKeys(n.labels, keys)) {
          ignored.add(n.name)
          continue
        }
        for (let i = 0; i < constraints.length; i++) {
          const c = constraints[i]!
          if (c.topologyKey !== hostnameLabel) domains[i]!.add(labelOf(n.labels, c.topologyKey) ?? "")
        }
      }
      const scored = constraints.map((c, i): ScoreConstraint => {
        const hostname = c.topologyKey === hostnameLabel
        const size = hostname ? nodes.length - ignored.size : domains[i]!.size
        return {
          key: c.topologyKey,
          maxSkew: c.maxSkew,
          // Smaller topologies are not watered down by bigger ones: weight by log(domains + 2).
          weight: Math.log(size + 2),
          byValue: hostname ? undefined : countsFor(counter, scope, pod, c, keys).byValue,
          constraint: c
        }
      })
      state.write(scoreKey, { namespace: pod.namespace, constraints: scored, ignored } satisfies PreScoreState)
      return success
    },

    score: (state, _pod, node) => {
      const s = state.read<PreScoreState>(scoreKey)
      if (s === undefined || s.ignored.has(node.name)) return 0
      let score = 0
      for (const c of s.constraints) {
        const value = labelOf(node.labels, c.key)
        if (value === undefined) continue
        const count = c.byValue === undefined ? countMatching(node, s.namespace, c.constraint) : (c.byValue.get(value) ?? 0)
        // maxSkew − 1 waters down differences between domains: the tolerance to skew.
        score += count * c.weight + (c.maxSkew - 1)
      }
      return Math.round(score)
    },

    normalize: (state, _pod, scores) => normalize(state.read<PreScoreState>(scoreKey), scores)
  }
}

/** Upstream NormalizeScore: fewest matching pods → 100; ignored nodes (missing a key) → 0. */
const normalize = (s: PreScoreState | undefined, scores: Array<NodeScore>): void => {
  if (s === undefined) return
  let min = Infinity
  let max = 0
  for (const sc of scores) {
    if (s.ignored.has(sc.node)) continue
    if (sc.score < min) min = sc.score
    if (sc.score > max) max = sc.score
  }
  for (const sc of scores) {
    if (s.ignored.has(sc.node)) sc.score = 0
    else if (max === 0) sc.score = MaxScore
    else sc.score = Math.floor((MaxScore * (max + min - sc.score)) / max)
  }
}

const validateDefault = (c: Record<string, unknown>, i: number): string | undefined => {
  const at = `defaultConstraints[${i}]`
  if (!(typeof c["maxSkew"] === "number" && Number.isInteger(c["maxSkew"]) && c["maxSkew"] > 0)) return `${at}.maxSkew: Invalid value: ${JSON.stringify(c["maxSkew"])}: must be greater than zero`
  if (asString(c["topologyKey"]) === "") return `${at}.topologyKey: Required value: can not be empty`
  if (c["whenUnsatisfiable"] !== "DoNotSchedule" && c["whenUnsatisfiable"] !== "ScheduleAnyway") {
    return `${at}.whenUnsatisfiable: Unsupported value: ${JSON.stringify(c["whenUnsatisfiable"])}: supported values: "DoNotSchedule", "ScheduleAnyway"`
  }
  if (c["labelSelector"] !== undefined && c["labelSelector"] !== null) return `${at}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod`
  return undefined
}

/**
 * Builds the plugin. Args: `defaultingType` (`System`, the default, or `List`) and, for `List`,
 * `defaultConstraints`. Handle: optional `defaultSelector(pod)` (see the file header).
 */
export const factory: Factory = (args, handle) => {
  const a = asObject(args) as Args & Record<string, unknown>
  const type = a.defaultingType ?? "System"
  if (type !== "System" && type !== "List") return `defaultingType: Unsupported value: ${JSON.stringify(type)}: supported values: "List", "System"`
  const given = asArray(a.defaultConstraints).map(asObject)
  if (type === "System" && given.length > 0) return `defaultConstraints: Invalid value: when .defaultingType is "System", .defaultConstraints must be empty`
  for (let i = 0; i < given.length; i++) {
    const bad = validateDefault(given[i]!, i)
    if (bad !== undefined) return bad
  }
  const seen = new Set(given.map((c) => `${asString(c["topologyKey"])}/${asString(c["whenUnsatisfiable"])}`))
  if (seen.size < given.length) return `defaultConstraints: Duplicate value: a topologyKey and whenUnsatisfiable pair may appear once`
  const lookup = (handle as SpreadHandle).defaultSelector ?? ownerLabelsSelector
  return make(type === "System" ? systemDefaults : given, type === "System", lookup)
}
