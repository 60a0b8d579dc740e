/**
 * The node lifecycle controller: watches each node's heartbeat (its Lease in `kube-node-lease`
 * and its Ready condition's `lastHeartbeatTime`) and, as kube-controller-manager's
 * node-lifecycle-controller with taint-based eviction does, when neither has moved for
 * `nodeMonitorGracePeriodMs` (default 40 s; `nodeStartupGracePeriodMs`, 60 s, for a node that
 * never posted Ready) sets Ready, MemoryPressure, DiskPressure and PIDPressure to Unknown
 * ("Kubelet stopped posting node status."), marks the node's pods not Ready, keeps the
 * condition taints (`node.kubernetes.io/unreachable|not-ready|…:NoSchedule`,
 * `unschedulable:NoSchedule`) in step with the conditions, and adds the NoExecute taint
 * (`unreachable` for Unknown, `not-ready` for False) through a per-zone rate limiter. Its taint
 * manager half deletes the pods of a NoExecute-tainted node that do not tolerate the taints, at
 * once or after the smallest `tolerationSeconds` of the tolerations they use.
 *
 * Zones (`topology.kubernetes.io/region` + `zone` labels) pace the tainting as upstream: Normal
 * zones taint `evictionRate` nodes per second (default 0.1), a zone with at least
 * `unhealthyZoneThreshold` (0.55) of its nodes not Ready and more than 2 of them
 * (PartialDisruption) `secondaryEvictionRate` (0.01) when it has more than
 * `largeClusterThreshold` (50) nodes and nothing at all otherwise, a zone with no Ready node
 * (FullDisruption) the normal rate; and when every zone is fully disrupted the controller
 * assumes the control plane is the one cut off ("Entering master disruption mode"): it removes
 * every NoExecute taint it placed and evicts nothing until some node is Ready again, then gives
 * every node a fresh grace period.
 *
 * Departures: one reconcile per node (plus a resync every `nodeMonitorPeriodMs`) instead of one
 * pass over all nodes, so zone states are recomputed on each reconcile from every node's
 * heartbeat; an eviction deadline counts from the earliest `timeAdded` of the node's NoExecute
 * taints (upstream: from when its taint manager first saw them); pods are marked not Ready only
 * if they became Ready before the node stopped being Ready (upstream: once per transition);
 * eviction deletes the pod after recording the `DisruptionTarget` condition, without a PDB check,
 * as upstream. The taint manager runs inside this controller rather than as its own.
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import * as TaintToleration from "../matching/TaintToleration.js"
import * as Conditions from "../object/Conditions.js"
import type * as Controller from "./Controller.js"
import type * as Informer from "../informer/Informer.js"
import * as Limiter from "./internal/EvictionRateLimiter.js"
import * as Pods from "../object/Pods.js"
import { type JsonObject, asArray, asObject } from "../object/Json.js"
import { isTerminating, metadataOf, nameOf, rfc3339, timeMs } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"



/** The namespace of node heartbeat Leases. */
export const leaseNamespace = "kube-node-lease"
/** Taint of a node whose Ready condition is Unknown. */
export const unreachableTaint = "node.kubernetes.io/unreachable"
/** Taint of a node whose Ready condition is False. */
export const notReadyTaint = "node.kubernetes.io/not-ready"
/** Taint of a cordoned node. */
export const unschedulableTaint = "node.kubernetes.io/unschedulable"
/** Nodes with this label are left out of zone disruption counts. */
export const excludeDisruptionLabel = "node.kubernetes.io/exclude-disruption"

// Upstream's nodeConditionToTaintKeyStatusMap: the NoSchedule taint each condition state brings.
const conditionTaints: ReadonlyArray<{ readonly type: string; readonly status: string; readonly key: string }> = [
  { type: "Ready", status: "False", key: notReadyTaint },
  { type: "Ready", status: "Unknown", key: unreachableTaint },
  { type: "MemoryPressure", status: "True", key: "node.kubernetes.io/memory-pressure" },
  { type: "DiskPressure", status: "True", key: "node.kubernetes.io/disk-pressure" },
  { type: "NetworkUnavailable", status: "True", key: "node.kubernetes.io/network-unavailable" },
  { type: "PIDPressure", status: "True", key: "node.kubernetes.io/pid-pressure" }
]
const conditionTaintKeys = new Set([...conditionTaints.map((c) => c.key), unschedulableTaint])

