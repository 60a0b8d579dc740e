/**
 * The `fleet.koder.dev/v1` `AlertRule` kind (namespaced): turn Events into notifications. A rule
 * matches core/v1 Events (reason, involved kind, type, namespaces), fires when at least
 * `threshold.count` matching occurrences fall inside `threshold.window`, and POSTs one JSON
 * notification to `webhook.url` per firing — again only after `resendInterval` while it keeps
 * firing, and once more when it resolves (`sendResolved`). docs/alerts.md describes the payload.
 *
 *   spec.match          which Events (absent lists match anything; namespaces: see below)
 *   spec.threshold      count (default 1) within window (Go duration, default 5m)
 *   spec.webhook        url, headers (literal or from a Secret key in the rule's namespace), timeoutSeconds
 *   spec.resendInterval repeat a still-firing alert after this long (default 4h)
 *   status              firing, lastFiredTime, lastResolvedTime, lastDeliveryTime, lastAttemptTime,
 *                       lastDeliveryError, occurrences
 *
 * A rule watches its own namespace. Only rules in `kube-system` may name other namespaces (or
 * `"*"`, every namespace): a notification carries Event messages, and someone allowed to create a
 * rule in one namespace must not learn another namespace's events through it.
 */
import { Schema } from "effect"
import { EventType } from "./Event.js"
import * as FieldError from "./FieldError.js"
import { optional, StringMap } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"
import { parseDuration } from "./Metrics.js"
import { Int32, Time } from "./Scalars.js"

/** The namespace whose rules may match events of other namespaces. */
export const ClusterNamespace = "kube-system"

/** `spec.match.namespaces` entry meaning every namespace (kube-system rules only). */
export const AllNamespaces = "*"

/** The severities a notification can carry, as the Koder notify service knows them. */
export const Severities = ["critical", "warning", "info"] as const

/** Defaults the API server fills in. */
export const defaults = { count: 1, window: "5m", severity: "warning", resendInterval: "4h", sendResolved: true, timeoutSeconds: 10 } as const

/** Which Events a rule counts. */
export const AlertMatch = Schema.Struct({
  /** Event reasons (`BackOff`, `FailedScheduling`); absent or empty: any. */
  reasons: optional(Schema.Array(Schema.String)),
  /** Kinds of the involved object (`Pod`, `Node`); absent or empty: any. */
  involvedKinds: optional(Schema.Array(Schema.String)),
  /** Event type; absent: both. */
  type: optional(EventType),
  /** Namespaces of the Events; absent: the rule's own. Others only for kube-system rules. */
  namespaces: optional(Schema.Array(Schema.String))
})

/** How many occurrences within how long make the rule fire. */
export const AlertThreshold = Schema.Struct({
  count: optional(Int32),
  /** A Go duration (`30s`, `10m`, `1h30m`). */
  window: optional(Schema.String)
})

/** A Secret key in the rule's namespace. */
export const SecretKeyRef = Schema.Struct({ name: Schema.String, key: Schema.String })

/** One header of the webhook request: a literal value, or a Secret key's value. */
export const WebhookHeader = Schema.Struct({
  name: Schema.String,
  value: optional(Schema.String),
  valueFrom: optional(Schema.Struct({ secretKeyRef: SecretKeyRef }))
})

/** Where notifications go. */
export const Webhook = Schema.Struct({
  url: Schema.String,
  headers: optional(Schema.Array(WebhookHeader)),
  timeoutSeconds: optional(Int32)
})

/** What an AlertRule asks for. */
export const AlertRuleSpec = Schema.Struct({
  match: optional(AlertMatch),
  threshold: optional(AlertThreshold),
  severity: optional(Schema.Literal(...Severities)),
  /** The notification's title (default: generated from the rule and what fired). */
  title: optional(Schema.String),
  /** Extra labels of every notification (routing keys for the notify service). */
  labels: optional(StringMap),
  webhook: Webhook,
  /** A Go duration; a still-firing alert is sent again after this long (default 4h). */
  resendInterval: optional(Schema.String),
  /** Whether to notify when a delivered alert resolves (default true). */
  sendResolved: optional(Schema.Boolean),
  /** Stop evaluating (a firing alert stays as it is, nothing is sent). */
  suspend: optional(Schema.Boolean)
})

/** What the controller last saw and did. */
export const AlertRuleStatus = Schema.Struct({
  /** Whether the threshold is met now. */
  firing: optional(Schema.Boolean),
  /** When the current (or last) firing began. */
  lastFiredTime: optional(Time),
  /** When the last firing ended. */
  lastResolvedTime: optional(Time),
  /** The last notification the webhook accepted (2xx). */
  lastDeliveryTime: optional(Time),
  /** The last notification attempted, delivered or not. */
  lastAttemptTime: optional(Time),
  /** Why the last attempt failed (absent once one succeeds); never a header value. */
  lastDeliveryError: optional(Schema.String),
  /** Matching occurrences inside the window at the last evaluation. */
  occurrences: optional(Int32),
  observedGeneration: optional(Schema.Number)
})

