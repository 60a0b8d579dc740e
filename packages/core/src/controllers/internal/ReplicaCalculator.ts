/**
 * The HorizontalPodAutoscaler's replica arithmetic, as kube-controller-manager's
 * `replica_calculator.go` and resource metrics client do it, over plain data:
 *
 *   PodMetrics items ─▶ per-pod value (milli-units) ─┐
 *   pods (selected) ─▶ ready / unready / missing / ignored ─┴─▶ usage ratio ─▶ replica proposal
 *
 * - Pods being deleted or finished are ignored; Pending pods count as unready; for cpu, a pod that
 *   is not Ready, or still in its cpu initialization period with a sample taken before it had
 *   been ready for a whole window, is unready too.
 * - Unready pods' samples are left out; when scaling up with unready pods, they count as using 0.
 * - Pods without a sample count as using 100% of their request (or the target, when higher) when
 *   scaling down, and 0 when scaling up: both make the change smaller.
 * - A ratio within the tolerance (10%) of 1, or a recount that would flip the direction, keeps
 *   the current count.
 */
import { parseDuration } from "../../model/Metrics.js"
import * as Quantity from "../../model/Quantity.js"
import * as Pods from "../../object/Pods.js"
import { asArray, asObject } from "../../object/Json.js"
import { isTerminating, metadataOf, nameOf, timeMs } from "../../object/Metadata.js"

type JsonObject = Record<string, unknown>

/** One pod's value of a metric, in milli-units, and when and over what window it was measured. */
export interface PodMetric {
  readonly value: number
  readonly timestampMs: number
  readonly windowMs: number
}

/** Per-pod metric values by pod name. */
export type PodMetricsInfo = ReadonlyMap<string, PodMetric>

/** The calculator's knobs (kube-controller-manager's `--horizontal-pod-autoscaler-*` flags). */
export interface Config {
  /** How far from 1 the usage ratio must be before the count changes (default 0.1). */
  readonly tolerance: number
  /** How long after a pod starts its cpu samples may still be start-up noise (default 5 min). */
  readonly cpuInitializationPeriodMs: number
  /** How long after a pod starts a not-Ready pod may still become Ready for the first time (default 30 s). */
  readonly initialReadinessDelayMs: number
}

/** The upstream defaults. */
export const defaultConfig: Config = { tolerance: 0.1, cpuInitializationPeriodMs: 300_000, initialReadinessDelayMs: 30_000 }


/** A quantity string in milli-units (Kubernetes `MilliValue`), or undefined when it does not parse. */
export const milli = (q: unknown): number | undefined => {
  if (typeof q !== "string" && typeof q !== "number") return undefined
  const parsed = Quantity.parse(String(q))
  return parsed._tag === "Right" ? Quantity.toMilli(parsed.right) : undefined
}

// metav1.Duration in JSON is a Go duration string.
const durationMs = (v: unknown): number => (typeof v === "string" ? (parseDuration(v) ?? 0) : 0)

/**
 * Per-pod values of `resource` from PodMetrics items (the metrics client's getPodMetrics and
 * getContainerMetrics): the sum over containers, or one named container's. A pod missing the
 * resource in any container has no value; a pod without the named container is an error.
 */
export const podMetrics = (items: ReadonlyArray<JsonObject>, resource: string, container?: string): { readonly metrics: PodMetricsInfo } | { readonly error: string } => {
  const out = new Map<string, PodMetric>()
  for (const item of items) {
    const timestampMs = timeMs(item["timestamp"]) ?? 0
    const windowMs = durationMs(item["window"])
    const containers = asArray(item["containers"]).map(asObject)
    if (container !== undefined) {
      const c = containers.find((x) => x["name"] === container)
      if (c === undefined) return { error: `container ${container} not present in metrics for pod ${String(metadataOf(item)["namespace"])}/${nameOf(item)}` }
      const value = milli(asObject(c["usage"])[resource])
      if (value !== undefined) out.set(nameOf(item), { value, timestampMs, windowMs })
      continue
    }
    let sum = 0
    let missing = containers.length === 0
    for (const c of containers) {
      const value = milli(asObject(c["usage"])[resource])
      if (value === undefined) {
        missing = true
        break
      }
      sum += value
    }
    if (!missing) out.set(nameOf(item), { value: sum, timestampMs, windowMs })
  }
  return { metrics: out }
}

/** How the selected pods count (upstream's groupPods). */
export interface Groups {
  readonly readyPodCount: number
  readonly unready: ReadonlySet<string>
  readonly missing: ReadonlySet<string>
  readonly ignored: ReadonlySet<string>
}