// The conditions a silent node's are set to Unknown (upstream's nodeConditionTypes to update).
const monitoredConditions = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]

/** Timings and rates (upstream defaults; tests pass milliseconds). */
export interface Options {
  /** A node silent this long is Unknown (default 40 000 ms). */
  readonly nodeMonitorGracePeriodMs?: number
  /** …or this long after creation if it never posted Ready (default 60 000 ms). */
  readonly nodeStartupGracePeriodMs?: number
  /** Every node is looked at again this often (default 5 000 ms). */
  readonly nodeMonitorPeriodMs?: number
  /** Nodes tainted NoExecute per second per healthy zone (default 0.1). */
  readonly evictionRate?: number
  /** …per partially disrupted zone of a large cluster (default 0.01). */
  readonly secondaryEvictionRate?: number
  /** The not-Ready fraction from which a zone is partially disrupted (default 0.55). */
  readonly unhealthyZoneThreshold?: number
  /** Zones with more nodes than this keep evicting slowly when partially disrupted (default 50). */
  readonly largeClusterThreshold?: number
}

type Settings = Required<Options>

const settings = (o: Options): Settings => ({
  nodeMonitorGracePeriodMs: o.nodeMonitorGracePeriodMs ?? 40_000,
  nodeStartupGracePeriodMs: o.nodeStartupGracePeriodMs ?? 60_000,
  nodeMonitorPeriodMs: o.nodeMonitorPeriodMs ?? 5_000,
  evictionRate: o.evictionRate ?? 0.1,
  secondaryEvictionRate: o.secondaryEvictionRate ?? 0.01,
  unhealthyZoneThreshold: o.unhealthyZoneThreshold ?? 0.55,
  largeClusterThreshold: o.largeClusterThreshold ?? 50
})


/** A node taint. */
export interface Taint {
  readonly key: string
  readonly value?: string
  readonly effect: string
  readonly timeAdded?: string
}

/** The taints of a node. */
export const taintsOf = (node: JsonObject): ReadonlyArray<Taint> => asArray(asObject(node["spec"])["taints"]).map((t) => asObject(t) as unknown as Taint)

const conditionsOf = (o: JsonObject): ReadonlyArray<Conditions.Condition> => asArray(asObject(o["status"])["conditions"]) as ReadonlyArray<Conditions.Condition>

const sameTaint = (a: Taint, b: Taint) => a.key === b.key && a.effect === b.effect

/**
 * What identifies the node's latest heartbeat: the Lease's `renewTime` and the Ready condition's
 * `lastHeartbeatTime`. The controller notes, on its own clock, when this last changed (as
 * upstream's probeTimestamp), so a skewed node clock cannot make a live node look dead.
 */
export const heartbeatOf = (node: JsonObject, lease: JsonObject | undefined): string =>
  `${String(asObject(lease?.["spec"])["renewTime"] ?? "")}|${String(Pods.condition(node, "Ready")?.["lastHeartbeatTime"] ?? "")}`

/** A node's health at `nowMs`. */
export interface Health {
  /** The Ready status after this look: the stored one, or Unknown once the grace period passed. */
  readonly ready: "True" | "False" | "Unknown" | undefined
  /** The node's conditions after this look (the same array when unchanged). */
  readonly conditions: ReadonlyArray<Conditions.Condition>
  /** When the node goes silent-for-too-long if nothing changes (undefined: already). */
  readonly staleAtMs: number | undefined
}

/**
 * The node's health (pure, upstream's tryUpdateNodeHealth): `probeMs` is when its heartbeat last
 * changed. A node that never posted Ready counts from its creation with the startup grace period.
 */
