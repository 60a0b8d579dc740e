/**
 * The apps/v1 workload kinds: `Deployment` (declarative rollouts over ReplicaSets),
 * `ReplicaSet` (keeps N pods matching a selector), `StatefulSet` (pods with stable names,
 * ordinals and per-pod claims), `DaemonSet` (one pod per eligible node) and
 * `ControllerRevision` (an immutable snapshot of a template, for StatefulSet and DaemonSet
 * history). Each workload requires a selector that matches its pod template's labels, or the
 * controller would adopt nothing it creates.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { IntOrPercent, type IntOrString } from "./IntOrString.js"
import * as LabelSelectorModule from "./LabelSelector.js"
import { ConditionStatus, makeObjectMeta, ObjectMeta } from "./Meta.js"
import { PodTemplateSpec } from "./Pod.js"
import { Int32, Int64, NonNegativeInt32, NonNegativeInt64, Time } from "./Scalars.js"
import * as Validation from "./Validation.js"
import * as Volume from "./Volume.js"

const { LabelSelector } = LabelSelectorModule

/**
 * Errors for a workload whose selector is empty or does not select its own template, worded
 * like kube-apiserver. Exported for the registry's update validation.
 */
export const validateSelectorMatchesTemplate = (
  kind: string,
  selector: LabelSelectorModule.LabelSelector,
  template: PodTemplateSpec,
  path = "spec"
): ReadonlyArray<FieldError.FieldError> => {
  if (LabelSelectorModule.isEmpty(selector)) {
    return [FieldError.invalid(FieldError.joinPath(path, "selector"), selector, `empty selector is invalid for ${kind}`)]
  }
  const labels = template.metadata?.labels ?? {}
  return LabelSelectorModule.compile(selector)(labels)
    ? []
    : [FieldError.invalid(FieldError.joinPath(path, "template.metadata.labels"), labels, "`selector` does not match template `labels`")]
}

// The schema filters report relative to the spec; the same check, as filter issues.
const selectorIssues = (kind: string) => (spec: { selector: LabelSelectorModule.LabelSelector; template: PodTemplateSpec }) =>
  validateSelectorMatchesTemplate(kind, spec.selector, spec.template, "").map((e) => ({
    path: e.path.split("."),
    message: e.message
  }))

/** How a Deployment replaces old pods: all at once, or a bounded rolling update. */
export const DeploymentStrategy = Schema.Struct({
  type: optional(Schema.Literal("RollingUpdate", "Recreate")),
  rollingUpdate: optional(
    Schema.Struct({
      maxUnavailable: optional(IntOrPercent),
      maxSurge: optional(IntOrPercent)
    })
  )
})

/** A deployment strategy. */
export type DeploymentStrategy = typeof DeploymentStrategy.Type

/** The desired state of a Deployment. */
export const DeploymentSpec = Schema.Struct({
  replicas: optional(NonNegativeInt32),
  selector: LabelSelector,
  template: PodTemplateSpec,
  strategy: optional(DeploymentStrategy),
  minReadySeconds: optional(NonNegativeInt32),
  revisionHistoryLimit: optional(NonNegativeInt32),
  paused: optional(Schema.Boolean),
  progressDeadlineSeconds: optional(Int32.pipe(Schema.filter((n) => n > 0 || "must be greater than 0")))
}).pipe(Schema.filter(selectorIssues("deployment")))

/** A deployment spec. */
export type DeploymentSpec = typeof DeploymentSpec.Type

/** A Deployment condition such as `Available` or `Progressing`. */
export const DeploymentCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  lastUpdateTime: optional(Time),
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** A deployment condition. */
export type DeploymentCondition = typeof DeploymentCondition.Type

/** The observed state of a Deployment. */
export const DeploymentStatus = Schema.Struct({
  observedGeneration: optional(Int64),
  replicas: optional(NonNegativeInt32),
  updatedReplicas: optional(NonNegativeInt32),
  readyReplicas: optional(NonNegativeInt32),
  availableReplicas: optional(NonNegativeInt32),
  unavailableReplicas: optional(NonNegativeInt32),
  conditions: optional(Schema.Array(DeploymentCondition)),
  collisionCount: optional(Int32)
})

