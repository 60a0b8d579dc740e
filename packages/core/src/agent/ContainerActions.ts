/**
 * Applies `PodSync`'s container actions to the runtime (the kubelet's kuberuntime container
 * manager): start an attempt (create, NetworkPolicy, start, postStart hook), start one created
 * before an agent restart, and kill one (preStop hook within the grace period, then stop). Why a
 * container could not be created or started is kept in the pod's `waiting`, for its status.
 */
import { Clock, Duration, Effect, Either, Option } from "effect"
import type * as Pod from "../model/Pod.js"
import type * as Runtime from "../runtime/Runtime.js"
import * as ContainerSpec from "./ContainerSpec.js"
import * as ImagePull from "./ImagePull.js"
import type * as HandlerRunner from "./HandlerRunner.js"
import type * as PodStates from "./PodStates.js"
import * as PodSync from "./PodSync.js"
import type * as PolicyEnforcement from "./PolicyEnforcement.js"
import * as PolicySync from "./PolicySync.js"
import type * as Prober from "./Prober.js"
import type * as RuntimeCapabilities from "./RuntimeCapabilities.js"
import type * as VolumePlan from "./VolumePlan.js"

/** What applying actions needs. */
export interface Deps {
  readonly runtime: Runtime.RuntimeService
  readonly policy: PolicyEnforcement.PolicyEnforcement
  readonly capabilities: RuntimeCapabilities.RuntimeCapabilities
  readonly emit: PodStates.Emit
  /** Runs a handler of `pod`'s container at the pod's current address. */
  readonly run: (pod: Pod.Pod, state: PodStates.PodState, containerName: string, containerId: string, handler: HandlerRunner.Handler, timeoutMs: number) => Effect.Effect<Prober.Outcome>
  /** The node and pod facts of `state`'s containers' specs, for a runtime with `capabilities`. */
  readonly specContext: (state: PodStates.PodState, capabilities: Runtime.Capabilities) => ContainerSpec.Context
}

/** How long a postStart hook may run. */
export const postStartTimeoutMs = 30_000

/** Start the created container `id` (`name` in the pod) once its NetworkPolicy is in place. */
export const startCreated = (deps: Deps, pod: Pod.Pod, state: PodStates.PodState, name: string, id: string) =>
  Effect.gen(function* () {
    const allowed = yield* deps.policy.beforeStart(pod, id)
    if (!allowed.run) return void state.waiting.set(name, { reason: allowed.reason, message: allowed.message })
    if (state.waiting.get(name)?.reason === PolicySync.NotEnforcedReason) state.waiting.delete(name)
    const started = yield* Effect.either(deps.runtime.containers.start(id))
    if (started._tag === "Left") {
      if (started.left._tag === "RuntimeUnavailable") return yield* Effect.fail(started.left)
      state.waiting.set(name, { reason: "RunContainerError", message: started.left.message })
      return
    }
    yield* deps.emit(pod, "Normal", "Started", `Started container ${name}`)
    const container = pod.spec.containers.find((c) => c.name === name)
    const postStart = container?.lifecycle?.postStart
    if (postStart !== undefined) {
      const outcome = yield* deps.run(pod, state, name, id, postStart, postStartTimeoutMs)
      if (outcome.result === "failure") {
        yield* deps.emit(pod, "Warning", "FailedPostStartHook", `PostStartHook failed: ${outcome.message}`)
        yield* deps.runtime.containers.stop(id, { gracePeriodMs: PodSync.minimumGracePeriodSeconds * 1000 }).pipe(Effect.catchTag("RuntimeNotFound", () => Effect.void))
      }
    }
  })

/** Create and start an attempt of a container; answers whether it was created. */
export const start = (
  deps: Deps,
  pod: Pod.Pod,
  state: PodStates.PodState,
  action: Extract<PodSync.Action, { _tag: "Start" }>,
  lookup: VolumePlan.Lookup,
  plan: VolumePlan.Plan
) =>
  Effect.gen(function* () {
    const caps = yield* deps.capabilities.get
    let image: Runtime.Image | undefined
    if (caps.imagePull === true) {
      const secrets = (pod.spec.imagePullSecrets ?? []).flatMap((r) => {
        const s = r.name === undefined ? undefined : lookup.secret(r.name)
        return s === undefined ? [] : [s]
      })
      const ready = yield* ImagePull.ensure(deps, pod, state, action.container, secrets)
      if (ready === undefined) return false
      image = ready.image
    } else if (action.attempt === 0 && (action.container.image ?? "") !== "") {
      // Said once per container, so `describe` explains why the image's files are not what runs.
      yield* deps.emit(pod, "Normal", "ImageNotUsed", `Image "${action.container.image}" is not pulled: the ${caps.drivers.join("/") || "process"} runtime runs the container's command on the host`)
    }
    const spec = ContainerSpec.make(pod, action.container, action.attempt, action.init, lookup, plan, deps.specContext(state, caps), image?.config)
    if (Either.isLeft(spec)) {
      state.waiting.set(action.container.name, { reason: "CreateContainerConfigError", message: spec.left })
      yield* deps.emit(pod, "Warning", "Failed", `Error: ${spec.left}`)
      return false
    }
    const id = yield* deps.runtime.containers.create(spec.right).pipe(
      Effect.catchTag("RuntimeAlreadyExists", (e) => Effect.succeed(e.id)),
      Effect.map(Option.some),
      Effect.catchTags({
        RuntimeInvalid: (e) => Effect.as(Effect.sync(() => state.waiting.set(action.container.name, { reason: "CreateContainerError", message: e.message })), Option.none()),
        RuntimeNotFound: (e) => Effect.as(Effect.sync(() => state.waiting.set(action.container.name, { reason: "CreateContainerError", message: e.message })), Option.none())
      })
    )
    if (Option.isNone(id)) return false
    state.waiting.delete(action.container.name)
    yield* startCreated(deps, pod, state, action.container.name, id.value)
    return true
  })

/** Stop a container: its preStop hook within the grace period, then the runtime's stop with what is left. */
export const kill = (deps: Deps, pod: Pod.Pod | undefined, state: PodStates.PodState, action: Extract<PodSync.Action, { _tag: "Kill" }>) =>
  Effect.gen(function* () {
    const start = yield* Clock.currentTimeMillis
    if (pod !== undefined) yield* deps.emit(pod, "Normal", "Killing", action.message)
    const container = pod === undefined ? undefined : [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((c) => c.name === action.name)
    const preStop = container?.lifecycle?.preStop
    if (action.preStop && preStop !== undefined && pod !== undefined) {
      const outcome = yield* deps.run(pod, state, action.name, action.containerId, preStop, action.gracePeriodSeconds * 1000).pipe(
        Effect.timeoutTo({ duration: Duration.seconds(action.gracePeriodSeconds), onSuccess: (o) => o, onTimeout: () => ({ result: "failure" as const, message: "timed out" }) })
      )
      if (outcome.result === "failure") yield* deps.emit(pod, "Warning", "FailedPreStopHook", `PreStopHook failed: ${outcome.message}`)
    }
    const elapsed = (yield* Clock.currentTimeMillis) - start
    const graceMs = Math.max(PodSync.minimumGracePeriodSeconds * 1000, action.gracePeriodSeconds * 1000 - elapsed)
    yield* deps.runtime.containers.stop(action.containerId, { gracePeriodMs: graceMs }).pipe(Effect.catchTag("RuntimeNotFound", () => Effect.void))
  })
