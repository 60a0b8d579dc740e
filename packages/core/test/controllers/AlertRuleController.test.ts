import { describe, expect, it } from "vitest"
import * as AlertRule from "../../src/controllers/AlertRuleController.js"
import type * as AlertRuleModel from "../../src/model/AlertRule.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const s = 1000
const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

const rule = (spec: Record<string, unknown> = {}, status?: AlertRuleModel.AlertRuleStatus, namespace = "shop"): AlertRuleModel.AlertRule =>
  ({
    apiVersion: "fleet.koder.dev/v1",
    kind: "AlertRule",
    metadata: { name: "crashloops", namespace, uid: "rule-uid", generation: 1 },
    spec: {
      match: { reasons: ["BackOff"], involvedKinds: ["Pod"] },
      threshold: { count: 5, window: "10m" },
      resendInterval: "1h",
      webhook: { url: "http://notify.local/v1/alerts" },
      ...spec
    },
    ...(status === undefined ? {} : { status })
  }) as AlertRuleModel.AlertRule

const event = (fields: { count?: number; first?: number; last?: number; reason?: string; kind?: string; namespace?: string; type?: string; name?: string } = {}) => ({
  apiVersion: "v1",
  kind: "Event",
  metadata: { name: fields.name ?? "web-1.abc", namespace: fields.namespace ?? "shop" },
  involvedObject: { kind: fields.kind ?? "Pod", namespace: fields.namespace ?? "shop", name: "web-1" },
  reason: fields.reason ?? "BackOff",
  message: "Back-off restarting failed container",
  type: fields.type ?? "Warning",
  count: fields.count ?? 1,
  firstTimestamp: at(fields.first ?? T0 - 60 * s),
  lastTimestamp: at(fields.last ?? fields.first ?? T0 - 60 * s)
})

const firing = (fired: number, delivered?: number, attempt?: number, error?: string): AlertRuleModel.AlertRuleStatus => ({
  firing: true,
  lastFiredTime: AlertRule.timestamp(fired),
  ...(delivered === undefined ? {} : { lastDeliveryTime: AlertRule.timestamp(delivered) }),
  ...(attempt === undefined ? {} : { lastAttemptTime: AlertRule.timestamp(attempt) }),
  ...(error === undefined ? {} : { lastDeliveryError: error })
})

const storm = [event({ count: 6, first: T0 - 120 * s, last: T0 - 5 * s })]
const retry = 30 * s

describe("AlertRule.occurrencesInWindow", () => {
  const window = 10 * 60 * s
  it.each([
    ["an event entirely inside the window counts fully", event({ count: 7, first: T0 - 60 * s, last: T0 - 10 * s }), 7],
    ["an event last seen before the window counts nothing", event({ count: 7, first: T0 - 3_600 * s, last: T0 - 11 * 60 * s }), 0],
    ["an older event still recurring counts its share of the window", event({ count: 60, first: T0 - 60 * 60 * s, last: T0 }), 10],
    ["a share never rounds to nothing", event({ count: 2, first: T0 - 100 * 60 * s, last: T0 - 9 * 60 * s }), 1],
    ["an event without a count is one occurrence", { ...event({ first: T0 - 5 * s }), count: undefined }, 1]
  ] as const)("%s", (_what, e, want) => expect(AlertRule.occurrencesInWindow(e, T0, window)).toBe(want))
})

describe("AlertRule.matches", () => {
  it.each([
    ["reason and kind listed", rule(), event(), true],
    ["another reason", rule(), event({ reason: "Pulled" }), false],
    ["another kind", rule(), event({ kind: "Node" }), false],
    ["another namespace", rule(), event({ namespace: "payments" }), false],
    ["type filter", rule({ match: { type: "Normal" } }), event(), false],
    ["empty match matches anything in the namespace", rule({ match: {} }), event({ reason: "Scheduled", kind: "Node", type: "Normal" }), true],
    ["kube-system rule naming the namespace", rule({ match: { namespaces: ["payments"] } }, undefined, "kube-system"), event({ namespace: "payments" }), true],
    ["kube-system rule for every namespace", rule({ match: { namespaces: ["*"] } }, undefined, "kube-system"), event({ namespace: "payments" }), true]
  ] as const)("%s", (_what, r, e, want) => expect(AlertRule.matches(r, e)).toBe(want))
})