export const health = (node: JsonObject, probeMs: number, nowMs: number, options: Options = {}): Health => {
  const s = settings(options)
  const current = conditionsOf(node)
  const ready = Conditions.get(current, "Ready")
  const since = ready === undefined ? (timeMs(metadataOf(node)["creationTimestamp"]) ?? probeMs) : probeMs
  const grace = ready === undefined ? s.nodeStartupGracePeriodMs : s.nodeMonitorGracePeriodMs
  const staleAt = since + grace
  if (nowMs <= staleAt) {
    return { ready: ready?.status, conditions: current, staleAtMs: staleAt }
  }
  const now = rfc3339(nowMs)
  const created = String(metadataOf(node)["creationTimestamp"] ?? now)
  let conditions: ReadonlyArray<Conditions.Condition> = current
  for (const type of monitoredConditions) {
    const c = Conditions.get(conditions, type)
    if (c === undefined) {
      conditions = [
        ...conditions,
        { type, status: "Unknown", reason: "NodeStatusNeverUpdated", message: "Kubelet never posted node status.", lastHeartbeatTime: created, lastTransitionTime: now }
      ]
    } else if (c.status !== "Unknown") {
      conditions = conditions.map((x) =>
        x.type === type ? { ...x, status: "Unknown", reason: "NodeStatusUnknown", message: "Kubelet stopped posting node status.", lastTransitionTime: now } : x
      )
    }
  }
  return { ready: "Unknown", conditions, staleAtMs: undefined }
}

/** A zone's disruption state (upstream's Normal / PartialDisruption / FullDisruption). */
export type ZoneState = "Normal" | "PartialDisruption" | "FullDisruption"

/** The zone a node belongs to (upstream's GetZoneKey: region and zone labels). */
export const zoneOf = (node: JsonObject): string => {
  const labels = asObject(metadataOf(node)["labels"])
  const region = String(labels["topology.kubernetes.io/region"] ?? labels["failure-domain.beta.kubernetes.io/region"] ?? "")
  const zone = String(labels["topology.kubernetes.io/zone"] ?? labels["failure-domain.beta.kubernetes.io/zone"] ?? "")
  return region === "" && zone === "" ? "" : `${region}:\u0000:${zone}`
}

/** A zone's state from how many of its nodes are Ready and how many are not (upstream's ComputeZoneState). */
export const zoneState = (ready: number, notReady: number, unhealthyZoneThreshold = 0.55): ZoneState => {
  if (ready === 0 && notReady > 0) return "FullDisruption"
  if (notReady > 2 && notReady / (notReady + ready) >= unhealthyZoneThreshold) return "PartialDisruption"
  return "Normal"
}

/** The rate at which a zone in `state` with `size` nodes may taint nodes (upstream's setLimiterInZone). */
export const zoneRate = (state: ZoneState, size: number, options: Options = {}): number => {
  const s = settings(options)
  switch (state) {
    case "Normal":
    case "FullDisruption":
      return s.evictionRate
    case "PartialDisruption":
      return size > s.largeClusterThreshold ? s.secondaryEvictionRate : 0
  }
}

/** What the controller knows about the cluster's zones when deciding one node. */
export interface ZoneView {
  /** Every zone is fully disrupted: evict nothing, remove the NoExecute taints. */
  readonly allDisrupted: boolean
  /** The node's zone has a token for tainting one more node now. */
  readonly tokenAvailable: boolean
  /** When it will have one (undefined: never at the current rate). */
  readonly msUntilToken: number | undefined
}

/** A pod's eviction by the taint manager. */
export interface Eviction {
  readonly pod: JsonObject
  /** When the pod must go (≤ now: at once). */
  readonly atMs: number
}

