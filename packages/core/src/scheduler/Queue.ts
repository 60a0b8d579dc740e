/**
 * The scheduling queue, in the shape of kube-scheduler's PriorityQueue: three places a pending pod
 * can wait, and the rules that move it between them.
 *
 *   add/update ─▶ activeQ (ordered by the profile's QueueSort) ─▶ pop ─▶ scheduling cycle (in flight)
 *                    ▲   ▲                                                │ done: scheduled
 *        backoff over │   │ relevant event / 5 min                         │ addUnschedulable(rejectedBy)
 *                 backoffQ ◀──────────────────── unschedulablePods ◀──────┘
 *
 * - activeQ holds pods ready to be tried, best first (PrioritySort: higher priority, then earlier).
 * - backoffQ holds pods that failed recently: per pod, `initial * 2^(attempts-1)` capped at `max`
 *   (upstream: 1 s → 10 s) after the failure; a timer armed for the earliest expiry moves them on.
 * - unschedulablePods parks pods with the set of plugins that rejected them. A cluster event moves
 *   a parked pod back only when one of those plugins registered interest in it (NodeResourcesFit
 *   in a node's allocatable, TaintToleration in its taints, …) — never on a blind timer; only pods
 *   parked longer than 5 min are flushed regardless (upstream's podMaxInUnschedulablePodsDuration).
 *   Events that arrive while a pod is in flight are remembered, so a pod rejected because of a
 *   node that was added during its cycle is retried at once instead of being parked forever.
 * - Nominations: pods that preempted wait for their victims to go with `nominatedNodeName` set;
 *   `nominated(node)` lists them so filters can count their resources as taken.
 *
 * Departures: pods with `spec.schedulingGates` are parked (as by upstream's SchedulingGates
 * PreEnqueue) and leave only when an update removes the gates; queueing hints (per-plugin
 * functions of the changed object) are reduced to event matching on resource, action and the
 * changed aspect; a plugin missing from the interest map is interested in every event, as a
 * plugin without EnqueueExtensions is upstream.
 *
 * Plain TypeScript (it sits on every pod's and event's path); only `pop` is an Effect, to wait.
 */
import { Effect } from "effect"
import type { JsonObject } from "../informer/Informer.js"
import { stableJson } from "../object/Json.js"
import type { Timer } from "../informer/WorkQueue.js"
import type { Plugin, QueuedPodInfo } from "./Framework.js"
import type { PodInfo } from "./Snapshot.js"

// ---- cluster events --------------------------------------------------------------------------

/** The kinds of object whose changes can make a parked pod schedulable (`*`: any). */
export type EventResource =
  | "Node"
  /** An assigned (bound) pod: its deletion frees room, its labels feed (anti-)affinity and spread. */
  | "Pod"
  | "PersistentVolume"
  | "PersistentVolumeClaim"
  | "StorageClass"
  | "CSINode"
  | "*"

/** What happened to the object (`*`: anything). */
export type EventAction = "Add" | "Update" | "Delete" | "*"

/** Which part of an updated object changed (upstream's UpdateNodeLabel, UpdateNodeTaint, …). */
export type EventAspect =
  | "Label"
  /** Taints, and `spec.unschedulable` (upstream reports both as UpdateNodeTaint). */
  | "Taint"
  | "Allocatable"
  | "Condition"
  | "Annotation"
  /** A pod's resource requests (an in-place scale-down frees room). */
  | "Request"

/** A change in the cluster, or a plugin's interest in such changes. */
export interface ClusterEvent {
  readonly resource: EventResource
  readonly action: EventAction
  /** For updates: the part that changed. Unset in an event: unknown (any); in an interest: any. */
  readonly what?: EventAspect
}

/** Whether `event` is one that `interest` asks for. */
export const matches = (interest: ClusterEvent, event: ClusterEvent): boolean =>
  (interest.resource === "*" || event.resource === "*" || interest.resource === event.resource) &&
  (interest.action === "*" || event.action === "*" || interest.action === event.action) &&
  (interest.what === undefined || event.what === undefined || interest.what === event.what)

