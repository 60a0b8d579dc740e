/**
 * The probe workers (the kubelet's prober manager): one fiber per running container with probes,
 * running `Probes`' schedule through a handler runner, recording an `Unhealthy` Event on each
 * failure, and queueing the pod when the container's verdict changes. A pod's sync starts the
 * workers of its new containers and stops those of containers that went.
 */
import { Clock, Duration, Effect, FiberMap, type Scope } from "effect"
import type * as Pod from "../model/Pod.js"
import type * as HandlerRunner from "./HandlerRunner.js"
import type * as PodStates from "./PodStates.js"
import type * as PodSync from "./PodSync.js"
import type * as Prober from "./Prober.js"
import * as Probes from "./Probes.js"

/** A running container's worker: its pod and the verdict it last reported. */
export interface Worker {
  readonly uid: string
  verdict: Probes.Verdict
}

/** The workers by container id, and their fibers. */
export interface State {
  readonly workers: Map<string, Worker>
  readonly fibers: FiberMap.FiberMap<string>
}

/** What the workers need. */
export interface Deps {
  /** Runs a handler of `pod`'s container at the pod's current address. */
  readonly run: (pod: Pod.Pod, state: PodStates.PodState, containerName: string, containerId: string, handler: HandlerRunner.Handler, timeoutMs: number) => Effect.Effect<Prober.Outcome>
  readonly emit: PodStates.Emit
  /** A container's verdict changed: its pod needs a sync. */
  readonly onChange: (uid: string) => void
}

/** The probe workers of one agent. */
export interface ProbeManager {
  readonly state: State
  /** Run workers for `pod`'s running containers with probes, and only those (none without `pod`). */
  readonly sync: (uid: string, pod: Pod.Pod | undefined, state: PodStates.PodState, observed: ReadonlyArray<PodSync.ObservedContainer>) => Effect.Effect<void>
  /** The verdicts of `uid`'s containers, by container id. */
  readonly verdicts: (uid: string) => ReadonlyMap<string, Probes.Verdict>
}

/** "liveness" → "Liveness". */
export const label = (kind: Probes.Kind): string => kind[0]!.toUpperCase() + kind.slice(1)

const worker = (deps: Deps, workers: Map<string, Worker>, uid: string, pod: Pod.Pod, state: PodStates.PodState, container: Pod.Container, observed: PodSync.ObservedContainer) =>
  Effect.gen(function* () {
    let probes = Probes.start(observed.id, container, observed.startedAtMs ?? (yield* Clock.currentTimeMillis))
    for (;;) {
      const next = Probes.nextDueMs(probes)
      if (next === undefined) return
      const now = yield* Clock.currentTimeMillis
      if (next > now) yield* Effect.sleep(Duration.millis(next - now))
      const at = yield* Clock.currentTimeMillis
      for (const kind of Probes.due(probes, at)) {
        const w = probes.workers.find((x) => x.kind === kind)!
        const outcome = yield* deps.run(pod, state, container.name, observed.id, w.probe, w.settings.timeoutMs)
        const after = yield* Clock.currentTimeMillis
        probes = Probes.record(probes, kind, outcome.result, after)
        if (outcome.result === "failure") yield* deps.emit(pod, "Warning", "Unhealthy", `${label(kind)} probe failed: ${outcome.message}`)
      }
      const w = workers.get(observed.id)
      const verdict = Probes.verdict(probes)
      if (w !== undefined && Probes.changed(w.verdict, verdict)) {
        w.verdict = verdict
        deps.onChange(uid)
      }
    }
  })

/** Probe workers living in the current scope. */
export const make = (deps: Deps): Effect.Effect<ProbeManager, never, Scope.Scope> =>
  Effect.gen(function* () {
    const state: State = { workers: new Map(), fibers: yield* FiberMap.make<string>() }
    const { workers, fibers } = state
    const sync: ProbeManager["sync"] = (uid, pod, podState, observed) =>
      Effect.gen(function* () {
        const wanted = new Map<string, { readonly container: Pod.Container; readonly observed: PodSync.ObservedContainer }>()
        if (pod !== undefined && pod.metadata.deletionTimestamp === undefined) {
          for (const o of observed) {
            if (o.state !== "running" || o.init) continue
            const container = pod.spec.containers.find((c) => c.name === o.name)
            if (container !== undefined && (container.livenessProbe || container.readinessProbe || container.startupProbe)) wanted.set(o.id, { container, observed: o })
          }
        }
        for (const [id, w] of [...workers]) {
          if (w.uid !== uid || wanted.has(id)) continue
          workers.delete(id)
          yield* FiberMap.remove(fibers, id)
        }
        for (const [id, want] of wanted) {
          if (workers.has(id)) continue
          workers.set(id, { uid, verdict: Probes.verdict(Probes.start(id, want.container, 0)) })
          yield* FiberMap.run(fibers, id, worker(deps, workers, uid, pod!, podState, want.container, want.observed))
        }
      })
    const verdicts = (uid: string): ReadonlyMap<string, Probes.Verdict> => {
      const out = new Map<string, Probes.Verdict>()
      for (const [id, w] of workers) if (w.uid === uid) out.set(id, w.verdict)
      return out
    }
    return { state, sync, verdicts }
  })
