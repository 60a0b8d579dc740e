/**
 * The pod status the agent reports, as the kubelet's `generateAPIPodStatus` builds it from the
 * runtime's containers: the phase (`getPhase`), the kubelet's conditions (PodReadyToStartContainers,
 * Initialized, Ready, ContainersReady, PodScheduled; `lastTransitionTime` kept while a status
 * holds; conditions other writers own, such as DisruptionTarget, kept as they are), container and
 * init container statuses (waiting/running/terminated with the kubelet's reasons, `lastState`,
 * `restartCount` = the newest attempt, `ready`, `started`, `containerID`, `image`), host and pod
 * IPs, `startTime`, `qosClass`, and Fleet's `hostPorts`. A pure function: the agent writes the
 * result only when it differs from what the API holds (`same`).
 */
import type * as Conditions from "../object/Conditions.js"
import type * as Pod from "../model/Pod.js"
import * as Quantity from "../model/Quantity.js"
import * as HostPorts from "./HostPorts.js"
import * as PodSync from "./PodSync.js"
import * as Probes from "./Probes.js"
import { isJsonObject } from "../object/Json.js"
import { rfc3339 } from "../object/Metadata.js"

/** What a status is computed from. */
export interface Input {
  readonly pod: Pod.Pod
  /** The runtime containers of the pod. */
  readonly containers: ReadonlyArray<PodSync.ObservedContainer>
  /** Probe verdicts by container id. */
  readonly probes: ReadonlyMap<string, Probes.Verdict>
  /** Containers waiting on something, by name (from the sync decision or a failed create). */
  readonly waiting: ReadonlyMap<string, PodSync.Waiting>
  /** The pod failed for good: refused by admission, or past its deadline. */
  readonly fail?: { readonly reason: string; readonly message: string }
  /** The pod's sandbox and volumes are set up. */
  readonly sandboxReady: boolean
  readonly hostIP: string
  /** The pod's IP (the host's in host-network mode); undefined until the sandbox exists. */
  readonly podIP?: string
  readonly hostPorts: ReadonlyArray<HostPorts.Assignment>
  /** When the agent first admitted the pod (RFC 3339). */
  readonly startTime?: string
  /** `containerID` prefix naming the runtime (`kbox://<id>`). */
  readonly runtimeName: string
  readonly nowMs: number
}

/** The conditions the kubelet owns; the others are carried over unchanged. */
export const kubeletConditions: ReadonlySet<string> = new Set(["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"])

const signals: Readonly<Record<string, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGUSR1: 10, SIGSEGV: 11, SIGUSR2: 12, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 }

const time = (ms: number | undefined) => (ms === undefined ? undefined : rfc3339(ms))

type State = Pod.ContainerState
type Status = Pod.ContainerStatus

const terminated = (c: PodSync.ObservedContainer, containerID: string): State => {
  const exitCode = c.exitCode ?? 0
  const signal = c.signal === undefined ? undefined : signals[c.signal]
  const startedAt = time(c.startedAtMs)
  const finishedAt = time(c.finishedAtMs)
  return {
    terminated: {
      exitCode,
      ...(signal === undefined ? {} : { signal }),
      reason: c.reason ?? (exitCode === 0 ? "Completed" : "Error"),
      ...(c.message === undefined ? {} : { message: c.message }),
      ...(startedAt === undefined ? {} : { startedAt }),
      ...(finishedAt === undefined ? {} : { finishedAt }),
      containerID
    }
  }
}

const containerStatus = (input: Input, container: Pod.Container, history: ReadonlyArray<PodSync.ObservedContainer>, init: boolean, defaultWaiting: string): Status => {
  const latest = history[0]
  const previous = history[1]
  const id = (c: PodSync.ObservedContainer) => `${input.runtimeName}://${c.id}`
  const waiting = input.waiting.get(container.name)
  const base = { name: container.name, image: container.image, imageID: "" }
  if (latest === undefined) {
    return { ...base, state: { waiting: waiting ?? { reason: defaultWaiting } }, lastState: {}, ready: false, restartCount: 0, started: false }
  }
  const lastState: State = previous !== undefined && previous.state === "exited" ? terminated(previous, id(previous)) : {}
  const common = { ...base, imageID: latest.imageRef ?? "", containerID: id(latest), restartCount: latest.attempt }
  switch (latest.state) {
    case "created":
      return { ...common, state: { waiting: waiting ?? { reason: "ContainerCreating" } }, lastState, ready: false, started: false }
    case "running": {
      // No verdict yet: what a container's probes say before their first result.
      const verdict = input.probes.get(latest.id) ?? Probes.verdict(Probes.start(latest.id, container, 0))
      const startedAt = time(latest.startedAtMs)
      return {
        ...common,
        state: { running: startedAt === undefined ? {} : { startedAt } },
        lastState,
        // An init container is ready once it completed; a running one is not.
        ready: !init && verdict.ready,
        started: verdict.started
      }
    }
    case "exited": {
      const done = terminated(latest, id(latest))
      if (waiting !== undefined) return { ...common, state: { waiting }, lastState: done, ready: false, started: false }
      return { ...common, state: done, lastState, ready: init && (latest.exitCode ?? 0) === 0, started: false }
    }
  }
}

