/**
 * Cluster events as the scheduling queue sees them (upstream's `framework.ClusterEvent` and each
 * plugin's EventsToRegister): what changed, on which kind of object, and which plugins care. A
 * parked pod goes back to be tried only on an event one of its rejecting plugins registered.
 * Queueing hints (per-plugin functions of the changed object) are reduced to matching on resource,
 * action and the changed aspect; a plugin missing from the interest map is interested in every
 * event, as a plugin without EnqueueExtensions is upstream.
 */
import { type JsonObject, stableJson } from "../../object/Json.js"
import * as Views from "../../object/Views.js"
import type { Plugin } from "../Framework.js"

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

/** An event (or an interest) on `resource`. */
export const event = (resource: EventResource, action: EventAction, what?: EventAspect): ClusterEvent =>
  what === undefined ? { resource, action } : { resource, action, what }

const ev = event

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

const differs = (a: unknown, b: unknown) => stableJson(a ?? null) !== stableJson(b ?? null)

const conditionStates = (status: Views.NodeStatus | null | undefined) => (status?.conditions ?? []).map((c) => [c.type, c.status])

/** The events of a Node update: one per changed aspect (none when nothing the scheduler reads changed). */
export const nodeUpdateEvents = (oldObject: JsonObject, nextObject: JsonObject): ReadonlyArray<ClusterEvent> => {
  const old = Views.node(oldObject)
  const next = Views.node(nextObject)
  const out: Array<ClusterEvent> = []
  if (differs(old.metadata?.labels, next.metadata?.labels)) out.push(ev("Node", "Update", "Label"))
  if (differs(old.spec?.taints, next.spec?.taints) || (old.spec?.unschedulable === true) !== (next.spec?.unschedulable === true)) out.push(ev("Node", "Update", "Taint"))
  if (differs(old.status?.allocatable, next.status?.allocatable)) out.push(ev("Node", "Update", "Allocatable"))
  if (differs(conditionStates(old.status), conditionStates(next.status))) out.push(ev("Node", "Update", "Condition"))
  if (differs(old.metadata?.annotations, next.metadata?.annotations)) out.push(ev("Node", "Update", "Annotation"))
  return out
}

const containerResources = (pod: Views.Pod) => (pod.spec?.containers ?? []).map((c) => c.resources)

/** The events of an assigned pod's update: its labels, its requests. */
export const podUpdateEvents = (oldObject: JsonObject, nextObject: JsonObject): ReadonlyArray<ClusterEvent> => {
  const old = Views.pod(oldObject)
  const next = Views.pod(nextObject)
  const out: Array<ClusterEvent> = []
  if (differs(old.metadata?.labels, next.metadata?.labels)) out.push(ev("Pod", "Update", "Label"))
  if (differs(containerResources(old), containerResources(next))) out.push(ev("Pod", "Update", "Request"))
  return out
}
