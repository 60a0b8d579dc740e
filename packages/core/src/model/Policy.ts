/**
 * Admission policy kinds: v1 `LimitRange` (per-container and per-pod defaults and bounds) and
 * `ResourceQuota` (hard caps on a namespace's usage, with the usage kept in `status.used`), the
 * `admissionregistration.k8s.io/v1` webhook configurations, the `admission.k8s.io/v1`
 * `AdmissionReview` exchanged with external webhooks, and the `policy/v1` disruption kinds:
 * `PodDisruptionBudget` (how many pods of a set voluntary evictions must leave running) and the
 * `Eviction` body posted to `pods/eviction` (a request, never stored).
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional, StringMap } from "./internal/fields.js"
import { IntOrPercent } from "./IntOrString.js"
import { LabelSelector } from "./LabelSelector.js"
import { ConditionStatus, ObjectMeta } from "./Meta.js"
import { ResourceList } from "./Quantity.js"
import { Int32, Int64, NonNegativeInt32, Time } from "./Scalars.js"

// ---- LimitRange ------------------------------------------------------------------------------

/** What a LimitRange item constrains: each container, the pod as a whole, or a claim. */
export const LimitType = Schema.Literal("Container", "Pod", "PersistentVolumeClaim")

/** One bound of a LimitRange: `min`/`max`, defaults, and the limit-to-request ratio. */
export const LimitRangeItem = Schema.Struct({
  type: LimitType,
  max: optional(ResourceList),
  min: optional(ResourceList),
  default: optional(ResourceList),
  defaultRequest: optional(ResourceList),
  maxLimitRequestRatio: optional(ResourceList)
})

/** One LimitRange item. */
export type LimitRangeItem = typeof LimitRangeItem.Type

/** The `LimitRange` kind (v1). */
export const LimitRange = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("LimitRange"),
  metadata: ObjectMeta,
  spec: optional(Schema.Struct({ limits: Schema.Array(LimitRangeItem) }))
})

/** A LimitRange object. */
export type LimitRange = typeof LimitRange.Type

// ---- ResourceQuota ---------------------------------------------------------------------------

/** A scope selector requirement (`PriorityClass In [high]`); decoded, not enforced yet. */
export const ScopedResourceSelectorRequirement = Schema.Struct({
  scopeName: Schema.String,
  operator: Schema.Literal("In", "NotIn", "Exists", "DoesNotExist"),
  values: optional(Schema.Array(Schema.String))
})

/** The caps of a ResourceQuota. */
export const ResourceQuotaSpec = Schema.Struct({
  hard: optional(ResourceList),
  scopes: optional(Schema.Array(Schema.String)),
  scopeSelector: optional(Schema.Struct({ matchExpressions: optional(Schema.Array(ScopedResourceSelectorRequirement)) }))
})

/** The caps in force (`hard`, a copy of `spec.hard`) and the usage counted against them. */
export const ResourceQuotaStatus = Schema.Struct({
  hard: optional(ResourceList),
  used: optional(ResourceList)
})

/** The `ResourceQuota` kind (v1). */
export const ResourceQuota = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("ResourceQuota"),
  metadata: ObjectMeta,
  spec: optional(ResourceQuotaSpec),
  status: optional(ResourceQuotaStatus)
})

/** A ResourceQuota object. */
export type ResourceQuota = typeof ResourceQuota.Type

// ---- Webhook configurations ------------------------------------------------------------------

/** The operations a webhook rule names (`*` for all). */
export const OperationType = Schema.Literal("CREATE", "UPDATE", "DELETE", "CONNECT", "*")

/** Which requests a webhook is called for. */
export const RuleWithOperations = Schema.Struct({
  operations: optional(Schema.Array(OperationType)),
  apiGroups: optional(Schema.Array(Schema.String)),
  apiVersions: optional(Schema.Array(Schema.String)),
  resources: optional(Schema.Array(Schema.String)),
  scope: optional(Schema.Literal("Cluster", "Namespaced", "*"))
})

/** One webhook rule. */
export type RuleWithOperations = typeof RuleWithOperations.Type

/** Where a webhook listens: a URL (used here) or an in-cluster service (not supported yet). */
export const WebhookClientConfig = Schema.Struct({
  url: optional(Schema.String),
  service: optional(
    Schema.Struct({ namespace: Schema.String, name: Schema.String, path: optional(Schema.String), port: optional(Int32) })
  ),
  /** PEM CA bundle, base64 in JSON (a `[]byte`). */
  caBundle: optional(Schema.String)
})

/** A CEL match condition; decoded, not evaluated (Fleet has no CEL). */
export const MatchCondition = Schema.Struct({ name: Schema.String, expression: Schema.String })