/** The kubelet's getPhase. */
export const phaseOf = (
  spec: Pod.PodSpec,
  initStatuses: ReadonlyArray<Status>,
  statuses: ReadonlyArray<Status>,
  podIsTerminal: boolean
): Pod.PodPhase => {
  let pendingInit = 0
  let failedInit = 0
  for (const s of initStatuses) {
    if (s.state?.running !== undefined) pendingInit++
    else if (s.state?.terminated !== undefined) {
      if (s.state.terminated.exitCode !== 0) failedInit++
    } else if (s.state?.waiting !== undefined && s.lastState?.terminated !== undefined) {
      if (s.lastState.terminated.exitCode !== 0) failedInit++
    } else pendingInit++
  }
  let unknown = 0
  let running = 0
  let waiting = 0
  let stopped = 0
  let succeeded = 0
  for (const s of statuses) {
    if (s.state?.running !== undefined) running++
    else if (s.state?.terminated !== undefined) {
      stopped++
      if (s.state.terminated.exitCode === 0) succeeded++
    } else if (s.state?.waiting !== undefined) {
      if (s.lastState?.terminated !== undefined) stopped++
      else waiting++
    } else unknown++
  }
  const policy = spec.restartPolicy ?? "Always"
  if (failedInit > 0 && policy === "Never") return "Failed"
  if (pendingInit > 0 || waiting > 0) return "Pending"
  if (running > 0 && unknown === 0) return "Running"
  if (running === 0 && stopped > 0 && unknown === 0) {
    if (podIsTerminal) return stopped === succeeded ? "Succeeded" : "Failed"
    if (policy === "Always") return "Running"
    if (stopped === succeeded) return "Succeeded"
    if (policy === "Never") return "Failed"
    return "Running"
  }
  return "Pending"
}

const nanos = (q: string | undefined): bigint => {
  if (q === undefined) return 0n
  const parsed = Quantity.parse(q)
  return parsed._tag === "Right" ? parsed.right.nanos : 0n
}

/**
 * The pod's quality-of-service class (Kubernetes' GetPodQOS, for cpu and memory): BestEffort
 * without any request or limit; Guaranteed when every container limits both and requests equal
 * limits (a missing request defaults to the limit); Burstable otherwise.
 */
export const qosClassOf = (spec: Pod.PodSpec): "Guaranteed" | "Burstable" | "BestEffort" => {
  let any = false
  let guaranteed = true
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    for (const r of ["cpu", "memory"]) {
      const limit = nanos(c.resources?.limits?.[r])
      const request = c.resources?.requests?.[r] === undefined ? limit : nanos(c.resources.requests[r])
      if (request !== 0n || limit !== 0n) any = true
      if (limit === 0n || request !== limit) guaranteed = false
    }
  }
  if (!any) return "BestEffort"
  return guaranteed ? "Guaranteed" : "Burstable"
}

const list = (names: ReadonlyArray<string>) => `[${names.join(" ")}]`

