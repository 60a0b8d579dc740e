/**
 * The scheduler's view of the cluster: one NodeInfo per node with what is already placed on it
 * (requested resources, pods with their labels, host ports), kept incrementally from watch events
 * and handed to each scheduling cycle as an immutable Snapshot. Placement is a pure function of
 * (pod, snapshot, profile).
 *
 * Follows kube-scheduler's cache (`internal/cache`) and `framework.NodeInfo`:
 * - A pod's requests are upstream's `PodRequests`: the containers' sum, raised to the largest init
 *   container (a sidecar — an init container with `restartPolicy: Always` — keeps running, so it
 *   adds to the sum and to every later init container), plus `spec.overhead`. The non-zero
 *   variant counts a container without a CPU or memory request as 100m / 200Mi (scoring only).
 * - Only bound, non-terminal pods count; a pod the scheduler has chosen a node for is *assumed*
 *   on it until the informer shows the binding (or the binding fails and it is forgotten).
 * - `snapshot()` is copy-on-write by node generation: only nodes changed since the previous
 *   snapshot get a new NodeInfo; the others are the same objects. Nodes are listed zone by zone
 *   round-robin (upstream's node tree), so a sampled search spreads over zones.
 * - Departures: assumed pods never expire (upstream's TTL is 0 too); pods stay in insertion order on
 *   a node (upstream swaps on removal); `withAffinityPods` is one list for affinity and
 *   anti-affinity (upstream also keeps a required-anti-affinity list).
 */
import * as Quantity from "../model/Quantity.js"
import type { JsonObject } from "../object/Json.js"
import type { TaintLike } from "../matching/TaintToleration.js"
import { asArray, asObject, asString } from "../object/Json.js"

/** Resource amounts in the units the scheduler adds up: milli-CPU, bytes, pod slots, and named scalars. */
export interface Resources {
  readonly milliCpu: number
  readonly memory: number
  readonly ephemeralStorage: number
  readonly pods: number
  /** Extended resources (`nvidia.com/gpu`, hugepages-*), in their integer units. */
  readonly scalar: Readonly<Record<string, number>>
}

/** A pod as the scheduler reads it, parsed once. */
export interface PodInfo {
  readonly pod: JsonObject
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly labels: Readonly<Record<string, string>>
  /** Effective requests: the containers' sum, or the largest init container, plus overhead. */
  readonly requests: Resources
  /** `spec.priority` (0 when unset). */
  readonly priority: number
  /** `spec.nodeName` when bound. */
  readonly nodeName: string | undefined
}

/** One node and what it carries. */
export interface NodeInfo {
  readonly name: string
  readonly node: JsonObject
  readonly labels: Readonly<Record<string, string>>
  readonly taints: ReadonlyArray<TaintLike>
  readonly unschedulable: boolean
  readonly allocatable: Resources
  /** The sum of the requests of the pods placed here. */
  readonly requested: Resources
  /** As `requested`, counting a pod without CPU/memory requests as 100m/200Mi (kube-scheduler's scoring defaults). */
  readonly nonZeroRequested: Resources
  readonly pods: ReadonlyArray<PodInfo>
  /** Host ports in use, as `protocol/hostIP/port` (hostIP `0.0.0.0` for any). */
  readonly usedPorts: ReadonlySet<string>
  /** Bumped on every change, so caches of derived values can tell they are stale. */
  readonly generation: number
}

/** The cluster as one scheduling cycle sees it. */
export interface Snapshot {
  readonly nodes: ReadonlyArray<NodeInfo>
  readonly get: (name: string) => NodeInfo | undefined
  /** Nodes with at least one pod that has (anti-)affinity terms (InterPodAffinity reads only these). */
  readonly withAffinityPods: ReadonlyArray<NodeInfo>
  /** What changed since the cache's previous snapshot (absent on snapshots not made by a Cache). */
  readonly delta?: Delta
}