/** A deployment status. */
export type DeploymentStatus = typeof DeploymentStatus.Type

/** The `Deployment` kind. */
export const Deployment = Schema.Struct({
  apiVersion: Schema.Literal("apps/v1"),
  kind: Schema.Literal("Deployment"),
  metadata: ObjectMeta,
  spec: DeploymentSpec,
  status: optional(DeploymentStatus)
})

/** A Deployment object. */
export type Deployment = typeof Deployment.Type

/** The desired state of a ReplicaSet. */
export const ReplicaSetSpec = Schema.Struct({
  replicas: optional(NonNegativeInt32),
  selector: LabelSelector,
  template: PodTemplateSpec,
  minReadySeconds: optional(NonNegativeInt32)
}).pipe(Schema.filter(selectorIssues("replicaset")))

/** A replica set spec. */
export type ReplicaSetSpec = typeof ReplicaSetSpec.Type

/** A ReplicaSet condition such as `ReplicaFailure`. */
export const ReplicaSetCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** The observed state of a ReplicaSet. */
export const ReplicaSetStatus = Schema.Struct({
  replicas: NonNegativeInt32,
  fullyLabeledReplicas: optional(NonNegativeInt32),
  readyReplicas: optional(NonNegativeInt32),
  availableReplicas: optional(NonNegativeInt32),
  observedGeneration: optional(Int64),
  conditions: optional(Schema.Array(ReplicaSetCondition))
})

/** A replica set status. */
export type ReplicaSetStatus = typeof ReplicaSetStatus.Type

/** The `ReplicaSet` kind. */
export const ReplicaSet = Schema.Struct({
  apiVersion: Schema.Literal("apps/v1"),
  kind: Schema.Literal("ReplicaSet"),
  metadata: ObjectMeta,
  spec: ReplicaSetSpec,
  status: optional(ReplicaSetStatus)
})

/** A ReplicaSet object. */
export type ReplicaSet = typeof ReplicaSet.Type

// ---- Shared by StatefulSet and DaemonSet ---------------------------------------------------

/** A workload condition (StatefulSet, DaemonSet). */
export const WorkloadCondition = ReplicaSetCondition

const percentOf = (v: IntOrString): number | undefined => (typeof v === "string" && /^[0-9]+%$/.test(v) ? Number(v.slice(0, -1)) : undefined)
const intOrPercentValue = (v: IntOrString): number => percentOf(v) ?? (typeof v === "number" ? v : 0)

const notMoreThan100Percent = (v: IntOrString, path: string): ReadonlyArray<FieldError.FieldError> =>
  (percentOf(v) ?? 0) > 100 ? [FieldError.invalid(path, v, "must not be greater than 100%")] : []

/**
 * Pod template rules of controllers whose pods must keep running: `restartPolicy` must be
 * `Always` (after defaulting) and `activeDeadlineSeconds` is forbidden.
 */
const validateAlwaysRunningTemplate = (kind: string, template: PodTemplateSpec): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const policy = template.spec.restartPolicy ?? "Always"
  if (policy !== "Always") errors.push(FieldError.notSupported("spec.template.spec.restartPolicy", policy, ["Always"]))
  if (template.spec.activeDeadlineSeconds !== undefined) {
    errors.push(FieldError.forbidden("spec.template.spec.activeDeadlineSeconds", `activeDeadlineSeconds in ${kind} is not Supported`))
  }
  return errors
}

// ---- StatefulSet ---------------------------------------------------------------------------

/** How a StatefulSet creates and deletes its pods: one at a time in order, or all at once. */
export const PodManagementPolicy = Schema.String.pipe(
  Schema.filter((s): s is "OrderedReady" | "Parallel" => s === "OrderedReady" || s === "Parallel", {
    message: () => "must be 'OrderedReady' or 'Parallel'"
  })
)

