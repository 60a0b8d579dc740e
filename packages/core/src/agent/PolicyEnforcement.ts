/**
 * The agent's NetworkPolicy loop (DESIGN §8): it watches NetworkPolicies, pods and namespaces,
 * resolves the rules of each pod on this node (`PolicySync`) and sends them to the runtime's
 * `network-policy` call, which enforces them inside the pod's network namespace. Two paths:
 *
 *   informers ── any change ─▶ (20 ms to coalesce a burst) ─▶ reconcile: PolicySync.decide ─▶ apply changed rules
 *   Agent ── a container is about to start ─▶ beforeStart: apply the pod's rules first, or refuse (strict)
 *
 * A pod's rules go in before its first container starts, so a selected pod never runs a moment
 * unprotected where they can be enforced; after that, a policy change or a peer pod's new address
 * or labels reaches the pod's namespace within the informers' latency plus one `nft -f`.
 *
 * Pods and namespaces are watched only once something needs them (a policy exists, or the runtime
 * can enforce and a first full pass must clear what an earlier agent left): a cluster without
 * policies costs one idle watch. Failures to enforce are reported once per pod and rules as a
 * Warning Event; with `strict` a selected pod's containers are not started instead.
 */
import { Cause, Duration, Effect, Queue, Scope } from "effect"
import type * as Client from "../client/Client.js"
import * as Informer from "../informer/Informer.js"
import type * as NetworkPolicyModel from "../model/NetworkPolicy.js"
import type * as Pod from "../model/Pod.js"
import * as NetworkPolicy from "../policy/NetworkPolicyRules.js"
import * as Runtime from "../runtime/Runtime.js"
import * as PolicySync from "./PolicySync.js"
import { labelsOf, nameOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as PodStates from "./PodStates.js"


/** How to run the loop. */
export interface Options {
  readonly client: Client.Client
  readonly nodeName: string
  /** `--network-policy-strict`: a selected pod whose rules cannot be enforced does not start. */
  readonly strict: boolean
  /** Records an Event on a pod. */
  readonly emit: (pod: Pod.Pod, type: "Normal" | "Warning", reason: string, message: string) => Effect.Effect<void>
  /** Time to let a burst of changes settle before resolving (default 20 ms). */
  readonly settleMs?: number
}

/** What the agent asks before starting a container. */
export type StartVerdict = { readonly run: true } | { readonly run: false; readonly reason: string; readonly message: string }

/** Counters, for tests and metrics. */
export interface Metrics {
  /** Successful `network-policy` calls. */
  readonly applied: number
  readonly failures: number
  /** The last failure, for diagnosis. */
  readonly lastError?: string
}

/** A running NetworkPolicy loop. */
export interface PolicyEnforcement {
  /** Enforce `pod`'s rules through its created container `containerId` before it starts. */
  readonly beforeStart: (pod: Pod.Pod, containerId: string) => Effect.Effect<StartVerdict>
  readonly metrics: () => Metrics
}

const asPod = PodStates.asPod
const uidOf = (p: Pod.Pod) => p.metadata.uid ?? ""
const running = (p: Pod.Pod) => p.metadata.deletionTimestamp === undefined && p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed"

/** Start the loop in the current scope. */
export const make = (options: Options): Effect.Effect<PolicyEnforcement, never, Scope.Scope | Runtime.Runtime> =>
  Effect.gen(function* () {
    const runtime = yield* Runtime.Runtime
    const scope = yield* Effect.scope
    const { client, nodeName, strict } = options
    const settleMs = options.settleMs ?? 20
    const wake = yield* Queue.sliding<void>(1)
    const trigger = () => void Queue.unsafeOffer(wake, undefined)
    // One call at a time: a start and a reconcile of the same pod must not overtake each other.
    const lock = yield* Effect.makeSemaphore(1)

    /** uid → key of the rules the runtime enforces for the pod. */
    const applied = new Map<string, string>()
    /** uid → key of rules whose failure was already reported (no Event storm, no hot retry). */
    const reported = new Map<string, string>()
    let appliedCount = 0
    let failures = 0
    let lastError: string | undefined

    const policies = yield* Informer.make(client, ResourceRefs.NetworkPolicy)
    policies.subscribe(trigger)
    // Known once, so a start does not race the informer against a timer every time.
    let policiesSynced = false
    yield* Effect.forkIn(Effect.andThen(policies.synced, () => void (policiesSynced = true)), scope)

    let peers: { readonly pods: Informer.Informer; readonly namespaces: Informer.Informer } | undefined
    const ensurePeers = Effect.gen(function* () {
      if (peers === undefined) {
        const pods = yield* Scope.extend(Informer.make(client, ResourceRefs.Pod), scope)
        const namespaces = yield* Scope.extend(Informer.make(client, ResourceRefs.Namespace), scope)
        peers = { pods, namespaces }
        pods.subscribe(trigger)
        namespaces.subscribe(trigger)
      }
      yield* peers.pods.synced
      yield* peers.namespaces.synced
      return peers
    })

    const cluster = (): NetworkPolicy.Cluster => ({
      // Stored NetworkPolicies, read without a decode for `Views.view`'s reason (the list is fresh: no copy).
      policies: policies.list() as unknown as ReadonlyArray<NetworkPolicyModel.NetworkPolicy>,
      pods: (peers?.pods.list() ?? []).map((o) => NetworkPolicy.podView(asPod(o))),
      namespaces: new Map((peers?.namespaces.list() ?? []).map((n) => [nameOf(n), labelsOf(n)]))
    })

    const fail = (pod: Pod.Pod, desired: PolicySync.Desired, cause: string) =>
      Effect.gen(function* () {
        failures++
        lastError = cause
        const verdict = PolicySync.onFailure(desired, strict)
        const uid = uidOf(pod)
        if (desired.selected && reported.get(uid) !== desired.key) {
          reported.set(uid, desired.key)
          yield* options.emit(pod, "Warning", PolicySync.NotEnforcedReason, PolicySync.notEnforcedMessage(pod, cause, verdict))
        }
        return verdict
      })

    /** Send `desired` through `containerId`; answers the failure's cause, if any. */
    const send = (pod: Pod.Pod, containerId: string, desired: PolicySync.Desired) =>
      Effect.gen(function* () {
        const result = yield* Effect.either(runtime.containers.applyNetworkPolicy(containerId, desired.rules))
        if (result._tag === "Left") return result.left
        appliedCount++
        applied.set(uidOf(pod), desired.key)
        reported.delete(uidOf(pod))
        return undefined
      })

    const beforeStart = (pod: Pod.Pod, containerId: string): Effect.Effect<StartVerdict> =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          const synced = policiesSynced || (yield* Effect.raceFirst(Effect.as(policies.synced, true), Effect.as(Effect.sleep(Duration.seconds(10)), false)))
          // Which policies select the pod is unknown: strict fails closed, otherwise it runs.
          if (!synced) return strict ? { run: false as const, reason: PolicySync.NotEnforcedReason, message: "NetworkPolicies could not be read from the API yet" } : { run: true as const }
          // No policy at all and none applied to the pod (most clusters, every start): nothing selects it.
          if (policies.list().length === 0 && !applied.has(uidOf(pod))) return { run: true as const }
          if (policies.list().length > 0 || applied.size > 0) yield* ensurePeers
          const desired = PolicySync.desired(cluster(), pod)
          // Nothing selects it and nothing was put there: no call (and none to a runtime that cannot).
          if (!desired.selected && !applied.has(uidOf(pod))) return { run: true as const }
          const error = yield* send(pod, containerId, desired)
          if (error === undefined) return { run: true as const }
          const verdict = yield* fail(pod, desired, error.message)
          return verdict === "block" ? { run: false as const, reason: PolicySync.NotEnforcedReason, message: PolicySync.notEnforcedMessage(pod, error.message, verdict) } : { run: true as const }
        })
      )

    /** Any container of the pod: the rules go to its network namespace. */
    const containerOf = (uid: string) =>
      Effect.map(Effect.orElseSucceed(runtime.containers.list({ labels: { [Runtime.Labels.podUid]: uid } }), () => []), (list) =>
        [...list].sort((a, b) => (a.status.state === "running" ? 0 : 1) - (b.status.state === "running" ? 0 : 1))[0]?.id
      )

    let firstPass = true
    const reconcile = lock.withPermits(1)(
      Effect.gen(function* () {
        yield* policies.synced
        if (firstPass) {
          // A runtime that enforces may hold rules an earlier agent applied: start from all pods.
          const info = yield* Effect.either(runtime.info)
          if (info._tag === "Left") return trigger()
          if (!info.right.capabilities.networkPolicy && policies.list().length === 0) return void (firstPass = false)
        } else if (policies.list().length === 0 && applied.size === 0) return
        const p = yield* ensurePeers
        const local = p.pods
          .onNode(nodeName)
          .map(asPod)
          .filter(running)
          .map((pod) => ({ uid: uidOf(pod), pod }))
        const c = cluster()
        const decision = PolicySync.decide(c, local, firstPass ? new Map(local.map((l) => [l.uid, ""])) : applied)
        firstPass = false
        for (const uid of decision.forget) {
          applied.delete(uid)
          reported.delete(uid)
        }
        let retry = false
        for (const { uid, pod, desired } of decision.apply) {
          if (reported.get(uid) === desired.key) continue
          const id = yield* containerOf(uid)
          // Not started yet: `beforeStart` applies its rules.
          if (id === undefined) continue
          const error = yield* send(pod, id, desired)
          if (error === undefined) continue
          if (error._tag === "RuntimeUnavailable") retry = true
          yield* fail(pod, desired, error.message)
          if (error._tag === "RuntimeUnavailable") reported.delete(uid)
        }
        if (retry) yield* Effect.forkIn(Effect.delay(Effect.sync(trigger), Duration.seconds(1)), scope)
      })
    )

    yield* Effect.forkIn(
      Effect.forever(
        Effect.gen(function* () {
          yield* Queue.take(wake)
          yield* Effect.sleep(Duration.millis(settleMs))
          yield* Effect.catchAllCause(reconcile, (cause) =>
            Effect.sync(() => {
              failures++
              lastError = Cause.pretty(cause)
            })
          )
        })
      ),
      scope
    )
    trigger()

    return {
      beforeStart,
      metrics: () => ({ applied: appliedCount, failures, ...(lastError === undefined ? {} : { lastError }) })
    }
  })
