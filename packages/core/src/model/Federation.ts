/**
 * The hub's kinds (`federation.fleet.koder.dev/v1alpha1`, served by `koder-fleet hub` only):
 *
 * - `MemberCluster` (cluster-scoped): one member cluster in the hub's registry. Its spec says how
 *   the hub reaches it (`syncMode` Pull: the member dials out; Push: the hub dials the member's
 *   `apiEndpoint` with the kubeconfig in `secretRef`), where it is (region, zone, provider) and
 *   its taints (the hub's own `federation.fleet.koder.dev/unreachable` among them). Its status is
 *   written by the member (or, in Push mode, by the hub for it): conditions Joined and Ready, the
 *   capacity, allocatable and allocated resources summed over its nodes, node counts, its Fleet
 *   version, the last heartbeat.
 * - `Work` (namespaced, in the member's namespace `fleet-member-<name>`): manifests for one member
 *   to apply. The member applies them with its own field manager, reports each one's condition
 *   (Applied, Available) and deletes what leaves the Work; `metadata.generation` fences stale
 *   copies (a member acts only on the newest generation it has seen).
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { ConditionStatus, ObjectMeta } from "./Meta.js"
import { Taint } from "./Node.js"
import { Time } from "./Scalars.js"
import * as Validation from "./Validation.js"

/** A condition as `metav1.Condition` (type, status, reason, message, when, for which generation). */
export const Condition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  reason: optional(Schema.String),
  message: optional(Schema.String),
  lastTransitionTime: optional(Time),
  observedGeneration: optional(Schema.Number)
})

/** A condition. */
export type Condition = typeof Condition.Type

/** The API group of the hub's kinds. */
export const Group = "federation.fleet.koder.dev"

/** The version served. */
export const Version = "v1alpha1"

/** `apiVersion` of the hub's kinds. */
export const ApiVersion = `${Group}/${Version}` as const

/** How a member and the hub talk: the member dials the hub (Pull), or the hub dials the member (Push). */
export const SyncMode = Schema.Literal("Pull", "Push")

/** A sync mode. */
export type SyncMode = typeof SyncMode.Type

/** Where the hub finds a Secret (Push mode: the member's kubeconfig under `kubeconfig`). */
export const SecretReference = Schema.Struct({ namespace: Schema.String, name: Schema.String })

/** What the hub knows of a member, and how to reach it. */
export const MemberClusterSpec = Schema.Struct({
  syncMode: SyncMode,
  /** The member's API (`https://host:port`); needed in Push mode. */
  apiEndpoint: optional(Schema.String),
  secretRef: optional(SecretReference),
  region: optional(Schema.String),
  zone: optional(Schema.String),
  provider: optional(Schema.String),
  taints: optional(Schema.Array(Taint)),
  /** Kept from new placements (an operator's cordon of the whole member). */
  unschedulable: optional(Schema.Boolean)
})

/** A MemberCluster spec. */
export type MemberClusterSpec = typeof MemberClusterSpec.Type

/** Resources summed over a member's nodes (quantities, as a Node's). */
export const MemberResources = Schema.Struct({
  capacity: optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  allocatable: optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** Requests of the pods bound to its nodes and not finished. */
  allocated: optional(Schema.Record({ key: Schema.String, value: Schema.String }))
})

/** Nodes of one resource shape (the global scheduler estimates replicas from these). */
export const NodeModel = Schema.Struct({
  /** Allocatable of one such node. */
  allocatable: Schema.Record({ key: Schema.String, value: Schema.String }),
  /** Left free on the emptiest node of this shape. */
  free: optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  count: Schema.Number
})