/**
 * The nodes a Cache snapshot changed relative to the snapshot the cache made before it, so
 * derived state (topology counts) can follow a cycle in O(changed nodes) instead of comparing
 * every node. Snapshots are numbered rather than linked: a link would keep every old snapshot alive.
 */
export interface Delta {
  /** This snapshot's number (the cache's count of snapshots made). */
  readonly id: number
  /** The number of the snapshot these names are relative to (-1: none, rebuild). */
  readonly previous: number
  /** Nodes added, changed or removed since `previous` (a removed node is no longer in `get`). */
  readonly names: ReadonlyArray<string>
  /** The highest generation of any NodeInfo in this snapshot. */
  readonly maxGeneration: number
}

// ─── Implementation ────────────────────────────────────────────────────────────────────────────


/** The CPU kube-scheduler counts for a container without a CPU request when scoring (100m). */
export const DefaultMilliCpuRequest = 100
/** The memory kube-scheduler counts for a container without a memory request when scoring (200Mi). */
export const DefaultMemoryRequest = 200 * 1024 * 1024

// Every NodeInfo ever built gets a distinct generation, as upstream's global counter: a plugin's
// cache keyed by (name, generation) can never mistake one NodeInfo for another.
let lastGeneration = 0
const nextGeneration = (): number => ++lastGeneration

// The same few quantity strings ("100m", "128Mi") appear on thousands of pods: parse each once.
const memoMilli = new Map<string, number>()
const memoUnits = new Map<string, number>()
const memoLimit = 4096
const quantity = (v: unknown, milli: boolean): number => {
  const text = typeof v === "string" ? v : typeof v === "number" ? String(v) : undefined
  if (text === undefined) return 0
  const memo = milli ? memoMilli : memoUnits
  const hit = memo.get(text)
  if (hit !== undefined) return hit
  const parsed = Quantity.parse(text)
  // Kubernetes rounds up (MilliValue/Value), so a tiny request never becomes free.
  const n = parsed._tag === "Left" ? 0 : milli ? Quantity.toMilli(parsed.right) : Quantity.toUnits(parsed.right)
  if (memo.size >= memoLimit) memo.clear()
  memo.set(text, n)
  return n
}

// Upstream's IsScalarResourceName: extended (`example.com/foo`) and prefixed native
// (`kubernetes.io/…`) resources, hugepages and attachable volumes; other names are not counted.
const isScalar = (name: string): boolean => name.includes("/") || name.startsWith("hugepages-") || name.startsWith("attachable-volumes-")

const emptyScalar: Readonly<Record<string, number>> = Object.freeze({})
const emptyPorts: ReadonlySet<string> = new Set<string>()
const noPorts: ReadonlyArray<string> = []

// A mutable sum, used while adding up and frozen into a Resources.
class Acc {
  milliCpu = 0
  memory = 0
  ephemeralStorage = 0
  pods = 0
  scalar: Record<string, number> | undefined = undefined

  add(name: string, value: unknown): void {
    switch (name) {
      case "cpu":
        this.milliCpu += quantity(value, true)
        return
      case "memory":
        this.memory += quantity(value, false)
        return
      case "ephemeral-storage":
        this.ephemeralStorage += quantity(value, false)
        return
      case "pods":
        this.pods += quantity(value, false)
        return
      default:
        if (isScalar(name)) this.addScalar(name, quantity(value, false))
    }
  }

  addScalar(name: string, n: number): void {
    const scalar = (this.scalar ??= {})
    scalar[name] = (scalar[name] ?? 0) + n
  }

  plus(other: Acc): void {
    this.milliCpu += other.milliCpu
    this.memory += other.memory
    this.ephemeralStorage += other.ephemeralStorage
    this.pods += other.pods
    if (other.scalar !== undefined) for (const k in other.scalar) this.addScalar(k, other.scalar[k] ?? 0)
  }