const ev = (resource: EventResource, action: EventAction, what?: EventAspect): ClusterEvent =>
  what === undefined ? { resource, action } : { resource, action, what }

/** An event every interest matches: `moveOnEvent(anyEvent)` moves every parked pod (upstream's MoveAllToActiveOrBackoffQueue). */
export const anyEvent: ClusterEvent = ev("*", "*")

/**
 * The events each upstream plugin registers (EventsToRegister), by plugin name. Score-only and
 * bind plugins register none: they never reject a pod.
 */
export const pluginEvents: Readonly<Record<string, ReadonlyArray<ClusterEvent>>> = {
  PrioritySort: [],
  DefaultBinder: [],
  // Gated pods leave only through an update that lifts the gates.
  SchedulingGates: [],
  DefaultPreemption: [],
  NodeResourcesBalancedAllocation: [],
  ImageLocality: [],
  NodeResourcesFit: [ev("Node", "Add"), ev("Node", "Update", "Allocatable"), ev("Pod", "Delete"), ev("Pod", "Update", "Request")],
  NodeName: [ev("Node", "Add")],
  NodeUnschedulable: [ev("Node", "Add"), ev("Node", "Update", "Taint")],
  NodePorts: [ev("Node", "Add"), ev("Pod", "Delete")],
  NodeAffinity: [ev("Node", "Add"), ev("Node", "Update", "Label")],
  TaintToleration: [ev("Node", "Add"), ev("Node", "Update", "Taint")],
  InterPodAffinity: [ev("Pod", "Add"), ev("Pod", "Update", "Label"), ev("Pod", "Delete"), ev("Node", "Add"), ev("Node", "Update", "Label")],
  PodTopologySpread: [
    ev("Pod", "Add"),
    ev("Pod", "Update", "Label"),
    ev("Pod", "Delete"),
    ev("Node", "Add"),
    ev("Node", "Update", "Label"),
    ev("Node", "Update", "Taint"),
    ev("Node", "Delete")
  ],
  VolumeBinding: [
    ev("PersistentVolumeClaim", "Add"),
    ev("PersistentVolumeClaim", "Update"),
    ev("PersistentVolume", "Add"),
    ev("PersistentVolume", "Update"),
    ev("StorageClass", "Add"),
    ev("StorageClass", "Update"),
    ev("CSINode", "Add"),
    ev("CSINode", "Update"),
    ev("Node", "Add"),
    ev("Node", "Update", "Label")
  ]
}

/** A plugin that declares which events may make a pod it rejected schedulable. */
export interface WithEvents extends Plugin {
  readonly events?: ReadonlyArray<ClusterEvent>
}

/** The interest map of a set of built plugins: what each declares, else the upstream default. */
export const eventsOf = (plugins: Iterable<WithEvents>): Readonly<Record<string, ReadonlyArray<ClusterEvent>>> => {
  const out: Record<string, ReadonlyArray<ClusterEvent>> = { ...pluginEvents }
  for (const p of plugins) if (p.events !== undefined) out[p.name] = p.events
  return out
}

const o = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const differs = (a: unknown, b: unknown) => stableJson(a ?? null) !== stableJson(b ?? null)

/** The events of a Node update: one per changed aspect (none when nothing the scheduler reads changed). */
export const nodeUpdateEvents = (old: JsonObject, next: JsonObject): ReadonlyArray<ClusterEvent> => {
  const out: Array<ClusterEvent> = []
  const [om, nm, os, ns, ost, nst] = [o(old["metadata"]), o(next["metadata"]), o(old["spec"]), o(next["spec"]), o(old["status"]), o(next["status"])]
  if (differs(om["labels"], nm["labels"])) out.push(ev("Node", "Update", "Label"))
  if (differs(os["taints"], ns["taints"]) || (os["unschedulable"] === true) !== (ns["unschedulable"] === true)) out.push(ev("Node", "Update", "Taint"))
  if (differs(ost["allocatable"], nst["allocatable"])) out.push(ev("Node", "Update", "Allocatable"))
  const conditions = (s: Record<string, unknown>) => (Array.isArray(s["conditions"]) ? s["conditions"].map((c) => [o(c)["type"], o(c)["status"]]) : [])
  if (differs(conditions(ost), conditions(nst))) out.push(ev("Node", "Update", "Condition"))
  if (differs(om["annotations"], nm["annotations"])) out.push(ev("Node", "Update", "Annotation"))
  return out
}