const webhookFields = {
  name: Schema.String,
  clientConfig: WebhookClientConfig,
  rules: optional(Schema.Array(RuleWithOperations)),
  failurePolicy: optional(Schema.Literal("Ignore", "Fail")),
  matchPolicy: optional(Schema.Literal("Exact", "Equivalent")),
  namespaceSelector: optional(LabelSelector),
  objectSelector: optional(LabelSelector),
  sideEffects: Schema.Literal("None", "NoneOnDryRun", "Some", "Unknown"),
  timeoutSeconds: optional(Int32.pipe(Schema.filter((n) => (n >= 1 && n <= 30) || "must be between 1 and 30 seconds"))),
  admissionReviewVersions: Schema.Array(Schema.String),
  matchConditions: optional(Schema.Array(MatchCondition))
}

/** One mutating webhook. */
export const MutatingWebhook = Schema.Struct({
  ...webhookFields,
  reinvocationPolicy: optional(Schema.Literal("Never", "IfNeeded"))
})

/** One mutating webhook. */
export type MutatingWebhook = typeof MutatingWebhook.Type

/** One validating webhook. */
export const ValidatingWebhook = Schema.Struct(webhookFields)

/** One validating webhook. */
export type ValidatingWebhook = typeof ValidatingWebhook.Type

/** The `MutatingWebhookConfiguration` kind (admissionregistration.k8s.io/v1). */
export const MutatingWebhookConfiguration = Schema.Struct({
  apiVersion: Schema.Literal("admissionregistration.k8s.io/v1"),
  kind: Schema.Literal("MutatingWebhookConfiguration"),
  metadata: ObjectMeta,
  webhooks: optional(Schema.Array(MutatingWebhook))
})

/** A MutatingWebhookConfiguration object. */
export type MutatingWebhookConfiguration = typeof MutatingWebhookConfiguration.Type

/** The `ValidatingWebhookConfiguration` kind (admissionregistration.k8s.io/v1). */
export const ValidatingWebhookConfiguration = Schema.Struct({
  apiVersion: Schema.Literal("admissionregistration.k8s.io/v1"),
  kind: Schema.Literal("ValidatingWebhookConfiguration"),
  metadata: ObjectMeta,
  webhooks: optional(Schema.Array(ValidatingWebhook))
})

/** A ValidatingWebhookConfiguration object. */
export type ValidatingWebhookConfiguration = typeof ValidatingWebhookConfiguration.Type

// ---- AdmissionReview (admission.k8s.io/v1) ---------------------------------------------------

/** `{group, version, kind}`. */
export const GroupVersionKind = Schema.Struct({ group: Schema.String, version: Schema.String, kind: Schema.String })

/** `{group, version, resource}`. */
export const GroupVersionResource = Schema.Struct({ group: Schema.String, version: Schema.String, resource: Schema.String })

/** What the API server asks a webhook. */
export const AdmissionRequest = Schema.Struct({
  uid: Schema.String,
  kind: GroupVersionKind,
  resource: GroupVersionResource,
  subResource: optional(Schema.String),
  requestKind: optional(GroupVersionKind),
  requestResource: optional(GroupVersionResource),
  requestSubResource: optional(Schema.String),
  name: optional(Schema.String),
  namespace: optional(Schema.String),
  operation: Schema.Literal("CREATE", "UPDATE", "DELETE", "CONNECT"),
  userInfo: Schema.Struct({
    username: optional(Schema.String),
    uid: optional(Schema.String),
    groups: optional(Schema.Array(Schema.String)),
    extra: optional(Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) }))
  }),
  object: optional(Schema.Unknown),
  oldObject: optional(Schema.Unknown),
  dryRun: optional(Schema.Boolean),
  options: optional(Schema.Unknown)
})

/** An admission request. */
export type AdmissionRequest = typeof AdmissionRequest.Type

/** The part of a Status a webhook may answer with (code, reason, message). */
export const AdmissionStatus = Schema.Struct({
  code: optional(Schema.Number),
  reason: optional(Schema.String),
  message: optional(Schema.String),
  status: optional(Schema.String)
})

/** What a webhook answers. */
export const AdmissionResponse = Schema.Struct({
  uid: Schema.String,
  allowed: Schema.Boolean,
  status: optional(AdmissionStatus),
  patch: optional(Schema.String),
  patchType: optional(Schema.Literal("JSONPatch")),
  auditAnnotations: optional(StringMap),
  warnings: optional(Schema.Array(Schema.String))
})

/** An admission response. */
export type AdmissionResponse = typeof AdmissionResponse.Type

/** The envelope both ways: `request` to the webhook, `response` back. */
export const AdmissionReview = Schema.Struct({
  apiVersion: Schema.Literal("admission.k8s.io/v1"),
  kind: Schema.Literal("AdmissionReview"),
  request: optional(AdmissionRequest),
  response: optional(AdmissionResponse)
})

/** An AdmissionReview. */
export type AdmissionReview = typeof AdmissionReview.Type

