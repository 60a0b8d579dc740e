/**
 * Host ownership across namespaces, table-driven: overlap of patterns, first claim wins by age
 * (then uid), same-namespace sharing, wildcard against concrete hosts, the catch-all, the admin's
 * policy, and what the route table then serves (a hijacking Ingress gets nothing, TLS included).
 */
import { describe, expect, it } from "vitest"
import * as IngressHosts from "../../src/network/IngressHosts.js"
import * as IngressRoutes from "../../src/network/IngressRoutes.js"

type Json = Record<string, unknown>

const ing = (ns: string, name: string, hosts: ReadonlyArray<string | undefined>, o: { created?: string; uid?: string; tls?: ReadonlyArray<Json>; defaultBackend?: boolean } = {}): Json => ({
  apiVersion: "networking.k8s.io/v1",
  kind: "Ingress",
  metadata: { namespace: ns, name, uid: o.uid ?? `${ns}-${name}`, creationTimestamp: o.created ?? "2026-01-01T00:00:00Z" },
  spec: {
    ingressClassName: "fleet",
    ...(o.defaultBackend === true ? { defaultBackend: { service: { name: `${name}-default`, port: { number: 80 } } } } : {}),
    rules: hosts.map((host) => ({
      ...(host === undefined ? {} : { host }),
      http: { paths: [{ path: "/", pathType: "Exact", backend: { service: { name: name, port: { number: 80 } } } }, { path: "/", pathType: "Prefix", backend: { service: { name: name, port: { number: 80 } } } }] }
    })),
    ...(o.tls === undefined ? {} : { tls: o.tls })
  }
})

describe("IngressHosts.overlaps", () => {
  const cases: ReadonlyArray<[string, string, boolean]> = [
    ["a.example.com", "a.example.com", true],
    ["a.example.com", "b.example.com", false],
    ["*.example.com", "a.example.com", true],
    ["a.example.com", "*.example.com", true],
    ["*.example.com", "example.com", false],
    ["*.example.com", "a.b.example.com", false],
    ["*.example.com", "*.example.com", true],
    ["*.a.example.com", "*.example.com", false],
    ["", "", true],
    ["", "a.example.com", false]
  ]
  it.each(cases)("%j and %j: %s", (a, b, want) => expect(IngressHosts.overlaps(a, b)).toBe(want))
})