/** The events of an assigned pod's update: its labels, its requests. */
export const podUpdateEvents = (old: JsonObject, next: JsonObject): ReadonlyArray<ClusterEvent> => {
  const out: Array<ClusterEvent> = []
  if (differs(o(old["metadata"])["labels"], o(next["metadata"])["labels"])) out.push(ev("Pod", "Update", "Label"))
  const resources = (p: JsonObject) => (Array.isArray(o(p["spec"])["containers"]) ? (o(p["spec"])["containers"] as Array<unknown>).map((c) => o(c)["resources"]) : [])
  if (differs(resources(old), resources(next))) out.push(ev("Pod", "Update", "Request"))
  return out
}

// ---- the queue -------------------------------------------------------------------------------

/** Timing of the queue, in milliseconds (tests shrink them). */
export interface Options {
  /** Orders activeQ: the profile's QueueSort `less` (default: PrioritySort). */
  readonly less?: (a: QueuedPodInfo, b: QueuedPodInfo) => boolean
  /** Backoff after the first failure (upstream podInitialBackoffSeconds: 1 s). */
  readonly initialBackoffMs?: number
  /** Longest backoff (upstream podMaxBackoffSeconds: 10 s). */
  readonly maxBackoffMs?: number
  /** A parked pod is retried after this long whatever happens (upstream: 5 min). */
  readonly maxInUnschedulableMs?: number
  /** Interest of each plugin in cluster events (merged over `pluginEvents`). */
  readonly pluginEvents?: Readonly<Record<string, ReadonlyArray<ClusterEvent>>>
  /** The clock (ms). */
  readonly now?: () => number
  /** Schedules a callback (injectable for tests). */
  readonly timer?: Timer
}

/** How many pods wait where. */
export interface Lengths {
  readonly active: number
  readonly backoff: number
  readonly unschedulable: number
  readonly inFlight: number
}

/** A scheduling queue. */
export interface SchedulingQueue {
  /** A new pending pod (an already known pod is updated instead; a bound pod is ignored). */
  readonly add: (pod: PodInfo) => void
  /**
   * A newer version of a pending pod: updated where it waits; a parked pod whose spec or metadata
   * changed goes back to be tried (its change may have fixed it). A pod now bound leaves the queue.
   */
  readonly update: (pod: PodInfo) => void
  /** The pod is gone (deleted, or no longer this scheduler's): it leaves every queue and nomination. */
  readonly delete: (uid: string) => void
  /** Wait for the best pod in activeQ; it is in flight until `done` or `addUnschedulable`. */
  readonly pop: Effect.Effect<QueuedPodInfo>
  /** The scheduling attempt of a popped pod is over (bound, or already re-queued). */
  readonly done: (uid: string) => void
  /** A popped pod did not fit: park it with the plugins that rejected it (none: an error, back off). */
  readonly addUnschedulable: (pod: QueuedPodInfo, rejectedBy: Iterable<string>) => void
  /** Something changed: parked pods whose rejecting plugins care are moved back. Answers how many. */
  readonly moveOnEvent: (event: ClusterEvent | ReadonlyArray<ClusterEvent>) => number
  /** Record (or with `undefined`, clear) that `pod` waits for room on `node`. */
  readonly nominate: (pod: PodInfo, node: string | undefined) => void
  /** The pods nominated to `node`. */
  readonly nominated: (node: string) => ReadonlyArray<PodInfo>
  /** The node a pod is nominated to. */
  readonly nominatedNode: (uid: string) => string | undefined
  /** How many pods wait where. */
  readonly lengths: () => Lengths
  /** Where a pod is (for tests and the placement explanation). */
  readonly where: (uid: string) => "active" | "backoff" | "unschedulable" | "inFlight" | undefined
  /** Stop the timers; waiting `pop`s never resume. */
  readonly close: () => void
}

