/**
 * Writes the status a sync computed (the kubelet's status manager): a merge patch of the status
 * subresource only when it differs from what the agent last wrote and from what the API has,
 * clearing the kubelet's fields that went away; and the pod start latency at the first Running.
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import type * as Pod from "../model/Pod.js"
import { type JsonObject, stableJson } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as PodStatus from "./PodStatus.js"
import type * as PodStates from "./PodStates.js"

/** The status fields the agent writes that a merge patch must clear when they go away. */
export const clearable: ReadonlyArray<string> = ["reason", "message", "podIP", "podIPs", "initContainerStatuses", "hostPorts"]

/**
 * The pod with the kubelet-owned conditions the agent last wrote (the informer's copy may not
 * have caught up with its own write yet, and transition times must not move because of that) and
 * everyone else's conditions as the API has them.
 */
export const withOwnConditions = (pod: Pod.Pod, written: Pod.PodStatus | undefined): Pod.Pod => {
  if (written === undefined) return pod
  const others = (pod.status?.conditions ?? []).filter((c) => !PodStatus.kubeletConditions.has(c.type))
  const own = (written.conditions ?? []).filter((c) => PodStatus.kubeletConditions.has(c.type))
  return { ...pod, status: { ...pod.status, conditions: [...others, ...own] } }
}

/**
 * Whether two versions of a pod differ only in status and resourceVersion. Asked of every status
 * write the agent makes: the plain encoding answers when the API kept the keys' order (it does),
 * the key-sorted one only when that differs.
 */
export const sameButStatus = (a: JsonObject, b: JsonObject): boolean => {
  const strip = (o: JsonObject) => {
    const { resourceVersion: _rv, managedFields: _mf, ...meta } = metadataOf(o)
    return { metadata: meta, spec: o["spec"] }
  }
  const sa = strip(a)
  const sb = strip(b)
  return JSON.stringify(sa) === JSON.stringify(sb) || stableJson(sa) === stableJson(sb)
}

/** The merge patch body that sets `status` and clears the clearable fields it lacks. */
export const patchOf = (status: Pod.PodStatus): { readonly status: JsonObject } => {
  const cleared: Record<string, null> = {}
  for (const k of clearable) if (!(k in status)) cleared[k] = null
  return { status: { ...cleared, ...status } }
}

/** What writing needs. */
export interface Deps {
  readonly client: Client.Client
  /** Observes the pod start latency, in seconds. */
  readonly observeStart: (seconds: number) => void
}

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

/** Write `status` for `pod` unless the agent or the API already has it. */
export const write = (deps: Deps, state: PodStates.PodState, pod: Pod.Pod, status: Pod.PodStatus) =>
  Effect.gen(function* () {
    if (PodStatus.same(status, state.lastStatus) || PodStatus.same(status, pod.status)) return
    yield* deps.client.patch(ResourceRefs.Pod, pod.metadata.namespace, pod.metadata.name ?? "", "merge", patchOf(status), "status").pipe(
      Effect.catchIf(isNotFound, () => Effect.void)
    )
    // The first Running this agent reports (not one it adopted after a restart): pod start latency.
    const wasRunning = pod.status?.phase === "Running" || state.lastStatus?.phase === "Running"
    if (status.phase === "Running" && !wasRunning && state.startTimeMs !== undefined) {
      deps.observeStart(Math.max(0, (yield* Clock.currentTimeMillis) - state.startTimeMs) / 1000)
    }
    state.lastStatus = status
  })
