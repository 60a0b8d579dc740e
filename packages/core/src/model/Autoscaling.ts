/**
 * The `autoscaling/v2` kind: `HorizontalPodAutoscaler`, which scales a workload's `/scale`
 * (Deployment, ReplicaSet, StatefulSet) between `minReplicas` and `maxReplicas` so that the
 * metrics it names stay at their targets, at the pace its `behavior` allows. Defaults and
 * validation are kube-apiserver's (SetDefaults_HorizontalPodAutoscaler, ValidateHorizontalPodAutoscaler),
 * worded as it words them. Enumerations (`type`, `selectPolicy`) are plain strings in the schema
 * so that a wrong value is reported with upstream's "Unsupported value" message, not a schema one.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { LabelSelector } from "./LabelSelector.js"
import { ConditionStatus, ObjectMeta } from "./Meta.js"
import * as Quantity from "./Quantity.js"
import { Int32, Int64, Time } from "./Scalars.js"

/** The group/version of the kind. */
export const ApiVersion = "autoscaling/v2"

/** The utilization target a HorizontalPodAutoscaler without metrics gets (cpu, percent of request). */
export const DefaultCpuUtilization = 80

/** The largest allowed scaling policy period, in seconds. */
export const MaxPeriodSeconds = 1800

/** The largest allowed stabilization window, in seconds. */
export const MaxStabilizationWindowSeconds = 3600

// ---- Spec ------------------------------------------------------------------------------------

/** A reference to the scaled object: kind and name, in the HorizontalPodAutoscaler's namespace. */
export const CrossVersionObjectReference = Schema.Struct({
  kind: Schema.String,
  name: Schema.String,
  apiVersion: optional(Schema.String)
})

/** A reference to the scaled object. */
export type CrossVersionObjectReference = typeof CrossVersionObjectReference.Type

/** A metric's target: a value, an average value per pod, or an average utilization (percent of request). */
export const MetricTarget = Schema.Struct({
  type: Schema.String,
  value: optional(Quantity.QuantitySchema),
  averageValue: optional(Quantity.QuantitySchema),
  averageUtilization: optional(Int32)
})

/** A metric target. */
export type MetricTarget = typeof MetricTarget.Type

/** A resource (cpu, memory) of the scaled pods, summed over their containers. */
export const ResourceMetricSource = Schema.Struct({ name: Schema.String, target: MetricTarget })

/** A resource of one named container of the scaled pods. */
export const ContainerResourceMetricSource = Schema.Struct({ name: Schema.String, container: Schema.String, target: MetricTarget })

/** A custom or external metric by name, narrowed by a label selector. */
export const MetricIdentifier = Schema.Struct({ name: Schema.String, selector: optional(LabelSelector) })

/** A custom metric of the scaled pods (decoded; Fleet serves no custom metrics API yet). */
export const PodsMetricSource = Schema.Struct({ metric: MetricIdentifier, target: MetricTarget })

/** A custom metric of another object (decoded; Fleet serves no custom metrics API yet). */
export const ObjectMetricSource = Schema.Struct({ describedObject: CrossVersionObjectReference, target: MetricTarget, metric: MetricIdentifier })

/** A metric from outside the cluster (decoded; Fleet serves no external metrics API yet). */
export const ExternalMetricSource = Schema.Struct({ metric: MetricIdentifier, target: MetricTarget })

/** One metric to scale on: `type` names which of the source fields is set. */
export const MetricSpec = Schema.Struct({
  type: Schema.String,
  object: optional(ObjectMetricSource),
  pods: optional(PodsMetricSource),
  resource: optional(ResourceMetricSource),
  containerResource: optional(ContainerResourceMetricSource),
  external: optional(ExternalMetricSource)
})

/** A metric spec. */
export type MetricSpec = typeof MetricSpec.Type

/** At most `value` pods (or percent of the pods) may be added or removed within `periodSeconds`. */
export const HPAScalingPolicy = Schema.Struct({ type: Schema.String, value: Int32, periodSeconds: Int32 })

/** A scaling policy. */
export type HPAScalingPolicy = typeof HPAScalingPolicy.Type

/** How one direction scales: the stabilization window, the rate policies and how they combine. */
export const HPAScalingRules = Schema.Struct({
  stabilizationWindowSeconds: optional(Int32),
  selectPolicy: optional(Schema.String),
  policies: optional(Schema.Array(HPAScalingPolicy))
})

