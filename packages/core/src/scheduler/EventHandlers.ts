/**
 * The scheduler's informer event handlers (upstream's eventhandlers.go): nodes and bound pods feed
 * the node-info cache, pending pods the queue, and every change that could make a parked pod
 * schedulable becomes a cluster event for the queue — a node added or updated (per changed
 * aspect), an assigned pod that appears, changes its labels or requests, finishes or goes, and
 * storage changes (VolumeBinding's interest).
 */
import type * as Informer from "../informer/Informer.js"
import { uidOf } from "../object/Metadata.js"
import type { Decisions } from "./Decisions.js"
import { isBound, isFinished, isPending, nominatedNodeOf } from "./PendingPods.js"
import * as Queue from "./Queue.js"
import * as Snapshot from "./Snapshot.js"

/** What the handlers feed. */
export interface Deps {
  readonly cache: Snapshot.Cache
  readonly queue: Queue.SchedulingQueue
  readonly decisions: Decisions
  /** The scheduler names of the configured profiles (a pod naming another is not ours). */
  readonly names: ReadonlySet<string>
  /** Nodes that may have nominated pods: a pending pod's nomination adds its node. */
  readonly nominatedNodes: Set<string>
}

/** A Node change: to the cache, and as an event to the queue. */
export const onNode = (deps: Pick<Deps, "cache" | "queue">) => (c: Informer.Change): void => {
  const { cache, queue } = deps
  if (c.type === "ADDED") {
    cache.addNode(c.object)
    queue.moveOnEvent({ resource: "Node", action: "Add" })
  } else if (c.type === "MODIFIED") {
    cache.updateNode(c.object)
    queue.moveOnEvent(c.old === undefined ? [{ resource: "Node", action: "Update" }] : Queue.nodeUpdateEvents(c.old, c.object))
  } else {
    cache.removeNode(c.object)
    queue.moveOnEvent({ resource: "Node", action: "Delete" })
  }
}

/**
 * A Pod change: a bound pod to the cache, a pending pod of ours to the queue, and what an
 * assigned pod's change means to parked pods (upstream's AssignedPod* events): one that appears,
 * or becomes assigned, is an Add; one that goes or finishes frees its room.
 */
export const onPod = (deps: Deps) => (c: Informer.Change): void => {
  const { cache, queue } = deps
  const pod = c.object
  const uid = uidOf(pod)
  const bound = isBound(pod)
  const wasAssigned = c.old !== undefined && isBound(c.old) && !isFinished(c.old)
  if (c.type === "DELETED") {
    cache.removePod(pod)
    queue.delete(uid)
    deps.decisions.forget(uid)
    if (bound && !isFinished(pod)) queue.moveOnEvent({ resource: "Pod", action: "Delete" })
    return
  }
  if (bound || c.old !== undefined) {
    if (c.type === "ADDED") cache.addPod(pod)
    else cache.updatePod(pod)
  }
  if (isPending(pod, deps.names)) {
    const info = Snapshot.podInfo(pod)
    const nominated = nominatedNodeOf(pod)
    if (nominated !== "") deps.nominatedNodes.add(nominated)
    if (c.type === "ADDED") queue.add(info)
    else queue.update(info)
    return
  }
  queue.delete(uid)
  if (!bound) return
  if (isFinished(pod)) {
    if (wasAssigned) queue.moveOnEvent({ resource: "Pod", action: "Delete" })
  } else if (!wasAssigned) {
    queue.moveOnEvent({ resource: "Pod", action: "Add" })
  } else {
    const changes = Queue.podUpdateEvents(c.old!, pod)
    if (changes.length > 0) queue.moveOnEvent(changes)
  }
}

/** A PersistentVolume or claim change: storage changes can make a pod waiting for a volume schedulable. */
export const onStorage = (queue: Queue.SchedulingQueue, resource: "PersistentVolume" | "PersistentVolumeClaim") => (c: Informer.Change): void => {
  queue.moveOnEvent({ resource, action: c.type === "ADDED" ? "Add" : c.type === "MODIFIED" ? "Update" : "Delete" })
}

/** The informers the handlers listen to. */
export interface Sources {
  readonly nodes: Informer.Informer
  readonly pods: Informer.Informer
  readonly volumes: Informer.Informer
  readonly claims: Informer.Informer
}

/** Subscribe the handlers; answers the unsubscribe. */
export const subscribe = (sources: Sources, deps: Deps): (() => void) => {
  const unsubscribe = [
    sources.nodes.subscribe(onNode(deps)),
    sources.pods.subscribe(onPod(deps)),
    sources.volumes.subscribe(onStorage(deps.queue, "PersistentVolume")),
    sources.claims.subscribe(onStorage(deps.queue, "PersistentVolumeClaim"))
  ]
  return () => {
    for (const u of unsubscribe) u()
  }
}
