// IngressHostOwnership in an in-process API server: an Ingress claiming another namespace's host
// (exactly, through a wildcard, by TLS, or by a later update) is refused with 422 naming the field,
// the host and the owner; the owner's namespace may add Ingresses for its host; the admin's policy
// reserves hosts; an Ingress of another class is not Fleet's to judge.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as AdmissionPlugins from "../../src/admission/index.js"
import { namespace, start, type Harness } from "./harness.js"

const run = <A>(body: (h: Harness) => Promise<A>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(start((store) => Effect.succeed([AdmissionPlugins.IngressHostOwnership.make({ store })])), (h) => Effect.promise(() => body(h)))))

const ingress = (name: string, hosts: ReadonlyArray<string>, o: { tls?: ReadonlyArray<string>; className?: string } = {}) => ({
  apiVersion: "networking.k8s.io/v1",
  kind: "Ingress",
  metadata: { name },
  spec: {
    ingressClassName: o.className ?? "fleet",
    rules: hosts.map((host) => ({ host, http: { paths: [{ path: "/", pathType: "Exact", backend: { service: { name: "web", port: { number: 80 } } } }] } })),
    ...(o.tls === undefined ? {} : { tls: [{ hosts: o.tls, secretName: "cert" }] })
  }
})

const ingresses = (ns: string) => `/apis/networking.k8s.io/v1/namespaces/${ns}/ingresses`

const setup = async (call: Harness["call"], namespaces = true) => {
  if (namespaces) for (const ns of ["team-a", "team-b"]) expect((await call("POST", "/api/v1/namespaces", namespace(ns))).status).toBe(201)
  expect((await call("POST", ingresses("team-a"), ingress("shop", ["shop.example.com", "*.apps.example.com"]))).status).toBe(201)
}

describe("IngressHostOwnership", () => {
  it("refuses another namespace's Ingress for an owned host, naming the field, the host and the owner", () =>
    run(async ({ call }) => {
      await setup(call)
      const refused = await call("POST", ingresses("team-b"), ingress("hijack", ["other.example.com", "shop.example.com"]))
      expect(refused.status).toBe(422)
      expect(refused.body.kind).toBe("Status")
      expect(refused.body.reason).toBe("Invalid")
      expect(refused.body.details.causes).toEqual([
        { reason: "FieldValueForbidden", field: "spec.rules[1].host", message: 'Forbidden: host "shop.example.com" is owned by namespace "team-a", Ingress team-a/shop' }
      ])
      expect(refused.body.message).toContain('Ingress.networking.k8s.io "hijack" is invalid')
      // Covered by the owner's wildcard, or claimed only through TLS: refused too.
      expect((await call("POST", ingresses("team-b"), ingress("w", ["x.apps.example.com"]))).status).toBe(422)
      const tls = await call("POST", ingresses("team-b"), ingress("t", ["t.example.com"], { tls: ["shop.example.com"] }))
      expect(tls.status).toBe(422)
      expect(tls.body.details.causes[0].field).toBe("spec.tls[0].hosts[0]")
      // The owner's namespace may split its host over Ingresses; unrelated hosts are anyone's.
      expect((await call("POST", ingresses("team-a"), ingress("shop-api", ["shop.example.com"]))).status).toBe(201)
      expect((await call("POST", ingresses("team-b"), ingress("mine", ["b.example.com", "apps.example.com"]))).status).toBe(201)
      // Another class is another controller's business.
      expect((await call("POST", ingresses("team-b"), ingress("nginx", ["shop.example.com"], { className: "nginx" }))).status).toBe(201)
    }))

  it("refuses an update that adds an owned host, even from an older Ingress, and lets the owner update", () =>
    run(async ({ call }) => {
      for (const ns of ["team-a", "team-b"]) expect((await call("POST", "/api/v1/namespaces", namespace(ns))).status).toBe(201)
      // team-b's Ingress is the oldest in the cluster.
      const old = await call("POST", ingresses("team-b"), ingress("old", ["b.example.com"]))
      expect(old.status).toBe(201)
      await setup(call, false)
      const updated = { ...old.body, spec: { ...old.body.spec, rules: [...old.body.spec.rules, ...ingress("x", ["shop.example.com"]).spec.rules] } }
      const refused = await call("PUT", `${ingresses("team-b")}/old`, updated)
      expect(refused.status).toBe(422)
      expect(refused.body.details.causes[0].field).toBe("spec.rules[1].host")
      const shop = (await call("GET", `${ingresses("team-a")}/shop`)).body
      const changed = await call("PUT", `${ingresses("team-a")}/shop`, { ...shop, metadata: { ...shop.metadata, labels: { v: "2" } } })
      expect(changed.status).toBe(200)
    }))

  it("reserves hosts by the admin's policy ConfigMap", () =>
    run(async ({ call }) => {
      for (const ns of ["team-a", "team-b"]) expect((await call("POST", "/api/v1/namespaces", namespace(ns))).status).toBe(201)
      expect((await call("POST", "/api/v1/namespaces", namespace("kube-system"))).status).toBe(201)
      const policy = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "fleet-ingress-hosts", namespace: "kube-system" }, data: { "team-a": "*.shop.example.com shop.example.com" } }
      expect((await call("POST", "/api/v1/namespaces/kube-system/configmaps", policy)).status).toBe(201)
      const refused = await call("POST", ingresses("team-b"), ingress("early", ["eu.shop.example.com"]))
      expect(refused.status).toBe(422)
      expect(refused.body.details.causes[0].message).toContain('reserved for namespace "team-a"')
      expect(refused.body.details.causes[0].message).toContain("kube-system/fleet-ingress-hosts")
      expect((await call("POST", ingresses("team-a"), ingress("eu", ["eu.shop.example.com"]))).status).toBe(201)
    }))
})