/** Sort the pods into ready (with a sample), unready, missing a sample, and ignored. */
export const groupPods = (pods: ReadonlyArray<JsonObject>, metrics: PodMetricsInfo, resource: string, config: Config, nowMs: number): Groups => {
  const unready = new Set<string>()
  const missing = new Set<string>()
  const ignored = new Set<string>()
  let readyPodCount = 0
  for (const pod of pods) {
    const name = nameOf(pod)
    const phase = Pods.phase(pod)
    if (isTerminating(pod) || phase === "Failed" || phase === "Succeeded") {
      ignored.add(name)
      continue
    }
    if (phase === "Pending") {
      unready.add(name)
      continue
    }
    const metric = metrics.get(name)
    if (metric === undefined) {
      missing.add(name)
      continue
    }
    if (resource === "cpu") {
      const ready = Pods.condition(pod, "Ready")
      const startMs = timeMs(asObject(pod["status"])["startTime"])
      let isUnready: boolean
      if (ready === undefined || startMs === undefined) {
        isUnready = true
      } else {
        const transitionMs = timeMs(ready["lastTransitionTime"]) ?? 0
        if (startMs + config.cpuInitializationPeriodMs > nowMs) {
          // Still starting: a not-Ready pod, or a sample that does not cover a whole window of readiness, is noise.
          isUnready = ready["status"] === "False" || metric.timestampMs < transitionMs + metric.windowMs
        } else {
          // Started long ago: only a pod that has never been Ready is left out.
          isUnready = ready["status"] === "False" && startMs + config.initialReadinessDelayMs > transitionMs
        }
      }
      if (isUnready) {
        unready.add(name)
        continue
      }
    }
    readyPodCount++
  }
  return { readyPodCount, unready, missing, ignored }
}

/**
 * Each pod's request of `resource` in milli-units: the sum over its containers (and restartable
 * init containers), or one named container's. A container without the request is an error.
 */
export const podRequests = (pods: ReadonlyArray<JsonObject>, resource: string, container?: string): { readonly requests: ReadonlyMap<string, number> } | { readonly error: string } => {
  const requests = new Map<string, number>()
  for (const pod of pods) {
    const spec = asObject(pod["spec"])
    const containers = [
      ...asArray(spec["containers"]).map(asObject),
      ...asArray(spec["initContainers"]).map(asObject).filter((c) => c["restartPolicy"] === "Always")
    ]
    let sum = 0
    for (const c of containers) {
      if (container !== undefined && c["name"] !== container) continue
      const request = milli(asObject(asObject(c["resources"])["requests"])[resource])
      if (request === undefined) return { error: `missing request for ${resource} in container ${String(c["name"])} of Pod ${nameOf(pod)}` }
      sum += request
    }
    requests.set(nameOf(pod), sum)
  }
  return { requests }
}

/** Utilization of requests: the ratio to the target, the percentage (truncated) and the average raw value. */
export const utilizationRatio = (
  metrics: PodMetricsInfo,
  requests: ReadonlyMap<string, number>,
  targetUtilization: number
): { readonly ratio: number; readonly utilization: number; readonly rawAverage: number } | { readonly error: string } => {
  let metricsTotal = 0
  let requestsTotal = 0
  let entries = 0
  for (const [name, metric] of metrics) {
    const request = requests.get(name)
    // Samples of pods we do not know (no request) are extraneous.
    if (request === undefined) continue
    metricsTotal += metric.value
    requestsTotal += request
    entries++
  }
  if (requestsTotal === 0) return { error: "no metrics returned matched known pods" }
  const utilization = Math.trunc((metricsTotal * 100) / requestsTotal)
  return { ratio: utilization / targetUtilization, utilization, rawAverage: Math.trunc(metricsTotal / entries) }
}

/** The average of raw values and its ratio to the target (GetMetricUsageRatio). */
export const usageRatio = (metrics: PodMetricsInfo, targetUsage: number): { readonly ratio: number; readonly usage: number } => {
  let total = 0
  for (const m of metrics.values()) total += m.value
  const usage = Math.trunc(total / metrics.size)
  return { ratio: usage / targetUsage, usage }
}

const withValue = (metrics: PodMetricsInfo, names: Iterable<string>, value: (name: string) => number): Map<string, PodMetric> => {
  const next = new Map(metrics)
  for (const name of names) next.set(name, { value: value(name), timestampMs: 0, windowMs: 0 })
  return next
}

const without = (metrics: PodMetricsInfo, names: ReadonlySet<string>): Map<string, PodMetric> => {
  const next = new Map(metrics)
  for (const name of names) next.delete(name)
  return next
}

