/**
 * The AlertRule controller: counts the Events a rule matches inside its window, keeps
 * `status.firing`, and sends the rule's webhook one notification per firing — again after
 * `resendInterval` while it keeps firing, and once when it resolves. Delivery goes through the
 * `Notifier` port; the outcome lands in status (`lastDeliveryTime`, `lastDeliveryError`).
 *
 *   Event change ─▶ rules that could match it ─▶ reconcile(rule)
 *     ─▶ decide(rule, events, now)  (pure: occurrences, firing, what to send, when to look again)
 *     ─▶ headers from Secrets ─▶ Notifier.deliver ─▶ status (merge patch, no resourceVersion race)
 *
 * Events arrive aggregated (client-go's correlator bumps `count` between `firstTimestamp` and
 * `lastTimestamp`), so occurrences inside the window are exact for events that began inside it
 * and, for an older event still recurring, its count spread evenly over its lifetime: `count ×
 * (last − windowStart) / (last − first)`, at least 1.
 *
 * Delivery is at least once: a notification is sent before its status is written, and a status
 * write that fails means the next reconcile sends again. Every payload therefore carries a
 * `fingerprint` (rule uid + firing start) a receiver can deduplicate by. A failed delivery is
 * retried every `retryMs` (default 30 s), never faster however many Events change meanwhile.
 * A resolved notification is tried once.
 */
import { Clock, Effect, Either } from "effect"
import type * as Client from "../client/Client.js"
import * as AlertRuleModel from "../model/AlertRule.js"
import { decodeObject } from "../model/Decode.js"
import type * as Controller from "./Controller.js"
import * as EventTtl from "./EventTtl.js"
import * as Informer from "../informer/Informer.js"
import * as Notifier from "./Notifier.js"
import { type JsonObject, asObject, asString, stableJson } from "../object/Json.js"
import { metadataOf, timeMs } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The AlertRule resource. */
export const AlertRuleRef: Client.ResourceRef = { apiVersion: "fleet.koder.dev/v1", kind: "AlertRule" }



/** Status times keep milliseconds: a firing and a delivery in the same second must still order. */
export const timestamp = (ms: number): string => new Date(ms).toISOString()

/** One matching Event and how many of its occurrences fall inside the window. */
export interface Match {
  readonly event: JsonObject
  readonly occurrences: number
  /** When it last happened (ms). */
  readonly lastMs: number
}

/** What the rule should do now. */
export interface Decision {
  /** Matching events with occurrences in the window, newest first. */
  readonly matches: ReadonlyArray<Match>
  readonly occurrences: number
  /** Whether the threshold is met. */
  readonly firing: boolean
  /** The firing started now. */
  readonly started: boolean
  /** The firing ended now. */
  readonly resolved: boolean
  /** Send a notification now: a firing one (first, retry or resend) or a resolved one. */
  readonly send: { readonly status: "firing" | "resolved"; readonly why: "new" | "retry" | "resend" | "resolved" } | undefined
  /** Look again after this long even if no Event changes (resend due, retry due, window sliding). */
  readonly requeueAfterMs: number | undefined
}

/** Whether `event` is one `rule` counts, ignoring time (pure). */
export const matches = (rule: AlertRuleModel.AlertRule, event: JsonObject): boolean => {
  const m = rule.spec.match ?? {}
  const namespaces = AlertRuleModel.watchedNamespaces(rule)
  const ns = asString(metadataOf(event)["namespace"])
  if (!namespaces.includes(AlertRuleModel.AllNamespaces) && !namespaces.includes(ns)) return false
  if ((m.reasons ?? []).length > 0 && !m.reasons!.includes(asString(event["reason"]))) return false
  if ((m.involvedKinds ?? []).length > 0 && !m.involvedKinds!.includes(asString(asObject(event["involvedObject"])["kind"]))) return false
  if (m.type !== undefined && asString(event["type"] || "Normal") !== m.type) return false
  return true
}