describe("IngressHosts.decide", () => {
  const t0 = "2026-01-01T00:00:00Z"
  const t1 = "2026-01-01T00:00:01Z"
  const cases: ReadonlyArray<{
    readonly name: string
    readonly ingresses: ReadonlyArray<Json>
    readonly policy?: IngressHosts.Policy
    /** ingress → lost hosts */
    readonly lost: Record<string, ReadonlyArray<string>>
    readonly owners: Record<string, string>
  }> = [
    { name: "the first claim owns the host", ingresses: [ing("b", "hijack", ["shop.example.com"], { created: t1 }), ing("a", "shop", ["shop.example.com"], { created: t0 })], lost: { "b/hijack": ["shop.example.com"] }, owners: { "shop.example.com": "a" } },
    { name: "same timestamp: uid decides", ingresses: [ing("b", "x", ["h.test"], { uid: "2" }), ing("a", "x", ["h.test"], { uid: "1" })], lost: { "b/x": ["h.test"] }, owners: { "h.test": "a" } },
    { name: "one namespace shares a host between its Ingresses", ingresses: [ing("a", "one", ["h.test"], { created: t0 }), ing("a", "two", ["h.test"], { created: t1 })], lost: {}, owners: { "h.test": "a" } },
    { name: "a newer wildcard loses to an older concrete host it covers", ingresses: [ing("a", "x", ["a.example.com"], { created: t0 }), ing("b", "y", ["*.example.com"], { created: t1 })], lost: { "b/y": ["*.example.com"] }, owners: { "a.example.com": "a" } },
    { name: "a newer concrete host loses to an older wildcard", ingresses: [ing("a", "x", ["*.example.com"], { created: t0 }), ing("b", "y", ["a.example.com", "other.test"], { created: t1 })], lost: { "b/y": ["a.example.com"] }, owners: { "*.example.com": "a", "other.test": "b" } },
    { name: "a wildcard does not cover its own domain nor two labels", ingresses: [ing("a", "x", ["*.example.com"], { created: t0 }), ing("b", "y", ["example.com", "a.b.example.com"], { created: t1 })], lost: {}, owners: { "*.example.com": "a", "example.com": "b", "a.b.example.com": "b" } },
    { name: "hosts compare case-insensitively", ingresses: [ing("a", "x", ["Shop.Example.COM"], { created: t0 }), ing("b", "y", ["shop.example.com."], { created: t1 })], lost: { "b/y": ["shop.example.com"] }, owners: { "shop.example.com": "a" } },
    { name: "the catch-all belongs to the first namespace too", ingresses: [ing("a", "x", [undefined], { created: t0 }), ing("b", "y", [undefined], { created: t1 })], lost: { "b/y": [""] }, owners: { "": "a" } },
    { name: "a default backend is a catch-all claim", ingresses: [ing("a", "x", [undefined], { created: t0 }), ing("b", "y", [], { created: t1, defaultBackend: true })], lost: { "b/y": [""] }, owners: { "": "a" } },
    { name: "a TLS host is a claim", ingresses: [ing("a", "x", ["h.test"], { created: t0 }), ing("b", "y", [], { created: t1, tls: [{ hosts: ["h.test"], secretName: "s" }] })], lost: { "b/y": ["h.test"] }, owners: { "h.test": "a" } },
    { name: "the policy beats age", ingresses: [ing("b", "early", ["shop.example.com"], { created: t0 }), ing("a", "shop", ["shop.example.com"], { created: t1 })], policy: [{ pattern: "shop.example.com", namespace: "a" }], lost: { "b/early": ["shop.example.com"] }, owners: { "shop.example.com": "a" } },
    { name: "a reserved wildcard covers its hosts", ingresses: [ing("b", "y", ["x.example.com"], { created: t0 })], policy: [{ pattern: "*.example.com", namespace: "a" }], lost: { "b/y": ["x.example.com"] }, owners: {} },
    { name: "the most specific reservation decides", ingresses: [ing("b", "y", ["x.example.com"], { created: t0 }), ing("a", "z", ["y.example.com"], { created: t1 })], policy: [{ pattern: "*.example.com", namespace: "a" }, { pattern: "x.example.com", namespace: "b" }], lost: {}, owners: { "x.example.com": "b", "y.example.com": "a" } },
    { name: "reserving one host does not reserve a wildcard over it", ingresses: [ing("b", "y", ["y.example.com"], { created: t0 }), ing("a", "z", ["*.example.com"], { created: t1 })], policy: [{ pattern: "x.example.com", namespace: "a" }], lost: { "a/z": ["*.example.com"] }, owners: { "y.example.com": "b" } },
    { name: "a wildcard overlapping another namespace's reservation loses", ingresses: [ing("a", "z", ["*.example.com"], { created: t0 })], policy: [{ pattern: "x.example.com", namespace: "b" }], lost: { "a/z": ["*.example.com"] }, owners: {} }
  ]
  it.each(cases)("$name", (c) => {
    const d = IngressHosts.decide(c.ingresses, c.policy)
    expect(Object.fromEntries([...d.lost].map(([k, v]) => [k, [...v].sort()]))).toEqual(Object.fromEntries(Object.entries(c.lost).map(([k, v]) => [k, [...v].sort()])))
    expect(Object.fromEntries([...d.owners].map(([k, v]) => [k, v.namespace]))).toEqual(c.owners)
  })

  it("a loss names the owning namespace and Ingress", () => {
    const d = IngressHosts.decide([ing("a", "shop", ["shop.example.com"], { created: t0 }), ing("b", "hijack", ["shop.example.com"], { created: t1 })])
    expect(d.losses).toEqual([{ ingress: "b/hijack", namespace: "b", host: "shop.example.com", owner: "a", ownerHost: "shop.example.com", ownerIngress: "a/shop", reason: "HostClaimed" }])
    expect(IngressHosts.describeLoss(d.losses[0]!)).toBe('host "shop.example.com" is owned by namespace "a", Ingress a/shop')
  })
})