  max(other: Acc): void {
    this.milliCpu = Math.max(this.milliCpu, other.milliCpu)
    this.memory = Math.max(this.memory, other.memory)
    this.ephemeralStorage = Math.max(this.ephemeralStorage, other.ephemeralStorage)
    if (other.scalar !== undefined) {
      const scalar = (this.scalar ??= {})
      for (const k in other.scalar) scalar[k] = Math.max(scalar[k] ?? 0, other.scalar[k] ?? 0)
    }
  }

  copy(): Acc {
    const c = new Acc()
    c.plus(this)
    return c
  }

  freeze(): Resources {
    return { milliCpu: this.milliCpu, memory: this.memory, ephemeralStorage: this.ephemeralStorage, pods: this.pods, scalar: this.scalar ?? emptyScalar }
  }
}

const requestsOf = (container: unknown): Record<string, unknown> => asObject(asObject(asObject(container)["resources"])["requests"])

// One container's requests; `nonZero` applies upstream's NonMissingContainerRequests (a missing
// CPU or memory request — absent, not zero — counts as the scoring default).
const addContainer = (acc: Acc, requests: Record<string, unknown>, nonZero: boolean): void => {
  for (const name in requests) acc.add(name, requests[name])
  if (nonZero) {
    if (requests["cpu"] === undefined) acc.milliCpu += DefaultMilliCpuRequest
    if (requests["memory"] === undefined) acc.memory += DefaultMemoryRequest
  }
}

// Upstream's resourcehelper.PodRequests.
const podRequests = (spec: Record<string, unknown>, nonZero: boolean): Acc => {
  const total = new Acc()
  for (const c of asArray(spec["containers"])) addContainer(total, requestsOf(c), nonZero)
  const inits = asArray(spec["initContainers"])
  if (inits.length > 0) {
    // Sidecars started so far keep running while each later init container runs.
    const sidecars = new Acc()
    const initMax = new Acc()
    for (const c of inits) {
      const requests = requestsOf(c)
      if (asObject(c)["restartPolicy"] === "Always") {
        addContainer(total, requests, nonZero)
        addContainer(sidecars, requests, nonZero)
        initMax.max(sidecars)
      } else {
        const running = sidecars.copy()
        addContainer(running, requests, nonZero)
        initMax.max(running)
      }
    }
    total.max(initMax)
  }
  const overhead = asObject(spec["overhead"])
  for (const name in overhead) total.add(name, overhead[name])
  return total
}

// Host ports as NodeInfo.usedPorts holds them; sidecars hold theirs for the pod's lifetime.
const hostPortsOf = (spec: Record<string, unknown>): ReadonlyArray<string> => {
  let out: Array<string> | undefined
  const collect = (container: unknown) => {
    for (const p of asArray(asObject(container)["ports"])) {
      const port = asObject(p)
      const hostPort = Number(port["hostPort"] ?? 0)
      if (!(hostPort > 0)) continue
      ;(out ??= []).push(`${asString(port["protocol"]) || "TCP"}/${asString(port["hostIP"]) || "0.0.0.0"}/${hostPort}`)
    }
  }
  for (const c of asArray(spec["initContainers"])) if (asObject(c)["restartPolicy"] === "Always") collect(c)
  for (const c of asArray(spec["containers"])) collect(c)
  return out ?? noPorts
}

// What the cache needs of a pod beyond PodInfo, computed once with it.
interface PodExtras {
  readonly nonZeroMilliCpu: number
  readonly nonZeroMemory: number
  readonly ports: ReadonlyArray<string>
  /** Has pod affinity or anti-affinity terms (upstream's podWithAffinity). */
  readonly affinity: boolean
}

const extras = new WeakMap<PodInfo, PodExtras>()

const computeExtras = (pod: JsonObject): PodExtras => {
  const spec = asObject(pod["spec"])
  const nonZero = podRequests(spec, true)
  const affinity = asObject(spec["affinity"])
  return {
    nonZeroMilliCpu: nonZero.milliCpu,
    nonZeroMemory: nonZero.memory,
    ports: hostPortsOf(spec),
    affinity: affinity["podAffinity"] != null || affinity["podAntiAffinity"] != null
  }
}