// ---- PodDisruptionBudget (policy/v1) ---------------------------------------------------------

/** Whether running-but-unhealthy pods may be evicted only within budget, or always. */
export const UnhealthyPodEvictionPolicy = Schema.Literal("AlwaysAllow", "IfHealthyBudget")

/**
 * The desired state of a budget: at most one of `minAvailable` and `maxUnavailable` (an integer
 * or a percentage of the selected pods). An empty selector selects every pod of the namespace.
 */
export const PodDisruptionBudgetSpec = Schema.Struct({
  minAvailable: optional(IntOrPercent),
  maxUnavailable: optional(IntOrPercent),
  selector: optional(LabelSelector),
  unhealthyPodEvictionPolicy: optional(UnhealthyPodEvictionPolicy)
})

/** A disruption budget spec. */
export type PodDisruptionBudgetSpec = typeof PodDisruptionBudgetSpec.Type

/** A budget condition; the disruption controller maintains `DisruptionAllowed`. */
export const PodDisruptionBudgetCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  observedGeneration: optional(Int64),
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/**
 * The observed state of a budget. `disruptedPods` maps pods the eviction API has approved but
 * that are not deleted yet to the time of approval, so concurrent evictions cannot overspend.
 */
export const PodDisruptionBudgetStatus = Schema.Struct({
  observedGeneration: optional(Int64),
  disruptedPods: optional(Schema.Record({ key: Schema.String, value: Time })),
  disruptionsAllowed: optional(NonNegativeInt32),
  currentHealthy: optional(NonNegativeInt32),
  desiredHealthy: optional(NonNegativeInt32),
  expectedPods: optional(NonNegativeInt32),
  conditions: optional(Schema.Array(PodDisruptionBudgetCondition))
})

/** A disruption budget status. */
export type PodDisruptionBudgetStatus = typeof PodDisruptionBudgetStatus.Type

/** The `PodDisruptionBudget` kind (policy/v1, namespaced). */
export const PodDisruptionBudget = Schema.Struct({
  apiVersion: Schema.Literal("policy/v1"),
  kind: Schema.Literal("PodDisruptionBudget"),
  metadata: ObjectMeta,
  spec: optional(PodDisruptionBudgetSpec),
  status: optional(PodDisruptionBudgetStatus)
})

/** A PodDisruptionBudget object. */
export type PodDisruptionBudget = typeof PodDisruptionBudget.Type

const percentValue = (v: string | number): number | undefined => (typeof v === "string" && /^[0-9]+%$/.test(v) ? Number(v.slice(0, -1)) : undefined)

/** Errors of a budget beyond its schema (kube-apiserver's `ValidatePodDisruptionBudgetSpec`). */
export const validatePodDisruptionBudget = (pdb: PodDisruptionBudget): ReadonlyArray<FieldError.FieldError> => {
  const spec = pdb.spec ?? {}
  const errors: Array<FieldError.FieldError> = []
  if (spec.minAvailable !== undefined && spec.maxUnavailable !== undefined) {
    errors.push(FieldError.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
  }
  for (const field of ["minAvailable", "maxUnavailable"] as const) {
    const v = spec[field]
    const percent = v === undefined ? undefined : percentValue(v)
    if (percent !== undefined && percent > 100) errors.push(FieldError.invalid(`spec.${field}`, v, "must not be greater than 100%"))
  }
  return errors
}

// ---- Eviction (policy/v1) --------------------------------------------------------------------

/** Conditions a delete must meet (the object's uid and resourceVersion). */
export const Preconditions = Schema.Struct({
  uid: optional(Schema.String),
  resourceVersion: optional(Schema.String)
})

/** The options of a delete (the `DeleteOptions` body of DELETE, or inside an Eviction). */
export const DeleteOptions = Schema.Struct({
  apiVersion: optional(Schema.String),
  kind: optional(Schema.String),
  gracePeriodSeconds: optional(Int64),
  preconditions: optional(Preconditions),
  orphanDependents: optional(Schema.Boolean),
  propagationPolicy: optional(Schema.Literal("Orphan", "Background", "Foreground")),
  dryRun: optional(Schema.Array(Schema.String))
})

/** Delete options. */
export type DeleteOptions = typeof DeleteOptions.Type

/**
 * The `Eviction` body POSTed to `pods/{name}/eviction`: which pod (`metadata.name`, and the
 * namespace of the URL) and how to delete it. A request, not a stored kind: it is not in
 * `Kinds.all`.
 */
export const Eviction = Schema.Struct({
  apiVersion: Schema.Literal("policy/v1"),
  kind: Schema.Literal("Eviction"),
  metadata: ObjectMeta,
  deleteOptions: optional(DeleteOptions)
})

/** An Eviction request. */
export type Eviction = typeof Eviction.Type