/** When the taint manager deletes `pod` given the node's NoExecute taints (undefined: never). */
export const evictionTime = (pod: JsonObject, noExecute: ReadonlyArray<Taint>, sinceMs: number): number | undefined => {
  if (noExecute.length === 0) return undefined
  const tolerations = asArray(asObject(pod["spec"])["tolerations"]).map(asObject) as ReadonlyArray<TaintToleration.TolerationLike>
  // Upstream's GetMatchingTolerations: one tolerating toleration per taint, or none tolerate.
  const used: Array<TaintToleration.TolerationLike> = []
  for (const taint of noExecute) {
    const t = tolerations.find((x) => TaintToleration.toleratesTaint(x, taint))
    if (t === undefined) return sinceMs
    used.push(t)
  }
  // Upstream's getMinTolerationTime: the smallest tolerationSeconds among the used tolerations;
  // a non-positive one means at once; none at all means forever.
  let min: number | undefined
  for (const t of used) {
    if (typeof t.tolerationSeconds !== "number") continue
    if (t.tolerationSeconds <= 0) return sinceMs
    min = min === undefined ? t.tolerationSeconds : Math.min(min, t.tolerationSeconds)
  }
  return min === undefined ? undefined : sinceMs + min * 1000
}

/** What the controller observed of one node. */
export interface Observed {
  readonly node: JsonObject
  /** When the node's heartbeat last changed, on the controller's clock. */
  readonly probeMs: number
  /** The pods bound to the node. */
  readonly pods: ReadonlyArray<JsonObject>
  readonly zone: ZoneView
  /** When NoExecute taints without `timeAdded` were first seen, by `key:effect`. */
  readonly taintsSeenMs?: ReadonlyMap<string, number>
}

/** What to do about one node. */
export interface Decision {
  /** The Ready status this decision works from. */
  readonly ready: "True" | "False" | "Unknown" | undefined
  /** New `status.conditions`, when they change. */
  readonly conditions: ReadonlyArray<Conditions.Condition> | undefined
  /** New `spec.taints`, when they change. */
  readonly taints: ReadonlyArray<Taint> | undefined
  /** A NoExecute taint is added anew: the zone's token is spent. */
  readonly tookToken: boolean
  /** The node just stopped being Ready (record an event). */
  readonly becameNotReady: boolean
  /** Pods whose Ready condition must become False. */
  readonly markNotReady: ReadonlyArray<JsonObject>
  /** Pods to delete now. */
  readonly evict: ReadonlyArray<JsonObject>
  /** Look again after this long. */
  readonly requeueAfterMs: number | undefined
}

const noExecuteKeyFor = (ready: string | undefined) => (ready === "False" ? notReadyTaint : ready === "Unknown" ? unreachableTaint : undefined)

/**
 * Decide one node (pure): its conditions, its condition and NoExecute taints, which of its pods
 * are marked not Ready, which are evicted now, and when to look again.
 */