// PodInfos built by hand (tests, other modules) get their extras on first use.
const extrasOf = (info: PodInfo): PodExtras => {
  let x = extras.get(info)
  if (x === undefined) {
    x = computeExtras(info.pod)
    extras.set(info, x)
  }
  return x
}

/** A pod as the scheduler reads it: requests parsed once (CPU in milli, bytes, scalars), priority, labels. */
export const podInfo = (pod: JsonObject): PodInfo => {
  const meta = asObject(pod["metadata"])
  const spec = asObject(pod["spec"])
  const requests = podRequests(spec, false)
  requests.pods = 1
  const nodeName = asString(spec["nodeName"])
  const info: PodInfo = {
    pod,
    namespace: asString(meta["namespace"]),
    name: asString(meta["name"]),
    uid: asString(meta["uid"]),
    labels: asObject(meta["labels"]) as Readonly<Record<string, string>>,
    requests: requests.freeze(),
    priority: typeof spec["priority"] === "number" ? spec["priority"] : 0,
    nodeName: nodeName === "" ? undefined : nodeName
  }
  extras.set(info, computeExtras(pod))
  return info
}

/**
 * What the resource plugins read of a pod, as a string: its requests and the non-zero scoring
 * variant of CPU and memory (two pods with equal strings fit and score alike on any node).
 */
export const requestsSignature = (info: PodInfo): string => {
  const r = info.requests
  const x = extrasOf(info)
  let s = `${r.milliCpu},${r.memory},${r.ephemeralStorage},${r.pods},${x.nonZeroMilliCpu},${x.nonZeroMemory}`
  for (const k in r.scalar) s += `,${k}=${r.scalar[k]}`
  return s
}

/** The key the cache knows a pod by: its uid, or `namespace/name` for a pod without one (tests). */
export const podKey = (info: PodInfo): string => (info.uid !== "" ? info.uid : `${info.namespace}/${info.name}`)

const keyOfPod = (pod: JsonObject): string => {
  const meta = asObject(pod["metadata"])
  const uid = asString(meta["uid"])
  return uid !== "" ? uid : `${asString(meta["namespace"])}/${asString(meta["name"])}`
}

/** Resource arithmetic on the immutable Resources values. */
export const resources = {
  /** Nothing. */
  zero: { milliCpu: 0, memory: 0, ephemeralStorage: 0, pods: 0, scalar: emptyScalar } as Resources,
  /** `a + b`, scalars by name. */
  add: (a: Resources, b: Resources): Resources => combine(a, b, 1),
  /** `a - b`, scalars by name (a scalar only in `b` goes negative). */
  sub: (a: Resources, b: Resources): Resources => combine(a, b, -1),
  /** A ResourceList (`{cpu: "2", memory: "4Gi", pods: "110"}`) in scheduler units. */
  fromList: (list: unknown): Resources => {
    const acc = new Acc()
    const l = asObject(list)
    for (const name in l) acc.add(name, l[name])
    return acc.freeze()
  }
} as const

const combine = (a: Resources, b: Resources, sign: 1 | -1): Resources => {
  let scalar: Record<string, number> | undefined
  for (const k in a.scalar) (scalar ??= {})[k] = a.scalar[k] ?? 0
  for (const k in b.scalar) (scalar ??= {})[k] = (scalar[k] ?? 0) + sign * (b.scalar[k] ?? 0)
  return {
    milliCpu: a.milliCpu + sign * b.milliCpu,
    memory: a.memory + sign * b.memory,
    ephemeralStorage: a.ephemeralStorage + sign * b.ephemeralStorage,
    pods: a.pods + sign * b.pods,
    scalar: scalar ?? emptyScalar
  }
}

