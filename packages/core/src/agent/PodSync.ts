/**
 * The pod sync decision: what the agent must do to the runtime so that one pod's containers match
 * its spec — a pure function of the pod (as the API has it, or gone), the runtime containers
 * labelled with its uid, the probe verdicts, the crash-loop backoff entries and the time,
 * following the kubelet's `computePodActions` and pod worker:
 *
 * - init containers run one at a time, in order, each to exit 0 before the next starts; a failed
 *   one is restarted (with backoff) unless the pod's restartPolicy is Never, which fails the pod;
 * - then every regular container starts; an exited one restarts per restartPolicy (Always;
 *   OnFailure when its exit code is not 0; never for Never) after its crash-loop backoff, and a
 *   container whose liveness or startup probe failed, or whose spec changed, is killed first;
 * - a pod past `activeDeadlineSeconds` is killed and fails with `DeadlineExceeded`;
 * - a pod being deleted has its containers killed gracefully (preStop hook, SIGTERM, the grace
 *   period from `deletionGracePeriodSeconds`/`terminationGracePeriodSeconds`, SIGKILL), and once
 *   none runs its deletion is confirmed; a pod gone from the API has its containers killed and
 *   removed, then its volumes cleaned up;
 * - dead containers are garbage-collected down to the newest dead one per container (for
 *   `previous` logs), and a container is never started twice: an attempt is created only when no
 *   attempt of that container runs or waits to start, with the next attempt number.
 *
 * The agent applies the actions in order (kills concurrently), then calls `decide` again when
 * `requeueAfterMs` says so or anything changes.
 */
import type * as Pod from "../model/Pod.js"
import * as CrashLoopBackoff from "./CrashLoopBackoff.js"
import type * as Probes from "./Probes.js"

/** A runtime container of the pod, as the agent reads it from the runtime and its labels. */
export interface ObservedContainer {
  readonly id: string
  /** The container's name in the pod spec. */
  readonly name: string
  readonly attempt: number
  readonly init: boolean
  /** The hash of the spec it was created from (`ContainerIdentity.hashOf`). */
  readonly hash: string
  /** The pinned image it runs (the status's `imageID`), when the runtime runs images. */
  readonly imageRef?: string
  readonly state: "created" | "running" | "exited"
  readonly exitCode?: number
  /** Why it exited (`Completed`, `Error`, `OOMKilled`, `StartError`, `Lost`). */
  readonly reason?: string
  /** Detail of the reason (a start error). */
  readonly message?: string
  /** The signal that ended it, by name (`SIGKILL`). */
  readonly signal?: string
  readonly createdAtMs: number
  readonly startedAtMs?: number
  readonly finishedAtMs?: number
  /** The image the runtime ran, when it was given one. */
  readonly image?: string
}

/** Why a container is not running (shown in its status). */
export interface Waiting {
  readonly reason: string
  readonly message?: string
}

/** One thing to do to the runtime. */
export type Action =
  /** Create and start attempt `attempt` of `container`. */
  | { readonly _tag: "Start"; readonly container: Pod.Container; readonly init: boolean; readonly attempt: number }
  /** Start a container that was created but never started (an agent restart between the two). */
  | { readonly _tag: "StartCreated"; readonly containerId: string; readonly name: string }
  /** Stop a running container: preStop hook (when `preStop`), SIGTERM, and SIGKILL after the grace period. */
  | {
      readonly _tag: "Kill"
      readonly containerId: string
      readonly name: string
      readonly gracePeriodSeconds: number
      readonly preStop: boolean
      readonly reason: string
      readonly message: string
    }
  /** Delete a dead container from the runtime. */
  | { readonly _tag: "Remove"; readonly containerId: string; readonly name: string }
  /** Every container of a pod being deleted has stopped: delete it for good (grace 0). */
  | { readonly _tag: "ConfirmDeletion" }
  /** The pod is gone and so are its containers: forget it and remove its volumes. */
  | { readonly _tag: "Cleanup" }