export const decide = (observed: Observed, nowMs: number, options: Options = {}): Decision => {
  const { node, zone } = observed
  const h = health(node, observed.probeMs, nowMs, options)
  const conditionsChanged = h.conditions !== conditionsOf(node)
  const before = Conditions.get(conditionsOf(node), "Ready")?.status
  const now = rfc3339(nowMs)
  const taints = taintsOf(node)
  const unschedulable = asObject(node["spec"])["unschedulable"] === true
  let requeue: number | undefined = h.staleAtMs === undefined ? undefined : h.staleAtMs - nowMs + 1
  const soon = (ms: number) => {
    requeue = requeue === undefined ? ms : Math.min(requeue, ms)
  }

  // NoSchedule taints follow the conditions and spec.unschedulable (upstream's doNoScheduleTaintingPass).
  const wantNoSchedule: Array<Taint> = []
  for (const c of h.conditions) {
    const match = conditionTaints.find((x) => x.type === c.type && x.status === c.status)
    if (match !== undefined && !wantNoSchedule.some((t) => t.key === match.key)) wantNoSchedule.push({ key: match.key, effect: "NoSchedule" })
  }
  if (unschedulable) wantNoSchedule.push({ key: unschedulableTaint, effect: "NoSchedule" })
  let next: Array<Taint> = taints.filter((t) => !(t.effect === "NoSchedule" && conditionTaintKeys.has(t.key)) || wantNoSchedule.some((w) => sameTaint(w, t)))
  for (const w of wantNoSchedule) if (!next.some((t) => sameTaint(t, w))) next.push(w)

  // NoExecute taints (upstream's processTaintBaseEviction + doNoExecuteTaintingPass).
  let tookToken = false
  if (h.ready !== undefined) {
    const want = zone.allDisrupted ? undefined : noExecuteKeyFor(h.ready)
    const mine = (t: Taint) => t.effect === "NoExecute" && (t.key === unreachableTaint || t.key === notReadyTaint)
    const present = next.filter(mine)
    if (want === undefined) next = next.filter((t) => !mine(t))
    else if (!present.some((t) => t.key === want)) {
      // Swapping unreachable ⇄ not-ready needs no token; a first NoExecute taint does.
      if (present.length > 0 || zone.tokenAvailable) {
        next = [...next.filter((t) => !mine(t)), { key: want, effect: "NoExecute", timeAdded: now }]
        tookToken = present.length === 0
      } else if (zone.msUntilToken !== undefined) soon(Math.max(1, zone.msUntilToken))
    }
  }
  const taintsChanged = next.length !== taints.length || next.some((t, i) => !sameTaint(t, taints[i]!) || t.timeAdded !== taints[i]!.timeAdded)

  // Pods: marked not Ready when the node is not (upstream's MarkPodsNotReady), and the taint
  // manager's evictions for the NoExecute taints the node will carry.
  const markNotReady: Array<JsonObject> = []
  const evict: Array<JsonObject> = []
  const readyCondition = Conditions.get(h.conditions, "Ready")
  const nodeNotReadySince = readyCondition === undefined || readyCondition.status === "True" ? undefined : timeMs(readyCondition.lastTransitionTime)
  const noExecute = next.filter((t) => t.effect === "NoExecute")
  const sinceMs = noExecute.length === 0 ? nowMs : Math.min(...noExecute.map((t) => timeMs(t.timeAdded) ?? observed.taintsSeenMs?.get(`${t.key}:${t.effect}`) ?? nowMs))
  for (const pod of observed.pods) {
    if (isTerminating(pod)) continue
    if (nodeNotReadySince !== undefined && Pods.isReady(pod)) {
      const podReadySince = timeMs(Pods.condition(pod, "Ready")?.["lastTransitionTime"])
      if (podReadySince === undefined || podReadySince <= nodeNotReadySince) markNotReady.push(pod)
    }
    const at = evictionTime(pod, noExecute, sinceMs)
    if (at === undefined) continue
    if (at <= nowMs) evict.push(pod)
    else soon(at - nowMs)
  }

  return {
    ready: h.ready,
    conditions: conditionsChanged ? h.conditions : undefined,
    taints: taintsChanged ? next : undefined,
    tookToken,
    becameNotReady: before === "True" && h.ready !== "True",
    markNotReady,
    evict,
    requeueAfterMs: requeue
  }
}

/** Zone bookkeeping the controller keeps between reconciles (upstream's zoneStates and limiters). */
interface Zones {
  states: Map<string, ZoneState>
  buckets: Map<string, Limiter.Bucket>
}

/** The NoExecute taint eviction's pod condition (upstream's DisruptionTarget by the taint manager). */
const disruptionTarget = {
  type: "DisruptionTarget",
  status: "True",
  reason: "DeletionByTaintManager",
  message: "Taint manager: deleting due to NoExecute taint"
} as const

// A pod that is gone, or changed since it was read, is looked at again on its next change.
const ignoreGone = <A>(e: Effect.Effect<A, ApiError.ApiError>) => e.pipe(Effect.catchIf((x) => x.status.code === 404 || x.status.code === 409, () => Effect.void))