/** Scaling rules. */
export type HPAScalingRules = typeof HPAScalingRules.Type

/** The scaling behavior, up and down. */
export const HorizontalPodAutoscalerBehavior = Schema.Struct({
  scaleUp: optional(HPAScalingRules),
  scaleDown: optional(HPAScalingRules)
})

/** A scaling behavior. */
export type HorizontalPodAutoscalerBehavior = typeof HorizontalPodAutoscalerBehavior.Type

/** The desired state of a HorizontalPodAutoscaler. */
export const HorizontalPodAutoscalerSpec = Schema.Struct({
  scaleTargetRef: CrossVersionObjectReference,
  minReplicas: optional(Int32),
  maxReplicas: Int32,
  metrics: optional(Schema.Array(MetricSpec)),
  behavior: optional(HorizontalPodAutoscalerBehavior)
})

/** A HorizontalPodAutoscaler spec. */
export type HorizontalPodAutoscalerSpec = typeof HorizontalPodAutoscalerSpec.Type

// ---- Status ----------------------------------------------------------------------------------

/** The current value of a metric: whichever of value, average value and average utilization applies. */
export const MetricValueStatus = Schema.Struct({
  value: optional(Quantity.QuantitySchema),
  averageValue: optional(Quantity.QuantitySchema),
  averageUtilization: optional(Int32)
})

/** The current value of one metric of `spec.metrics`, by source type. */
export const MetricStatus = Schema.Struct({
  type: Schema.String,
  object: optional(Schema.Struct({ describedObject: CrossVersionObjectReference, metric: MetricIdentifier, current: MetricValueStatus })),
  pods: optional(Schema.Struct({ metric: MetricIdentifier, current: MetricValueStatus })),
  resource: optional(Schema.Struct({ name: Schema.String, current: MetricValueStatus })),
  containerResource: optional(Schema.Struct({ name: Schema.String, container: Schema.String, current: MetricValueStatus })),
  external: optional(Schema.Struct({ metric: MetricIdentifier, current: MetricValueStatus }))
})

/** A metric status. */
export type MetricStatus = typeof MetricStatus.Type

/** A condition: `AbleToScale`, `ScalingActive` or `ScalingLimited`. */
export const HorizontalPodAutoscalerCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** The observed state of a HorizontalPodAutoscaler. */
export const HorizontalPodAutoscalerStatus = Schema.Struct({
  observedGeneration: optional(Int64),
  lastScaleTime: optional(Time),
  currentReplicas: optional(Int32),
  desiredReplicas: optional(Int32),
  currentMetrics: optional(Schema.Array(MetricStatus)),
  conditions: optional(Schema.Array(HorizontalPodAutoscalerCondition))
})

/** A HorizontalPodAutoscaler status. */
export type HorizontalPodAutoscalerStatus = typeof HorizontalPodAutoscalerStatus.Type

/** The `HorizontalPodAutoscaler` kind (autoscaling/v2, namespaced). */
export const HorizontalPodAutoscaler = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("HorizontalPodAutoscaler"),
  metadata: ObjectMeta,
  spec: HorizontalPodAutoscalerSpec,
  status: optional(HorizontalPodAutoscalerStatus)
})

/** A HorizontalPodAutoscaler object. */
export type HorizontalPodAutoscaler = typeof HorizontalPodAutoscaler.Type

// ---- Defaults --------------------------------------------------------------------------------

type Json = Record<string, unknown>
const obj = (v: unknown): Json | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : undefined)

/** Upstream's scale-up rules when `behavior` is given without them: +4 pods or +100% per 15 s, whichever is more, at once. */
export const defaultScaleUp: HPAScalingRules = {
  stabilizationWindowSeconds: 0,
  selectPolicy: "Max",
  policies: [
    { type: "Pods", value: 4, periodSeconds: 15 },
    { type: "Percent", value: 100, periodSeconds: 15 }
  ]
}

/**
 * Upstream's scale-down rules when `behavior` is given without them: −100% per 15 s. The window
 * is left unset: the controller fills in its own (`--horizontal-pod-autoscaler-downscale-stabilization`, 300 s).
 */
export const defaultScaleDown: HPAScalingRules = {
  selectPolicy: "Max",
  policies: [{ type: "Percent", value: 100, periodSeconds: 15 }]
}

