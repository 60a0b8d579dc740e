/**
 * How the agent recognises its containers in the runtime, so that it keeps no state of its own
 * about what it started: every container carries the Runtime port's labels naming the pod (uid,
 * namespace, name), the container of the pod spec, the attempt (0 for the first run, +1 per
 * restart: the restartCount survives an agent restart, as the kubelet's
 * `io.kubernetes.container.restartCount` annotation) and a hash of the container's spec (an image
 * change restarts the container), plus whether it is an init container and the pod's host-port
 * assignment. The runtime refuses a second container with the same (sandbox, name, attempt), so a
 * create retried after a lost answer cannot start a second copy.
 */
import * as Pods from "../object/Pods.js"
import type * as Pod from "../model/Pod.js"
import * as Runtime from "../runtime/Runtime.js"
import type { ObservedContainer } from "./PodSync.js"
import { stableJson } from "../object/Json.js"

/** The labels the agent puts on runtime containers (the port's, plus its own two). */
export const Labels = {
  ...Runtime.Labels,
  /** `"true"` on init containers. */
  init: "fleet.koder.dev/init",
  /** The pod's host-port assignment (`HostPorts.encode`), for re-adoption. */
  hostPorts: "fleet.koder.dev/host-ports"
} as const

// Asked for each container at every sync of its pod and again for its labels: one computation
// per container object (a new version of the pod brings new objects).
const hashes = new WeakMap<Pod.Container, string>()

/** A stable hash of a container's spec (FNV-32a of its canonical JSON, hex). */
export const hashOf = (container: Pod.Container): string => {
  let hash = hashes.get(container)
  if (hash === undefined) {
    hash = Pods.fnv32a(stableJson(container)).toString(16)
    hashes.set(container, hash)
  }
  return hash
}

/** The labels of the pod's sandbox. */
export const sandboxLabels = (pod: Pod.Pod): Record<string, string> => ({
  [Labels.podUid]: pod.metadata.uid ?? "",
  [Labels.podNamespace]: pod.metadata.namespace ?? "",
  [Labels.podName]: pod.metadata.name ?? ""
})

/** The labels of a new container for attempt `attempt` of `container` in `pod`. */
export const labelsFor = (pod: Pod.Pod, container: Pod.Container, attempt: number, init: boolean, hostPorts: string): Record<string, string> => ({
  ...sandboxLabels(pod),
  [Labels.containerName]: container.name,
  [Labels.restartAttempt]: String(attempt),
  [Labels.specHash]: hashOf(container),
  ...(init ? { [Labels.init]: "true" } : {}),
  ...(hostPorts === "" || hostPorts === "[]" ? {} : { [Labels.hostPorts]: hostPorts })
})

/** The pod uid a runtime container belongs to (undefined: not the agent's). */
export const podUidOf = (c: Runtime.Container): string | undefined => {
  const uid = c.spec.labels?.[Labels.podUid]
  return uid === undefined || uid === "" ? undefined : uid
}

const ms = (text: string | undefined): number | undefined => {
  if (text === undefined) return undefined
  const t = Date.parse(text)
  return Number.isFinite(t) ? t : undefined
}

/** A runtime container as the sync decision reads it. */
export const observe = (c: Runtime.Container): ObservedContainer => {
  const s = c.status
  const startedAtMs = ms(s.startedAt)
  const finishedAtMs = ms(s.finishedAt)
  return {
    id: c.id,
    name: c.spec.name,
    attempt: c.spec.attempt,
    init: c.spec.labels?.[Labels.init] === "true",
    hash: c.spec.labels?.[Labels.specHash] ?? "",
    state: s.state,
    ...(s.exitCode === undefined ? {} : { exitCode: s.exitCode }),
    ...(s.reason === undefined ? {} : { reason: s.reason }),
    ...(s.message === undefined ? {} : { message: s.message }),
    ...(s.signal === undefined ? {} : { signal: s.signal }),
    createdAtMs: ms(c.createdAt) ?? 0,
    ...(startedAtMs === undefined ? {} : { startedAtMs }),
    ...(finishedAtMs === undefined ? {} : { finishedAtMs }),
    ...(c.spec.image === undefined ? {} : { image: c.spec.image }),
    ...(c.imageRef === undefined ? {} : { imageRef: c.imageRef })
  }
}