/** Occurrences of an aggregated event inside `[nowMs − windowMs, nowMs]` (pure; see the module comment). */
export const occurrencesInWindow = (event: JsonObject, nowMs: number, windowMs: number): number => {
  const last = EventTtl.lastSeenMs(event)
  if (last === undefined) return 0
  const start = nowMs - windowMs
  if (last < start) return 0
  const first = timeMs(event["firstTimestamp"]) ?? timeMs(event["eventTime"]) ?? last
  const series = asObject(event["series"])
  const count = Math.max(1, Number(series["count"] ?? event["count"] ?? 1) || 1)
  if (first >= start || last <= first) return count
  return Math.max(1, Math.round((count * (last - start)) / (last - first)))
}

/** How often a firing rule looks again whether it has resolved: a tenth of its window, 1–60 s. */
const slideMs = (windowMs: number) => Math.min(60_000, Math.max(1000, Math.round(windowMs / 10)))

/**
 * Decide what `rule` does at `nowMs` given the candidate `events` (pure). `retryMs` paces attempts
 * after a failed delivery.
 */
export const decide = (rule: AlertRuleModel.AlertRule, events: ReadonlyArray<JsonObject>, nowMs: number, retryMs: number): Decision => {
  const { windowMs, resendMs } = AlertRuleModel.timings(rule)
  const threshold = rule.spec.threshold?.count ?? AlertRuleModel.defaults.count
  const found: Array<Match> = []
  for (const event of events) {
    if (!matches(rule, event)) continue
    const occurrences = occurrencesInWindow(event, nowMs, windowMs)
    if (occurrences > 0) found.push({ event, occurrences, lastMs: EventTtl.lastSeenMs(event) ?? 0 })
  }
  found.sort((a, b) => b.lastMs - a.lastMs)
  const occurrences = found.reduce((n, m) => n + m.occurrences, 0)
  const status = rule.status ?? {}
  const wasFiring = status.firing === true
  const firing = occurrences >= threshold
  const none = { matches: found, occurrences, firing, started: firing && !wasFiring, resolved: wasFiring && !firing }

  const firedMs = timeMs(status.lastFiredTime)
  const deliveredMs = timeMs(status.lastDeliveryTime)
  const attemptMs = timeMs(status.lastAttemptTime)
  const deliveredThisFiring = wasFiring && firedMs !== undefined && deliveredMs !== undefined && deliveredMs >= firedMs
  const lastFailed = attemptMs !== undefined && (deliveredMs === undefined || attemptMs > deliveredMs)
  const retryAt = lastFailed ? attemptMs + retryMs : undefined

  if (!firing) {
    const send = wasFiring && deliveredThisFiring && rule.spec.sendResolved !== false ? ({ status: "resolved", why: "resolved" } as const) : undefined
    return { ...none, send, requeueAfterMs: undefined }
  }
  const why = !wasFiring ? "new" : !deliveredThisFiring ? "retry" : nowMs >= deliveredMs! + resendMs ? "resend" : undefined
  const slide = slideMs(windowMs)
  if (why !== undefined && retryAt !== undefined && nowMs < retryAt) {
    return { ...none, send: undefined, requeueAfterMs: Math.min(slide, retryAt - nowMs) }
  }
  if (why !== undefined) return { ...none, send: { status: "firing", why }, requeueAfterMs: slide }
  return { ...none, send: undefined, requeueAfterMs: Math.min(slide, Math.max(1, deliveredMs! + resendMs - nowMs)) }
}

/** An Event as a notification lists it. */
export interface EventSummary {
  readonly namespace: string
  readonly name: string
  readonly type: string
  readonly reason: string
  readonly message: string
  readonly involvedObject: { readonly kind: string; readonly namespace: string; readonly name: string }
  readonly count: number
  readonly occurrencesInWindow: number
  readonly firstTimestamp: string
  readonly lastTimestamp: string
}