// copyHPAScalingRules: fields the user set win over the defaults, one by one.
const withRules = (given: unknown, defaults: HPAScalingRules): Json => {
  const g = obj(given)
  if (g === undefined) return { ...defaults }
  return {
    ...defaults,
    ...(g["selectPolicy"] !== undefined ? { selectPolicy: g["selectPolicy"] } : {}),
    ...(g["stabilizationWindowSeconds"] !== undefined ? { stabilizationWindowSeconds: g["stabilizationWindowSeconds"] } : {}),
    ...(g["policies"] !== undefined ? { policies: g["policies"] } : {})
  }
}

/**
 * autoscaling/v2 defaulting on JSON: `minReplicas` 1; no metrics means cpu at 80% of requests; a
 * `behavior` that is set gets both directions filled in (an absent `behavior` stays absent).
 */
export const defaults = <O extends Json>(o: O): O => {
  const spec = obj(o["spec"])
  if (spec === undefined) return o
  const next: Json = { ...spec }
  if (next["minReplicas"] === undefined) next["minReplicas"] = 1
  if (!Array.isArray(next["metrics"]) || next["metrics"].length === 0) {
    next["metrics"] = [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: DefaultCpuUtilization } } }]
  }
  const behavior = obj(next["behavior"])
  if (behavior !== undefined) {
    next["behavior"] = { ...behavior, scaleUp: withRules(behavior["scaleUp"], defaultScaleUp), scaleDown: withRules(behavior["scaleDown"], defaultScaleDown) }
  }
  return { ...o, spec: next }
}

// ---- Validation ------------------------------------------------------------------------------

const metricSourceTypes = ["ContainerResource", "External", "Object", "Pods", "Resource"]
const metricTargetTypes = ["AverageValue", "Utilization", "Value"]
const selectPolicies = ["Disabled", "Max", "Min"]
const policyTypes = ["Percent", "Pods"]

// Kubernetes' IsValidPathSegmentName: a name that must fit one URL path segment.
const pathSegmentErrors = (name: string): ReadonlyArray<string> => {
  if (name === "." || name === "..") return [`may not be '${name}'`]
  const errors: Array<string> = []
  for (const c of ["/", "%"]) if (name.includes(c)) errors.push(`may not contain '${c}'`)
  return errors
}

const validateReference = (ref: CrossVersionObjectReference, path: string): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  for (const field of ["kind", "name"] as const) {
    const value = ref[field]
    if (value === "") errors.push(FieldError.required(`${path}.${field}`))
    else for (const m of pathSegmentErrors(value)) errors.push(FieldError.invalid(`${path}.${field}`, value, m))
  }
  return errors
}

const sign = (q: string): number => {
  const n = Quantity.parse(q)
  return n._tag === "Right" ? (n.right.nanos > 0n ? 1 : n.right.nanos < 0n ? -1 : 0) : 0
}

const validateTarget = (t: MetricTarget, path: string): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (t.type === "") errors.push(FieldError.required(`${path}.type`, "must specify a metric target type"))
  if (!metricTargetTypes.includes(t.type)) errors.push(FieldError.invalid(`${path}.type`, t.type, "must be either Utilization, Value, or AverageValue"))
  if (t.value !== undefined && sign(t.value) !== 1) errors.push(FieldError.invalid(`${path}.value`, t.value, "must be positive"))
  if (t.averageValue !== undefined && sign(t.averageValue) !== 1) errors.push(FieldError.invalid(`${path}.averageValue`, t.averageValue, "must be positive"))
  if (t.averageUtilization !== undefined && t.averageUtilization < 1) {
    errors.push(FieldError.invalid(`${path}.averageUtilization`, t.averageUtilization, "must be greater than 0"))
  }
  return errors
}

// validateResourceSource and validateContainerResourceSource: a resource target is a utilization or an average value.
const validateResourceTarget = (t: MetricTarget, path: string): ReadonlyArray<FieldError.FieldError> => {
  const errors = [...validateTarget(t, path)]
  if (t.averageUtilization === undefined && t.averageValue === undefined) {
    errors.push(FieldError.required(`${path}.averageUtilization`, "must set either a target raw value or a target utilization"))
  }
  if (t.averageUtilization !== undefined && t.averageValue !== undefined) {
    errors.push(FieldError.forbidden(`${path}.averageValue`, "may not set both a target raw value and a target utilization"))
  }
  return errors
}

const validateMetricName = (name: string, path: string): ReadonlyArray<FieldError.FieldError> =>
  name === "" ? [FieldError.required(path, "must specify a metric name")] : []