// A node's own fields, parsed once per node event and reused for every rebuild of its NodeInfo.
type NodeBase = Pick<NodeInfo, "name" | "node" | "labels" | "taints" | "unschedulable" | "allocatable">

const nodeBase = (node: JsonObject): NodeBase => {
  const meta = asObject(node["metadata"])
  const spec = asObject(node["spec"])
  return {
    name: asString(meta["name"]),
    node,
    labels: asObject(meta["labels"]) as Readonly<Record<string, string>>,
    taints: asArray(spec["taints"]).map(asObject),
    unschedulable: spec["unschedulable"] === true,
    // Missing allocatable is zero, as upstream: such a node takes no pod that requests anything.
    allocatable: resources.fromList(asObject(node["status"])["allocatable"])
  }
}

const build = (base: NodeBase, pods: ReadonlyArray<PodInfo>, generation: number): NodeInfo => {
  const requested = new Acc()
  let nonZeroCpu = 0
  let nonZeroMemory = 0
  let ports: Set<string> | undefined
  for (const p of pods) {
    const r = p.requests
    requested.milliCpu += r.milliCpu
    requested.memory += r.memory
    requested.ephemeralStorage += r.ephemeralStorage
    for (const k in r.scalar) requested.addScalar(k, r.scalar[k] ?? 0)
    const x = extrasOf(p)
    nonZeroCpu += x.nonZeroMilliCpu
    nonZeroMemory += x.nonZeroMemory
    for (const port of x.ports) (ports ??= new Set()).add(port)
  }
  requested.pods = pods.length
  const frozen = requested.freeze()
  return {
    name: base.name,
    node: base.node,
    labels: base.labels,
    taints: base.taints,
    unschedulable: base.unschedulable,
    allocatable: base.allocatable,
    requested: frozen,
    nonZeroRequested: { ...frozen, milliCpu: nonZeroCpu, memory: nonZeroMemory },
    pods,
    usedPorts: ports ?? emptyPorts,
    generation
  }
}

/** A NodeInfo for `node` carrying `pods` (a fresh generation). */
export const nodeInfo = (node: JsonObject, pods: ReadonlyArray<PodInfo> = []): NodeInfo => build(nodeBase(node), pods.slice(), nextGeneration())

/** `info` with one more pod (what-if for preemption and nominated pods); `info` is unchanged. */
export const withPod = (info: NodeInfo, pod: PodInfo): NodeInfo => build(info, [...info.pods, pod], nextGeneration())

/** `info` without the pod of key `key` (see `podKey`); `info` is unchanged. */
export const withoutPod = (info: NodeInfo, key: string): NodeInfo => build(info, info.pods.filter((p) => podKey(p) !== key), nextGeneration())

/** Whether any pod on the node has pod affinity or anti-affinity terms. */
export const hasAffinityPods = (info: NodeInfo): boolean => info.pods.some((p) => extrasOf(p).affinity)

const snapshotOf = (nodes: ReadonlyArray<NodeInfo>, index: ReadonlyMap<string, number>, withAffinityPods: ReadonlyArray<NodeInfo>, delta?: Delta): Snapshot => ({
  nodes,
  get: (name) => {
    const i = index.get(name)
    return i === undefined ? undefined : nodes[i]
  },
  withAffinityPods,
  ...(delta === undefined ? {} : { delta })
})

/** A Snapshot of the given NodeInfos, in that order (tests, what-if scheduling). */
export const make = (nodes: ReadonlyArray<NodeInfo>): Snapshot =>
  snapshotOf(nodes.slice(), new Map(nodes.map((n, i) => [n.name, i])), nodes.filter(hasAffinityPods))

const zoneLabel = "topology.kubernetes.io/zone"
const regionLabel = "topology.kubernetes.io/region"
const zoneOf = (labels: Readonly<Record<string, string>>): string =>
  `${labels[regionLabel] ?? labels["failure-domain.beta.kubernetes.io/region"] ?? ""}:\u0000:${labels[zoneLabel] ?? labels["failure-domain.beta.kubernetes.io/zone"] ?? ""}`

