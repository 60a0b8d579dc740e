/**
 * The Node object an agent registers and the status it reports, and its heartbeat Lease, as pure
 * builders (the kubelet's node status setters and lease controller). The node carries the
 * well-known labels (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`, the
 * region label of DESIGN §3 and `topology.kubernetes.io/region`), the capacity and allocatable the
 * caller computed (the host minus reservations), the four kubelet conditions with
 * `lastHeartbeatTime`, addresses, the agent's port (9301) and system facts. The Lease in
 * `kube-node-lease` (named after the node, owned by it) is renewed every 10 s with a 40 s
 * duration: what the node lifecycle controller watches.
 */
import * as Conditions from "../object/Conditions.js"
import { RegionLabel } from "../model/Meta.js"
import { formatMicroTime } from "../model/Scalars.js"
import { type JsonObject, stableJson } from "../object/Json.js"
import { rfc3339 } from "../object/Metadata.js"

/** What the agent knows about its host. */
export interface Facts {
  readonly nodeName: string
  readonly hostname: string
  /** `linux`, `darwin` (Go's GOOS names). */
  readonly os: string
  /** `amd64`, `arm64` (Go's GOARCH names). */
  readonly arch: string
  /** The region label; absent: the server's default applies. */
  readonly region?: string
  /** Extra labels to register with. */
  readonly labels?: Readonly<Record<string, string>>
  /** Annotations the agent owns on its Node (e.g. its local-path root for the provisioner). */
  readonly annotations?: Readonly<Record<string, string>>
  /** Taints to register with (`--register-with-taints`). */
  readonly taints?: ReadonlyArray<{ readonly key: string; readonly value?: string; readonly effect: string }>
  readonly capacity: Readonly<Record<string, string>>
  readonly allocatable: Readonly<Record<string, string>>
  readonly internalIP: string
  /** The agent's HTTPS port (logs, exec, metrics). */
  readonly port: number
  readonly nodeInfo: {
    readonly machineID: string
    readonly systemUUID: string
    readonly bootID: string
    readonly kernelVersion: string
    readonly osImage: string
    readonly containerRuntimeVersion: string
    readonly kubeletVersion: string
  }
}

/** The namespace of node heartbeat Leases. */
export const leaseNamespace = "kube-node-lease"

/** How long a node Lease is valid (the kubelet's 40 s). */
export const leaseDurationSeconds = 40

/** How often the Lease is renewed (the kubelet's: a quarter of the duration, 10 s). */
export const renewIntervalMs = 10_000

/** The region label Kubernetes topology uses. */
export const topologyRegionLabel = "topology.kubernetes.io/region"

/** The labels of the node. */
export const labelsOf = (facts: Facts): Record<string, string> => ({
  "kubernetes.io/hostname": facts.hostname,
  "kubernetes.io/os": facts.os,
  "kubernetes.io/arch": facts.arch,
  "beta.kubernetes.io/os": facts.os,
  "beta.kubernetes.io/arch": facts.arch,
  ...(facts.region === undefined ? {} : { [RegionLabel]: facts.region, [topologyRegionLabel]: facts.region }),
  ...(facts.labels ?? {})
})

/** Why the node is or is not ready. */
export interface Health {
  /** The runtime answers. */
  readonly runtimeReady: boolean
  readonly message?: string
  /**
   * Which limits the runtime enforces (absent: unknown, no `LimitsEnforced` condition), and whether
   * pods with limits it cannot enforce run anyway (`--allow-unenforced-limits`).
   */
  readonly limits?: { readonly cpu: boolean; readonly memory: boolean; readonly allowUnenforced: boolean }
}

/** The node condition saying whether pods' cpu and memory limits are enforced on the node. */
export const limitsCondition = "LimitsEnforced"

const limitsConditionOf = (limits: NonNullable<Health["limits"]>): Omit<Conditions.Condition, "lastTransitionTime"> => {
  const missing = [...(limits.memory ? [] : ["memory"]), ...(limits.cpu ? [] : ["cpu"])]
  if (missing.length === 0) return { type: limitsCondition, status: "True", reason: "CgroupControllers", message: "the container runtime enforces cpu and memory limits" }
  const what = `the container runtime cannot enforce ${missing.join(" or ")} limits (no cgroup controller for them)`
  return limits.allowUnenforced
    ? { type: limitsCondition, status: "False", reason: "LimitsNotEnforced", message: `${what}: pods with such limits run unenforced (--allow-unenforced-limits)` }
    : { type: limitsCondition, status: "False", reason: "UnenforceableLimits", message: `${what}: pods with such limits are refused (--allow-unenforced-limits runs them unenforced)` }
}

