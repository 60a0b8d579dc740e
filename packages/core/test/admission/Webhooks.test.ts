import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as Webhooks from "../../src/admission/Webhooks.js"
import type * as Policy from "../../src/model/Policy.js"
import { eventually, namespace, pod, start } from "./harness.js"
import { request } from "./requests.js"

const attrs = (over: Partial<Webhooks.Attributes> = {}): Webhooks.Attributes => ({
  operation: "CREATE",
  group: "",
  version: "v1",
  plural: "pods",
  subresource: "",
  namespaced: true,
  ...over
})

describe("Webhooks.ruleMatches", () => {
  const rule = (r: Partial<Policy.RuleWithOperations>): Policy.RuleWithOperations => ({ operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], ...r })
  const cases: ReadonlyArray<[string, Partial<Policy.RuleWithOperations>, Partial<Webhooks.Attributes>, boolean]> = [
    ["exact", {}, {}, true],
    ["other operation", {}, { operation: "UPDATE" }, false],
    ["any operation", { operations: ["*"] }, { operation: "DELETE" }, true],
    ["other group", {}, { group: "apps", plural: "deployments" }, false],
    ["a resource does not match its subresources", {}, { subresource: "status" }, false],
    ["pods/status", { resources: ["pods/status"] }, { subresource: "status" }, true],
    ["pods/*", { resources: ["pods/*"] }, { subresource: "status" }, true],
    ["pods/* is not pods", { resources: ["pods/*"] }, {}, false],
    ["* is every resource", { resources: ["*"], apiGroups: ["*"], apiVersions: ["*"] }, { group: "apps", version: "v1", plural: "deployments" }, true],
    ["*/* includes subresources", { resources: ["*/*"] }, { subresource: "status" }, true],
    ["*/scale", { resources: ["*/scale"], apiGroups: ["*"] }, { group: "apps", plural: "deployments", subresource: "scale" }, true],
    ["Cluster scope", { scope: "Cluster", resources: ["*"] }, {}, false],
    ["Namespaced scope", { scope: "Namespaced" }, {}, true],
    ["namespaces are cluster-scoped", { scope: "Cluster", resources: ["namespaces"] }, { plural: "namespaces", namespaced: false }, true]
  ]
  it.each(cases)("%s", (_what, r, a, want) => expect(Webhooks.ruleMatches(rule(r), attrs(a))).toBe(want))
})

describe("Webhooks.matches", () => {
  const hook = (w: Partial<Policy.ValidatingWebhook>): Policy.ValidatingWebhook => ({
    name: "w.example.com",
    clientConfig: { url: "https://x" },
    rules: [{ operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*"] }],
    sideEffects: "None",
    admissionReviewVersions: ["v1"],
    ...w
  })
  const labelled = (labels: Record<string, string>) => ({ metadata: { labels } })
  const cases: ReadonlyArray<[string, Partial<Policy.ValidatingWebhook>, { object: unknown; oldObject: unknown; namespaceLabels: Record<string, string> | undefined }, boolean]> = [
    ["no selectors", {}, { object: {}, oldObject: undefined, namespaceLabels: {} }, true],
    ["namespace selected", { namespaceSelector: { matchLabels: { env: "prod" } } }, { object: {}, oldObject: undefined, namespaceLabels: { env: "prod" } }, true],
    ["namespace not selected", { namespaceSelector: { matchLabels: { env: "prod" } } }, { object: {}, oldObject: undefined, namespaceLabels: { env: "dev" } }, false],
    ["object selected", { objectSelector: { matchExpressions: [{ key: "inject", operator: "Exists" }] } }, { object: labelled({ inject: "y" }), oldObject: undefined, namespaceLabels: {} }, true],
    ["old object selected", { objectSelector: { matchLabels: { a: "b" } } }, { object: labelled({}), oldObject: labelled({ a: "b" }), namespaceLabels: {} }, true],
    ["object not selected", { objectSelector: { matchLabels: { a: "b" } } }, { object: labelled({}), oldObject: undefined, namespaceLabels: {} }, false]
  ]
  it.each(cases)("%s", (_what, w, objects, want) => expect(Webhooks.matches(hook(w), attrs(), objects)).toBe(want))
})

describe("Webhooks.interpret", () => {
  const answer = (response: unknown, status = 200) => ({ status, body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response }) })
  const patch = btoa(JSON.stringify([{ op: "add", path: "/metadata/labels", value: { a: "b" } }]))
  it.each<[string, Webhooks.CallResponse, unknown]>([
    ["allowed", answer({ uid: "u", allowed: true }), { _tag: "Allowed", patch: undefined, warnings: [] }],
    ["patched", answer({ uid: "u", allowed: true, patchType: "JSONPatch", patch }), { _tag: "Allowed", patch: [{ op: "add", path: "/metadata/labels", value: { a: "b" } }], warnings: [] }],
    ["wrong uid", answer({ uid: "v", allowed: true }), { _tag: "Failed", reason: 'expected response.uid="u", got "v"' }],
    ["no response", { status: 200, body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }) }, { _tag: "Failed", reason: "webhook response was absent" }],
    ["not JSON", { status: 200, body: "<html>" }, { _tag: "Failed", reason: expect.stringContaining("the response is not JSON") }],
    ["HTTP 500", answer({ uid: "u", allowed: true }, 500), { _tag: "Failed", reason: "the server responded with status 500" }],
    ["patch without type", answer({ uid: "u", allowed: true, patch }), { _tag: "Failed", reason: 'unsupported patch type ""' }]
  ])("%s", (_what, response, want) => expect(Webhooks.interpret("w", "u", true, response)).toEqual(want))

  it("turns a denial into kube's Status", () => {
    const denied = Webhooks.interpret("w.example.com", "u", false, answer({ uid: "u", allowed: false, status: { code: 403, reason: "Forbidden", message: "no latest tags" } }))
    expect(denied._tag === "Denied" && denied.error.status).toMatchObject({ code: 403, reason: "Forbidden", message: 'admission webhook "w.example.com" denied the request: no latest tags' })
    expect(Webhooks.denial("w", undefined).status).toMatchObject({ code: 400, message: 'admission webhook "w" denied the request without explanation' })
  })

  it("sends an AdmissionReview v1 with the request's identity", () => {
    const review = Webhooks.review(request("UPDATE", "apps", "deployments", { namespace: "a", name: "d", object: { x: 1 }, oldObject: { x: 0 }, subresource: "scale" }), "id-1")
    expect(review.request).toMatchObject({
      uid: "id-1",
      kind: { group: "apps", version: "v1", kind: "Deployment" },
      resource: { group: "apps", version: "v1", resource: "deployments" },
      subResource: "scale",
      name: "d",
      namespace: "a",
      operation: "UPDATE",
      userInfo: { username: "admin", groups: ["system:masters"] },
      object: { x: 1 },
      oldObject: { x: 0 },
      options: { kind: "UpdateOptions" }
    })
  })
})