/** Rolling-update parameters: pods with an ordinal below `partition` keep the old revision. */
export const RollingUpdateStatefulSetStrategy = Schema.Struct({
  partition: optional(NonNegativeInt32),
  maxUnavailable: optional(IntOrPercent)
})

/** How a StatefulSet replaces pods after a template change. */
export const StatefulSetUpdateStrategy = Schema.Struct({
  type: optional(
    Schema.String.pipe(
      Schema.filter((s): s is "RollingUpdate" | "OnDelete" => s === "RollingUpdate" || s === "OnDelete", {
        message: () => "must be 'RollingUpdate' or 'OnDelete'"
      })
    )
  ),
  rollingUpdate: optional(RollingUpdateStatefulSetStrategy)
})

/** A StatefulSet update strategy. */
export type StatefulSetUpdateStrategy = typeof StatefulSetUpdateStrategy.Type

/** Whether a StatefulSet's claims outlive it (`whenDeleted`) or its scale-down (`whenScaled`). */
export const PersistentVolumeClaimRetentionPolicyType = Schema.Literal("Retain", "Delete")

/** What happens to the claims made from `volumeClaimTemplates`. */
export const StatefulSetPersistentVolumeClaimRetentionPolicy = Schema.Struct({
  whenDeleted: optional(PersistentVolumeClaimRetentionPolicyType),
  whenScaled: optional(PersistentVolumeClaimRetentionPolicyType)
})

/** The desired state of a StatefulSet. */
export const StatefulSetSpec = Schema.Struct({
  replicas: optional(NonNegativeInt32),
  selector: LabelSelector,
  template: PodTemplateSpec,
  volumeClaimTemplates: optional(Schema.Array(Volume.PersistentVolumeClaimTemplate)),
  serviceName: optional(Schema.String),
  podManagementPolicy: optional(PodManagementPolicy),
  updateStrategy: optional(StatefulSetUpdateStrategy),
  revisionHistoryLimit: optional(NonNegativeInt32),
  minReadySeconds: optional(NonNegativeInt32),
  persistentVolumeClaimRetentionPolicy: optional(StatefulSetPersistentVolumeClaimRetentionPolicy),
  ordinals: optional(Schema.Struct({ start: optional(NonNegativeInt32) }))
}).pipe(Schema.filter(selectorIssues("statefulset")))

/** A StatefulSet spec. */
export type StatefulSetSpec = typeof StatefulSetSpec.Type

// Status counters Go serialises without omitempty are optional here: a client that sends
// `status: {}` (or omits a zero) means 0, as it does to kube-apiserver.

/** The observed state of a StatefulSet. */
export const StatefulSetStatus = Schema.Struct({
  observedGeneration: optional(Int64),
  replicas: optional(NonNegativeInt32),
  readyReplicas: optional(NonNegativeInt32),
  currentReplicas: optional(NonNegativeInt32),
  updatedReplicas: optional(NonNegativeInt32),
  availableReplicas: optional(NonNegativeInt32),
  currentRevision: optional(Schema.String),
  updateRevision: optional(Schema.String),
  collisionCount: optional(NonNegativeInt32),
  conditions: optional(Schema.Array(WorkloadCondition))
})

/** A StatefulSet status. */
export type StatefulSetStatus = typeof StatefulSetStatus.Type

/**
 * StatefulSet metadata: the name is a DNS-1123 label, since it prefixes each pod's name and
 * hostname (`web-0`).
 */
export const StatefulSetMeta = makeObjectMeta(Validation.isDNS1123Label)

/** The `StatefulSet` kind. */
export const StatefulSet = Schema.Struct({
  apiVersion: Schema.Literal("apps/v1"),
  kind: Schema.Literal("StatefulSet"),
  metadata: StatefulSetMeta,
  spec: StatefulSetSpec,
  status: optional(StatefulSetStatus)
})

/** A StatefulSet object. */
export type StatefulSet = typeof StatefulSet.Type