/** What a member reports. */
export const MemberClusterStatus = Schema.Struct({
  conditions: optional(Schema.Array(Condition)),
  fleetVersion: optional(Schema.String),
  kubernetesVersion: optional(Schema.String),
  nodeCount: optional(Schema.Number),
  readyNodeCount: optional(Schema.Number),
  resources: optional(MemberResources),
  nodeModels: optional(Schema.Array(NodeModel)),
  /** The API groups/versions/resources it serves (`apps/v1/deployments`), for placement. */
  apiEnablements: optional(Schema.Array(Schema.String)),
  lastHeartbeatTime: optional(Time),
  /** The member's certificate: serial, and when it expires (renewed before). */
  /**
   * The certificates the hub accepts from it: `serial`, and `previousSerial` until `rotatedAt` +
   * MemberAuthentication.previousGraceMs; `tokenHash`: the member's own token (`sha256:<hex>`),
   * presented with the certificate on every request.
   */
  certificate: optional(Schema.Struct({ serial: optional(Schema.String), notAfter: optional(Time), previousSerial: optional(Schema.String), rotatedAt: optional(Time), tokenHash: optional(Schema.String) }))
})

/** A MemberCluster status. */
export type MemberClusterStatus = typeof MemberClusterStatus.Type

/** The `MemberCluster` kind (cluster-scoped, short name `mc`). */
export const MemberCluster = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("MemberCluster"),
  metadata: ObjectMeta,
  spec: MemberClusterSpec,
  status: optional(MemberClusterStatus)
})

/** A MemberCluster object. */
export type MemberCluster = typeof MemberCluster.Type

/** The hub namespace that holds a member's Works and heartbeat Lease. */
export const memberNamespace = (member: string): string => `fleet-member-${member}`

/** The member a hub namespace belongs to, if it is one. */
export const memberOfNamespace = (namespace: string): string | undefined =>
  namespace.startsWith("fleet-member-") && namespace.length > "fleet-member-".length ? namespace.slice("fleet-member-".length) : undefined

/** The taint the hub puts on a member whose heartbeat stopped: only new placements avoid it. */
export const UnreachableTaint = `${Group}/unreachable`

/** The taint on a member that reports itself not ready. */
export const NotReadyTaint = `${Group}/not-ready`

/** The user name of a member's hub identity (its certificate's CN). */
export const memberUser = (member: string): string => `system:member:${member}`

/** The group of every member identity. */
export const MembersGroup = "system:members"

/** The member a user is, when it is a member identity. */
export const memberOf = (user: { readonly name: string; readonly groups: ReadonlyArray<string> }): string | undefined =>
  user.groups.includes(MembersGroup) && user.name.startsWith("system:member:") && user.name.length > "system:member:".length ? user.name.slice("system:member:".length) : undefined

/** The label with the member's name on everything the hub writes to or about it. */
export const MemberLabel = `${Group}/member`

/**
 * On the MemberCluster of the cluster a co-located hub (`--hub`) runs beside: the hub reaches it
 * in-process, so it has no Secret with a kubeconfig.
 */
export const CoLocatedAnnotation = `${Group}/co-located`

/** Errors of a MemberCluster beyond its schema. */
export const validateMemberCluster = (mc: MemberCluster): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const name = mc.metadata.name ?? ""
  // The name goes into a namespace name (`fleet-member-<name>`): a DNS label, short enough.
  for (const d of Validation.isDNS1123Label(name)) errors.push(FieldError.invalid("metadata.name", name, d))
  if (name.length > 50) errors.push(FieldError.tooLong("metadata.name", 50, "characters"))
  if (mc.spec.syncMode === "Push") {
    if (mc.spec.apiEndpoint === undefined || mc.spec.apiEndpoint === "") errors.push(FieldError.required("spec.apiEndpoint", "Push mode needs the member's API endpoint"))
    if (mc.spec.secretRef === undefined && mc.metadata.annotations?.[CoLocatedAnnotation] !== "true") errors.push(FieldError.required("spec.secretRef", "Push mode needs the Secret with the member's kubeconfig"))
  }
  if (mc.spec.apiEndpoint !== undefined && mc.spec.apiEndpoint !== "" && !/^https:\/\/[^/\s]+\/?$/.test(mc.spec.apiEndpoint)) {
    errors.push(FieldError.invalid("spec.apiEndpoint", mc.spec.apiEndpoint, "must be https://host[:port]"))
  }
  for (const [i, t] of (mc.spec.taints ?? []).entries()) {
    if (!["NoSchedule", "PreferNoSchedule", "NoExecute"].includes(t.effect)) errors.push(FieldError.notSupported(`spec.taints[${i}].effect`, t.effect, ["NoExecute", "NoSchedule", "PreferNoSchedule"]))
  }
  return errors
}

