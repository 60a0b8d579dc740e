/**
 * The pod side of a simulated kubelet: the reconciler that moves each pod bound to a live node
 * through its life — Running after the startup time, Ready unless told otherwise, exiting as its
 * annotations (or a crash) say, restarted per its restartPolicy or finished, and its deletion
 * confirmed once it is terminating. Steered by the `sim.fleet.koder.dev/*` annotations.
 */
import { Clock, Effect } from "effect"
import type * as Controller from "../../controllers/Controller.js"
import type { JsonObject } from "../../object/Json.js"
import {
  annotationsOf,
  isTerminating,
  nameOf,
  namespaceOrUndefined,
  rfc3339,
  splitKey,
  uidOf
} from "../../object/Metadata.js"
import * as Pods from "../../object/Pods.js"
import * as ResourceRefs from "../../object/ResourceRefs.js"
import * as Views from "../../object/Views.js"
import { conditionsOf, containerStatuses, terminated } from "./simulatedPodStatus.js"
import type { NodeState, PodState, Simulation } from "./simulation.js"

/** The annotation giving the simulated containers' exit code. */
export const exitCodeAnnotation = "sim.fleet.koder.dev/exit-code"
/** The annotation giving how long simulated containers run before exiting. */
export const runMsAnnotation = "sim.fleet.koder.dev/run-ms"
/** The annotation that keeps a simulated pod unready (`"false"`). */
export const readyAnnotation = "sim.fleet.koder.dev/ready"

/** What a reconcile step answers: a requeue, or nothing more to do for now. */
type Step = Effect.Effect<Controller.Result | void, never>

/** One pass over a pod as it stands at `nowMs`, on the node it is bound to. */
interface Pass {
  readonly sim: Simulation
  readonly pod: JsonObject
  readonly state: PodState
  readonly nowMs: number
  readonly now: string
  readonly ready: boolean
  /** The programmed exit code (annotation), if any. */
  readonly exitCode: string | undefined
  readonly runMs: number
}

/** PATCH the pod's status (merge); failures are left to the next pass. */
const patchStatus = (sim: Simulation, pod: JsonObject, status: JsonObject): Effect.Effect<void> =>
  sim.client
    .patch(ResourceRefs.Pod, namespaceOrUndefined(pod), nameOf(pod), "merge", { status }, "status")
    .pipe(Effect.ignore)

/** The pod's state, reset to bound at `nowMs` the first time it is seen bound (crash and readiness kept). */
const boundState = (sim: Simulation, key: string, nowMs: number): PodState => {
  const old = sim.pods.get(key)
  if (old !== undefined && old.boundAt !== 0) return old
  const state: PodState = {
    boundAt: nowMs,
    runningAt: undefined,
    restarts: 0,
    crash: old?.crash ?? false,
    readyOverride: old?.readyOverride
  }
  sim.pods.set(key, state)
  return state
}

/** Report the pod Running on its node, with an IP from the node's range, once its startup time is over. */
const startRunning = (p: Pass, node: NodeState, runningAt: number): Effect.Effect<void> => {
  p.state.runningAt = runningAt
  const ip = `10.244.${node.index}.${(node.nextIp++ % 250) + 2}`
  return patchStatus(p.sim, p.pod, {
    phase: "Running",
    hostIP: `10.0.0.${node.index + 2}`,
    podIP: ip,
    podIPs: [{ ip }],
    startTime: p.now,
    qosClass: "BestEffort",
    conditions: conditionsOf(p.pod, p.ready, p.now),
    containerStatuses: containerStatuses(p.pod, true, p.ready, 0, p.now)
  })
}