/** Errors of a (defaulted) StatefulSet beyond its schema, worded like kube-apiserver. */
export const validateStatefulSet = (sts: StatefulSet): ReadonlyArray<FieldError.FieldError> => {
  const spec = sts.spec
  const errors: Array<FieldError.FieldError> = []
  const strategy = spec.updateStrategy
  if (strategy?.type === "OnDelete" && strategy.rollingUpdate !== undefined) {
    errors.push(FieldError.invalid("spec.updateStrategy.rollingUpdate", strategy.rollingUpdate, "only allowed for updateStrategy 'RollingUpdate'"))
  }
  const maxUnavailable = strategy?.type === "RollingUpdate" ? strategy.rollingUpdate?.maxUnavailable : undefined
  if (maxUnavailable !== undefined) {
    const path = "spec.updateStrategy.rollingUpdate.maxUnavailable"
    if (intOrPercentValue(maxUnavailable) === 0) errors.push(FieldError.invalid(path, maxUnavailable, "cannot be 0"))
    errors.push(...notMoreThan100Percent(maxUnavailable, path))
  }
  spec.volumeClaimTemplates?.forEach((t, i) => {
    if (t.metadata.name === undefined || t.metadata.name === "") errors.push(FieldError.required(`spec.volumeClaimTemplates[${i}].metadata.name`))
  })
  errors.push(...validateAlwaysRunningTemplate("StatefulSet", spec.template))
  return errors
}

/** The StatefulSet spec fields an update may change. */
export const statefulSetMutableFields = [
  "replicas",
  "ordinals",
  "template",
  "updateStrategy",
  "persistentVolumeClaimRetentionPolicy",
  "minReadySeconds",
  "revisionHistoryLimit"
] as const

/**
 * Errors of a StatefulSet update: only the fields in `statefulSetMutableFields` may change
 * (kube-apiserver's message still names the six it has always named).
 */
export const validateStatefulSetUpdate = (sts: StatefulSet, old: StatefulSet): ReadonlyArray<FieldError.FieldError> => {
  const frozen = (spec: StatefulSetSpec) => {
    const rest: Record<string, unknown> = { ...spec }
    for (const f of statefulSetMutableFields) delete rest[f]
    return canonicalJson(rest)
  }
  return frozen(sts.spec) === frozen(old.spec)
    ? []
    : [
        FieldError.forbidden(
          "spec",
          "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
        )
      ]
}

// ---- DaemonSet -----------------------------------------------------------------------------

/** Rolling-update parameters: exactly one of `maxUnavailable` and `maxSurge` is non-zero. */
export const RollingUpdateDaemonSet = Schema.Struct({
  maxUnavailable: optional(IntOrPercent),
  maxSurge: optional(IntOrPercent)
})

/** How a DaemonSet replaces pods after a template change. */
export const DaemonSetUpdateStrategy = Schema.Struct({
  type: optional(Schema.Literal("RollingUpdate", "OnDelete")),
  rollingUpdate: optional(RollingUpdateDaemonSet)
})

/** A DaemonSet update strategy. */
export type DaemonSetUpdateStrategy = typeof DaemonSetUpdateStrategy.Type

/** The desired state of a DaemonSet. */
export const DaemonSetSpec = Schema.Struct({
  selector: LabelSelector,
  template: PodTemplateSpec,
  updateStrategy: optional(DaemonSetUpdateStrategy),
  minReadySeconds: optional(NonNegativeInt32),
  revisionHistoryLimit: optional(NonNegativeInt32)
}).pipe(Schema.filter(selectorIssues("daemonset")))

/** A DaemonSet spec. */
export type DaemonSetSpec = typeof DaemonSetSpec.Type

/** The observed state of a DaemonSet. */
export const DaemonSetStatus = Schema.Struct({
  currentNumberScheduled: optional(NonNegativeInt32),
  numberMisscheduled: optional(NonNegativeInt32),
  desiredNumberScheduled: optional(NonNegativeInt32),
  numberReady: optional(NonNegativeInt32),
  observedGeneration: optional(NonNegativeInt64),
  updatedNumberScheduled: optional(NonNegativeInt32),
  numberAvailable: optional(NonNegativeInt32),
  numberUnavailable: optional(NonNegativeInt32),
  collisionCount: optional(NonNegativeInt32),
  conditions: optional(Schema.Array(WorkloadCondition))
})

