/**
 * The apps/v1 workload kinds: `Deployment` (declarative rollouts over ReplicaSets) and
 * `ReplicaSet` (keeps N pods matching a selector). Both require a selector that matches
 * their pod template's labels, or the controller would adopt nothing it creates.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { IntOrPercent } from "./IntOrString.js"
import * as LabelSelectorModule from "./LabelSelector.js"
import { ConditionStatus, ObjectMeta } from "./Meta.js"
import { PodTemplateSpec } from "./Pod.js"
import { Int32, Int64, NonNegativeInt32, Time } from "./Scalars.js"

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