// validatePodsSource, validateObjectSource, validateExternalSource: custom metrics take values, not utilizations.
const validatePodsTarget = (t: MetricTarget, path: string): ReadonlyArray<FieldError.FieldError> => [
  ...validateTarget(t, path),
  ...(t.averageValue === undefined ? [FieldError.required(`${path}.averageValue`, "must specify a positive target averageValue")] : [])
]

const validateObjectTarget = (t: MetricTarget, path: string): ReadonlyArray<FieldError.FieldError> => [
  ...validateTarget(t, path),
  ...(t.value === undefined && t.averageValue === undefined ? [FieldError.required(`${path}.averageValue`, "must set either a target value or averageValue")] : [])
]

const validateExternalTarget = (t: MetricTarget, path: string): ReadonlyArray<FieldError.FieldError> => [
  ...validateTarget(t, path),
  ...(t.value === undefined && t.averageValue === undefined ? [FieldError.required(`${path}.averageValue`, "must set either a target value for metric or a per-pod target")] : []),
  ...(t.value !== undefined && t.averageValue !== undefined ? [FieldError.forbidden(`${path}.value`, "may not set both a target value for metric and a per-pod target")] : [])
]

const validateMetricSpec = (m: MetricSpec, path: string): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (m.type === "") errors.push(FieldError.required(`${path}.type`, "must specify a metric source type"))
  const present = (["object", "pods", "resource", "containerResource", "external"] as const).filter((f) => m[f] !== undefined)
  if (m.resource !== undefined) {
    if (m.resource.name === "") errors.push(FieldError.required(`${path}.resource.name`, "must specify a resource name"))
    errors.push(...validateResourceTarget(m.resource.target, `${path}.resource.target`))
  }
  if (m.containerResource !== undefined) {
    const c = m.containerResource
    if (c.name === "") errors.push(FieldError.required(`${path}.containerResource.name`, "must specify a resource name"))
    if (c.container === "") errors.push(FieldError.required(`${path}.containerResource.container`, "must specify a container"))
    errors.push(...validateResourceTarget(c.target, `${path}.containerResource.target`))
  }
  if (m.pods !== undefined) {
    errors.push(...validateMetricName(m.pods.metric.name, `${path}.pods.metric.name`), ...validatePodsTarget(m.pods.target, `${path}.pods.target`))
  }
  if (m.object !== undefined) {
    errors.push(
      ...validateReference(m.object.describedObject, `${path}.object.describedObject`),
      ...validateMetricName(m.object.metric.name, `${path}.object.metric.name`),
      ...validateObjectTarget(m.object.target, `${path}.object.target`)
    )
  }
  if (m.external !== undefined) {
    errors.push(...validateMetricName(m.external.metric.name, `${path}.external.metric.name`), ...validateExternalTarget(m.external.target, `${path}.external.target`))
  }
  const expected = m.type === "ContainerResource" ? "containerResource" : m.type.toLowerCase()
  if (!metricSourceTypes.includes(m.type)) {
    errors.push(FieldError.notSupported(`${path}.type`, m.type, metricSourceTypes))
  } else if (m[expected as (typeof present)[number]] === undefined) {
    errors.push(FieldError.required(`${path}.${expected}`, "must populate information for the given metric source"))
  }
  if (present.length > 1) {
    for (const f of present) {
      if (f !== expected) errors.push(FieldError.forbidden(`${path}.${f}`, "must populate the given metric source only"))
    }
  }
  return errors
}

const validateRules = (rules: HPAScalingRules | undefined, path: string): ReadonlyArray<FieldError.FieldError> => {
  if (rules === undefined) return []
  const errors: Array<FieldError.FieldError> = []
  const window = rules.stabilizationWindowSeconds
  if (window !== undefined && window < 0) errors.push(FieldError.invalid(`${path}.stabilizationWindowSeconds`, window, "must be greater than or equal to zero"))
  if (window !== undefined && window > MaxStabilizationWindowSeconds) {
    errors.push(FieldError.invalid(`${path}.stabilizationWindowSeconds`, window, `must be less than or equal to ${MaxStabilizationWindowSeconds}`))
  }
  if (rules.selectPolicy !== undefined && !selectPolicies.includes(rules.selectPolicy)) {
    errors.push(FieldError.notSupported(`${path}.selectPolicy`, rules.selectPolicy, selectPolicies))
  }
  const policies = rules.policies ?? []
  if (policies.length === 0) errors.push(FieldError.required(`${path}.policies`, "must specify at least one Policy"))
  policies.forEach((p, i) => {
    const at = `${path}.policies[${i}]`
    if (!policyTypes.includes(p.type)) errors.push(FieldError.notSupported(`${at}.type`, p.type, policyTypes))
    if (p.value <= 0) errors.push(FieldError.invalid(`${at}.value`, p.value, "must be greater than zero"))
    if (p.periodSeconds <= 0) errors.push(FieldError.invalid(`${at}.periodSeconds`, p.periodSeconds, "must be greater than zero"))
    if (p.periodSeconds > MaxPeriodSeconds) errors.push(FieldError.invalid(`${at}.periodSeconds`, p.periodSeconds, `must be less than or equal to ${MaxPeriodSeconds}`))
  })
  return errors
}