/** The scheduler's node-info cache, kept from informer events and snapshotted once per cycle. */
export interface Cache {
  /** A node appeared. */
  addNode(node: JsonObject): void
  /** A node changed (labels, taints, allocatable, …). */
  updateNode(node: JsonObject): void
  /** A node was deleted (its pods stay counted until they are deleted too, as upstream). */
  removeNode(node: JsonObject): void
  /** A pod appeared; counted when bound and not finished (confirms an assumed pod). */
  addPod(pod: JsonObject): void
  /** A pod changed; a finished pod leaves its node, a newly bound one joins (confirms an assumed pod). */
  updatePod(pod: JsonObject): void
  /** A pod was deleted (also drops an assumed pod). */
  removePod(pod: JsonObject): void
  /** Counts `pod` on `nodeName` before the API confirms the binding; false when the pod is already cached. */
  assume(pod: PodInfo, nodeName: string): boolean
  /** Drops an assumed pod whose binding failed (by `podKey`); false when it is not assumed. */
  forget(key: string): boolean
  /** Whether the pod (by `podKey`) is assumed and not yet confirmed. */
  isAssumed(key: string): boolean
  /** The cluster now, sharing every NodeInfo that did not change since the previous snapshot. */
  snapshot(): Snapshot
}

interface NodeItem {
  readonly name: string
  /** Undefined while pods name a node the cache has not seen (or that was deleted before them). */
  base: NodeBase | undefined
  zone: string
  /** Pods by key, in arrival order. */
  readonly pods: Map<string, PodInfo>
  affinityPods: number
  generation: number
  /** The NodeInfo built at the last snapshot (shared until the node changes). */
  info: NodeInfo | undefined
  /** Whether the last snapshot listed this node in withAffinityPods. */
  listedWithAffinity: boolean
}

interface PodState {
  readonly node: string
  readonly assumed: boolean
  readonly affinity: boolean
}

// Upstream's node tree: zones in order of first appearance, one node from each in turn.
const zoneRoundRobin = (items: ReadonlyArray<NodeItem>): Array<NodeItem> => {
  const zones = new Map<string, Array<NodeItem>>()
  for (const item of items) {
    const list = zones.get(item.zone)
    if (list === undefined) zones.set(item.zone, [item])
    else list.push(item)
  }
  if (zones.size <= 1) return items.slice()
  const lists = [...zones.values()]
  const out: Array<NodeItem> = []
  for (let i = 0; out.length < items.length; i++) for (const list of lists) if (i < list.length) out.push(list[i]!)
  return out
}

/** A change to a built node list: position, and the NodeInfo now there. */
type Change = readonly [number, NodeInfo]

/**
 * A cache's snapshot. Its node list is built on first read, from the last list the cache built and
 * the changes logged since: a cycle that only looks nodes up by name (a batched one) copies no
 * list of thousands of nodes. Lookups in the cache's newest snapshot read the cache's NodeInfos,
 * which are this snapshot's until the next one is made; an older snapshot builds its list first.
 */
class CacheSnapshot implements Snapshot {
  private built: ReadonlyArray<NodeInfo> | undefined
  constructor(
    private readonly cache: CacheImpl,
    private readonly base: ReadonlyArray<NodeInfo>,
    private readonly log: ReadonlyArray<Change>,
    private readonly logLength: number,
    private readonly index: ReadonlyMap<string, number>,
    readonly withAffinityPods: ReadonlyArray<NodeInfo>,
    readonly delta: Delta
  ) {
    if (logLength === 0) this.built = base
  }

  get nodes(): ReadonlyArray<NodeInfo> {
    if (this.built === undefined) {
      const nodes = this.base.slice()
      for (let k = 0; k < this.logLength; k++) {
        const [i, info] = this.log[k]!
        nodes[i] = info
      }
      this.built = nodes
      this.cache.adopt(this, nodes)
    }
    return this.built
  }