describe("AlertRule.decide", () => {
  const cases: ReadonlyArray<{
    what: string
    rule: AlertRuleModel.AlertRule
    events: ReadonlyArray<Record<string, unknown>>
    now?: number
    firing: boolean
    send: string | undefined
    requeue?: number | undefined
  }> = [
    { what: "below the threshold: quiet", rule: rule(), events: [event({ count: 4 })], firing: false, send: undefined, requeue: undefined },
    { what: "threshold met for the first time: fire", rule: rule(), events: storm, firing: true, send: "firing/new", requeue: 60 * s },
    { what: "several events add up", rule: rule(), events: [event({ count: 3 }), event({ count: 2, name: "web-2.def" })], firing: true, send: "firing/new" },
    { what: "unmatched events do not count", rule: rule(), events: [event({ count: 3 }), event({ count: 9, reason: "Pulled" })], firing: false, send: undefined },
    {
      what: "firing and delivered: deduplicated until the resend interval",
      rule: rule({}, firing(T0 - 60 * s, T0 - 60 * s)),
      events: storm,
      firing: true,
      send: undefined,
      requeue: 60 * s
    },
    {
      what: "resend interval passed: send again",
      rule: rule({ resendInterval: "30s" }, firing(T0 - 60 * s, T0 - 31 * s)),
      events: storm,
      firing: true,
      send: "firing/resend"
    },
    {
      what: "resend soon: look again then",
      rule: rule({ resendInterval: "30s" }, firing(T0 - 60 * s, T0 - 25 * s)),
      events: storm,
      firing: true,
      send: undefined,
      requeue: 5 * s
    },
    {
      what: "the first delivery failed recently: wait for the retry",
      rule: rule({}, firing(T0 - 10 * s, undefined, T0 - 10 * s, "HTTP 500")),
      events: storm,
      firing: true,
      send: undefined,
      requeue: 20 * s
    },
    {
      what: "the first delivery failed long enough ago: retry",
      rule: rule({}, firing(T0 - 40 * s, undefined, T0 - 40 * s, "HTTP 500")),
      events: storm,
      firing: true,
      send: "firing/retry"
    },
    {
      what: "a failed resend is retried, paced",
      rule: rule({ resendInterval: "30s" }, firing(T0 - 600 * s, T0 - 100 * s, T0 - 5 * s, "HTTP 503")),
      events: storm,
      firing: true,
      send: undefined,
      requeue: 25 * s
    },
    {
      what: "resolved after a delivered firing: tell the webhook",
      rule: rule({}, firing(T0 - 60 * s, T0 - 60 * s)),
      events: [event({ count: 6, first: T0 - 20 * 60 * s, last: T0 - 11 * 60 * s })],
      firing: false,
      send: "resolved/resolved",
      requeue: undefined
    },
    {
      what: "resolved, sendResolved off: quiet",
      rule: rule({ sendResolved: false }, firing(T0 - 60 * s, T0 - 60 * s)),
      events: [],
      firing: false,
      send: undefined
    },
    {
      what: "resolved before anything was delivered: quiet",
      rule: rule({}, firing(T0 - 60 * s, undefined, T0 - 60 * s, "HTTP 500")),
      events: [],
      firing: false,
      send: undefined
    },
    {
      what: "a new firing after an old delivery fires again",
      rule: rule({}, { firing: false, lastFiredTime: AlertRule.timestamp(T0 - 3_600 * s), lastDeliveryTime: AlertRule.timestamp(T0 - 3_600 * s) }),
      events: storm,
      firing: true,
      send: "firing/new"
    }
  ]
  it.each(cases)("$what", (c) => {
    const d = AlertRule.decide(c.rule, c.events, c.now ?? T0, retry)
    expect(d.firing).toBe(c.firing)
    expect(d.send === undefined ? undefined : `${d.send.status}/${d.send.why}`).toBe(c.send)
    if ("requeue" in c) expect(d.requeueAfterMs).toBe(c.requeue)
  })
})

describe("AlertRule.nextStatus and payload", () => {
  it("records a firing, its delivery, and clears the last error", () => {
    const r = rule({}, { firing: false, lastDeliveryError: "HTTP 500", lastAttemptTime: AlertRule.timestamp(T0 - 3_600 * s) })
    const d = AlertRule.decide(r, storm, T0, retry)
    const status = AlertRule.nextStatus(r, d, { atMs: T0 + 250, error: undefined }, T0)
    expect(status).toEqual({
      firing: true,
      occurrences: 6,
      observedGeneration: 1,
      lastFiredTime: "2024-05-01T10:00:00.000Z",
      lastAttemptTime: "2024-05-01T10:00:00.250Z",
      lastDeliveryTime: "2024-05-01T10:00:00.250Z"
    })
  })

  it("keeps the last delivery when an attempt fails", () => {
    const r = rule({ resendInterval: "30s" }, firing(T0 - 600 * s, T0 - 100 * s))
    const d = AlertRule.decide(r, storm, T0, retry)
    const status = AlertRule.nextStatus(r, d, { atMs: T0, error: "POST http://notify.local/v1/alerts: HTTP 503" }, T0)
    expect(status.lastAttemptTime).toBe(AlertRule.timestamp(T0))
    expect(status.lastDeliveryTime).toBe(AlertRule.timestamp(T0 - 100 * s))
    expect(status.lastDeliveryError).toBe("POST http://notify.local/v1/alerts: HTTP 503")
    expect(status.lastFiredTime).toBe(AlertRule.timestamp(T0 - 600 * s))
  })

  it("builds the notify payload: title, severity, labels, fingerprint, events newest first", () => {
    const r = rule({ severity: "critical", labels: { team: "shop" } })
    const events = [event({ count: 2, name: "a", last: T0 - 50 * s }), event({ count: 4, name: "b", last: T0 - 5 * s })]
    const d = AlertRule.decide(r, events, T0, retry)
    const p = AlertRule.payload(r, d, T0, T0, "koder-fleet/eu-1")
    expect(p).toMatchObject({
      title: "[FIRING] shop/crashloops: BackOff on Pod",
      severity: "critical",
      status: "firing",
      labels: { team: "shop", alertrule: "crashloops", namespace: "shop", severity: "critical" },
      source: "koder-fleet/eu-1",
      firedAt: "2024-05-01T10:00:00.000Z",
      fingerprint: "rule-uid/2024-05-01T10:00:00.000Z",
      occurrences: 6,
      threshold: { count: 5, window: "10m" }
    })
    expect(p.events.map((e) => e.name)).toEqual(["b", "a"])
    expect(p.message.split("\n")[0]).toBe("6 matching occurrence(s) in the last 10m (threshold 5).")
  })
})