/** The `AlertRule` kind. */
export const AlertRule = Schema.Struct({
  apiVersion: Schema.Literal("fleet.koder.dev/v1"),
  kind: Schema.Literal("AlertRule"),
  metadata: ObjectMeta,
  spec: AlertRuleSpec,
  status: optional(AlertRuleStatus)
})

/** An AlertRule object. */
export type AlertRule = typeof AlertRule.Type

/** Its status. */
export type AlertRuleStatus = typeof AlertRuleStatus.Type

const headerNameRe = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
// Headers the transport owns; a rule setting them would only break the request.
const reservedHeaders = new Set(["content-length", "content-type", "host", "transfer-encoding", "connection"])

const durationErrors = (path: string, value: string | undefined, minMs: number): ReadonlyArray<FieldError.FieldError> => {
  if (value === undefined) return []
  const ms = parseDuration(value)
  if (ms === undefined) return [FieldError.invalid(path, value, "must be a duration such as 30s, 10m or 1h30m")]
  return ms < minMs ? [FieldError.invalid(path, value, `must be at least ${minMs / 1000}s`)] : []
}

/** Field errors of an AlertRule beyond its schema. */
export const validate = (rule: AlertRule): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const spec = rule.spec
  const own = rule.metadata.namespace
  ;(spec.match?.namespaces ?? []).forEach((ns, i) => {
    if (own !== ClusterNamespace && ns !== own) {
      errors.push(FieldError.forbidden(`spec.match.namespaces[${i}]`, `only rules in ${ClusterNamespace} may match events of other namespaces`))
    }
  })
  if (spec.threshold?.count !== undefined && spec.threshold.count < 1) errors.push(FieldError.invalid("spec.threshold.count", spec.threshold.count, "must be at least 1"))
  errors.push(...durationErrors("spec.threshold.window", spec.threshold?.window, 1000))
  errors.push(...durationErrors("spec.resendInterval", spec.resendInterval, 1000))
  let url: URL | undefined
  try {
    url = new URL(spec.webhook.url)
  } catch {
    errors.push(FieldError.invalid("spec.webhook.url", spec.webhook.url, "must be an absolute http or https URL"))
  }
  if (url !== undefined && url.protocol !== "http:" && url.protocol !== "https:") errors.push(FieldError.notSupported("spec.webhook.url", url.protocol, ["http:", "https:"]))
  // The URL lands in status messages and logs: credentials belong in headers from a Secret.
  if (url !== undefined && (url.username !== "" || url.password !== "")) errors.push(FieldError.forbidden("spec.webhook.url", "must not carry credentials; use a header from a Secret"))
  const timeout = spec.webhook.timeoutSeconds
  if (timeout !== undefined && (timeout < 1 || timeout > 60)) errors.push(FieldError.invalid("spec.webhook.timeoutSeconds", timeout, "must be between 1 and 60"))
  const seen = new Set<string>()
  ;(spec.webhook.headers ?? []).forEach((h, i) => {
    const path = `spec.webhook.headers[${i}]`
    const lower = h.name.toLowerCase()
    if (!headerNameRe.test(h.name)) errors.push(FieldError.invalid(`${path}.name`, h.name, "must be an HTTP header name"))
    else if (reservedHeaders.has(lower)) errors.push(FieldError.forbidden(`${path}.name`, `${h.name} is set by the transport`))
    if (seen.has(lower)) errors.push(FieldError.duplicate(`${path}.name`, h.name))
    seen.add(lower)
    if ((h.value === undefined) === (h.valueFrom === undefined)) errors.push(FieldError.invalid(path, h.name, "must set exactly one of value and valueFrom"))
    if (h.valueFrom !== undefined) {
      if (h.valueFrom.secretKeyRef.name === "") errors.push(FieldError.required(`${path}.valueFrom.secretKeyRef.name`))
      if (h.valueFrom.secretKeyRef.key === "") errors.push(FieldError.required(`${path}.valueFrom.secretKeyRef.key`))
    }
  })
  return errors
}

/** The namespaces whose Events `rule` counts (`["*"]`: all). */
export const watchedNamespaces = (rule: AlertRule): ReadonlyArray<string> => {
  const listed = rule.spec.match?.namespaces ?? []
  return listed.length === 0 ? [rule.metadata.namespace ?? "default"] : listed
}

/** Milliseconds of the rule's window, resend interval and webhook timeout, defaults applied. */
export const timings = (rule: AlertRule): { readonly windowMs: number; readonly resendMs: number; readonly timeoutMs: number } => ({
  windowMs: parseDuration(rule.spec.threshold?.window ?? defaults.window) ?? parseDuration(defaults.window)!,
  resendMs: parseDuration(rule.spec.resendInterval ?? defaults.resendInterval) ?? parseDuration(defaults.resendInterval)!,
  timeoutMs: (rule.spec.webhook.timeoutSeconds ?? defaults.timeoutSeconds) * 1000
})