/** PrioritySort's order: higher priority first, then the earlier queued. */
export const prioritySort = (a: QueuedPodInfo, b: QueuedPodInfo): boolean =>
  a.pod.priority !== b.pod.priority ? a.pod.priority > b.pod.priority : a.timestampMs < b.timestampMs

/** The backoff after `attempts` attempts: `initial` doubled per attempt after the first, capped at `max`. */
export const backoffMs = (attempts: number, initialMs: number, maxMs: number): number => {
  let d = initialMs
  for (let i = 1; i < attempts && d < maxMs; i++) d *= 2
  return Math.min(d, maxMs)
}

type Place = "active" | "backoff" | "unschedulable" | "inFlight"

interface Entry {
  info: QueuedPodInfo
  place: Place
  /** Position in the heap it is in. */
  index: number
  backoffUntil: number
  /** In flight: the first event of the log this attempt has not seen yet. */
  eventsFrom: number
  /** In flight: the pod was updated meanwhile (the update may have fixed it). */
  updated: boolean
  gated: boolean
}

/** A binary min-heap of entries that knows each entry's position, so any entry can be removed. */
class Heap {
  readonly items: Array<Entry> = []
  constructor(private readonly before: (a: Entry, b: Entry) => boolean) {}
  get size() {
    return this.items.length
  }
  peek(): Entry | undefined {
    return this.items[0]
  }
  push(e: Entry) {
    e.index = this.items.length
    this.items.push(e)
    this.up(e.index)
  }
  pop(): Entry | undefined {
    const top = this.items[0]
    if (top !== undefined) this.remove(top)
    return top
  }
  remove(e: Entry) {
    const i = e.index
    const last = this.items.pop()!
    if (i < this.items.length) {
      this.items[i] = last
      last.index = i
      this.down(i)
      this.up(last.index)
    }
    e.index = -1
  }
  fix(e: Entry) {
    this.down(e.index)
    this.up(e.index)
  }
  private swap(i: number, j: number) {
    const a = this.items[i]!
    const b = this.items[j]!
    this.items[i] = b
    this.items[j] = a
    a.index = j
    b.index = i
  }
  private up(i: number) {
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.before(this.items[i]!, this.items[parent]!)) return
      this.swap(i, parent)
      i = parent
    }
  }
  private down(i: number) {
    const n = this.items.length
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let best = i
      if (l < n && this.before(this.items[l]!, this.items[best]!)) best = l
      if (r < n && this.before(this.items[r]!, this.items[best]!)) best = r
      if (best === i) return
      this.swap(i, best)
      i = best
    }
  }
}

const realTimer: Timer = (ms, run) => {
  const t = setTimeout(run, ms)
  // The queue's timers must not keep a process alive on their own.
  ;(t as { unref?: () => void }).unref?.()
  return () => clearTimeout(t)
}

const nominatedNodeNameOf = (pod: PodInfo): string | undefined => {
  const n = o(pod.pod["status"])["nominatedNodeName"]
  return typeof n === "string" && n !== "" ? n : undefined
}

const isGated = (pod: PodInfo): boolean => {
  const gates = o(pod.pod["spec"])["schedulingGates"]
  return Array.isArray(gates) && gates.length > 0
}

// What an update must change for a parked pod to be worth another try (upstream isPodUpdated:
// everything but status and the bookkeeping fields that change on every write).
const schedulingRelevant = (pod: PodInfo): string => {
  const { resourceVersion: _rv, generation: _g, managedFields: _m, ...meta } = o(pod.pod["metadata"])
  return stableJson({ meta, spec: pod.pod["spec"] })
}

/** The plugin name parked gated pods carry (upstream's SchedulingGates PreEnqueue plugin). */
export const schedulingGates = "SchedulingGates"