/** The JSON body of a notification (the Koder notify service's shape; docs/alerts.md). */
export interface Payload {
  readonly title: string
  readonly message: string
  readonly severity: (typeof AlertRuleModel.Severities)[number]
  readonly status: "firing" | "resolved"
  readonly labels: Readonly<Record<string, string>>
  readonly source: string
  readonly firedAt: string
  readonly resolvedAt?: string
  /** Same for every notification of one firing (first, resends, resolved): deduplicate by it. */
  readonly fingerprint: string
  readonly rule: { readonly namespace: string; readonly name: string; readonly uid: string }
  readonly occurrences: number
  readonly threshold: { readonly count: number; readonly window: string }
  /** The matching events, newest first, at most `maxEvents`. */
  readonly events: ReadonlyArray<EventSummary>
}

/** How many events one notification lists. */
export const maxEvents = 20

const summary = (m: Match): EventSummary => {
  const e = m.event
  const involved = asObject(e["involvedObject"])
  return {
    namespace: asString(metadataOf(e)["namespace"]),
    name: asString(metadataOf(e)["name"]),
    type: asString(e["type"]) || "Normal",
    reason: asString(e["reason"]),
    message: asString(e["message"]),
    involvedObject: { kind: asString(involved["kind"]), namespace: asString(involved["namespace"]), name: asString(involved["name"]) },
    count: Number(e["count"] ?? 1),
    occurrencesInWindow: m.occurrences,
    firstTimestamp: asString(e["firstTimestamp"]),
    lastTimestamp: asString(e["lastTimestamp"]) || asString(e["firstTimestamp"])
  }
}

/** The notification for `decision` (pure). `firedAtMs` is the firing's start. */
export const payload = (rule: AlertRuleModel.AlertRule, decision: Decision, firedAtMs: number, nowMs: number, source: string): Payload => {
  const namespace = rule.metadata.namespace ?? "default"
  const name = rule.metadata.name ?? ""
  const uid = rule.metadata.uid ?? ""
  const severity = rule.spec.severity ?? AlertRuleModel.defaults.severity
  const window = rule.spec.threshold?.window ?? AlertRuleModel.defaults.window
  const count = rule.spec.threshold?.count ?? AlertRuleModel.defaults.count
  const resolved = decision.send?.status === "resolved"
  // What happened, or (resolved: nothing in the window any more) what the rule looks for.
  const seen = (f: (e: JsonObject) => string, listed: ReadonlyArray<string> | undefined) => {
    const found = [...new Set(decision.matches.map((m) => f(m.event)))].filter((x) => x !== "")
    return found.length > 0 ? found : (listed ?? [])
  }
  const reasons = seen((e) => asString(e["reason"]), rule.spec.match?.reasons)
  const kinds = seen((e) => asString(asObject(e["involvedObject"])["kind"]), rule.spec.match?.involvedKinds)
  const what = `${reasons.join(", ") || "events"}${kinds.length > 0 ? ` on ${kinds.join(", ")}` : ""}`
  const title = `${resolved ? "[RESOLVED]" : "[FIRING]"} ${rule.spec.title ?? `${namespace}/${name}: ${what}`}`
  const top = decision.matches
    .slice(0, 3)
    .map((m) => `${asString(m.event["reason"])} ${asString(asObject(m.event["involvedObject"])["kind"])}/${asString(asObject(m.event["involvedObject"])["name"])} (${m.occurrences}×): ${asString(m.event["message"])}`)
  const message = resolved
    ? `${decision.occurrences} matching occurrence(s) in the last ${window}, below the threshold of ${count}.`
    : [`${decision.occurrences} matching occurrence(s) in the last ${window} (threshold ${count}).`, ...top].join("\n")
  return {
    title,
    message,
    severity,
    status: resolved ? "resolved" : "firing",
    labels: { ...(rule.spec.labels ?? {}), alertrule: name, namespace, severity },
    source,
    firedAt: timestamp(firedAtMs),
    ...(resolved ? { resolvedAt: timestamp(nowMs) } : {}),
    fingerprint: `${uid}/${timestamp(firedAtMs)}`,
    rule: { namespace, name, uid },
    occurrences: decision.occurrences,
    threshold: { count, window },
    events: decision.matches.slice(0, maxEvents).map(summary)
  }
}