/** The status of `input.pod` now. */
export const compute = (input: Input): Pod.PodStatus => {
  const { pod } = input
  const old = pod.status ?? {}
  const now = rfc3339(input.nowMs)
  const groups = PodSync.byName(input.containers)
  const inits = pod.spec.initContainers ?? []
  const defaultWaiting = inits.length > 0 ? "PodInitializing" : "ContainerCreating"
  const initStatuses = inits.map((c) => containerStatus(input, c, groups.get(c.name) ?? [], true, defaultWaiting))
  const statuses = pod.spec.containers.map((c) => containerStatus(input, c, groups.get(c.name) ?? [], false, defaultWaiting))
  const anyRunning = input.containers.some((c) => c.state === "running")
  const podIsTerminal = input.fail !== undefined || (pod.metadata.deletionTimestamp !== undefined && !anyRunning)
  const phase: Pod.PodPhase = input.fail !== undefined && input.containers.length === 0 ? "Failed" : phaseOf(pod.spec, initStatuses, statuses, podIsTerminal)
  const terminalPhase = phase === "Succeeded" || phase === "Failed"

  // Initialized: every init container completed (or a regular container was created already).
  // Every container has a status (a never-created one is waiting), so none is "unknown" here.
  const incompleteInit = initStatuses.filter((s) => !s.ready).map((s) => s.name)
  const regularCreated = pod.spec.containers.some((c) => groups.has(c.name))
  const initialized: Conditions.Condition =
    inits.length === 0 || regularCreated || incompleteInit.length === 0
      ? { type: "Initialized", status: "True" }
      : phase === "Succeeded"
        ? { type: "Initialized", status: "True", reason: "PodCompleted" }
        : { type: "Initialized", status: "False", reason: "ContainersNotInitialized", message: `containers with incomplete status: ${list(incompleteInit)}` }

  // ContainersReady and Ready: every regular container ready (and every readiness gate True).
  const unready = statuses.filter((s) => !s.ready).map((s) => s.name)
  const containersReady: Conditions.Condition = terminalPhase
    ? { type: "ContainersReady", status: "False", reason: phase === "Succeeded" ? "PodCompleted" : "PodFailed" }
    : unready.length > 0
      ? { type: "ContainersReady", status: "False", reason: "ContainersNotReady", message: `containers with unready status: ${list(unready)}` }
      : { type: "ContainersReady", status: "True" }
  const gates = (pod.spec.readinessGates ?? []).map((g) => g.conditionType)
  const missingGates = gates.filter((g) => (old.conditions ?? []).find((c) => c.type === g) === undefined)
  const falseGates = gates.filter((g) => {
    const c = (old.conditions ?? []).find((x) => x.type === g)
    return c !== undefined && c.status !== "True"
  })
  const ready: Conditions.Condition =
    containersReady.status !== "True"
      ? { ...containersReady, type: "Ready" }
      : missingGates.length > 0 || falseGates.length > 0
        ? {
            type: "Ready",
            status: "False",
            reason: "ReadinessGatesNotReady",
            message: [
              ...missingGates.map((g) => `corresponding condition of pod readiness gate "${g}" does not exist.`),
              ...(falseGates.length > 0 ? [`the status of pod readiness gate ${list(falseGates)} is not "True"`] : [])
            ].join(", ")
          }
        : { type: "Ready", status: "True" }

  const owned: ReadonlyArray<Conditions.Condition> = [
    { type: "PodReadyToStartContainers", status: input.sandboxReady && !(terminalPhase && !anyRunning && pod.metadata.deletionTimestamp !== undefined) ? "True" : "False" },
    initialized,
    ready,
    containersReady,
    { type: "PodScheduled", status: "True" }
  ]
  const previous = (old.conditions ?? []) as ReadonlyArray<Conditions.Condition>
  const conditions: Array<Conditions.Condition> = previous.filter((c) => !kubeletConditions.has(c.type))
  for (const c of owned) {
    const before = previous.find((p) => p.type === c.type)
    conditions.push({ ...c, lastTransitionTime: before !== undefined && before.status === c.status && before.lastTransitionTime !== undefined ? before.lastTransitionTime : now })
  }

  const hostPorts = HostPorts.status(input.hostPorts)
  return {
    phase,
    conditions: conditions as ReadonlyArray<Pod.PodCondition>,
    ...(input.fail === undefined ? {} : { reason: input.fail.reason, message: input.fail.message }),
    hostIP: input.hostIP,
    hostIPs: [{ ip: input.hostIP }],
    ...(input.podIP === undefined ? {} : { podIP: input.podIP, podIPs: [{ ip: input.podIP }] }),
    ...(input.startTime === undefined ? {} : { startTime: input.startTime }),
    ...(inits.length > 0 ? { initContainerStatuses: initStatuses } : {}),
    containerStatuses: statuses,
    qosClass: qosClassOf(pod.spec),
    ...(old.nominatedNodeName === undefined ? {} : { nominatedNodeName: old.nominatedNodeName }),
    ...(hostPorts.length === 0 ? {} : { hostPorts })
  }
}

/** JSON values equal, key order and undefined fields aside (what their stable encodings compare). */
const equal = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false
    return a.every((x, i) => equal(x, b[i]))
  }
  if (!isJsonObject(a) || !isJsonObject(b)) return false
  const keys = Object.keys(a).filter((k) => a[k] !== undefined)
  return keys.length === Object.keys(b).filter((k) => b[k] !== undefined).length && keys.every((k) => equal(a[k], b[k]))
}

/**
 * Whether two statuses say the same (key order and absent fields aside). Compared in place: asked
 * twice for every status the agent computes, and building two key-sorted encodings cost more.
 */
export const same = (a: unknown, b: unknown): boolean => equal(a ?? {}, b ?? {})