/** The containers exited with `code` after running since `runningAt`: restart them or finish the pod. */
const exit = (p: Pass, code: number, runningAt: number): Step =>
  Effect.gen(function* () {
    const { pod, state, now, ready } = p
    const policy = Views.pod(pod).spec.restartPolicy ?? "Always"
    const restart = policy === "Always" || (policy === "OnFailure" && code !== 0)
    const started = rfc3339(runningAt)
    if (restart) {
      state.restarts++
      state.runningAt = p.nowMs
      const lastState = { terminated: terminated({ exitCode: code, startedAt: started, finishedAt: now }) }
      const statuses = containerStatuses(pod, true, ready, state.restarts, now).map((s) => ({ ...s, lastState }))
      yield* patchStatus(p.sim, pod, { conditions: conditionsOf(pod, ready, now), containerStatuses: statuses })
      return p.exitCode === undefined ? undefined : { requeueAfterMs: Math.max(1, p.runMs) }
    }
    yield* patchStatus(p.sim, pod, {
      phase: code === 0 ? "Succeeded" : "Failed",
      conditions: conditionsOf(pod, false, now),
      containerStatuses: containerStatuses(pod, false, false, state.restarts, started, { exitCode: code, at: now })
    })
  })

/** A running pod: exit when programmed (or crashed), else report readiness changes; requeue for the exit. */
const run = (p: Pass, runningAt: number): Step =>
  Effect.gen(function* () {
    const { pod, state } = p
    const exiting = state.crash || (p.exitCode !== undefined && p.nowMs >= runningAt + p.runMs)
    if (exiting) {
      const code = state.crash ? 1 : Number(p.exitCode)
      state.crash = false
      return yield* exit(p, code, runningAt)
    }
    if (Pods.isReady(pod) !== p.ready && Pods.phase(pod) === "Running") {
      yield* patchStatus(p.sim, pod, {
        conditions: conditionsOf(pod, p.ready, p.now),
        containerStatuses: containerStatuses(pod, true, p.ready, state.restarts, rfc3339(runningAt))
      })
    }
    if (p.exitCode !== undefined) return { requeueAfterMs: Math.max(1, runningAt + p.runMs - p.nowMs) }
  })

/** A live pod on a live node: wait out its startup, start it, then run it. */
const live = (sim: Simulation, key: string, pod: JsonObject, node: NodeState, nowMs: number): Step =>
  Effect.gen(function* () {
    const state = boundState(sim, key, nowMs)
    const annotations = annotationsOf(pod)
    const p: Pass = {
      sim,
      pod,
      state,
      nowMs,
      now: rfc3339(nowMs),
      ready: state.readyOverride ?? annotations[readyAnnotation] !== "false",
      exitCode: annotations[exitCodeAnnotation],
      runMs: Number(annotations[runMsAnnotation] ?? 0)
    }
    if (state.runningAt === undefined) {
      const left = state.boundAt + sim.startupMs - nowMs
      if (left > 0) return { requeueAfterMs: left }
      yield* startRunning(p, node, nowMs)
    }
    return yield* run(p, state.runningAt ?? nowMs)
  })

/** The reconcile of one pod key: the pod's next step of life, if its node is alive. */
export const reconcile = (sim: Simulation, key: string): Step =>
  Effect.gen(function* () {
    const { namespace, name } = splitKey(key)
    const got = yield* Effect.either(sim.client.get(ResourceRefs.Pod, namespace, name))
    if (got._tag === "Left") {
      sim.pods.delete(key)
      return
    }
    const pod = got.right
    const nodeName = Views.pod(pod).spec.nodeName
    if (typeof nodeName !== "string") return
    const node = sim.nodes.get(nodeName)
    if (node === undefined || !node.alive) return
    const nowMs = yield* Clock.currentTimeMillis
    if (isTerminating(pod)) {
      // Containers stop at once here; confirm the deletion as a kubelet does.
      const options = { gracePeriodSeconds: 0, preconditions: { uid: uidOf(pod) } }
      yield* Effect.ignore(sim.client.delete(ResourceRefs.Pod, namespace, name, options))
      sim.pods.delete(key)
      return
    }
    const phase = Pods.phase(pod)
    if (phase === "Succeeded" || phase === "Failed") return
    return yield* live(sim, key, pod, node, nowMs)
  })
