/**
 * The scheduling queue, in the shape of kube-scheduler's PriorityQueue: three places a pending pod
 * can wait, and the rules that move it between them. Each place is a module of its own under
 * `queue/`; this one composes them and owns the moves.
 *
 *   add/update ─▶ activeQ (ordered by the profile's QueueSort) ─▶ pop ─▶ scheduling cycle (in flight)
 *                    ▲   ▲                                                │ done: scheduled
 *        backoff over │   │ relevant event / 5 min                         │ addUnschedulable(rejectedBy)
 *                 backoffQ ◀──────────────────── unschedulablePods ◀──────┘
 *
 * - activeQ (`queue/ActiveQueue.ts`) holds pods ready to be tried, best first (PrioritySort:
 *   higher priority, then earlier), and the pods in flight with the events seen meanwhile.
 * - backoffQ (`queue/BackoffQueue.ts`) holds pods that failed recently until their backoff is over.
 * - unschedulablePods (`queue/UnschedulablePods.ts`) parks pods with the set of plugins that
 *   rejected them. A cluster event (`queue/ClusterEvents.ts`) moves a parked pod back only when
 *   one of those plugins registered interest in it (NodeResourcesFit in a node's allocatable,
 *   TaintToleration in its taints, …) — never on a blind timer; only pods parked longer than 5 min
 *   are flushed regardless. Events that arrive while a pod is in flight are remembered, so a pod
 *   rejected because of a node that was added during its cycle is retried at once.
 * - Nominations (`queue/Nominator.ts`): pods that preempted wait for their victims to go with
 *   `nominatedNodeName` set; `nominated(node)` lists them so filters can count their resources as taken.
 *
 * Departures: pods with `spec.schedulingGates` are parked (as by upstream's SchedulingGates
 * PreEnqueue) and leave only when an update removes the gates; queueing hints are reduced to
 * event matching (see `ClusterEvents.ts`).
 *
 * Plain TypeScript (it sits on every pod's and event's path); only `pop` is an Effect, to wait.
 */
import { Effect } from "effect"
import type { Timer } from "../informer/WorkQueue.js"
import { asArray, asObject, stableJson } from "../object/Json.js"
import type { QueuedPodInfo } from "./Framework.js"
import { ActiveQueue } from "./queue/ActiveQueue.js"
import { BackoffQueue, backoffMs } from "./queue/BackoffQueue.js"
import { type ClusterEvent, matches, pluginEvents } from "./queue/ClusterEvents.js"
import { Nominator } from "./queue/Nominator.js"
import * as QueueEntry from "./queue/QueueEntry.js"
import { anyPlugin, UnschedulablePods } from "./queue/UnschedulablePods.js"
import type { PodInfo } from "./Snapshot.js"

export {
  anyEvent,
  type ClusterEvent,
  type EventAction,
  type EventAspect,
  type EventResource,
  eventsOf,
  matches,
  nodeUpdateEvents,
  pluginEvents,
  podUpdateEvents,
  type WithEvents
} from "./queue/ClusterEvents.js"
export { backoffMs } from "./queue/BackoffQueue.js"

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

const realTimer: Timer = (ms, run) => {
  const t = setTimeout(run, ms)
  // The queue's timers must not keep a process alive on their own.
  ;(t as { unref?: () => void }).unref?.()
  return () => clearTimeout(t)
}

// The field is not in the Pod schema Fleet stores, so it is read as plain JSON.
const isGated = (pod: PodInfo): boolean => asArray(asObject(pod.pod["spec"])["schedulingGates"]).length > 0

// What an update must change for a parked pod to be worth another try (upstream isPodUpdated:
// everything but status and the bookkeeping fields that change on every write).
const schedulingRelevant = (pod: PodInfo): string => {
  const { resourceVersion: _rv, generation: _g, managedFields: _m, ...meta } = asObject(pod.pod["metadata"])
  return stableJson({ meta, spec: pod.pod["spec"] })
}

/** The plugin name parked gated pods carry (upstream's SchedulingGates PreEnqueue plugin). */
export const schedulingGates = "SchedulingGates"