/** A DaemonSet status. */
export type DaemonSetStatus = typeof DaemonSetStatus.Type

/** The `DaemonSet` kind. */
export const DaemonSet = Schema.Struct({
  apiVersion: Schema.Literal("apps/v1"),
  kind: Schema.Literal("DaemonSet"),
  metadata: ObjectMeta,
  spec: DaemonSetSpec,
  status: optional(DaemonSetStatus)
})

/** A DaemonSet object. */
export type DaemonSet = typeof DaemonSet.Type

/** Errors of a (defaulted) DaemonSet beyond its schema, worded like kube-apiserver. */
export const validateDaemonSet = (ds: DaemonSet): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = [...validateAlwaysRunningTemplate("DaemonSet", ds.spec.template)]
  const strategy = ds.spec.updateStrategy
  if (strategy?.type === "RollingUpdate") {
    const path = "spec.updateStrategy.rollingUpdate"
    const ru = strategy.rollingUpdate
    if (ru === undefined) return [...errors, FieldError.required(path)]
    const maxUnavailable = ru.maxUnavailable ?? 0
    const maxSurge = ru.maxSurge ?? 0
    errors.push(...notMoreThan100Percent(maxUnavailable, `${path}.maxUnavailable`), ...notMoreThan100Percent(maxSurge, `${path}.maxSurge`))
    const hasUnavailable = intOrPercentValue(maxUnavailable) !== 0
    const hasSurge = intOrPercentValue(maxSurge) !== 0
    if (hasUnavailable && hasSurge) errors.push(FieldError.invalid(`${path}.maxSurge`, maxSurge, "may not be set when maxUnavailable is non-zero"))
    if (!hasUnavailable && !hasSurge) errors.push(FieldError.required(`${path}.maxUnavailable`, "cannot be 0 when maxSurge is 0"))
  }
  return errors
}

/** Errors of a DaemonSet update: the selector is immutable. */
export const validateDaemonSetUpdate = (ds: DaemonSet, old: DaemonSet): ReadonlyArray<FieldError.FieldError> =>
  canonicalJson(ds.spec.selector) === canonicalJson(old.spec.selector) ? [] : [FieldError.invalid("spec.selector", ds.spec.selector, "field is immutable")]

// ---- ControllerRevision --------------------------------------------------------------------

/**
 * The `ControllerRevision` kind: `data` is the serialized state (a patch of the template) a
 * StatefulSet or DaemonSet can roll back to, `revision` its sequence number.
 */
export const ControllerRevision = Schema.Struct({
  apiVersion: Schema.Literal("apps/v1"),
  kind: Schema.Literal("ControllerRevision"),
  metadata: ObjectMeta,
  data: optional(Schema.Unknown),
  revision: NonNegativeInt64
})

/** A ControllerRevision object. */
export type ControllerRevision = typeof ControllerRevision.Type

/** Errors of a ControllerRevision: `data` is mandatory. */
export const validateControllerRevision = (cr: ControllerRevision): ReadonlyArray<FieldError.FieldError> =>
  cr.data === undefined || cr.data === null ? [FieldError.required("data", "data is mandatory")] : []

/**
 * Errors of a ControllerRevision update: `data` is immutable. `revision` is not: a controller
 * rolling back to an equal template renumbers the existing revision instead of copying it.
 */
export const validateControllerRevisionUpdate = (cr: ControllerRevision, old: ControllerRevision): ReadonlyArray<FieldError.FieldError> =>
  canonicalJson(cr.data) === canonicalJson(old.data) ? [] : [FieldError.invalid("data", cr.data ?? null, "field is immutable")]

// Key-order-independent JSON text, for comparing decoded values.
const canonicalJson = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    typeof x === "object" && x !== null && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x
  ) ?? "undefined"