describe("webhook plugins in the API server (fake transport)", () => {
  it("follows configurations, patches, denies, and applies the failure policy", async () => {
    const calls: Array<any> = []
    const call: Webhooks.Call = (url, _ca, body) => {
      const review = JSON.parse(body)
      calls.push({ url, review })
      const uid = review.request.uid
      const respond = (response: object) => Effect.succeed({ status: 200, body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid, ...response } }) })
      if (url === "https://mutate") return respond({ allowed: true, patchType: "JSONPatch", patch: btoa(JSON.stringify([{ op: "add", path: "/metadata/annotations", value: { mutated: "yes" } }])) })
      if (url === "https://deny") return review.request.name === "bad" ? respond({ allowed: false, status: { message: "bad name" } }) : respond({ allowed: true })
      return Effect.fail(new Webhooks.WebhookCallError({ reason: `Post "${url}": connect ECONNREFUSED` }))
    }
    const hook = (name: string, url: string, extra: object = {}) => ({
      name,
      clientConfig: { url },
      rules: [{ operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"] }],
      sideEffects: "None",
      admissionReviewVersions: ["v1"],
      ...extra
    })
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const h = yield* start((store) => Effect.map(Webhooks.make({ store, call }), (w) => [w.mutating, w.validating]))
          const cm = (name: string) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name } })
          yield* Effect.promise(async () => {
            await h.call("POST", "/api/v1/namespaces", namespace("team"))
            expect((await h.call("POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", { apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", metadata: { name: "m" }, webhooks: [hook("m.example.com", "https://mutate")] })).status).toBe(201)
            expect((await h.call("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingWebhookConfiguration", metadata: { name: "v" }, webhooks: [hook("v.example.com", "https://deny"), hook("gone.example.com", "https://gone", { failurePolicy: "Ignore" })] })).status).toBe(201)
            await eventually(async () => {
              const ok = await h.call("POST", "/api/v1/namespaces/team/configmaps", cm(`ok-${calls.length}`))
              expect(ok.body.metadata.annotations).toEqual({ mutated: "yes" })
            })
            const bad = await h.call("POST", "/api/v1/namespaces/team/configmaps", cm("bad"))
            expect(bad.status).toBe(400)
            expect(bad.body.message).toBe('admission webhook "v.example.com" denied the request: bad name')
            // The validating webhook saw the mutated object.
            expect(calls.find((c) => c.url === "https://deny").review.request.object.metadata.annotations).toEqual({ mutated: "yes" })
            // Pods are not in the rules.
            const before = calls.length
            expect((await h.call("POST", "/api/v1/namespaces/team/pods", pod("p"))).status).toBe(201)
            expect(calls.length).toBe(before)
            // failurePolicy Fail (the default) refuses when the webhook cannot be reached.
            await h.call("PATCH", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v", [{ op: "remove", path: "/webhooks/1/failurePolicy" }], "admin", "application/json-patch+json")
            await eventually(async () => {
              const refused = await h.call("POST", "/api/v1/namespaces/team/configmaps", cm(`x-${calls.length}`))
              expect(refused.status).toBe(500)
              expect(refused.body.message).toBe('Internal error occurred: failed calling webhook "gone.example.com": failed to call webhook: Post "https://gone": connect ECONNREFUSED')
            })
            // Deleting the configuration stops the calls.
            await h.call("DELETE", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v")
            await eventually(async () => expect((await h.call("POST", "/api/v1/namespaces/team/configmaps", cm(`y-${calls.length}`))).status).toBe(201))
          })
        })
      )
    )
  })
})