/** The outcome of one decision. */
export interface Decision {
  readonly actions: ReadonlyArray<Action>
  /** Containers waiting on something, by name (their status shows it). */
  readonly waiting: ReadonlyMap<string, Waiting>
  /** The backoff entries by container name after this decision (replacing the input's). */
  readonly backoff: ReadonlyMap<string, CrashLoopBackoff.Entry>
  /** The pod is to fail for good (its status gets phase Failed with this reason). */
  readonly fail?: { readonly reason: string; readonly message: string }
  /** Decide again after this long at the latest (0: at once, after the actions). */
  readonly requeueAfterMs?: number
}

/** What one decision looks at. */
export interface Input {
  /** The pod as the API has it, or undefined when it is gone. */
  readonly pod: Pod.Pod | undefined
  /** The runtime containers labelled with the pod's uid. */
  readonly containers: ReadonlyArray<ObservedContainer>
  /** Probe verdicts by container id (absent: no probe workers). */
  readonly probes: ReadonlyMap<string, Probes.Verdict>
  /** Crash-loop backoff entries by container name. */
  readonly backoff: ReadonlyMap<string, CrashLoopBackoff.Entry>
  /** The pod must run nothing more (refused by admission, failed, or terminal in the API). */
  readonly terminal: boolean
  /** When the agent first started the pod (for `activeDeadlineSeconds`). */
  readonly startTimeMs?: number
  /** Hash of a container's spec (`ContainerIdentity.hashOf`). */
  readonly hashOf: (container: Pod.Container) => string
  readonly nowMs: number
}

/** The kubelet's minimum grace period when killing a container (seconds). */
export const minimumGracePeriodSeconds = 2

/** The grace period of a pod without one (seconds). */
export const defaultGracePeriodSeconds = 30

/** The grace period to kill a pod's containers with: the deletion's, else the spec's, at least the minimum. */
export const gracePeriodOf = (pod: Pod.Pod | undefined): number =>
  Math.max(minimumGracePeriodSeconds, pod?.metadata.deletionGracePeriodSeconds ?? pod?.spec.terminationGracePeriodSeconds ?? defaultGracePeriodSeconds)

/** The newest attempt first. */
const byAttemptDesc = (a: ObservedContainer, b: ObservedContainer) => b.attempt - a.attempt || b.createdAtMs - a.createdAtMs

/** A pod's containers grouped by name, newest attempt first. */
export const byName = (containers: ReadonlyArray<ObservedContainer>): ReadonlyMap<string, ReadonlyArray<ObservedContainer>> => {
  const out = new Map<string, Array<ObservedContainer>>()
  for (const c of containers) {
    const list = out.get(c.name)
    if (list === undefined) out.set(c.name, [c])
    else list.push(c)
  }
  for (const list of out.values()) list.sort(byAttemptDesc)
  return out
}

const failed = (c: ObservedContainer) => c.state === "exited" && (c.exitCode ?? 0) !== 0

/** Whether a container that exited should run again under `policy` (the kubelet's ShouldContainerBeRestarted). */
export const shouldRestart = (policy: string, latest: ObservedContainer): boolean =>
  latest.state === "exited" && (policy === "Always" || (policy === "OnFailure" && (latest.exitCode ?? 0) !== 0))

type NextInit =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Wait" }
  | { readonly _tag: "Run"; readonly container: Pod.Container; readonly latest: ObservedContainer | undefined }
  | { readonly _tag: "Failed"; readonly container: Pod.Container; readonly latest: ObservedContainer }

/** The kubelet's findNextInitContainerToRun over the newest attempt of each container. */
const nextInit = (pod: Pod.Pod, latest: (name: string) => ObservedContainer | undefined): NextInit => {
  const inits = pod.spec.initContainers ?? []
  if (inits.length === 0) return { _tag: "Done" }
  // A regular container exists: initialization finished before (the kubelet never re-runs it).
  if (pod.spec.containers.some((c) => latest(c.name) !== undefined)) return { _tag: "Done" }
  for (let i = inits.length - 1; i >= 0; i--) {
    const c = inits[i]!
    const l = latest(c.name)
    if (l !== undefined && failed(l)) return { _tag: "Failed", container: c, latest: l }
  }
  for (let i = inits.length - 1; i >= 0; i--) {
    const l = latest(inits[i]!.name)
    if (l === undefined) continue
    if (l.state === "running") return { _tag: "Wait" }
    if (l.state === "created") return { _tag: "Run", container: inits[i]!, latest: l }
    return i === inits.length - 1 ? { _tag: "Done" } : { _tag: "Run", container: inits[i + 1]!, latest: undefined }
  }
  return { _tag: "Run", container: inits[0]!, latest: undefined }
}

