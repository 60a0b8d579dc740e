/**
 * One pod's sync (the kubelet's pod worker `SyncPod`), keyed by uid:
 *
 *   admit ▸ host ports ▸ sandbox ▸ volumes ▸ PodSync.decide ▸ apply (kills concurrently)
 *         ▸ probe workers ▸ PodStatus.compute ▸ patch the status when it changed ▸ requeue
 *
 * A pod gone from the API with nothing left of it is forgotten; one whose deletion `PodSync`
 * confirmed is deleted from the API; one `PodSync` cleans up loses its sandboxes and directories.
 * Answers when to sync the pod again, if it asks to be.
 */
import { Clock, Effect } from "effect"
import * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import type * as Pod from "../model/Pod.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import type * as Runtime from "../runtime/Runtime.js"
import * as ContainerActions from "./ContainerActions.js"
import * as ContainerIdentity from "./ContainerIdentity.js"
import type * as ObjectCache from "./ObjectCache.js"
import * as PodSetup from "./PodSetup.js"
import * as PodStates from "./PodStates.js"
import * as PodStatus from "./PodStatus.js"
import * as PodStatusWriter from "./PodStatusWriter.js"
import * as PodSync from "./PodSync.js"
import type * as ProbeManager from "./ProbeManager.js"
import type * as Relist from "./Relist.js"
import type * as TokenCache from "./TokenCache.js"
import * as VolumeLookup from "./VolumeLookup.js"
import type * as VolumePlan from "./VolumePlan.js"

/** Everything a sync reads and writes. */
export interface Deps {
  readonly client: Client.Client
  readonly runtime: Runtime.RuntimeService
  readonly setup: PodSetup.Deps
  readonly setupState: PodSetup.State
  readonly actions: ContainerActions.Deps
  readonly status: PodStatusWriter.Deps
  readonly objects: ObjectCache.ObjectCache
  readonly tokens: TokenCache.TokenCache
  readonly probes: ProbeManager.ProbeManager
  readonly relist: Relist.Relist
  readonly admission: PodStates.Admission
  /** The pods bound to this node, by uid (the informer's view). */
  readonly pods: ReadonlyMap<string, Pod.Pod>
  readonly states: PodStates.Table
  readonly emit: PodStates.Emit
  readonly runtimeName: string
}

/** After a failed preparation or a container that could not start, the pod is synced again this soon. */
export const retryMs = 2_000

const noContainers = { raw: [] as ReadonlyArray<Runtime.Container>, observed: [] as ReadonlyArray<PodSync.ObservedContainer> }

/** The runtime's containers of pod `uid`, raw and as `PodSync` reads them. */
export const containersOf = (runtime: Runtime.RuntimeService, uid: string) =>
  Effect.map(runtime.containers.list({ labels: { [ContainerIdentity.Labels.podUid]: uid } }), (list) => ({
    raw: list,
    observed: list.map(ContainerIdentity.observe)
  }))

// Remove what is left of a pod the agent is done with: sandboxes, directories, its record.
const forget = (deps: Deps, uid: string) =>
  Effect.gen(function* () {
    for (const s of yield* deps.runtime.sandboxes.list({ podUid: uid })) yield* deps.runtime.sandboxes.remove(s.id)
    yield* PodSetup.removePodDirs(deps.setup, uid)
    deps.states.delete(uid)
  })