/** The node lifecycle reconciler (keys: node names). */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const s = settings(options)
  // When each node's heartbeat last changed, on this controller's clock (upstream's nodeHealthMap).
  const probes = new Map<string, { readonly heartbeat: string; atMs: number }>()
  const taintsSeen = new Map<string, number>()
  const zones: Zones = { states: new Map(), buckets: new Map() }

  const probe = (node: JsonObject, lease: JsonObject | undefined, nowMs: number): number => {
    const name = nameOf(node)
    const beat = heartbeatOf(node, lease)
    const p = probes.get(name)
    if (p !== undefined && p.heartbeat === beat) return p.atMs
    probes.set(name, { heartbeat: beat, atMs: nowMs })
    return nowMs
  }

  /**
   * Recompute every zone's state from every node's health and move the limiters as upstream's
   * handleDisruption does: whether every zone is fully disrupted, and whether that just began or ended.
   */
  const handleDisruption = (informers: Informer.Informers, nowMs: number): { readonly all: boolean; readonly entering: boolean; readonly leaving: boolean } => {
    const leases = informers.for(ResourceRefs.Lease)
    const counts = new Map<string, { ready: number; notReady: number }>()
    const nodes = informers.for(ResourceRefs.Node).list()
    for (const node of nodes) {
      if (asObject(metadataOf(node)["labels"])[excludeDisruptionLabel] !== undefined) continue
      const h = health(node, probe(node, leases.get(leaseNamespace, nameOf(node)), nowMs), nowMs, options)
      const z = zoneOf(node)
      const c = counts.get(z) ?? { ready: 0, notReady: 0 }
      if (h.ready === "True") c.ready++
      else c.notReady++
      counts.set(z, c)
    }
    const next = new Map<string, ZoneState>()
    for (const [z, c] of counts) next.set(z, zoneState(c.ready, c.notReady, s.unhealthyZoneThreshold))
    for (const z of [...zones.states.keys()]) if (!next.has(z)) zones.states.delete(z)
    for (const z of [...zones.buckets.keys()]) if (!next.has(z)) zones.buckets.delete(z)
    for (const z of next.keys()) if (!zones.buckets.has(z)) zones.buckets.set(z, Limiter.make(s.evictionRate, nowMs))
    const allNow = next.size > 0 && [...next.values()].every((x) => x === "FullDisruption")
    const allWas = zones.states.size > 0 && [...zones.states.values()].every((x) => x === "FullDisruption")
    const sizeOf = (z: string) => (counts.get(z)?.ready ?? 0) + (counts.get(z)?.notReady ?? 0)
    if (allNow && !allWas) {
      for (const z of next.keys()) zones.buckets.set(z, Limiter.swap(zones.buckets.get(z)!, 0, nowMs))
    } else if (!allNow && allWas) {
      // Leaving "master disruption mode": every node gets a fresh grace period before eviction.
      for (const p of probes.values()) p.atMs = nowMs
      for (const [z, st] of next) zones.buckets.set(z, Limiter.swap(zones.buckets.get(z)!, zoneRate(st, sizeOf(z), s), nowMs))
    } else if (!allNow) {
      for (const [z, st] of next) {
        if (zones.states.get(z) !== st) zones.buckets.set(z, Limiter.swap(zones.buckets.get(z)!, zoneRate(st, sizeOf(z), s), nowMs))
      }
    }
    zones.states = next
    return { all: allNow, entering: allNow && !allWas, leaving: !allNow && allWas }
  }

  return {
    name: "node-lifecycle",
    primary: ResourceRefs.Node,
    watches: [
      { ref: ResourceRefs.Lease, keys: (c) => (metadataOf(c.object)["namespace"] === leaseNamespace ? [nameOf(c.object)] : []) },
      {
        ref: ResourceRefs.Pod,
        // Only pods of nodes that are not Ready or carry NoExecute taints concern this controller.
        keys: (c, informers) => {
          const nodeName = asObject(c.object["spec"])["nodeName"]
          if (typeof nodeName !== "string" || c.type === "DELETED") return []
          const node = informers.for(ResourceRefs.Node).get(undefined, nodeName)
          if (node === undefined) return []
          const concerned = Pods.condition(node, "Ready")?.["status"] !== "True" || taintsOf(node).some((t) => t.effect === "NoExecute")
          return concerned ? [nodeName] : []
        }
      }
    ],
    resync: { everyMs: s.nodeMonitorPeriodMs, keys: (informers) => informers.for(ResourceRefs.Node).list().map(nameOf) },
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const node = ctx.informers.for(ResourceRefs.Node).get(undefined, key)
        if (node === undefined) {
          probes.delete(key)
          for (const k of [...taintsSeen.keys()]) if (k.startsWith(`${key}/`)) taintsSeen.delete(k)
          return
        }
        const disruption = handleDisruption(ctx.informers, nowMs)
        const allDisrupted = disruption.all
        if (disruption.entering) yield* Effect.logWarning("node-lifecycle: no node is Ready; entering master disruption mode (no evictions)")
        if (disruption.leaving) yield* Effect.logInfo("node-lifecycle: some nodes are Ready again; leaving master disruption mode")
        const zoneKey = zoneOf(node)
        const bucket = zones.buckets.get(zoneKey) ?? Limiter.make(s.evictionRate, nowMs)
        const seen = new Map<string, number>()
        for (const t of taintsOf(node)) {
          if (t.effect !== "NoExecute" || t.timeAdded !== undefined) continue
          const k = `${key}/${t.key}:${t.effect}`
          if (!taintsSeen.has(k)) taintsSeen.set(k, nowMs)
          seen.set(`${t.key}:${t.effect}`, taintsSeen.get(k)!)
        }
        const probeMs = probes.get(key)?.atMs ?? probe(node, ctx.informers.for(ResourceRefs.Lease).get(leaseNamespace, key), nowMs)
        const unhealthy = Pods.condition(node, "Ready")?.["status"] !== "True" || taintsOf(node).some((t) => t.effect === "NoExecute")
        const zone: ZoneView = { allDisrupted, tokenAvailable: Limiter.canAccept(bucket, nowMs), msUntilToken: Limiter.msUntilToken(bucket, nowMs) }
        // A healthy node's pods are only read when the decision may concern them.
        const firstLook = decide({ node, probeMs, pods: [], zone, taintsSeenMs: seen }, nowMs, options)
        const concerned = unhealthy || firstLook.ready !== "True" || (firstLook.taints ?? []).some((t) => t.effect === "NoExecute")
        const pods = concerned ? ctx.informers.for(ResourceRefs.Pod).onNode(key) : []
        const d = concerned ? decide({ node, probeMs, pods, zone, taintsSeenMs: seen }, nowMs, options) : firstLook
        // Spend the token now, before any yield, so two nodes of a zone cannot both take it.
        if (d.tookToken) zones.buckets.set(zoneKey, Limiter.tryAccept(bucket, nowMs).bucket)

        let current = node
        if (d.conditions !== undefined) {
          current = yield* ctx.client.update({ ...current, status: { ...asObject(current["status"]), conditions: d.conditions } }, "status")
        }
        if (d.taints !== undefined) {
          const spec = { ...asObject(current["spec"]), taints: d.taints.length === 0 ? undefined : d.taints }
          current = yield* ctx.client.update({ ...current, spec })
        }
        if (d.becameNotReady) yield* ctx.events.record(node, "Normal", "NodeNotReady", `Node ${key} status is now: NodeNotReady`)
        const now = rfc3339(nowMs)
        for (const pod of d.markNotReady) {
          const conditions = Conditions.set(conditionsOf(pod), { type: "Ready", status: "False" }, now)
          yield* ignoreGone(ctx.client.update({ ...pod, status: { ...asObject(pod["status"]), conditions } }, "status"))
          yield* ctx.events.record(pod, "Warning", "NodeNotReady", "Node is not ready")
        }
        for (const pod of d.evict) {
          const m = metadataOf(pod)
          const ns = String(m["namespace"] ?? "")
          yield* ctx.events.record(pod, "Normal", "TaintManagerEviction", `Marking for deletion Pod ${ns}/${nameOf(pod)}`)
          const conditions = Conditions.set(conditionsOf(pod), disruptionTarget, now)
          yield* Effect.ignore(ctx.client.update({ ...pod, status: { ...asObject(pod["status"]), conditions } }, "status"))
          yield* ignoreGone(ctx.client.delete(ResourceRefs.Pod, ns, nameOf(pod), { preconditions: { uid: m["uid"] } }))
        }
        return d.requeueAfterMs === undefined ? undefined : { requeueAfterMs: d.requeueAfterMs }
      })
  }
}