  readonly get = (name: string): NodeInfo | undefined => {
    const i = this.index.get(name)
    if (i === undefined) return undefined
    if (this.built === undefined && this.cache.isNewest(this)) {
      // Undefined when the node left the cache since (its entry is gone): the list still has it.
      const info = this.cache.infoOf(name)
      if (info !== undefined) return info
    }
    return this.nodes[i]
  }
}

class CacheImpl implements Cache {
  private readonly items = new Map<string, NodeItem>()
  private readonly podStates = new Map<string, PodState>()
  /** Nodes changed since the last snapshot. */
  private readonly dirty = new Set<NodeItem>()
  /** A node appeared, left or moved zone: the order and the name index are rebuilt. */
  private listChanged = true
  private last: Snapshot | undefined = undefined
  private order: Array<NodeItem> = []
  private index: ReadonlyMap<string, number> = new Map()
  /** The last node list built, and the changes to it since, oldest first (a new array per list). */
  private base: ReadonlyArray<NodeInfo> = []
  private log: Array<Change> = []
  private made = 0
  private maxGeneration = 0

  addNode(node: JsonObject): void {
    this.upsertNode(node)
  }

  updateNode(node: JsonObject): void {
    this.upsertNode(node)
  }

  removeNode(node: JsonObject): void {
    const item = this.items.get(asString(asObject(node["metadata"])["name"]))
    if (item === undefined || item.base === undefined) return
    item.base = undefined
    if (item.pods.size === 0) this.items.delete(item.name)
    this.listChanged = true
    this.touch(item)
  }

  addPod(pod: JsonObject): void {
    this.upsertPod(pod)
  }

  updatePod(pod: JsonObject): void {
    this.upsertPod(pod)
  }

  removePod(pod: JsonObject): void {
    this.drop(keyOfPod(pod))
  }

  assume(pod: PodInfo, nodeName: string): boolean {
    const key = podKey(pod)
    if (this.podStates.has(key)) return false
    // As upstream, the assumed copy carries the node it is going to.
    const assumed: PodInfo = { ...pod, nodeName, pod: { ...pod.pod, spec: { ...asObject(pod.pod["spec"]), nodeName } } }
    extras.set(assumed, extrasOf(pod))
    this.place(key, assumed, nodeName, true)
    return true
  }

  forget(key: string): boolean {
    if (this.podStates.get(key)?.assumed !== true) return false
    this.drop(key)
    return true
  }

  isAssumed(key: string): boolean {
    return this.podStates.get(key)?.assumed === true
  }

  snapshot(): Snapshot {
    const last = this.last
    if (last !== undefined && this.dirty.size === 0 && !this.listChanged) return last
    let affinityChanged = this.listChanged || last === undefined
    const names = new Array<string>(this.dirty.size)
    let d = 0
    let maxGeneration = this.maxGeneration
    for (const item of this.dirty) {
      if (item.affinityPods > 0 || item.listedWithAffinity) affinityChanged = true
      item.info = item.base === undefined ? undefined : build(item.base, Array.from(item.pods.values()), item.generation)
      names[d++] = item.name
      if (item.generation > maxGeneration) maxGeneration = item.generation
    }
    this.maxGeneration = maxGeneration
    let index = this.index
    if (this.listChanged || last === undefined) {
      const present: Array<NodeItem> = []
      for (const item of this.items.values()) if (item.base !== undefined) present.push(item)
      this.order = zoneRoundRobin(present)
      const fresh = new Map<string, number>()
      const nodes = new Array<NodeInfo>(this.order.length)
      this.order.forEach((item, i) => {
        fresh.set(item.name, i)
        nodes[i] = item.info!
      })
      // A new map rather than an update: older snapshots keep reading their own.
      index = this.index = fresh
      this.base = nodes
      this.log = []
    } else {
      for (const item of this.dirty) {
        const i = index.get(item.name)
        if (i !== undefined && item.info !== undefined) this.log.push([i, item.info])
      }
    }
    let withAffinity = last?.withAffinityPods ?? []
    if (affinityChanged) {
      const list: Array<NodeInfo> = []
      for (const item of this.order) {
        item.listedWithAffinity = item.affinityPods > 0
        if (item.listedWithAffinity) list.push(item.info!)
      }
      withAffinity = list
    }
    this.dirty.clear()
    this.listChanged = false
    const id = ++this.made
    const snapshot = new CacheSnapshot(this, this.base, this.log, this.log.length, index, withAffinity, {
      id,
      previous: last === undefined ? -1 : id - 1,
      names,
      maxGeneration
    })
    this.last = snapshot
    // A log as long as half the list costs more to keep than a copy of the list.
    if (this.log.length > this.base.length / 2) void snapshot.nodes
    return snapshot
  }