describe("IngressHosts.parsePolicy", () => {
  it("reads namespaces as keys and host patterns as values, reporting what is not", () => {
    const { policy, problems } = IngressHosts.parsePolicy({ "team-a": "shop.example.com, *.shop.example.com\nAPI.example.com", "Bad Key": "x.test", "team-b": "not_a_host!" })
    expect(policy).toEqual([
      { pattern: "shop.example.com", namespace: "team-a" },
      { pattern: "*.shop.example.com", namespace: "team-a" },
      { pattern: "api.example.com", namespace: "team-a" }
    ])
    expect(problems).toHaveLength(2)
  })
})

describe("IngressRoutes with host ownership", () => {
  const service = (ns: string, name: string): Json => ({ apiVersion: "v1", kind: "Service", metadata: { namespace: ns, name }, spec: { ports: [{ name: "http", port: 80 }] } })
  const slice = (ns: string, svc: string, ip: string): Json => ({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { namespace: ns, name: svc, labels: { "kubernetes.io/service-name": svc } },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8000, protocol: "TCP" }],
    endpoints: [{ addresses: [ip] }]
  })
  const build = (ingresses: ReadonlyArray<Json>, policy?: IngressHosts.Policy) =>
    IngressRoutes.build({
      ingresses,
      ingressClasses: [IngressRoutes.fleetIngressClass(true)],
      services: [service("a", "shop"), service("b", "hijack"), service("b", "hijack-default")],
      endpointSlices: [slice("a", "shop", "10.0.0.1"), slice("b", "hijack", "10.0.0.2"), slice("b", "hijack-default", "10.0.0.3")],
      ...(policy === undefined ? {} : { hostPolicy: policy })
    })

  it("the hijacking Ingress (Exact /, newer, another namespace) gets none of the owner's traffic", () => {
    const table = build([
      ing("a", "shop", ["shop.example.com"], { created: "2026-01-01T00:00:00Z", tls: [{ hosts: ["shop.example.com"], secretName: "shop-tls" }] }),
      ing("b", "hijack", ["shop.example.com"], { created: "2026-01-01T00:00:01Z", tls: [{ hosts: ["shop.example.com"], secretName: "evil-tls" }] })
    ])
    for (const path of ["/", "/login", "/a/b"]) expect(IngressRoutes.lookup(table, "shop.example.com", path)?.backend.namespace).toBe("a")
    expect(IngressRoutes.tlsFor(table, "shop.example.com")).toEqual({ namespace: "a", secretName: "shop-tls", ingress: "a/shop" })
  })

  it("another namespace's catch-all and default backend never answer for an owned host", () => {
    const owner: Json = {
      ...ing("a", "shop", [], { created: "2026-01-01T00:00:00Z" }),
      spec: { ingressClassName: "fleet", rules: [{ host: "shop.example.com", http: { paths: [{ path: "/", pathType: "Exact", backend: { service: { name: "shop", port: { number: 80 } } } }] } }] }
    }
    const table = build([owner, ing("b", "hijack", [undefined], { created: "2025-01-01T00:00:00Z", defaultBackend: true, tls: [{ secretName: "evil-tls" }] })])
    expect(IngressRoutes.lookup(table, "shop.example.com", "/")?.backend.namespace).toBe("a")
    expect(IngressRoutes.lookup(table, "shop.example.com", "/login")).toBeUndefined()
    expect(IngressRoutes.tlsFor(table, "shop.example.com")).toBeUndefined()
    // Hosts nobody owns still reach the catch-all.
    expect(IngressRoutes.lookup(table, "other.test", "/login")?.backend.namespace).toBe("b")
    expect(IngressRoutes.tlsFor(table, "other.test")?.secretName).toBe("evil-tls")
  })

  it("the policy gives a host to its namespace even when another claimed it first", () => {
    const table = build(
      [ing("b", "hijack", ["shop.example.com"], { created: "2025-01-01T00:00:00Z" }), ing("a", "shop", ["shop.example.com"], { created: "2026-01-01T00:00:00Z" })],
      [{ pattern: "shop.example.com", namespace: "a" }]
    )
    expect(IngressRoutes.lookup(table, "shop.example.com", "/")?.backend.namespace).toBe("a")
    expect(table.ownership.lost.get("b/hijack")).toEqual(new Set(["shop.example.com"]))
  })
})