// Host ports, sandbox, the objects the pod refers to, and its volumes. Answers the plan, or why
// the pod is blocked (a FailedMount Event is recorded).
const prepare = (deps: Deps, state: PodStates.PodState, pod: Pod.Pod, raw: ReadonlyArray<Runtime.Container>) =>
  Effect.gen(function* () {
    let lookup: VolumePlan.Lookup | undefined
    let plan: VolumePlan.Plan | undefined
    let blocked: string | undefined
    const prepared = yield* Effect.either(
      Effect.gen(function* () {
        const ports = yield* PodSetup.ensureHostPorts(deps.setup, deps.states, state, pod, raw)
        yield* PodSetup.ensureSandbox(deps.setup, deps.setupState, state, pod, ports)
        lookup = yield* VolumeLookup.lookupFor(deps.objects, deps.tokens, pod)
        return yield* PodSetup.prepareVolumes(deps.setup, state, pod, lookup)
      })
    )
    if (prepared._tag === "Left") blocked = prepared.left instanceof ApiError.ApiError ? prepared.left.status.message : prepared.left.message
    else if (prepared.right._tag === "Left") blocked = prepared.right.left
    else plan = prepared.right.right
    state.volumesReady = blocked === undefined
    if (blocked !== undefined) yield* deps.emit(pod, "Warning", "FailedMount", blocked)
    return { lookup, plan, blocked }
  })

// Record the decision's failure and back-off Events.
const noteDecision = (deps: Deps, uid: string, state: PodStates.PodState, pod: Pod.Pod | undefined, decision: PodSync.Decision) =>
  Effect.gen(function* () {
    state.backoff = decision.backoff
    if (decision.fail !== undefined && state.fail === undefined) {
      state.fail = decision.fail
      if (pod !== undefined) yield* deps.emit(pod, "Warning", decision.fail.reason, decision.fail.message)
    }
    for (const [name, w] of decision.waiting) {
      if (w.reason === "CrashLoopBackOff" && pod !== undefined && !state.waiting.has(name)) {
        yield* deps.emit(pod, "Warning", "BackOff", `Back-off restarting failed container ${name} in pod ${pod.metadata.name ?? ""}_${pod.metadata.namespace ?? ""}(${uid})`)
      }
    }
  })

// Apply the decision's actions: kills at once, then the rest in order.
const apply = (
  deps: Deps,
  state: PodStates.PodState,
  pod: Pod.Pod | undefined,
  actions: ReadonlyArray<PodSync.Action>,
  lookup: VolumePlan.Lookup | undefined,
  plan: VolumePlan.Plan | undefined
) =>
  Effect.gen(function* () {
    let changed = false
    let retry = false
    let confirmed = false
    let cleanup = false
    const kills = actions.filter((a): a is Extract<PodSync.Action, { _tag: "Kill" }> => a._tag === "Kill")
    if (kills.length > 0) {
      yield* Effect.forEach(kills, (a) => ContainerActions.kill(deps.actions, pod, state, a), { concurrency: "unbounded", discard: true })
      changed = true
    }
    for (const action of actions) {
      switch (action._tag) {
        case "Kill":
          break
        case "Start":
          if (plan === undefined || lookup === undefined || pod === undefined) {
            retry = true
            break
          }
          if (!(yield* ContainerActions.start(deps.actions, pod, state, action, lookup, plan))) retry = true
          changed = true
          break
        case "StartCreated":
          if (plan === undefined || pod === undefined) {
            retry = true
            break
          }
          yield* ContainerActions.startCreated(deps.actions, pod, state, action.name, action.containerId)
          changed = true
          break
        case "Remove":
          yield* deps.runtime.containers.remove(action.containerId)
          changed = true
          break
        case "ConfirmDeletion":
          confirmed = true
          break
        case "Cleanup":
          cleanup = true
          break
      }
    }
    return { changed, retry, confirmed, cleanup }
  })