/** The kubelet's conditions at `nowMs`, keeping transition times of `previous`. */
export const conditionsOf = (health: Health, previous: ReadonlyArray<Conditions.Condition> | undefined, nowMs: number): ReadonlyArray<Conditions.Condition> => {
  const now = rfc3339(nowMs)
  const want: ReadonlyArray<Omit<Conditions.Condition, "lastTransitionTime">> = [
    { type: "MemoryPressure", status: "False", reason: "KubeletHasSufficientMemory", message: "kubelet has sufficient memory available" },
    { type: "DiskPressure", status: "False", reason: "KubeletHasNoDiskPressure", message: "kubelet has no disk pressure" },
    { type: "PIDPressure", status: "False", reason: "KubeletHasSufficientPID", message: "kubelet has sufficient PID available" },
    health.runtimeReady
      ? { type: "Ready", status: "True", reason: "KubeletReady", message: "kubelet is posting ready status" }
      : { type: "Ready", status: "False", reason: "KubeletNotReady", message: health.message ?? "container runtime is down" },
    ...(health.limits === undefined ? [] : [limitsConditionOf(health.limits)])
  ]
  return want.map((c) => {
    const old = Conditions.get(previous, c.type)
    return { ...c, lastHeartbeatTime: now, lastTransitionTime: old !== undefined && old.status === c.status && old.lastTransitionTime !== undefined ? old.lastTransitionTime : now }
  })
}

/** A Node status as the agent writes it: a JSON object whose conditions are the kubelet's. */
export type Status = JsonObject & { readonly conditions: ReadonlyArray<Conditions.Condition> }

/** The node's status at `nowMs`. */
export const statusOf = (facts: Facts, health: Health, previous: ReadonlyArray<Conditions.Condition> | undefined, nowMs: number): Status => ({
  capacity: facts.capacity,
  allocatable: facts.allocatable,
  conditions: conditionsOf(health, previous, nowMs),
  addresses: [
    { type: "InternalIP", address: facts.internalIP },
    { type: "Hostname", address: facts.hostname }
  ],
  daemonEndpoints: { kubeletEndpoint: { Port: facts.port } },
  nodeInfo: { ...facts.nodeInfo, kubeProxyVersion: "", operatingSystem: facts.os, architecture: facts.arch }
})

/** The Node object to register. */
export const nodeObject = (facts: Facts, health: Health, nowMs: number): JsonObject => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: facts.nodeName, labels: labelsOf(facts), ...(facts.annotations === undefined ? {} : { annotations: { ...facts.annotations } }) },
  spec: facts.taints === undefined || facts.taints.length === 0 ? {} : { taints: facts.taints },
  status: statusOf(facts, health, undefined, nowMs)
})

/**
 * Whether a status report is due: something other than heartbeat times changed, or the last
 * report is older than `reportIntervalMs` (the kubelet's nodeStatusReportFrequency).
 */
export const reportDue = (current: Status | undefined, next: Status, lastReportMs: number, nowMs: number, reportIntervalMs: number): boolean => {
  if (current === undefined || nowMs - lastReportMs >= reportIntervalMs) return true
  const strip = (s: Status) =>
    stableJson({
      ...s,
      conditions: s.conditions?.map(({ lastHeartbeatTime: _h, ...c }) => c)
    })
  return strip(current) !== strip(next)
}

/** The node's heartbeat Lease, renewed at `nowMs`. */
export const leaseObject = (nodeName: string, nodeUid: string | undefined, nowMs: number): JsonObject => ({
  apiVersion: "coordination.k8s.io/v1",
  kind: "Lease",
  metadata: {
    name: nodeName,
    namespace: leaseNamespace,
    ...(nodeUid === undefined ? {} : { ownerReferences: [{ apiVersion: "v1", kind: "Node", name: nodeName, uid: nodeUid }] })
  },
  spec: { holderIdentity: nodeName, leaseDurationSeconds, renewTime: formatMicroTime(new Date(nowMs)) }
})