/** A new, empty queue. */
export const make = (options: Options = {}): SchedulingQueue => {
  const less = options.less ?? prioritySort
  const initialBackoff = options.initialBackoffMs ?? 1000
  const maxBackoff = options.maxBackoffMs ?? 10_000
  const maxParked = options.maxInUnschedulableMs ?? 300_000
  const interest = { ...pluginEvents, ...options.pluginEvents }
  const now = options.now ?? Date.now
  const timer = options.timer ?? realTimer

  const entries = new Map<string, Entry>()
  const active = new Heap((a, b) => less(a.info, b.info))
  const backoff = new Heap((a, b) => a.backoffUntil < b.backoffUntil)
  // Parked pods in the order they were parked (oldest first), and indexed by rejecting plugin.
  const parked = new Map<string, Entry>()
  const parkedBy = new Map<string, Set<Entry>>()
  // Pods rejected by no plugin (errors) and waiting for any event.
  const anyPlugin = "\u0000any"
  let inFlight = 0
  // Events seen while pods were in flight; `logBase` is the sequence number of log[0].
  let log: Array<ReadonlyArray<ClusterEvent>> = []
  let logBase = 0
  // Pods whose cycle ended in a binding: updates not yet showing the node are stale and ignored.
  const scheduled = new Set<string>()
  const nominations = new Map<string, { node: string; pod: PodInfo }>()
  const byNode = new Map<string, Map<string, PodInfo>>()
  let waiters: Array<() => void> = []
  let closed = false
  let backoffTimer: { at: number; cancel: () => void } | undefined
  let parkedTimer: { at: number; cancel: () => void } | undefined

  // ---- nominations

  const unnominate = (uid: string) => {
    const n = nominations.get(uid)
    if (n === undefined) return
    nominations.delete(uid)
    const m = byNode.get(n.node)
    m?.delete(uid)
    if (m !== undefined && m.size === 0) byNode.delete(n.node)
  }
  const nominate = (pod: PodInfo, node: string | undefined) => {
    unnominate(pod.uid)
    if (node === undefined || node === "") return
    nominations.set(pod.uid, { node, pod })
    let m = byNode.get(node)
    if (m === undefined) byNode.set(node, (m = new Map()))
    m.set(pod.uid, pod)
  }
  // On add/update: the pod's own `status.nominatedNodeName` wins; a version without one keeps a
  // nomination made in memory that the API has not caught up with yet (as upstream's nominator).
  const syncNomination = (pod: PodInfo, previous: PodInfo | undefined) => {
    const node = nominatedNodeNameOf(pod)
    if (node !== undefined) return nominate(pod, node)
    const kept = nominations.get(pod.uid)
    if (kept === undefined) return
    if (previous !== undefined && nominatedNodeNameOf(previous) !== undefined) return unnominate(pod.uid)
    nominate(pod, kept.node)
  }

  // ---- moving entries

  const wake = () => {
    if (waiters.length === 0) return
    // Every waiter retries; one gets the pod, the others wait again (a broadcast, as upstream).
    const ws = waiters
    waiters = []
    for (const w of ws) w()
  }

  const unpark = (e: Entry) => {
    parked.delete(e.info.pod.uid)
    const keys = e.info.unschedulablePlugins.size === 0 ? [anyPlugin] : e.info.unschedulablePlugins
    for (const p of keys) {
      const s = parkedBy.get(p)
      s?.delete(e)
      if (s !== undefined && s.size === 0) parkedBy.delete(p)
    }
  }

  const detach = (e: Entry) => {
    switch (e.place) {
      case "active":
        active.remove(e)
        break
      case "backoff":
        backoff.remove(e)
        break
      case "unschedulable":
        unpark(e)
        break
      case "inFlight":
        inFlight--
        if (inFlight === 0) {
          logBase += log.length
          log = []
        }
        break
    }
  }

  const toActive = (e: Entry) => {
    e.place = "active"
    active.push(e)
    wake()
  }

  const armBackoff = () => {
    if (closed) return
    const top = backoff.peek()
    if (top === undefined) {
      backoffTimer?.cancel()
      backoffTimer = undefined
      return
    }
    if (backoffTimer !== undefined && backoffTimer.at <= top.backoffUntil) return
    backoffTimer?.cancel()
    const at = top.backoffUntil
    backoffTimer = { at, cancel: timer(Math.max(0, at - now()), () => {
      backoffTimer = undefined
      flushBackoff()
    }) }
  }

  const flushBackoff = () => {
    const t = now()
    for (let top = backoff.peek(); top !== undefined && top.backoffUntil <= t; top = backoff.peek()) {
      backoff.pop()
      toActive(top)
    }
    armBackoff()
  }

  // Back to be tried: to backoffQ while its backoff lasts, else to activeQ (upstream requeue).
  const requeue = (e: Entry) => {
    const until = e.info.timestampMs + backoffMs(e.info.attempts, initialBackoff, maxBackoff)
    if (until > now()) {
      e.place = "backoff"
      e.backoffUntil = until
      backoff.push(e)
      armBackoff()
    } else toActive(e)
  }

  const armParked = () => {
    if (closed) return
    let oldest: Entry | undefined
    for (const e of parked.values()) {
      if (e.gated) continue
      oldest = e
      break
    }
    if (oldest === undefined) {
      parkedTimer?.cancel()
      parkedTimer = undefined
      return
    }
    const at = oldest.info.timestampMs + maxParked
    if (parkedTimer !== undefined && parkedTimer.at <= at) return
    parkedTimer?.cancel()
    parkedTimer = { at, cancel: timer(Math.max(0, at - now()), () => {
      parkedTimer = undefined
      flushParked()
    }) }
  }

  // Upstream's flushUnschedulablePodsLeftover: a pod parked too long may have missed its event.
  const flushParked = () => {
    const t = now()
    const due: Array<Entry> = []
    for (const e of parked.values()) {
      if (e.gated) continue
      if (e.info.timestampMs + maxParked > t) break
      due.push(e)
    }
    for (const e of due) {
      unpark(e)
      requeue(e)
    }
    armParked()
  }

  const park = (e: Entry) => {
    e.place = "unschedulable"
    parked.set(e.info.pod.uid, e)
    const keys = e.info.unschedulablePlugins.size === 0 ? [anyPlugin] : e.info.unschedulablePlugins
    for (const p of keys) {
      let s = parkedBy.get(p)
      if (s === undefined) parkedBy.set(p, (s = new Set()))
      s.add(e)
    }
    armParked()
  }

  const interested = (plugin: string, events: ReadonlyArray<ClusterEvent>): boolean => {
    if (plugin === anyPlugin) return true
    const wants = interest[plugin]
    // A plugin that registered nothing is interested in everything (upstream's WildCardEvent).
    if (wants === undefined) return true
    for (const w of wants) for (const e of events) if (matches(w, e)) return true
    return false
  }

  const enqueueNew = (pod: PodInfo) => {
    const t = now()
    const e: Entry = {
      info: { pod, initialAttemptMs: t, timestampMs: t, attempts: 0, unschedulablePlugins: new Set() },
      place: "active",
      index: -1,
      backoffUntil: 0,
      eventsFrom: 0,
      updated: false,
      gated: isGated(pod)
    }
    entries.set(pod.uid, e)
    if (e.gated) {
      e.info = { ...e.info, unschedulablePlugins: new Set([schedulingGates]) }
      park(e)
    } else toActive(e)
  }

  const remove = (uid: string) => {
    const e = entries.get(uid)
    if (e !== undefined) {
      detach(e)
      entries.delete(uid)
    }
    scheduled.delete(uid)
    unnominate(uid)
  }

  const update = (pod: PodInfo) => {
    if (closed) return
    // A bound pod is the cache's business now, not the queue's.
    if (pod.nodeName !== undefined && pod.nodeName !== "") return remove(pod.uid)
    const e = entries.get(pod.uid)
    if (e === undefined) {
      if (scheduled.has(pod.uid)) return
      syncNomination(pod, undefined)
      return enqueueNew(pod)
    }
    const previous = e.info.pod
    syncNomination(pod, previous)
    const changed = schedulingRelevant(previous) !== schedulingRelevant(pod)
    e.info = { ...e.info, pod }
    switch (e.place) {
      case "active":
        active.fix(e)
        return
      case "backoff":
        return
      case "inFlight":
        if (changed) e.updated = true
        return
      case "unschedulable": {
        if (!changed) return
        unpark(e)
        e.gated = isGated(pod)
        if (e.gated) {
          e.info = { ...e.info, unschedulablePlugins: new Set([schedulingGates]) }
          return park(e)
        }
        // Gates just lifted: straight to activeQ, as upstream's PreEnqueue does; otherwise back off.
        if (e.info.unschedulablePlugins.has(schedulingGates)) {
          e.info = { ...e.info, unschedulablePlugins: new Set() }
          return toActive(e)
        }
        return requeue(e)
      }
    }
  }

  const next = (): QueuedPodInfo | undefined => {
    const e = active.pop()
    if (e === undefined) return undefined
    e.place = "inFlight"
    inFlight++
    e.eventsFrom = logBase + log.length
    e.updated = false
    e.info = { ...e.info, attempts: e.info.attempts + 1 }
    return e.info
  }

  const pop: Effect.Effect<QueuedPodInfo> = Effect.suspend(() => {
    const info = next()
    if (info !== undefined) return Effect.succeed(info)
    // Wait for a wake-up, then try again: the pod itself stays in activeQ until taken, so an
    // interrupted waiter loses nothing.
    return Effect.async<void>((resume) => {
      const w = () => resume(Effect.void)
      waiters.push(w)
      return Effect.sync(() => {
        waiters = waiters.filter((x) => x !== w)
      })
    }).pipe(Effect.zipRight(pop))
  })

  return {
    add: (pod) => update(pod),
    update,
    delete: remove,
    pop,
    done: (uid) => {
      const e = entries.get(uid)
      if (e === undefined || e.place !== "inFlight") return
      detach(e)
      entries.delete(uid)
      scheduled.add(uid)
    },
    addUnschedulable: (qpi, rejectedBy) => {
      if (closed) return
      const uid = qpi.pod.uid
      let e = entries.get(uid)
      if (e !== undefined && e.place !== "inFlight") return
      if (e === undefined) {
        // `done` came first (a failed binding): the pod is pending again.
        if (!scheduled.delete(uid)) return
        e = { info: qpi, place: "inFlight", index: -1, backoffUntil: 0, eventsFrom: logBase + log.length, updated: false, gated: false }
        entries.set(uid, e)
        inFlight++
      }
      const plugins = new Set(rejectedBy)
      const seen = log.slice(Math.max(0, e.eventsFrom - logBase))
      const updated = e.updated
      detach(e)
      e.info = { ...e.info, attempts: Math.max(e.info.attempts, qpi.attempts), timestampMs: now(), unschedulablePlugins: plugins }
      // An error (no rejecting plugin) backs off; so does a pod that an event or an update during
      // its cycle may have fixed. Only the others are parked.
      let retry = plugins.size === 0 || updated
      if (!retry) {
        for (const events of seen) {
          for (const p of plugins) {
            if (interested(p, events)) {
              retry = true
              break
            }
          }
          if (retry) break
        }
      }
      if (retry) requeue(e)
      else park(e)
    },
    moveOnEvent: (event) => {
      if (closed) return 0
      const events: ReadonlyArray<ClusterEvent> = Array.isArray(event) ? event : [event as ClusterEvent]
      if (events.length === 0) return 0
      if (inFlight > 0) log.push(events)
      const moving = new Set<Entry>()
      for (const [plugin, es] of parkedBy) {
        if (!interested(plugin, events)) continue
        for (const e of es) if (!e.gated) moving.add(e)
      }
      for (const e of moving) {
        unpark(e)
        requeue(e)
      }
      if (moving.size > 0) armParked()
      return moving.size
    },
    nominate,
    nominated: (node) => {
      const m = byNode.get(node)
      return m === undefined ? [] : [...m.values()]
    },
    nominatedNode: (uid) => nominations.get(uid)?.node,
    lengths: () => ({ active: active.size, backoff: backoff.size, unschedulable: parked.size, inFlight }),
    where: (uid) => entries.get(uid)?.place,
    close: () => {
      closed = true
      backoffTimer?.cancel()
      parkedTimer?.cancel()
      backoffTimer = undefined
      parkedTimer = undefined
    }
  }
}