/** A new, empty queue. */
export const make = (options: Options = {}): SchedulingQueue => {
  const less = options.less ?? prioritySort
  const initialBackoff = options.initialBackoffMs ?? 1000
  const maxBackoff = options.maxBackoffMs ?? 10_000
  const interest = { ...pluginEvents, ...options.pluginEvents }
  const now = options.now ?? Date.now
  const timer = options.timer ?? realTimer

  const entries = new Map<string, QueueEntry.Entry>()
  const active = new ActiveQueue((a, b) => less(a.info, b.info))
  const backoff = new BackoffQueue(timer, now, (e) => active.push(e))
  // Back to be tried: to backoffQ while its backoff lasts, else to activeQ (upstream requeue).
  const requeue = (e: QueueEntry.Entry) => {
    const until = e.info.timestampMs + backoffMs(e.info.attempts, initialBackoff, maxBackoff)
    if (until > now()) backoff.add(e, until)
    else active.push(e)
  }
  const parked = new UnschedulablePods(options.maxInUnschedulableMs ?? 300_000, timer, now, requeue)
  const nominator = new Nominator()
  // Pods whose cycle ended in a binding: updates not yet showing the node are stale and ignored.
  const scheduled = new Set<string>()
  let closed = false

  const detach = (e: QueueEntry.Entry) => {
    switch (e.place) {
      case "active":
        return active.remove(e)
      case "backoff":
        return backoff.remove(e)
      case "unschedulable":
        return parked.unpark(e)
      case "inFlight":
        return active.leave(e)
    }
  }

  const interested = (plugin: string, events: ReadonlyArray<ClusterEvent>): boolean => {
    if (plugin === anyPlugin) return true
    const wants = interest[plugin]
    // A plugin that registered nothing is interested in everything (upstream's WildCardEvent).
    if (wants === undefined) return true
    for (const w of wants) for (const e of events) if (matches(w, e)) return true
    return false
  }

  const parkGated = (e: QueueEntry.Entry) => {
    e.info = { ...e.info, unschedulablePlugins: new Set([schedulingGates]) }
    parked.park(e)
  }

  const enqueueNew = (pod: PodInfo) => {
    const t = now()
    const e = QueueEntry.make({ pod, initialAttemptMs: t, timestampMs: t, attempts: 0, unschedulablePlugins: new Set() }, "active", isGated(pod))
    entries.set(pod.uid, e)
    if (e.gated) parkGated(e)
    else active.push(e)
  }

  const remove = (uid: string) => {
    const e = entries.get(uid)
    if (e !== undefined) {
      detach(e)
      entries.delete(uid)
    }
    scheduled.delete(uid)
    nominator.remove(uid)
  }

  // A parked pod whose spec or metadata changed: gated again, freed from its gates, or backing off.
  const updateParked = (e: QueueEntry.Entry, pod: PodInfo) => {
    parked.unpark(e)
    e.gated = isGated(pod)
    if (e.gated) return parkGated(e)
    // Gates just lifted: straight to activeQ, as upstream's PreEnqueue does; otherwise back off.
    if (e.info.unschedulablePlugins.has(schedulingGates)) {
      e.info = { ...e.info, unschedulablePlugins: new Set() }
      return active.push(e)
    }
    requeue(e)
  }

  const update = (pod: PodInfo) => {
    if (closed) return
    // A bound pod is the cache's business now, not the queue's.
    if (pod.nodeName !== undefined && pod.nodeName !== "") return remove(pod.uid)
    const e = entries.get(pod.uid)
    if (e === undefined) {
      if (scheduled.has(pod.uid)) return
      nominator.sync(pod, undefined)
      return enqueueNew(pod)
    }
    const previous = e.info.pod
    nominator.sync(pod, previous)
    const changed = schedulingRelevant(previous) !== schedulingRelevant(pod)
    e.info = { ...e.info, pod }
    switch (e.place) {
      case "active":
        return active.fix(e)
      case "backoff":
        return
      case "inFlight":
        if (changed) e.updated = true
        return
      case "unschedulable":
        if (changed) updateParked(e, pod)
        return
    }
  }

  const addUnschedulable = (qpi: QueuedPodInfo, rejectedBy: Iterable<string>) => {
    if (closed) return
    const uid = qpi.pod.uid
    let e = entries.get(uid)
    if (e !== undefined && e.place !== "inFlight") return
    if (e === undefined) {
      // `done` came first (a failed binding): the pod is pending again.
      if (!scheduled.delete(uid)) return
      e = QueueEntry.make(qpi, "inFlight", false)
      active.adopt(e)
      entries.set(uid, e)
    }
    const plugins = new Set(rejectedBy)
    const seen = active.seenBy(e)
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
    else parked.park(e)
  }

  const moveOnEvent = (event: ClusterEvent | ReadonlyArray<ClusterEvent>): number => {
    if (closed) return 0
    const events: ReadonlyArray<ClusterEvent> = Array.isArray(event) ? event : [event as ClusterEvent]
    if (events.length === 0) return 0
    active.record(events)
    const moving = parked.movable((plugin) => interested(plugin, events))
    for (const e of moving) {
      parked.unpark(e)
      requeue(e)
    }
    if (moving.size > 0) parked.arm()
    return moving.size
  }

  const pop: Effect.Effect<QueuedPodInfo> = Effect.suspend(() => {
    const e = active.take()
    if (e !== undefined) return Effect.succeed(e.info)
    // Wait for a wake-up, then try again: the pod itself stays in activeQ until taken, so an
    // interrupted waiter loses nothing.
    return Effect.zipRight(active.wait, pop)
  })

  return {
    add: update,
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
    addUnschedulable,
    moveOnEvent,
    nominate: (pod, node) => nominator.nominate(pod, node),
    nominated: (node) => nominator.nominated(node),
    nominatedNode: (uid) => nominator.nodeOf(uid),
    lengths: () => ({ active: active.size, backoff: backoff.size, unschedulable: parked.size, inFlight: active.inFlight }),
    where: (uid) => entries.get(uid)?.place,
    close: () => {
      closed = true
      backoff.close()
      parked.close()
    }
  }
}