/** Decide what to do for one pod. */
export const decide = (input: Input): Decision => {
  const { pod, nowMs } = input
  const actions: Array<Action> = []
  const waiting = new Map<string, Waiting>()
  const backoff = new Map(input.backoff)
  const groups = byName(input.containers)
  const latest = (name: string) => groups.get(name)?.[0]
  const running = input.containers.filter((c) => c.state === "running")
  let requeue: number | undefined
  const requeueAfter = (ms: number) => {
    requeue = requeue === undefined ? ms : Math.min(requeue, ms)
  }

  // Garbage: every attempt older than the newest two (the newest dead one serves `previous` logs
  // and `lastState`), and any older running copy of a container.
  const garbage = (keepRunning: boolean) => {
    for (const [name, list] of groups) {
      if (!specNames.has(name)) continue
      list.forEach((c, i) => {
        if (c.state === "running") {
          if (i > 0 && keepRunning) {
            actions.push({ _tag: "Kill", containerId: c.id, name, gracePeriodSeconds: minimumGracePeriodSeconds, preStop: false, reason: "Duplicate", message: `Container ${name} has a newer attempt, stopping this one` })
          }
        } else if (i > 1) {
          actions.push({ _tag: "Remove", containerId: c.id, name })
        }
      })
    }
  }

  // Gone from the API: kill what runs, remove what is dead, then forget the pod.
  if (pod === undefined) {
    if (running.length > 0) {
      for (const c of running) {
        actions.push({ _tag: "Kill", containerId: c.id, name: c.name, gracePeriodSeconds: minimumGracePeriodSeconds, preStop: false, reason: "Killing", message: `Stopping container ${c.name}` })
      }
      return { actions, waiting, backoff: new Map(), requeueAfterMs: 0 }
    }
    for (const c of input.containers) actions.push({ _tag: "Remove", containerId: c.id, name: c.name })
    actions.push({ _tag: "Cleanup" })
    return { actions, waiting, backoff: new Map() }
  }

  const specNames = new Set([...(pod.spec.initContainers ?? []), ...pod.spec.containers].map((c) => c.name))
  // Containers no longer in the spec (cannot happen through the API, but a runtime may hold them).
  for (const [name, list] of groups) {
    if (specNames.has(name)) continue
    for (const c of list) {
      if (c.state === "running") actions.push({ _tag: "Kill", containerId: c.id, name, gracePeriodSeconds: minimumGracePeriodSeconds, preStop: false, reason: "Killing", message: `Container ${name} is not in the pod spec` })
      else actions.push({ _tag: "Remove", containerId: c.id, name })
    }
  }

  // Being deleted: stop everything gracefully, then confirm.
  if (pod.metadata.deletionTimestamp !== undefined) {
    const grace = gracePeriodOf(pod)
    for (const c of running) {
      if (!specNames.has(c.name)) continue
      actions.push({ _tag: "Kill", containerId: c.id, name: c.name, gracePeriodSeconds: grace, preStop: true, reason: "Killing", message: `Stopping container ${c.name}` })
    }
    if (running.length > 0) return { actions, waiting, backoff, requeueAfterMs: 0 }
    actions.push({ _tag: "ConfirmDeletion" })
    return { actions, waiting, backoff }
  }

  // Past its active deadline: kill and fail.
  const deadline = pod.spec.activeDeadlineSeconds
  let fail: Decision["fail"]
  if (!input.terminal && deadline !== undefined && input.startTimeMs !== undefined) {
    const left = input.startTimeMs + deadline * 1000 - nowMs
    if (left <= 0) fail = { reason: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline" }
    else requeueAfter(left)
  }
  if (input.terminal || fail !== undefined) {
    for (const c of running) {
      if (!specNames.has(c.name)) continue
      actions.push({ _tag: "Kill", containerId: c.id, name: c.name, gracePeriodSeconds: gracePeriodOf(pod), preStop: true, reason: "Killing", message: `Stopping container ${c.name}` })
    }
    garbage(false)
    return { actions, waiting, backoff, ...(fail === undefined ? {} : { fail }) }
  }

  const policy = pod.spec.restartPolicy ?? "Always"
  const podRef = { name: pod.metadata.name ?? "", namespace: pod.metadata.namespace ?? "", uid: pod.metadata.uid ?? "" }

  // Restart an exited container unless it is in backoff; answers whether it was started.
  const restart = (container: Pod.Container, init: boolean, last: ObservedContainer) => {
    const finished = last.finishedAtMs ?? last.createdAtMs
    const entry = backoff.get(container.name)
    const wait = CrashLoopBackoff.remaining(entry, finished, nowMs)
    if (wait > 0) {
      waiting.set(container.name, { reason: "CrashLoopBackOff", message: CrashLoopBackoff.message(entry!, container.name, podRef) })
      requeueAfter(wait)
      return
    }
    backoff.set(container.name, CrashLoopBackoff.next(entry, finished, nowMs))
    actions.push({ _tag: "Start", container, init, attempt: last.attempt + 1 })
  }

  const init = nextInit(pod, latest)
  switch (init._tag) {
    case "Failed":
      if (policy === "Never") {
        garbage(false)
        return { actions, waiting, backoff }
      }
      restart(init.container, true, init.latest)
      garbage(true)
      return { actions, waiting, backoff, ...(requeue === undefined ? {} : { requeueAfterMs: requeue }) }
    case "Wait":
      garbage(true)
      return { actions, waiting, backoff, ...(requeue === undefined ? {} : { requeueAfterMs: requeue }) }
    case "Run":
      if (init.latest?.state === "created") actions.push({ _tag: "StartCreated", containerId: init.latest.id, name: init.container.name })
      else actions.push({ _tag: "Start", container: init.container, init: true, attempt: (latest(init.container.name)?.attempt ?? -1) + 1 })
      garbage(true)
      return { actions, waiting, backoff, ...(requeue === undefined ? {} : { requeueAfterMs: requeue }) }
    case "Done":
      break
  }

  let killed = false
  for (const container of pod.spec.containers) {
    const last = latest(container.name)
    if (last === undefined) {
      actions.push({ _tag: "Start", container, init: false, attempt: 0 })
      continue
    }
    if (last.state === "created") {
      actions.push({ _tag: "StartCreated", containerId: last.id, name: container.name })
      continue
    }
    if (last.state === "running") {
      const verdict = input.probes.get(last.id)
      const why =
        verdict?.startupFailed === true
          ? `Container ${container.name} failed startup probe, will be restarted`
          : verdict?.livenessFailed === true
            ? `Container ${container.name} failed liveness probe, will be restarted`
            : last.hash !== "" && last.hash !== input.hashOf(container)
              ? `Container ${container.name} definition changed, will be restarted`
              : undefined
      if (why !== undefined) {
        const probeGrace = verdict?.startupFailed === true ? container.startupProbe?.terminationGracePeriodSeconds : verdict?.livenessFailed === true ? container.livenessProbe?.terminationGracePeriodSeconds : undefined
        const grace = Math.max(minimumGracePeriodSeconds, probeGrace ?? pod.spec.terminationGracePeriodSeconds ?? defaultGracePeriodSeconds)
        actions.push({ _tag: "Kill", containerId: last.id, name: container.name, gracePeriodSeconds: grace, preStop: true, reason: "Killing", message: why })
        killed = true
      }
      continue
    }
    if (shouldRestart(policy, last)) restart(container, false, last)
  }
  garbage(true)
  if (killed) requeueAfter(0)
  return { actions, waiting, backoff, ...(requeue === undefined ? {} : { requeueAfterMs: requeue }) }
}