/** How a delivery ended: when (ms), and the error if it failed. */
export interface Outcome {
  readonly atMs: number
  readonly error: string | undefined
}

/**
 * The status after `decision` at `nowMs` and the delivery `outcome` (pure; `undefined`: nothing
 * was sent). Attempt and delivery times are when the attempt ended, so a slow webhook's retries
 * and resends are paced from its answer, not from when the controller started asking.
 */
export const nextStatus = (
  rule: AlertRuleModel.AlertRule,
  decision: Decision,
  outcome: Outcome | undefined,
  nowMs: number
): AlertRuleModel.AlertRuleStatus => {
  const { lastDeliveryError: _cleared, ...old } = rule.status ?? {}
  const now = timestamp(nowMs)
  const ended = outcome === undefined ? now : timestamp(outcome.atMs)
  const keptError = rule.status?.lastDeliveryError === undefined || (outcome !== undefined && outcome.error === undefined) ? {} : { lastDeliveryError: rule.status.lastDeliveryError }
  return {
    ...old,
    ...keptError,
    firing: decision.firing,
    occurrences: decision.occurrences,
    ...(rule.metadata.generation === undefined ? {} : { observedGeneration: rule.metadata.generation }),
    ...(decision.started ? { lastFiredTime: now } : {}),
    ...(decision.resolved ? { lastResolvedTime: now } : {}),
    ...(outcome === undefined ? {} : { lastAttemptTime: ended }),
    ...(outcome !== undefined && outcome.error === undefined ? { lastDeliveryTime: ended } : {}),
    ...(outcome?.error === undefined ? {} : { lastDeliveryError: outcome.error })
  }
}

/** Options of the controller. */
export interface Options {
  /** Where notifications go (default: `Notifier.make()` over the global fetch). */
  readonly notifier?: Notifier.NotifierService
  /** Time between attempts after a failed delivery (default 30 000 ms). */
  readonly retryMs?: number
  /** The `source` of every notification (default `koder-fleet`). */
  readonly source?: string
}

// Informer objects are replaced, never changed, on update: a rule is decoded once per version
// however many Events (a storm) ask which rules they concern.
const decodedRules = new WeakMap<JsonObject, AlertRuleModel.AlertRule | undefined>()
const decodeRule = (raw: JsonObject): AlertRuleModel.AlertRule | undefined => {
  if (decodedRules.has(raw)) return decodedRules.get(raw)
  const decoded = decodeObject(AlertRuleModel.AlertRule, raw)
  const rule = Either.isRight(decoded) ? decoded.right : undefined
  decodedRules.set(raw, rule)
  return rule
}

/** The rules an Event change may concern: its namespace's, and kube-system's that reach it. */
const rulesFor = (informers: Informer.Informers, event: JsonObject): ReadonlyArray<string> => {
  const ns = asString(metadataOf(event)["namespace"])
  const rules = informers.for(AlertRuleRef)
  const candidates = ns === AlertRuleModel.ClusterNamespace ? rules.list(ns) : [...rules.list(ns), ...rules.list(AlertRuleModel.ClusterNamespace)]
  return candidates
    .filter((raw) => {
      const rule = decodeRule(raw)
      return rule !== undefined && rule.spec.suspend !== true && matches(rule, event)
    })
    .map(Informer.keyOf)
}