  /** A snapshot built its list: if it is the newest, later snapshots start from that list. */
  adopt(snapshot: Snapshot, nodes: ReadonlyArray<NodeInfo>): void {
    if (snapshot !== this.last) return
    this.base = nodes
    this.log = []
  }

  /** Whether `snapshot` is the newest (the cache's NodeInfos are its own). */
  isNewest(snapshot: Snapshot): boolean {
    return snapshot === this.last
  }

  /** A node's NodeInfo as of the newest snapshot. */
  infoOf(name: string): NodeInfo | undefined {
    return this.items.get(name)?.info
  }

  private item(name: string): NodeItem {
    let item = this.items.get(name)
    if (item === undefined) {
      item = { name, base: undefined, zone: "", pods: new Map(), affinityPods: 0, generation: 0, info: undefined, listedWithAffinity: false }
      this.items.set(name, item)
    }
    return item
  }

  private touch(item: NodeItem): void {
    item.generation = nextGeneration()
    this.dirty.add(item)
  }

  private upsertNode(node: JsonObject): void {
    const base = nodeBase(node)
    if (base.name === "") return
    const item = this.item(base.name)
    const zone = zoneOf(base.labels)
    if (item.base === undefined || item.zone !== zone) this.listChanged = true
    item.base = base
    item.zone = zone
    this.touch(item)
  }

  private upsertPod(pod: JsonObject): void {
    const key = keyOfPod(pod)
    const phase = asString(asObject(pod["status"])["phase"])
    if (phase === "Succeeded" || phase === "Failed") {
      this.drop(key)
      return
    }
    const nodeName = asString(asObject(pod["spec"])["nodeName"])
    if (nodeName === "") {
      // An assumed pod's own updates (conditions, annotations) can arrive before its binding.
      if (this.podStates.get(key)?.assumed !== true) this.drop(key)
      return
    }
    this.place(key, podInfo(pod), nodeName, false)
  }

  private place(key: string, info: PodInfo, nodeName: string, assumed: boolean): void {
    const state = this.podStates.get(key)
    if (state !== undefined && state.node !== nodeName) {
      this.drop(key)
    } else if (state?.affinity === true) {
      // Replaced in place below; its old terms no longer count.
      this.item(nodeName).affinityPods--
    }
    const item = this.item(nodeName)
    const affinity = extrasOf(info).affinity
    // Map.set keeps an updated pod in its place on the node.
    item.pods.set(key, info)
    if (affinity) item.affinityPods++
    this.podStates.set(key, { node: nodeName, assumed, affinity })
    this.touch(item)
  }

  private drop(key: string): void {
    const state = this.podStates.get(key)
    if (state === undefined) return
    this.podStates.delete(key)
    const item = this.items.get(state.node)
    if (item === undefined) return
    item.pods.delete(key)
    if (state.affinity) item.affinityPods--
    this.touch(item)
    if (item.base === undefined && item.pods.size === 0) this.items.delete(item.name)
  }
}

/** The incremental cache. */
export const Cache = {
  /** An empty cache. */
  make: (): Cache => new CacheImpl()
}
