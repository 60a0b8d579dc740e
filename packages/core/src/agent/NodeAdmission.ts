/**
 * Node admission, as the kubelet's resource predicate: a pod bound to this node is admitted only
 * if its requests (containers, init containers, overhead; as the scheduler counts them) fit the
 * node's allocatable minus what the pods already admitted here request. A pod that does not fit
 * fails for good with the kubelet's reason and message, e.g. reason `OutOfcpu`, message
 * `Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: 500, capacity: 2000`
 * (CPU in millicores, memory and storage in bytes). Checked in the kubelet's order: pods, cpu,
 * memory, ephemeral-storage, then extended resources; the first shortage is the reason.
 *
 * Then limits (`limits`): a pod with cpu or memory limits on a node whose runtime cannot enforce
 * them (no cgroup controllers: `Runtime.Capabilities.limits`) fails with reason
 * `UnenforceableLimits`, unless the node runs them unenforced (`--allow-unenforced-limits`): it is
 * then admitted, and the agent says in a Warning Event (`LimitsNotEnforced`) that its limits are not
 * applied. A limit the node silently ignored let a 64 Mi pod grow to 700 MB.
 */
import type { JsonObject } from "../object/Json.js"
import * as Views from "../object/Views.js"
import * as Snapshot from "../scheduler/Snapshot.js"

/** Admitted, or refused with the pod status reason and message. */
export type Verdict = { readonly admit: true } | { readonly admit: false; readonly reason: string; readonly message: string }

const admitted: Verdict = { admit: true }

// A node admits each new pod against all it runs: the requests of a pod object are computed once
// (a burst of N pods would otherwise parse every running pod's quantities N times over).
const requestsCache = new WeakMap<JsonObject, Snapshot.PodInfo["requests"]>()
const requestsOf = (pod: JsonObject): Snapshot.PodInfo["requests"] => {
  let r = requestsCache.get(pod)
  if (r === undefined) {
    r = Snapshot.podInfo(pod).requests
    requestsCache.set(pod, r)
  }
  return r
}

const refuse = (resource: string, requested: number, used: number, capacity: number): Verdict => ({
  admit: false,
  reason: `OutOf${resource}`,
  message: `Pod was rejected: Node didn't have enough resource: ${resource}, requested: ${requested}, used: ${used}, capacity: ${capacity}`
})

/**
 * Whether `pod` may run on a node with `allocatable` (a ResourceList) beside `running` (the pods
 * admitted before it that have not finished).
 */
export const decide = (pod: JsonObject, allocatable: unknown, running: ReadonlyArray<JsonObject>): Verdict => {
  const capacity = Snapshot.resources.fromList(allocatable)
  const want = requestsOf(pod)
  let used = Snapshot.resources.zero
  for (const p of running) used = Snapshot.resources.add(used, requestsOf(p))
  const pods = running.length
  if (capacity.pods > 0 && pods + 1 > capacity.pods) return refuse("pods", 1, pods, capacity.pods)
  if (want.milliCpu > 0 && used.milliCpu + want.milliCpu > capacity.milliCpu) return refuse("cpu", want.milliCpu, used.milliCpu, capacity.milliCpu)
  if (want.memory > 0 && used.memory + want.memory > capacity.memory) return refuse("memory", want.memory, used.memory, capacity.memory)
  if (want.ephemeralStorage > 0 && used.ephemeralStorage + want.ephemeralStorage > capacity.ephemeralStorage) {
    return refuse("ephemeral-storage", want.ephemeralStorage, used.ephemeralStorage, capacity.ephemeralStorage)
  }
  for (const name of Object.keys(want.scalar).sort()) {
    const w = want.scalar[name] ?? 0
    const u = used.scalar[name] ?? 0
    const c = capacity.scalar[name] ?? 0
    if (w > 0 && u + w > c) return refuse(name, w, u, c)
  }
  return admitted
}

/** The reason of a pod refused for limits the node cannot enforce. */
export const unenforceableReason = "UnenforceableLimits"

/** The reason of the Warning Event of a pod that runs with limits the node does not enforce. */
export const notEnforcedReason = "LimitsNotEnforced"

/** Which limits the node's runtime enforces (`Runtime.Capabilities.limits`). */
export interface Enforced {
  readonly cpu: boolean
  readonly memory: boolean
}

/** The kinds of limit (`cpu`, `memory`) `pod`'s containers set that the node does not enforce. */
export const unenforced = (pod: JsonObject, enforced: Enforced): ReadonlyArray<string> => {
  const spec = Views.pod(pod).spec
  const out = new Set<string>()
  for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
    const limits = c.resources?.limits
    if (limits?.["cpu"] !== undefined && !enforced.cpu) out.add("cpu")
    if (limits?.["memory"] !== undefined && !enforced.memory) out.add("memory")
  }
  return ["cpu", "memory"].filter((k) => out.has(k))
}

/**
 * Whether `pod`'s limits may run on a node enforcing `enforced`: refused when it cannot enforce
 * one of them, unless `allowUnenforced`.
 */
export const limits = (pod: JsonObject, enforced: Enforced, allowUnenforced: boolean): Verdict => {
  const missing = unenforced(pod, enforced)
  if (missing.length === 0 || allowUnenforced) return admitted
  return {
    admit: false,
    reason: unenforceableReason,
    message: `Pod was rejected: the node cannot enforce the pod's ${missing.join(" and ")} limits (its container runtime has no cgroup controller for them); an administrator may run such pods unenforced with the agent's --allow-unenforced-limits`
  }
}

/** The message of the Warning Event of a pod admitted with limits the node does not enforce. */
export const notEnforcedMessage = (missing: ReadonlyArray<string>): string =>
  `the node does not enforce this pod's ${missing.join(" and ")} limits (no cgroup controller for them; the agent runs with --allow-unenforced-limits): the containers may use more than their limits`