/** Resolve the webhook's headers; a missing Secret or key is a delivery error naming it (not its value). */
const headers = (rule: AlertRuleModel.AlertRule, client: Client.Client) =>
  Effect.gen(function* () {
    const out: Record<string, string> = {}
    const namespace = rule.metadata.namespace ?? "default"
    for (const h of rule.spec.webhook.headers ?? []) {
      if (h.value !== undefined) {
        out[h.name] = h.value
        continue
      }
      const ref = h.valueFrom!.secretKeyRef
      const secret = yield* client.get(ResourceRefs.Secret, namespace, ref.name).pipe(
        Effect.mapError((e) => (e.status.code === 404 ? `header ${h.name}: secret ${namespace}/${ref.name} not found` : `header ${h.name}: secret ${namespace}/${ref.name}: ${e.status.message}`))
      )
      const data = asObject(secret["data"])[ref.key]
      if (typeof data !== "string") return yield* Effect.fail(`header ${h.name}: secret ${namespace}/${ref.name} has no key ${JSON.stringify(ref.key)}`)
      const value = Either.try(() => new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(atob(data), (c) => c.charCodeAt(0))))
      if (Either.isLeft(value)) return yield* Effect.fail(`header ${h.name}: secret ${namespace}/${ref.name} key ${JSON.stringify(ref.key)} is not UTF-8 text`)
      out[h.name] = value.right.trim()
    }
    return out
  })

/** The AlertRule reconciler (keys: `namespace/name` of rules). */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const notifier = options.notifier ?? Notifier.make()
  const retryMs = options.retryMs ?? 30_000
  const source = options.source ?? "koder-fleet"
  return {
    name: "alert-rule",
    primary: AlertRuleRef,
    watches: [{ ref: EventTtl.EventRef, keys: (change, informers) => rulesFor(informers, change.object) }],
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const { namespace, name } = Informer.splitKey(key)
        const raw = ctx.informers.for(AlertRuleRef).get(namespace, name)
        if (raw === undefined || metadataOf(raw)["deletionTimestamp"] !== undefined) return
        const rule = decodeRule(raw)
        // The API validated it; a rule that no longer decodes waits for its next edit.
        if (rule === undefined || rule.spec.suspend === true) return
        const now = yield* Clock.currentTimeMillis
        const eventsInformer = ctx.informers.for(EventTtl.EventRef)
        const namespaces = AlertRuleModel.watchedNamespaces(rule)
        const events = namespaces.includes(AlertRuleModel.AllNamespaces) ? eventsInformer.list() : namespaces.flatMap((ns) => eventsInformer.list(ns))
        const decision = decide(rule, events, now, retryMs)

        let outcome: Outcome | undefined
        if (decision.send !== undefined) {
          const firedAt = decision.started ? now : (timeMs(rule.status?.lastFiredTime) ?? now)
          const body = payload(rule, decision, firedAt, now, source)
          const { timeoutMs } = AlertRuleModel.timings(rule)
          const delivered = yield* headers(rule, ctx.client).pipe(
            Effect.flatMap((h) => Effect.mapError(notifier.deliver({ url: rule.spec.webhook.url, headers: h, body, timeoutMs }), (e) => e.reason)),
            Effect.either
          )
          outcome = { atMs: yield* Clock.currentTimeMillis, error: Either.isLeft(delivered) ? delivered.left : undefined }
          if (outcome.error !== undefined) yield* Effect.logWarning(`alert-rule: ${key}: ${decision.send.status} notification not delivered: ${outcome.error}`)
        }

        const status = nextStatus(rule, decision, outcome, now)
        if (stableJson(status) !== stableJson(rule.status ?? {})) {
          // A merge patch of status carries no resourceVersion: a concurrent spec edit cannot make
          // this write fail after the notification went out (which would send it twice).
          const patch = { status: { ...status, lastDeliveryError: status.lastDeliveryError ?? null } }
          yield* ctx.client.patch(AlertRuleRef, namespace, name, "merge", patch, "status").pipe(Effect.catchIf((e) => e.status.code === 404, () => Effect.succeed({})))
        }
        return decision.requeueAfterMs === undefined ? {} : { requeueAfterMs: decision.requeueAfterMs }
      })
  }
}
