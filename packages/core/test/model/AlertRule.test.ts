import { describe, expect, it } from "@effect/vitest"
import * as AlertRule from "../../src/model/AlertRule.js"

const rule = (spec: Record<string, unknown>, namespace = "shop") =>
  ({ apiVersion: "fleet.koder.dev/v1", kind: "AlertRule", metadata: { name: "r", namespace }, spec: { webhook: { url: "https://notify.example/v1/alerts" }, ...spec } }) as AlertRule.AlertRule

const secretHeader = { name: "Authorization", valueFrom: { secretKeyRef: { name: "notify", key: "token" } } }

describe("AlertRule.validate", () => {
  it.each([
    ["a minimal rule", rule({}), []],
    ["its own namespace listed", rule({ match: { namespaces: ["shop"] } }), []],
    ["another namespace from an ordinary namespace", rule({ match: { namespaces: ["shop", "payments"] } }), ["spec.match.namespaces[1]"]],
    ["every namespace from an ordinary namespace", rule({ match: { namespaces: ["*"] } }), ["spec.match.namespaces[0]"]],
    ["every namespace from kube-system", rule({ match: { namespaces: ["*"] } }, "kube-system"), []],
    ["a zero count", rule({ threshold: { count: 0 } }), ["spec.threshold.count"]],
    ["a window that is no duration", rule({ threshold: { window: "ten minutes" } }), ["spec.threshold.window"]],
    ["a resend interval under a second", rule({ resendInterval: "500ms" }), ["spec.resendInterval"]],
    ["a relative URL", rule({ webhook: { url: "/alerts" } }), ["spec.webhook.url"]],
    ["a non-HTTP URL", rule({ webhook: { url: "ftp://notify.example/" } }), ["spec.webhook.url"]],
    ["credentials in the URL", rule({ webhook: { url: "https://user:pw@notify.example/" } }), ["spec.webhook.url"]],
    ["a header from a Secret and a literal one", rule({ webhook: { url: "https://n.example/", headers: [secretHeader, { name: "X-Team", value: "shop" }] } }), []],
    ["a header with both value and valueFrom", rule({ webhook: { url: "https://n.example/", headers: [{ ...secretHeader, value: "x" }] } }), ["spec.webhook.headers[0]"]],
    ["a header with neither", rule({ webhook: { url: "https://n.example/", headers: [{ name: "X-Team" }] } }), ["spec.webhook.headers[0]"]],
    ["a header the transport owns", rule({ webhook: { url: "https://n.example/", headers: [{ name: "Content-Type", value: "text/plain" }] } }), ["spec.webhook.headers[0].name"]],
    ["a repeated header", rule({ webhook: { url: "https://n.example/", headers: [{ name: "X-A", value: "1" }, { name: "x-a", value: "2" }] } }), ["spec.webhook.headers[1].name"]],
    ["a timeout over a minute", rule({ webhook: { url: "https://n.example/", timeoutSeconds: 120 } }), ["spec.webhook.timeoutSeconds"]]
  ] as const)("%s", (_what, r, paths) => {
    expect(AlertRule.validate(r).map((e) => e.path)).toEqual(paths)
  })

  it("reads timings with defaults", () => {
    expect(AlertRule.timings(rule({}))).toEqual({ windowMs: 300_000, resendMs: 14_400_000, timeoutMs: 10_000 })
    expect(AlertRule.timings(rule({ threshold: { window: "1h30m" }, resendInterval: "90s", webhook: { url: "https://n.example/", timeoutSeconds: 3 } }))).toEqual({ windowMs: 5_400_000, resendMs: 90_000, timeoutMs: 3_000 })
  })
})