// The count after filling in missing and unready pods, unless it is within tolerance or turns around.
const settle = (currentReplicas: number, ratio: number, newRatio: number, counted: number, tolerance: number): number => {
  if (Math.abs(1 - newRatio) <= tolerance || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1)) return currentReplicas
  const replicas = Math.ceil(newRatio * counted)
  if ((newRatio < 1 && replicas > currentReplicas) || (newRatio > 1 && replicas < currentReplicas)) return currentReplicas
  return replicas
}

/** A proposal from a utilization target (GetResourceReplicas). */
export interface UtilizationProposal {
  readonly replicas: number
  readonly utilization: number
  readonly rawUtilization: number
}

/**
 * The replica count that brings the average utilization (percent of requests) of `resource`
 * to `targetUtilization`, or why there is none.
 */
export const resourceReplicas = (
  currentReplicas: number,
  targetUtilization: number,
  resource: string,
  pods: ReadonlyArray<JsonObject>,
  sampled: PodMetricsInfo,
  config: Config,
  nowMs: number,
  container?: string
): UtilizationProposal | { readonly error: string } => {
  if (pods.length === 0) return { error: "no pods returned by selector while calculating replica count" }
  const groups = groupPods(pods, sampled, resource, config, nowMs)
  let metrics = without(without(sampled, groups.ignored), groups.unready)
  if (metrics.size === 0) return { error: "did not receive metrics for targeted pods (pods might be unready)" }
  const r = podRequests(pods, resource, container)
  if ("error" in r) return r
  const first = utilizationRatio(metrics, r.requests, targetUtilization)
  if ("error" in first) return first
  const { ratio, utilization, rawAverage } = first
  const scaleUpWithUnready = groups.unready.size > 0 && ratio > 1
  if (!scaleUpWithUnready && groups.missing.size === 0) {
    if (Math.abs(1 - ratio) <= config.tolerance) return { replicas: currentReplicas, utilization, rawUtilization: rawAverage }
    return { replicas: Math.ceil(ratio * groups.readyPodCount), utilization, rawUtilization: rawAverage }
  }
  if (groups.missing.size > 0) {
    if (ratio < 1) {
      const fallback = Math.max(100, targetUtilization)
      metrics = withValue(metrics, groups.missing, (name) => Math.trunc(((r.requests.get(name) ?? 0) * fallback) / 100))
    } else if (ratio > 1) {
      metrics = withValue(metrics, groups.missing, () => 0)
    }
  }
  if (scaleUpWithUnready) metrics = withValue(metrics, groups.unready, () => 0)
  const second = utilizationRatio(metrics, r.requests, targetUtilization)
  if ("error" in second) return second
  return { replicas: settle(currentReplicas, ratio, second.ratio, metrics.size, config.tolerance), utilization, rawUtilization: rawAverage }
}

/** A proposal from an average value target (GetRawResourceReplicas). */
export interface ValueProposal {
  readonly replicas: number
  readonly usage: number
}

/** The replica count that brings the per-pod average of `resource` (milli-units) to `targetUsage`. */
export const rawResourceReplicas = (
  currentReplicas: number,
  targetUsage: number,
  resource: string,
  pods: ReadonlyArray<JsonObject>,
  sampled: PodMetricsInfo,
  config: Config,
  nowMs: number
): ValueProposal | { readonly error: string } => {
  if (pods.length === 0) return { error: "no pods returned by selector while calculating replica count" }
  const groups = groupPods(pods, sampled, resource, config, nowMs)
  let metrics = without(without(sampled, groups.ignored), groups.unready)
  if (metrics.size === 0) return { error: "did not receive metrics for targeted pods (pods might be unready)" }
  const { ratio, usage } = usageRatio(metrics, targetUsage)
  const scaleUpWithUnready = groups.unready.size > 0 && ratio > 1
  if (!scaleUpWithUnready && groups.missing.size === 0) {
    if (Math.abs(1 - ratio) <= config.tolerance) return { replicas: currentReplicas, usage }
    return { replicas: Math.ceil(ratio * groups.readyPodCount), usage }
  }
  if (groups.missing.size > 0) metrics = withValue(metrics, groups.missing, () => (ratio < 1 ? targetUsage : 0))
  if (scaleUpWithUnready) metrics = withValue(metrics, groups.unready, () => 0)
  const again = usageRatio(metrics, targetUsage)
  return { replicas: settle(currentReplicas, ratio, again.ratio, metrics.size, config.tolerance), usage }
}