/** Errors of a HorizontalPodAutoscaler beyond its schema, after defaulting (kube-apiserver's wording). */
export const validate = (hpa: HorizontalPodAutoscaler): ReadonlyArray<FieldError.FieldError> => {
  const spec = hpa.spec
  const errors: Array<FieldError.FieldError> = [...validateReference(spec.scaleTargetRef, "spec.scaleTargetRef")]
  if (spec.minReplicas !== undefined && spec.minReplicas < 1) {
    errors.push(FieldError.invalid("spec.minReplicas", spec.minReplicas, "must be greater than or equal to 1"))
  }
  if (spec.maxReplicas < 1) errors.push(FieldError.invalid("spec.maxReplicas", spec.maxReplicas, "must be greater than 0"))
  if (spec.minReplicas !== undefined && spec.maxReplicas < spec.minReplicas) {
    errors.push(FieldError.invalid("spec.maxReplicas", spec.maxReplicas, "must be greater than or equal to `minReplicas`"))
  }
  ;(spec.metrics ?? []).forEach((m, i) => errors.push(...validateMetricSpec(m, `spec.metrics[${i}]`)))
  if (spec.behavior !== undefined) {
    errors.push(...validateRules(spec.behavior.scaleUp, "spec.behavior.scaleUp"), ...validateRules(spec.behavior.scaleDown, "spec.behavior.scaleDown"))
  }
  return errors
}

// ---- Printing --------------------------------------------------------------------------------

/**
 * kubectl's TARGETS column (formatHPAMetrics): `cpu: 42%/80%`, `memory: 100Mi/200Mi`,
 * `<unknown>` before the first measurement; two metrics, then `+ N more...`.
 */
export const formatTargets = (hpa: Json): string => {
  const specs = Array.isArray(obj(hpa["spec"])?.["metrics"]) ? (obj(hpa["spec"])?.["metrics"] as ReadonlyArray<unknown>) : []
  const statuses = Array.isArray(obj(hpa["status"])?.["currentMetrics"]) ? (obj(hpa["status"])?.["currentMetrics"] as ReadonlyArray<unknown>) : []
  if (specs.length === 0) return "<none>"
  const list = specs.map((s, i) => {
    const spec = obj(s) ?? {}
    const type = String(spec["type"] ?? "")
    const field = type === "ContainerResource" ? "containerResource" : type.toLowerCase()
    const source = obj(spec[field]) ?? {}
    const target = obj(source["target"]) ?? {}
    const current = obj(obj(obj(statuses[i])?.[field])?.["current"]) ?? {}
    const name = type === "Resource" || type === "ContainerResource" ? String(source["name"] ?? "") : String(obj(source["metric"])?.["name"] ?? "")
    if (!["Resource", "ContainerResource", "Pods", "Object", "External"].includes(type)) return "<unknown type>"
    if (target["averageUtilization"] !== undefined || ((type === "Resource" || type === "ContainerResource") && target["averageValue"] === undefined)) {
      const now = typeof current["averageUtilization"] === "number" ? `${current["averageUtilization"]}%` : "<unknown>"
      const want = typeof target["averageUtilization"] === "number" ? `${target["averageUtilization"]}%` : "<auto>"
      return `${name}: ${now}/${want}`
    }
    const key = target["averageValue"] !== undefined ? "averageValue" : "value"
    const now = typeof current[key] === "string" ? String(current[key]) : "<unknown>"
    return `${name}: ${now}/${String(target[key] ?? "<unknown>")}`
  })
  return list.length > 2 ? `${list.slice(0, 2).join(", ")} + ${list.length - 2} more...` : list.join(", ")
}
