/**
 * The agent's record of each pod it handles, keyed by uid (the kubelet's pod manager and its
 * admission step): whether the pod was admitted or failed, its start time, host ports, sandbox,
 * crash-loop backoff and the status last written. Nothing here is durable: an agent restart
 * rebuilds it from the API and the runtime's container labels.
 */
import type { Effect } from "effect"
import type * as Pod from "../model/Pod.js"
import type { JsonObject } from "../object/Json.js"
import { rfc3339, timeMs } from "../object/Metadata.js"
import * as Views from "../object/Views.js"
import type * as Runtime from "../runtime/Runtime.js"
import type * as CrashLoopBackoff from "./CrashLoopBackoff.js"
import type * as HostPorts from "./HostPorts.js"
import type * as ImagePull from "./ImagePull.js"
import * as NodeAdmission from "./NodeAdmission.js"
import type * as PodSync from "./PodSync.js"

/** What the agent keeps about one pod between syncs. */
export interface PodState {
  pod: Pod.Pod | undefined
  admitted: boolean
  fail: { readonly reason: string; readonly message: string } | undefined
  backoff: ReadonlyMap<string, CrashLoopBackoff.Entry>
  startTime: string | undefined
  startTimeMs: number | undefined
  hostPorts: ReadonlyArray<HostPorts.Assignment> | undefined
  sandbox: Runtime.Sandbox | undefined
  /** Why containers could not be created, by name. */
  readonly waiting: Map<string, PodSync.Waiting>
  /** Failed image pulls in a row, by container name (their backoff). */
  readonly imagePulls: Map<string, ImagePull.Backoff>
  volumesReady: boolean
  lastStatus: Pod.PodStatus | undefined
}

/** Every pod the agent handles, by uid. */
export type Table = Map<string, PodState>

/** Records an Event on a pod (in the background: it never fails nor waits for the API). */
export type Emit = (pod: Pod.Pod, type: "Normal" | "Warning", reason: string, message: string) => Effect.Effect<void>

/** A pod read from the API as the agent's model type (see `Views.view` for why no decode runs). */
export const asPod = (o: JsonObject): Pod.Pod => Views.view<Pod.Pod>(o)

/** The pod as the untyped object the API and the admission rules take. */
export const podObject = (pod: Pod.Pod): JsonObject => pod as unknown as JsonObject // a Pod is a JSON object; its interface has no index signature

/** The record of `uid`, made empty the first time. */
export const stateOf = (table: Table, uid: string): PodState => {
  let s = table.get(uid)
  if (s === undefined) {
    s = {
      pod: undefined,
      admitted: false,
      fail: undefined,
      backoff: new Map(),
      startTime: undefined,
      startTimeMs: undefined,
      hostPorts: undefined,
      sandbox: undefined,
      waiting: new Map(),
      imagePulls: new Map(),
      volumesReady: false,
      lastStatus: undefined
    }
    table.set(uid, s)
  }
  return s
}

/** The pods admitted and still running, but `except`: what a new pod's requests must fit beside. */
export const admittedRunning = (table: Table, except: string): ReadonlyArray<JsonObject> => {
  const out: Array<JsonObject> = []
  for (const [uid, s] of table) {
    if (uid === except || !s.admitted || s.fail !== undefined || s.pod === undefined) continue
    const phase = s.pod.status?.phase
    if (phase === "Succeeded" || phase === "Failed") continue
    out.push(podObject(s.pod))
  }
  return out
}

/** The host ports every pod holds. */
export const takenHostPorts = (table: Table): Set<number> => {
  const taken = new Set<number>()
  for (const s of table.values()) for (const a of s.hostPorts ?? []) taken.add(a.hostPort)
  return taken
}

/** The pod's IP: its sandbox's in `pod` network mode, else the node's. */
export const podIPOf = (state: PodState, network: "host" | "pod", internalIP: string): string | undefined =>
  network === "pod" ? state.sandbox?.ip : internalIP

/** What `admit` needs beyond the pod. */
export interface Admission {
  readonly allocatable: Readonly<Record<string, string>>
  readonly allowUnenforcedLimits: boolean
}

/**
 * Admit a pod the agent has not decided on yet: record `admitted` or `fail`, and its start time.
 * Synchronous, so two workers can never admit against the same free room. Answers the Warning
 * Event to record about the pod's limits (refused, or admitted unenforced), if any.
 */
export const admit = (
  table: Table,
  uid: string,
  state: PodState,
  pod: Pod.Pod,
  hasContainers: boolean,
  nowMs: number,
  enforced: NodeAdmission.Enforced | undefined,
  admission: Admission
): { readonly reason: string; readonly message: string } | undefined => {
  if (state.admitted || state.fail !== undefined) return undefined
  const phase = pod.status?.phase
  // Admitted before (by this agent before a restart): adopt without a second check.
  const known = hasContainers || pod.status?.startTime !== undefined || phase === "Running"
  const object = podObject(pod)
  let verdict: NodeAdmission.Verdict = known ? { admit: true } : NodeAdmission.decide(object, admission.allocatable, admittedRunning(table, uid))
  let event: { readonly reason: string; readonly message: string } | undefined
  if (!known && verdict.admit && enforced !== undefined) {
    verdict = NodeAdmission.limits(object, enforced, admission.allowUnenforcedLimits)
    const missing = NodeAdmission.unenforced(object, enforced)
    if (!verdict.admit) event = { reason: verdict.reason, message: verdict.message }
    else if (missing.length > 0) event = { reason: NodeAdmission.notEnforcedReason, message: NodeAdmission.notEnforcedMessage(missing) }
  }
  if (verdict.admit) state.admitted = true
  else state.fail = { reason: verdict.reason, message: verdict.message }
  state.startTime = pod.status?.startTime ?? rfc3339(nowMs)
  state.startTimeMs = timeMs(state.startTime) ?? nowMs
  return event
}
