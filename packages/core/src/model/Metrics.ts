/**
 * The resource metrics kinds of `metrics.k8s.io/v1beta1` (metrics-server's API, what `kubectl top`
 * and the HorizontalPodAutoscaler read): `NodeMetrics` (a node's cpu and memory use) and
 * `PodMetrics` (each container's). Both are computed on request from recent samples, never
 * stored: `timestamp` is when the sample was taken and `window` the span its CPU rate averages.
 */
import { Schema } from "effect"
import * as Duration from "./Duration.js"
import { optional } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"
import { ResourceList } from "./Quantity.js"
import { Time } from "./Scalars.js"

/** The group of the resource metrics API. */
export const Group = "metrics.k8s.io"

/** Its only version. */
export const Version = "v1beta1"

/** `metrics.k8s.io/v1beta1`. */
export const ApiVersion = `${Group}/${Version}`

/** One container's use: `cpu` (cores, e.g. `250m` or `1234567n`) and `memory` (working set bytes). */
export const ContainerMetrics = Schema.Struct({ name: Schema.String, usage: ResourceList })

/** One container's use. */
export type ContainerMetrics = typeof ContainerMetrics.Type

/** The `NodeMetrics` kind: a node's use, cluster-scoped, named as the node. */
export const NodeMetrics = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("NodeMetrics"),
  metadata: ObjectMeta,
  timestamp: Time,
  /** A Go duration (`15s`, `1m0s`). */
  window: Schema.String,
  usage: ResourceList
})

/** A NodeMetrics object. */
export type NodeMetrics = typeof NodeMetrics.Type

/** The `PodMetrics` kind: a pod's use per container, named and namespaced as the pod. */
export const PodMetrics = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("PodMetrics"),
  metadata: ObjectMeta,
  timestamp: Time,
  /** A Go duration (`15s`, `1m0s`). */
  window: Schema.String,
  containers: optional(Schema.Array(ContainerMetrics))
})

/** A PodMetrics object. */
export type PodMetrics = typeof PodMetrics.Type

/**
 * A duration in milliseconds as Go's `time.Duration.String()` writes it, which is how
 * `metav1.Duration` serialises: `0s`, `500ms`, `15s`, `15.5s`, `1m0s`, `1h2m3s`.
 */
export const formatDuration = (ms: number): string => {
  const total = Math.max(0, Math.round(ms))
  if (total === 0) return "0s"
  if (total < 1000) return `${total}ms`
  const hours = Math.floor(total / 3_600_000)
  const minutes = Math.floor((total % 3_600_000) / 60_000)
  const millis = total % 60_000
  const seconds = `${Math.floor(millis / 1000)}${millis % 1000 === 0 ? "" : `.${String(millis % 1000).padStart(3, "0").replace(/0+$/, "")}`}s`
  if (hours > 0) return `${hours}h${minutes}m${seconds}`
  if (minutes > 0) return `${minutes}m${seconds}`
  return seconds
}

/**
 * Milliseconds of a Go duration string (`15s`, `1m0s`, `1.5s`, `250ms`), or undefined. Narrower
 * than Go, as it always was: no sign, no number without leading digits (`.5s`), no Greek-mu `μs`.
 */
export const parseDuration = (text: string): number | undefined =>
  /^[+-]|(^|[^0-9])\.|\u03bc/.test(text) ? undefined : Duration.toMillis(text)