// Compute and write the pod's status; delete it from the API once its deletion is confirmed.
const report = (
  deps: Deps,
  uid: string,
  state: PodStates.PodState,
  pod: Pod.Pod,
  observed: ReadonlyArray<PodSync.ObservedContainer>,
  decisionWaiting: ReadonlyMap<string, PodSync.Waiting>,
  confirmed: boolean
) =>
  Effect.gen(function* () {
    const waiting = new Map(state.waiting)
    for (const [k, w] of decisionWaiting) waiting.set(k, w)
    const { network, internalIP } = deps.setup
    const podIP = PodStates.podIPOf(state, network, internalIP)
    const status = PodStatus.compute({
      pod: PodStatusWriter.withOwnConditions(pod, state.lastStatus),
      containers: observed,
      probes: deps.probes.verdicts(uid),
      waiting,
      ...(state.fail === undefined ? {} : { fail: state.fail }),
      sandboxReady: state.sandbox !== undefined && state.volumesReady,
      hostIP: internalIP,
      ...(podIP === undefined || state.sandbox === undefined ? {} : { podIP }),
      hostPorts: network === "host" ? (state.hostPorts ?? []) : [],
      ...(state.startTime === undefined ? {} : { startTime: state.startTime }),
      runtimeName: deps.runtimeName,
      nowMs: yield* Clock.currentTimeMillis
    })
    yield* PodStatusWriter.write(deps.status, state, pod, status)
    if (confirmed) {
      yield* deps.client
        .delete(ResourceRefs.Pod, pod.metadata.namespace, pod.metadata.name ?? "", { gracePeriodSeconds: 0, preconditions: { uid } })
        .pipe(Effect.catchIf((e) => e.status.code === 404 || e.status.code === 409, () => Effect.void))
    }
  })

/** Sync pod `uid`; answers when to sync it again, if it asks to be. */
export const sync = (deps: Deps, uid: string) =>
  Effect.gen(function* () {
    const pod = deps.pods.get(uid)
    // A pod the agent has never handled and the last relist saw no container of has none:
    // only the agent creates them. This saves a runtime call on every new pod's first sync.
    const fresh = !deps.states.has(uid) && !deps.relist.hasContainers(uid)
    const state = PodStates.stateOf(deps.states, uid)
    state.pod = pod
    const nowMs = yield* Clock.currentTimeMillis
    let { raw, observed } = fresh ? noContainers : yield* containersOf(deps.runtime, uid)
    if (pod === undefined && observed.length === 0 && state.sandbox === undefined && state.hostPorts === undefined) {
      // Never known or already cleaned up: only a stale sandbox may be left.
      yield* forget(deps, uid)
      return undefined
    }
    if (pod !== undefined) {
      // The runtime's limits (asked once) only for a pod not admitted yet.
      const enforced = state.admitted || state.fail !== undefined ? undefined : (yield* deps.actions.capabilities.get).limits
      const event = PodStates.admit(deps.states, uid, state, pod, observed.length > 0, nowMs, enforced, deps.admission)
      if (event !== undefined) yield* deps.emit(pod, "Warning", event.reason, event.message)
    }
    const live = pod !== undefined && pod.metadata.deletionTimestamp === undefined
    const apiPhase = pod?.status?.phase
    const terminal = state.fail !== undefined || apiPhase === "Succeeded" || apiPhase === "Failed"
    const prepared = live && !terminal ? yield* prepare(deps, state, pod, raw) : undefined

    const decision = PodSync.decide({
      pod,
      containers: observed,
      probes: deps.probes.verdicts(uid),
      backoff: state.backoff,
      terminal,
      ...(state.startTimeMs === undefined ? {} : { startTimeMs: state.startTimeMs }),
      hashOf: ContainerIdentity.hashOf,
      nowMs
    })
    yield* noteDecision(deps, uid, state, pod, decision)
    const applied = yield* apply(deps, state, pod, decision.actions, prepared?.lookup, prepared?.plan)
    if (applied.changed) ({ raw, observed } = yield* containersOf(deps.runtime, uid))

    if (applied.cleanup) {
      yield* deps.probes.sync(uid, undefined, state, [])
      yield* forget(deps, uid)
      return undefined
    }

    deps.relist.noteSeen(uid, raw)
    // Probe workers first, so a container that just started shows its probes' initial verdict.
    yield* deps.probes.sync(uid, pod, state, observed)
    if (pod !== undefined) yield* report(deps, uid, state, pod, observed, decision.waiting, applied.confirmed)
    if (prepared?.blocked !== undefined || applied.retry) return retryMs
    return decision.requeueAfterMs
  })
