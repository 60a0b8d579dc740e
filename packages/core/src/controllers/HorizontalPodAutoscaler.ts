/**
 * The HorizontalPodAutoscaler controller (`autoscaling/v2`), following kube-controller-manager's
 * podautoscaler: every sync period (15 s) each HorizontalPodAutoscaler reads its target's scale
 * (Deployment, ReplicaSet or StatefulSet: `spec.replicas` and the selector), the selected pods
 * and their `metrics.k8s.io` PodMetrics, proposes a count per metric and takes the largest:
 *
 *   scale ─▶ pods + PodMetrics ─▶ per metric: ceil(ready × usage/target), 10% tolerance, unready
 *   and missing pods counted conservatively (ReplicaCalculator) ─▶ max over metrics
 *     ─▶ stabilization (recent recommendations) ─▶ rate limits (behavior policies, or ×2/+4 without
 *        behavior) ─▶ [minReplicas, maxReplicas] ─▶ write `/scale`, status, conditions, Events
 *
 * `decide` is pure: the pods, metrics and recommendation history go in, the new size, status,
 * events and history come out; `settle` adds what the scale write's outcome changes. The history
 * (recent recommendations and scale events per HorizontalPodAutoscaler) lives in memory, as
 * upstream's, so a restarted controller starts a new stabilization window from the current size.
 *
 * Conditions (`AbleToScale`, `ScalingActive`, `ScalingLimited`), their reasons and messages, the
 * Events (`SuccessfulRescale` "New size: 4; reason: cpu resource utilization (percentage of
 * request) above target", `FailedGetResourceMetric`, `FailedComputeMetricsReplicas`,
 * `FailedGetScale`, `FailedRescale`) and the `currentMetrics` entries (`type: ""` for a metric
 * that failed) are upstream's.
 *
 * Departures: only `Resource` and `ContainerResource` metrics are computed (Fleet serves no custom
 * or external metrics API: `Pods`, `Object` and `External` metrics fail as upstream's do when
 * those APIs are missing); targets are the apps/v1 kinds with a `/scale` (not custom resources);
 * no `AmbiguousSelector` check across HorizontalPodAutoscalers; the status is written with an
 * update of `/status`. A change of the spec (a new `metadata.generation`) is synced at once
 * rather than at the next period.
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import * as LabelSelector from "../model/LabelSelector.js"
import * as Quantity from "../model/Quantity.js"
import * as Conditions from "../object/Conditions.js"
import type * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import * as ReplicaCalculator from "./internal/ReplicaCalculator.js"
import { type JsonObject, asArray, asObject, stableJson } from "../object/Json.js"
import { metadataOf, rfc3339 } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"

type Condition = Conditions.Condition

/** The HorizontalPodAutoscaler resource. */
export const HorizontalPodAutoscalerRef: Client.ResourceRef = { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler" }

/** The PodMetrics resource of `metrics.k8s.io`, read through the API like upstream's metrics client. */
export const PodMetricsRef: Client.ResourceRef = { apiVersion: "metrics.k8s.io/v1beta1", plural: "pods", namespaced: true }


/** The kinds whose `/scale` the controller can drive, by `group/kind`. */
export const scalableKinds: Readonly<Record<string, Client.ResourceRef & { readonly plural: string }>> = {
  "apps/Deployment": { apiVersion: "apps/v1", kind: "Deployment", plural: "deployments" },
  "apps/ReplicaSet": { apiVersion: "apps/v1", kind: "ReplicaSet", plural: "replicasets" },
  "apps/StatefulSet": { apiVersion: "apps/v1", kind: "StatefulSet", plural: "statefulsets" }
}

/** Condition types. */
export const ConditionType = { AbleToScale: "AbleToScale", ScalingActive: "ScalingActive", ScalingLimited: "ScalingLimited" } as const

// ---- History ---------------------------------------------------------------------------------

/** A recommendation (an unstabilized desired count) and when it was made. */
export interface Recommendation {
  readonly replicas: number
  readonly timestampMs: number
}

/** A rescale by `change` pods (positive), and when. */
export interface ScaleEvent {
  readonly change: number
  readonly timestampMs: number
}

/** What the controller remembers of one HorizontalPodAutoscaler between syncs. */
export interface History {
  /** The object it belongs to: a new object with the same name starts afresh. */
  readonly uid: string
  readonly recommendations: ReadonlyArray<Recommendation>
  readonly scaleUpEvents: ReadonlyArray<ScaleEvent>
  readonly scaleDownEvents: ReadonlyArray<ScaleEvent>
}

// ---- Inputs and outputs ----------------------------------------------------------------------

/** The controller-wide knobs (kube-controller-manager's `--horizontal-pod-autoscaler-*` flags). */
export interface Settings extends ReplicaCalculator.Config {
  /** The scale-down stabilization window of HorizontalPodAutoscalers that set none (default 300 s). */
  readonly downscaleStabilizationMs: number
}

/** The upstream defaults. */
export const defaultSettings: Settings = { ...ReplicaCalculator.defaultConfig, downscaleStabilizationMs: 300_000 }

/** The target's scale: `spec.replicas`, `status.replicas` and the pod selector. */
export interface Scale {
  readonly specReplicas: number
  readonly statusReplicas: number
  readonly selector: LabelSelector.LabelSelector | undefined
}

/** What a sync observed. */
export interface Observed {
  readonly hpa: JsonObject
  /** The target's scale, or why it could not be read. */
  readonly scale: Scale | { readonly error: string }
  /** The pods of the namespace that the target's selector selects. */
  readonly pods: ReadonlyArray<JsonObject>
  /** The PodMetrics items for the selector, or why the metrics API failed. */
  readonly podMetrics: ReadonlyArray<JsonObject> | { readonly error: string }
  readonly history: History | undefined
}

/** An Event about the HorizontalPodAutoscaler. */
export interface Event {
  readonly type: "Normal" | "Warning"
  readonly reason: string
  readonly message: string
}

/** What a sync decided, before writing the scale. */
export interface Decision {
  /** The size to write to the target's `/scale`, and why. */
  readonly rescale: { readonly replicas: number; readonly reason: string } | undefined
  /** The status if there is no rescale or it succeeds (conditions as they stand before the write). */
  readonly status: JsonObject
  /** The target's `spec.replicas` this sync saw (0 when its scale could not be read). */
  readonly currentReplicas: number
  /** `status.desiredReplicas` before this sync (what a failed rescale leaves). */
  readonly previousDesiredReplicas: number | undefined
  readonly events: ReadonlyArray<Event>
  readonly history: History
  /** Rescale events are remembered only for HorizontalPodAutoscalers with a `behavior`. */
  readonly recordsScaleEvents: boolean
  /** Why the sync did not complete (upstream's returned error; logged, retried at the next period). */
  readonly error: string | undefined
}

// ---- Helpers ---------------------------------------------------------------------------------

const num = (v: unknown, fallback = 0): number => (typeof v === "number" ? v : fallback)
const milliQuantity = (milli: number): string => Quantity.format(Quantity.fromMilli(Math.trunc(milli)))

interface Rules {
  readonly stabilizationWindowSeconds: number
  readonly selectPolicy: string
  readonly policies: ReadonlyArray<{ readonly type: string; readonly value: number; readonly periodSeconds: number }>
}

const rulesOf = (v: unknown, fallbackWindowSeconds: number): Rules => {
  const r = asObject(v)
  return {
    stabilizationWindowSeconds: num(r["stabilizationWindowSeconds"], fallbackWindowSeconds),
    selectPolicy: typeof r["selectPolicy"] === "string" ? r["selectPolicy"] : "Max",
    policies: asArray(r["policies"]).map((p) => ({ type: String(asObject(p)["type"]), value: num(asObject(p)["value"]), periodSeconds: num(asObject(p)["periodSeconds"]) }))
  }
}

// ---- Metrics ---------------------------------------------------------------------------------

interface MetricOutcome {
  readonly replicas: number
  readonly name: string
  readonly status: JsonObject
}

interface MetricFailure {
  readonly error: string
  readonly condition: { readonly reason: string; readonly message: string }
}

/**
 * One Resource or ContainerResource metric (computeStatusForResourceMetricGeneric): a proposal,
 * the metric's name for messages, and its status entry.
 */
const resourceMetric = (
  spec: JsonObject,
  container: string | undefined,
  specReplicas: number,
  o: Observed,
  settings: Settings,
  nowMs: number,
  events: Array<Event>
): MetricOutcome | MetricFailure => {
  const resource = String(spec["name"] ?? "")
  const target = asObject(spec["target"])
  const sourceType = container === undefined ? "Resource" : "ContainerResource"
  const field = container === undefined ? "resource" : "containerResource"
  const failureReason = container === undefined ? "FailedGetResourceMetric" : "FailedGetContainerResourceMetric"
  const fail = (inner: string): MetricFailure => {
    // getUnableComputeReplicaCountCondition: an Event now, the condition if this metric decides.
    events.push({ type: "Warning", reason: failureReason, message: inner })
    return {
      error: `failed to get ${resource} ${container === undefined ? "" : "container "}resource metric value: ${inner}`,
      condition: { reason: failureReason, message: `the HPA was unable to compute the replica count: ${inner}` }
    }
  }
  const sampled = (): ReplicaCalculator.PodMetricsInfo | string => {
    if ("error" in o.podMetrics) return `unable to get metrics for resource ${resource}: unable to fetch metrics from resource metrics API: ${o.podMetrics.error}`
    if (o.podMetrics.length === 0) return `unable to get metrics for resource ${resource}: no metrics returned from resource metrics API`
    const m = ReplicaCalculator.podMetrics(o.podMetrics, resource, container)
    return "error" in m ? `unable to get metrics for resource ${resource}: failed to get container metrics: ${m.error}` : m.metrics
  }
  const statusOf = (current: JsonObject): JsonObject => ({
    type: sourceType,
    [field]: { name: resource, ...(container === undefined ? {} : { container }), current }
  })

  const averageValue = target["averageValue"]
  if (averageValue !== undefined) {
    const metrics = sampled()
    if (typeof metrics === "string") return fail(`failed to get ${resource} usage: ${metrics}`)
    const proposal = ReplicaCalculator.rawResourceReplicas(specReplicas, ReplicaCalculator.milli(averageValue) ?? 0, resource, o.pods, metrics, settings, nowMs)
    if ("error" in proposal) return fail(`failed to get ${resource} usage: ${proposal.error}`)
    return {
      replicas: proposal.replicas,
      name: `${resource} ${container === undefined ? "" : "container "}resource`,
      status: statusOf({ averageValue: milliQuantity(proposal.usage) })
    }
  }
  const targetUtilization = target["averageUtilization"]
  if (typeof targetUtilization !== "number") {
    return fail("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
  }
  const metrics = sampled()
  if (typeof metrics === "string") return fail(`failed to get ${resource} utilization: ${metrics}`)
  const proposal = ReplicaCalculator.resourceReplicas(specReplicas, targetUtilization, resource, o.pods, metrics, settings, nowMs, container)
  if ("error" in proposal) return fail(`failed to get ${resource} utilization: ${proposal.error}`)
  return {
    replicas: proposal.replicas,
    name: `${resource} ${container === undefined ? "" : "container "}resource utilization (percentage of request)`,
    status: statusOf({ averageUtilization: proposal.utilization, averageValue: milliQuantity(proposal.rawUtilization) })
  }
}

// Custom and external metrics need APIs Fleet does not serve: they fail the way upstream's do without them.
const unservedMetric = (type: string, spec: JsonObject, events: Array<Event>): MetricFailure => {
  const api = type === "External" ? "external metrics API (external.metrics.k8s.io)" : "custom metrics API (custom.metrics.k8s.io)"
  const inner = `unable to get metric ${String(asObject(spec["metric"])["name"] ?? "")}: the ${api} is not served`
  const reason = `FailedGet${type}Metric`
  events.push({ type: "Warning", reason, message: inner })
  return {
    error: `failed to get ${type.toLowerCase()} metric value: ${inner}`,
    condition: { reason, message: `the HPA was unable to compute the replica count: ${inner}` }
  }
}

const metricOutcome = (m: JsonObject, specReplicas: number, o: Observed, settings: Settings, nowMs: number, events: Array<Event>): MetricOutcome | MetricFailure => {
  const type = String(m["type"] ?? "")
  switch (type) {
    case "Resource":
      return resourceMetric(asObject(m["resource"]), undefined, specReplicas, o, settings, nowMs, events)
    case "ContainerResource": {
      const spec = asObject(m["containerResource"])
      return resourceMetric(spec, String(spec["container"] ?? ""), specReplicas, o, settings, nowMs, events)
    }
    case "Pods":
      return unservedMetric("Pods", asObject(m["pods"]), events)
    case "Object":
      return unservedMetric("Object", asObject(m["object"]), events)
    case "External":
      return unservedMetric("External", asObject(m["external"]), events)
    default: {
      const message = `unknown metric source type "${type}"`
      events.push({ type: "Warning", reason: "InvalidMetricSourceType", message })
      return { error: message, condition: { reason: "InvalidMetricSourceType", message: `the HPA was unable to compute the replica count: ${message}` } }
    }
  }
}

// ---- Normalization ---------------------------------------------------------------------------

interface Limited {
  readonly replicas: number
  readonly reason: string
  readonly message: string
}

/** Without behavior: no more than ×2 (at least 4) per sync, within [min, max] (convertDesiredReplicasWithRules). */
const limitWithRules = (current: number, desired: number, min: number, max: number): Limited => {
  const scaleUpLimit = Math.max(2 * current, 4)
  const [maximum, reason, message] =
    max > scaleUpLimit
      ? [scaleUpLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"]
      : [max, "TooManyReplicas", "the desired replica count is more than the maximum replica count"]
  if (desired < min) return { replicas: min, reason: "TooFewReplicas", message: "the desired replica count is less than the minimum replica count" }
  if (desired > maximum) return { replicas: maximum, reason, message }
  return { replicas: desired, reason: "DesiredWithinRange", message: "the desired count is within the acceptable range" }
}

const changeWithin = (periodSeconds: number, events: ReadonlyArray<ScaleEvent>, nowMs: number): number => {
  const cutoff = nowMs - periodSeconds * 1000
  return events.reduce((sum, e) => (e.timestampMs > cutoff ? sum + e.change : sum), 0)
}

/** The most pods the policies allow after this period's scale events (calculateScaleUpLimitWithScalingRules). */
export const scaleUpLimit = (current: number, history: Pick<History, "scaleUpEvents" | "scaleDownEvents">, rules: Rules, nowMs: number): number => {
  if (rules.selectPolicy === "Disabled") return current
  const pick = rules.selectPolicy === "Min" ? Math.min : Math.max
  let result = rules.selectPolicy === "Min" ? Number.MAX_SAFE_INTEGER : Number.MIN_SAFE_INTEGER
  for (const p of rules.policies) {
    const periodStart = current - changeWithin(p.periodSeconds, history.scaleUpEvents, nowMs) + changeWithin(p.periodSeconds, history.scaleDownEvents, nowMs)
    const proposed = p.type === "Pods" ? periodStart + p.value : Math.ceil(periodStart * (1 + p.value / 100))
    result = pick(result, proposed)
  }
  return result
}

/** The fewest pods the policies allow after this period's scale events (calculateScaleDownLimitWithBehaviors). */
export const scaleDownLimit = (current: number, history: Pick<History, "scaleUpEvents" | "scaleDownEvents">, rules: Rules, nowMs: number): number => {
  if (rules.selectPolicy === "Disabled") return current
  const pick = rules.selectPolicy === "Min" ? Math.max : Math.min
  let result = rules.selectPolicy === "Min" ? Number.MIN_SAFE_INTEGER : Number.MAX_SAFE_INTEGER
  for (const p of rules.policies) {
    const periodStart = current - changeWithin(p.periodSeconds, history.scaleUpEvents, nowMs) + changeWithin(p.periodSeconds, history.scaleDownEvents, nowMs)
    const proposed = p.type === "Pods" ? periodStart - p.value : Math.trunc(periodStart * (1 - p.value / 100))
    result = pick(result, proposed)
  }
  return result
}

/** With behavior: the policies' rates, then [min, max] (convertDesiredReplicasWithBehaviorRate). */
const limitWithBehavior = (current: number, desired: number, min: number, max: number, up: Rules, down: Rules, history: History, nowMs: number): Limited => {
  if (desired > current) {
    const limit = Math.max(scaleUpLimit(current, history, up, nowMs), current)
    const [maximum, reason, message] =
      max > limit
        ? [limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"]
        : [max, "TooManyReplicas", "the desired replica count is more than the maximum replica count"]
    if (desired > maximum) return { replicas: maximum, reason, message }
  } else if (desired < current) {
    const limit = Math.min(scaleDownLimit(current, history, down, nowMs), current)
    const [minimum, reason, message] =
      min < limit
        ? [limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"]
        : [min, "TooFewReplicas", "the desired replica count is less than the minimum replica count"]
    if (desired < minimum) return { replicas: minimum, reason, message }
  }
  return { replicas: desired, reason: "DesiredWithinRange", message: "the desired count is within the acceptable range" }
}

// Keep one slot per stale recommendation: the newest replaces the first one past every window.
const remember = (recommendations: ReadonlyArray<Recommendation>, next: Recommendation, isStale: (r: Recommendation) => boolean): ReadonlyArray<Recommendation> => {
  const i = recommendations.findIndex(isStale)
  return i < 0 ? [...recommendations, next] : recommendations.map((r, j) => (j === i ? next : r))
}

// ---- Decision --------------------------------------------------------------------------------

/**
 * One sync of one HorizontalPodAutoscaler (upstream's reconcileAutoscaler up to the scale write).
 * `settle` completes it with the write's outcome.
 */
export const decide = (o: Observed, settings: Settings, nowMs: number): Decision => {
  const hpa = o.hpa
  const spec = asObject(hpa["spec"])
  const oldStatus = asObject(hpa["status"])
  const uid = String(metadataOf(hpa)["uid"] ?? "")
  const now = rfc3339(nowMs)
  const ref = asObject(spec["scaleTargetRef"])
  const reference = `${String(ref["kind"] ?? "")}/${String(metadataOf(hpa)["namespace"] ?? "")}/${String(ref["name"] ?? "")}`
  const behavior = spec["behavior"] === undefined ? undefined : asObject(spec["behavior"])
  const events: Array<Event> = []
  let conditions = asArray(oldStatus["conditions"]) as ReadonlyArray<Condition>
  const setCondition = (type: string, status: Condition["status"], reason: string, message: string) => {
    conditions = Conditions.set(conditions, { type, status, reason, message }, now)
  }
  let history: History =
    o.history !== undefined && o.history.uid === uid ? o.history : { uid, recommendations: [], scaleUpEvents: [], scaleDownEvents: [] }
  const previousDesiredReplicas = typeof oldStatus["desiredReplicas"] === "number" ? oldStatus["desiredReplicas"] : undefined
  const base = { history, previousDesiredReplicas, recordsScaleEvents: behavior !== undefined }
  // setStatus: the counts and metrics are replaced, lastScaleTime and conditions carried.
  const statusOf = (current: number, desired: number | undefined, metrics: ReadonlyArray<JsonObject> | undefined): JsonObject => ({
    ...(oldStatus["observedGeneration"] === undefined ? {} : { observedGeneration: oldStatus["observedGeneration"] }),
    ...(oldStatus["lastScaleTime"] === undefined ? {} : { lastScaleTime: oldStatus["lastScaleTime"] }),
    ...(current === 0 ? {} : { currentReplicas: current }),
    desiredReplicas: desired ?? 0,
    ...(metrics === undefined || metrics.length === 0 ? {} : { currentMetrics: metrics }),
    ...(conditions.length === 0 ? {} : { conditions })
  })

  if ("error" in o.scale) {
    events.push({ type: "Warning", reason: "FailedGetScale", message: o.scale.error })
    setCondition(ConditionType.AbleToScale, "False", "FailedGetScale", `the HPA controller was unable to get the target's current scale: ${o.scale.error}`)
    return {
      ...base,
      currentReplicas: 0,
      rescale: undefined,
      status: { ...oldStatus, conditions },
      events,
      error: `failed to query scale subresource for ${reference}: ${o.scale.error}`
    }
  }
  const scale = o.scale
  const current = scale.specReplicas
  const synced = { ...base, currentReplicas: current }
  setCondition(ConditionType.AbleToScale, "True", "SucceededGetScale", "the HPA controller was able to get the target's current scale")
  // recordInitialRecommendation: the first sync remembers the current size, so a scale-down waits a window.
  if (history.recommendations.length === 0) history = { ...history, recommendations: [{ replicas: current, timestampMs: nowMs }] }
  const minReplicas = num(spec["minReplicas"], 1)
  const maxReplicas = num(spec["maxReplicas"])

  let desired = 0
  let reason = ""
  let rescale = true
  let metricStatuses: ReadonlyArray<JsonObject> | undefined
  let error: string | undefined

  if (current === 0 && minReplicas !== 0) {
    // A target scaled to zero by hand has autoscaling switched off.
    rescale = false
    setCondition(ConditionType.ScalingActive, "False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
  } else if (current > maxReplicas) {
    reason = "Current number of replicas above Spec.MaxReplicas"
    desired = maxReplicas
  } else if (current < minReplicas) {
    reason = "Current number of replicas below Spec.MinReplicas"
    desired = minReplicas
  } else {
    // computeReplicasForMetrics
    if (scale.selector === undefined) {
      events.push({ type: "Warning", reason: "SelectorRequired", message: "selector is required" })
      setCondition(ConditionType.ScalingActive, "False", "InvalidSelector", "the HPA target's scale is missing a selector")
      events.push({ type: "Warning", reason: "FailedComputeMetricsReplicas", message: "selector is required" })
      return { ...synced, history, rescale: undefined, status: statusOf(current, previousDesiredReplicas, undefined), events, error: "selector is required" }
    }
    const specs = asArray(spec["metrics"]).map(asObject)
    const statuses: Array<JsonObject> = specs.map(() => ({ type: "" }))
    let replicas = 0
    let metricName = ""
    let invalid = 0
    let firstFailure: MetricFailure | undefined
    specs.forEach((m, i) => {
      const outcome = metricOutcome(m, scale.specReplicas, o, settings, nowMs, events)
      if ("error" in outcome) {
        if (invalid === 0) firstFailure = outcome
        invalid++
        return
      }
      statuses[i] = outcome.status
      if (replicas === 0 || outcome.replicas > replicas) {
        replicas = outcome.replicas
        metricName = outcome.name
      }
    })
    metricStatuses = statuses
    if (firstFailure !== undefined && (invalid >= specs.length || replicas < scale.specReplicas)) {
      // Every metric failed, or a failed one might have wanted more pods than a scale-down leaves.
      setCondition(ConditionType.ScalingActive, "False", firstFailure.condition.reason, firstFailure.condition.message)
      const message = `invalid metrics (${invalid} invalid out of ${specs.length}), first error is: ${firstFailure.error}`
      events.push({ type: "Warning", reason: "FailedComputeMetricsReplicas", message })
      return {
        ...synced,
        history,
        rescale: undefined,
        status: statusOf(current, previousDesiredReplicas, statuses),
        events,
        error: `failed to compute desired number of replicas based on listed metrics for ${reference}: ${message}`
      }
    }
    if (firstFailure !== undefined) error = `invalid metrics (${invalid} invalid out of ${specs.length}), first error is: ${firstFailure.error}`
    setCondition(ConditionType.ScalingActive, "True", "ValidMetricFound", `the HPA was able to successfully calculate a replica count from ${metricName}`)

    desired = replicas
    if (desired > current) reason = `${metricName} above target`
    if (desired < current) reason = "All metrics below target"

    let stabilized: number
    let limited: Limited
    if (behavior === undefined) {
      // normalizeDesiredReplicas: the highest recommendation of the downscale window.
      const cutoff = nowMs - settings.downscaleStabilizationMs
      stabilized = history.recommendations.reduce((m, r) => (r.timestampMs >= cutoff && r.replicas > m ? r.replicas : m), desired)
      history = { ...history, recommendations: remember(history.recommendations, { replicas: desired, timestampMs: nowMs }, (r) => r.timestampMs < cutoff) }
      if (stabilized !== desired) {
        setCondition(ConditionType.AbleToScale, "True", "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
      } else {
        setCondition(ConditionType.AbleToScale, "True", "ReadyForNewScale", "recommended size matches current size")
      }
      limited = limitWithRules(current, stabilized, minReplicas, maxReplicas)
    } else {
      // normalizeDesiredReplicasWithBehaviors
      const up = rulesOf(behavior["scaleUp"], 0)
      const down = rulesOf(behavior["scaleDown"], Math.round(settings.downscaleStabilizationMs / 1000))
      const upCutoff = nowMs - up.stabilizationWindowSeconds * 1000
      const downCutoff = nowMs - down.stabilizationWindowSeconds * 1000
      let upRecommendation = desired
      let downRecommendation = desired
      for (const r of history.recommendations) {
        if (r.timestampMs > upCutoff) upRecommendation = Math.min(r.replicas, upRecommendation)
        if (r.timestampMs > downCutoff) downRecommendation = Math.max(r.replicas, downRecommendation)
      }
      stabilized = Math.min(Math.max(current, upRecommendation), downRecommendation)
      history = {
        ...history,
        recommendations: remember(history.recommendations, { replicas: desired, timestampMs: nowMs }, (r) => r.timestampMs < upCutoff && r.timestampMs < downCutoff)
      }
      if (stabilized !== desired) {
        if (desired >= current) {
          setCondition(ConditionType.AbleToScale, "True", "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation")
        } else {
          setCondition(ConditionType.AbleToScale, "True", "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
        }
      } else {
        setCondition(ConditionType.AbleToScale, "True", "ReadyForNewScale", "recommended size matches current size")
      }
      limited = limitWithBehavior(current, stabilized, minReplicas, maxReplicas, up, down, history, nowMs)
    }
    setCondition(ConditionType.ScalingLimited, limited.replicas === stabilized ? "False" : "True", limited.reason, limited.message)
    desired = limited.replicas
    rescale = desired !== current
  }

  if (!rescale) desired = current
  return {
    ...synced,
    history,
    rescale: rescale ? { replicas: desired, reason } : undefined,
    status: statusOf(current, desired, metricStatuses),
    events,
    error
  }
}

/** The scale write's outcome: written, or the error that stopped it. */
export type WriteOutcome = { readonly _tag: "Written" } | { readonly _tag: "Failed"; readonly message: string }

/** The end of a sync: the status to write (undefined when unchanged), the Events, the next history. */
export interface Settled {
  readonly status: JsonObject | undefined
  readonly events: ReadonlyArray<Event>
  readonly history: History
}

/** Complete a decision with the outcome of its scale write (none when it did not rescale). */
export const settle = (hpa: JsonObject, decision: Decision, outcome: WriteOutcome | undefined, nowMs: number): Settled => {
  const now = rfc3339(nowMs)
  let status = decision.status
  const events = [...decision.events]
  let history = decision.history
  const conditions = (type: string, s: Condition["status"], reason: string, message: string) =>
    Conditions.set(asArray(status["conditions"]) as ReadonlyArray<Condition>, { type, status: s, reason, message }, now)
  const rescale = decision.rescale
  if (rescale !== undefined && outcome?._tag === "Failed") {
    events.push({ type: "Warning", reason: "FailedRescale", message: `New size: ${rescale.replicas}; reason: ${rescale.reason}; error: ${outcome.message}` })
    const { desiredReplicas: _desired, ...rest } = status
    status = {
      ...rest,
      desiredReplicas: decision.previousDesiredReplicas ?? 0,
      conditions: conditions(ConditionType.AbleToScale, "False", "FailedUpdateScale", `the HPA controller was unable to update the target scale: ${outcome.message}`)
    }
  } else if (rescale !== undefined) {
    status = {
      ...status,
      lastScaleTime: now,
      conditions: conditions(ConditionType.AbleToScale, "True", "SucceededRescale", `the HPA controller was able to update the target scale to ${rescale.replicas}`)
    }
    events.push({ type: "Normal", reason: "SuccessfulRescale", message: `New size: ${rescale.replicas}; reason: ${rescale.reason}` })
    if (decision.recordsScaleEvents) history = storeScaleEvent(asObject(asObject(hpa["spec"])["behavior"]), history, decision, rescale.replicas, nowMs)
  }
  const changed = stableJson(asObject(hpa["status"])) !== stableJson(status)
  return { status: changed ? status : undefined, events, history }
}

// storeScaleEvent: one slot per event older than the direction's longest policy period is reused.
const storeScaleEvent = (behavior: JsonObject, history: History, decision: Decision, replicas: number, nowMs: number): History => {
  const current = decision.currentReplicas
  const up = replicas > current
  const rules = rulesOf(behavior[up ? "scaleUp" : "scaleDown"], 0)
  const longest = rules.policies.reduce((m, p) => Math.max(m, p.periodSeconds), 0)
  const event: ScaleEvent = { change: Math.abs(replicas - current), timestampMs: nowMs }
  const events = up ? history.scaleUpEvents : history.scaleDownEvents
  const i = events.findIndex((e) => e.timestampMs < nowMs - longest * 1000)
  const next = i < 0 ? [...events, event] : events.map((e, j) => (j === i ? event : e))
  return up ? { ...history, scaleUpEvents: next } : { ...history, scaleDownEvents: next }
}

// ---- Reconciler ------------------------------------------------------------------------------

/** Options of the HorizontalPodAutoscaler reconciler. */
export interface Options {
  /** How often every HorizontalPodAutoscaler is synced (default 15 s, `--horizontal-pod-autoscaler-sync-period`). */
  readonly syncPeriodMs?: number
  /** The usage ratio's dead band around 1 (default 0.1). */
  readonly tolerance?: number
  /** The scale-down stabilization window of HorizontalPodAutoscalers without their own (default 300 s). */
  readonly downscaleStabilizationMs?: number
  /** How long cpu samples of a starting pod may be start-up noise (default 5 min). */
  readonly cpuInitializationPeriodMs?: number
  /** How long a starting pod may take to become Ready the first time (default 30 s). */
  readonly initialReadinessDelayMs?: number
  /** Concurrent workers (default 5, as `--concurrent-horizontal-pod-autoscaler-syncs`). */
  readonly workers?: number
}

/** The target's scale as the informers show it, or upstream's error for it. */
export const scaleOf = (hpa: JsonObject, informers: Informer.Informers): { readonly ref: Client.ResourceRef; readonly name: string; readonly scale: Scale } | { readonly error: string } => {
  const target = asObject(asObject(hpa["spec"])["scaleTargetRef"])
  const apiVersion = String(target["apiVersion"] ?? "")
  const group = apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : ""
  const kind = String(target["kind"] ?? "")
  const name = String(target["name"] ?? "")
  const ref = scalableKinds[`${group}/${kind}`]
  if (ref === undefined) return { error: `no matches for kind "${kind}" in group "${group}"` }
  const o = informers.for(ref).get(metadataOf(hpa)["namespace"] as string | undefined, name)
  if (o === undefined) return { error: `${ref.plural}.${group} "${name}" not found` }
  const selector = asObject(o["spec"])["selector"]
  return {
    ref,
    name,
    scale: {
      specReplicas: num(asObject(o["spec"])["replicas"]),
      statusReplicas: num(asObject(o["status"])["replicas"]),
      selector: selector === undefined ? undefined : (selector as LabelSelector.LabelSelector)
    }
  }
}

const usesResourceMetrics = (hpa: JsonObject) =>
  asArray(asObject(hpa["spec"])["metrics"]).some((m) => asObject(m)["type"] === "Resource" || asObject(m)["type"] === "ContainerResource")

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

// A new HorizontalPodAutoscaler, a changed spec or a deletion is looked at now; status writes
// (its own) wait for the next period, as upstream queues every change at the sync period.
const hpaKeys: Controller.KeyMapper = (change) => {
  if (change.type !== "MODIFIED") return [Informer.keyOf(change.object)]
  const generation = metadataOf(change.object)["generation"]
  return change.old !== undefined && metadataOf(change.old)["generation"] !== generation ? [Informer.keyOf(change.object)] : []
}

/** The HorizontalPodAutoscaler reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const settings: Settings = {
    tolerance: options.tolerance ?? defaultSettings.tolerance,
    downscaleStabilizationMs: options.downscaleStabilizationMs ?? defaultSettings.downscaleStabilizationMs,
    cpuInitializationPeriodMs: options.cpuInitializationPeriodMs ?? defaultSettings.cpuInitializationPeriodMs,
    initialReadinessDelayMs: options.initialReadinessDelayMs ?? defaultSettings.initialReadinessDelayMs
  }
  const histories = new Map<string, History>()
  return {
    name: "horizontal-pod-autoscaler",
    primary: HorizontalPodAutoscalerRef,
    reactToPrimary: false,
    watches: [{ ref: HorizontalPodAutoscalerRef, keys: hpaKeys }],
    reads: [...Object.values(scalableKinds), ResourceRefs.Pod],
    resync: { everyMs: options.syncPeriodMs ?? 15_000, keys: (informers) => informers.for(HorizontalPodAutoscalerRef).list().map(Informer.keyOf) },
    workers: options.workers ?? 5,
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const { namespace, name } = Informer.splitKey(key)
        const hpa = ctx.informers.for(HorizontalPodAutoscalerRef).get(namespace, name)
        if (hpa === undefined) {
          histories.delete(key)
          return
        }
        const nowMs = yield* Clock.currentTimeMillis
        const target = scaleOf(hpa, ctx.informers)
        let pods: ReadonlyArray<JsonObject> = []
        let podMetrics: Observed["podMetrics"] = []
        if (!("error" in target) && target.scale.selector !== undefined) {
          const selector = target.scale.selector
          const matches = LabelSelector.compile(selector)
          pods = ctx.informers.for(ResourceRefs.Pod).list(namespace).filter((p) => matches(metadataOf(p)["labels"] as Record<string, string> | undefined))
          if (usesResourceMetrics(hpa)) {
            const listed = yield* Effect.either(ctx.client.list(PodMetricsRef, { namespace: namespace ?? "", labelSelector: LabelSelector.formatSelector(selector) }))
            podMetrics = listed._tag === "Right" ? (asArray(listed.right["items"]) as ReadonlyArray<JsonObject>) : { error: listed.left.status.message ?? "unknown error" }
          }
        }
        const decision = decide(
          { hpa, scale: "error" in target ? target : target.scale, pods, podMetrics, history: histories.get(key) },
          settings,
          nowMs
        )
        let outcome: WriteOutcome | undefined
        if (decision.rescale !== undefined && !("error" in target)) {
          const written = yield* Effect.either(ctx.client.patch(target.ref, namespace, target.name, "merge", { spec: { replicas: decision.rescale.replicas } }, "scale"))
          outcome = written._tag === "Right" ? { _tag: "Written" } : { _tag: "Failed", message: written.left.status.message ?? "unknown error" }
        }
        const settled = settle(hpa, decision, outcome, nowMs)
        histories.set(key, settled.history)
        yield* Effect.forEach(settled.events, (e) => ctx.events.record(hpa, e.type, e.reason, e.message), { discard: true })
        if (settled.status !== undefined) {
          yield* Effect.catchIf(ctx.client.update({ ...hpa, status: settled.status }, "status"), isNotFound, () => Effect.succeed({}))
        }
        if (decision.error !== undefined) yield* Effect.logDebug(`horizontal-pod-autoscaler: ${key}: ${decision.error}`)
      })
  }
}