/** What an update may not change: the sync mode. */
export const validateMemberClusterUpdate = (mc: MemberCluster, old: MemberCluster): ReadonlyArray<FieldError.FieldError> =>
  mc.spec.syncMode === old.spec.syncMode ? validateMemberCluster(mc) : [FieldError.invalid("spec.syncMode", mc.spec.syncMode, "field is immutable"), ...validateMemberCluster(mc)]

// ---- Work ---------------------------------------------------------------------------------

/** One manifest's identity in a Work's status. */
export const ResourceIdentifier = Schema.Struct({
  ordinal: Schema.Number,
  group: Schema.String,
  version: Schema.String,
  kind: Schema.String,
  resource: optional(Schema.String),
  namespace: optional(Schema.String),
  name: Schema.String
})

/** A manifest's conditions on the member (Applied, Available), and what it reported. */
export const ManifestCondition = Schema.Struct({
  resourceMeta: ResourceIdentifier,
  conditions: optional(Schema.Array(Condition)),
  /** A few status fields of the applied object (replicas, readyReplicas, availableReplicas, phase). */
  statusFeedback: optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

/** The manifests of a Work. */
export const WorkSpec = Schema.Struct({
  workload: Schema.Struct({ manifests: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown })) }),
  /** Orphan: what leaves the Work (or the Work itself when deleted) stays on the member. */
  deleteOption: optional(Schema.Struct({ propagationPolicy: Schema.Literal("Foreground", "Orphan") }))
})

/** The `Work` kind (namespaced, in the member's hub namespace). */
export const Work = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("Work"),
  metadata: ObjectMeta,
  spec: WorkSpec,
  status: optional(
    Schema.Struct({
      conditions: optional(Schema.Array(Condition)),
      manifestConditions: optional(Schema.Array(ManifestCondition)),
      /** The Work generation the member last applied. */
      observedGeneration: optional(Schema.Number)
    })
  )
})

/** A Work object. */
export type Work = typeof Work.Type

/** Errors of a Work: every manifest names apiVersion, kind and metadata.name. */
export const validateWork = (w: Work): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (memberOfNamespace(w.metadata.namespace ?? "") === undefined) {
    errors.push(FieldError.invalid("metadata.namespace", w.metadata.namespace ?? "", "a Work lives in a member's namespace (fleet-member-<member>)"))
  }
  const seen = new Set<string>()
  for (const [i, m] of w.spec.workload.manifests.entries()) {
    const path = `spec.workload.manifests[${i}]`
    const meta = (m["metadata"] ?? {}) as Record<string, unknown>
    if (typeof m["apiVersion"] !== "string" || m["apiVersion"] === "") errors.push(FieldError.required(`${path}.apiVersion`))
    if (typeof m["kind"] !== "string" || m["kind"] === "") errors.push(FieldError.required(`${path}.kind`))
    if (typeof meta["name"] !== "string" || meta["name"] === "") errors.push(FieldError.required(`${path}.metadata.name`))
    const key = `${String(m["apiVersion"])}/${String(m["kind"])}/${String(meta["namespace"] ?? "")}/${String(meta["name"])}`
    if (seen.has(key)) errors.push(FieldError.duplicate(path, key))
    seen.add(key)
  }
  return errors
}
