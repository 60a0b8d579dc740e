/**
 * The ingress route table, table-driven: Prefix matching by path elements, Exact, longest match,
 * wildcard hosts with Kubernetes' one-label rule, host tiers, default backends, conflicts between
 * Ingresses, class selection, backends from EndpointSlices, and TLS by server name.
 */
import { describe, expect, it } from "vitest"
import * as IngressRoutes from "../../src/network/IngressRoutes.js"

type Json = Record<string, unknown>

const backend = (service: string, port: number | string = 80): Json => ({ service: { name: service, port: typeof port === "number" ? { number: port } : { name: port } } })

const ingress = (name: string, spec: Json, o: { created?: string; namespace?: string; annotations?: Record<string, string> } = {}): Json => ({
  apiVersion: "networking.k8s.io/v1",
  kind: "Ingress",
  metadata: { name, namespace: o.namespace ?? "default", creationTimestamp: o.created ?? "2025-01-01T00:00:00Z", ...(o.annotations ? { annotations: o.annotations } : {}) },
  spec: { ingressClassName: "fleet", ...spec }
})

const service = (name: string, ports: ReadonlyArray<Json> = [{ name: "http", port: 80 }], o: { namespace?: string; spec?: Json } = {}): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: o.namespace ?? "default" },
  spec: { ports, ...o.spec }
})

const slice = (svc: string, port: number, endpoints: ReadonlyArray<{ ip: string; ready?: boolean }>, o: { portName?: string; namespace?: string } = {}): Json => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: { name: `${svc}-${port}`, namespace: o.namespace ?? "default", labels: { "kubernetes.io/service-name": svc } },
  addressType: "IPv4",
  ports: [{ name: o.portName ?? "http", port, protocol: "TCP" }],
  endpoints: endpoints.map((e) => ({ addresses: [e.ip], ...(e.ready === undefined ? {} : { conditions: { ready: e.ready } }) }))
})

const fleetClass = IngressRoutes.fleetIngressClass(true)

const rule = (host: string | undefined, paths: ReadonlyArray<[string, string, string]>): Json => ({
  ...(host === undefined ? {} : { host }),
  http: { paths: paths.map(([path, pathType, svc]) => ({ path, pathType, backend: backend(svc) })) }
})

/** A table whose every Service exists with one ready endpoint, so lookups name Services. */
const tableOf = (ingresses: ReadonlyArray<Json>, classes: ReadonlyArray<Json> = [fleetClass]) => {
  const names = new Set<string>()
  for (const i of ingresses) JSON.stringify(i, (k, v: unknown) => (k === "service" && typeof v === "object" && v !== null && "name" in v ? (names.add(String((v as { name: string }).name)), v) : v))
  return IngressRoutes.build({
    ingresses,
    ingressClasses: classes,
    services: [...names].map((n) => service(n)),
    endpointSlices: [...names].map((n) => slice(n, 30000, [{ ip: "127.0.0.1" }]))
  })
}

const routed = (table: IngressRoutes.RouteTable, host: string, path: string) => IngressRoutes.lookup(table, host, path)?.backend.service

describe("IngressRoutes.pathMatches", () => {
  // The Kubernetes documentation's examples table, and a few edges.
  const cases: ReadonlyArray<[string, "Exact" | "Prefix", string, boolean]> = [
    ["/", "Prefix", "/", true],
    ["/", "Prefix", "/anything/at/all", true],
    ["/foo", "Exact", "/foo", true],
    ["/foo", "Exact", "/bar", false],
    ["/foo", "Exact", "/foo/", false],
    ["/foo/", "Exact", "/foo", false],
    ["/foo", "Prefix", "/foo", true],
    ["/foo", "Prefix", "/foo/", true],
    ["/foo/", "Prefix", "/foo", true],
    ["/foo/", "Prefix", "/foo/", true],
    ["/aaa/bb", "Prefix", "/aaa/bbb", false],
    ["/aaa/bbb", "Prefix", "/aaa/bbb", true],
    ["/aaa/bbb/", "Prefix", "/aaa/bbb", true],
    ["/aaa/bbb", "Prefix", "/aaa/bbb/", true],
    ["/aaa/bbb", "Prefix", "/aaa/bbb/ccc", true],
    ["/aaa/bbb", "Prefix", "/aaa/bbbxyz", false],
    ["/foo", "Prefix", "/foobar", false],
    ["/foo/bar", "Prefix", "/foo", false]
  ]
  for (const [rulePath, type, request, expected] of cases) {
    it(`${type} ${rulePath} ${expected ? "matches" : "does not match"} ${request}`, () => {
      expect(IngressRoutes.pathMatches(rulePath, type === "Exact", request)).toBe(expected)
    })
  }
})

describe("IngressRoutes.lookup", () => {
  it("picks the longest matching path; Exact wins a tie with Prefix", () => {
    const table = tableOf([
      ingress("web", {
        rules: [
          rule("shop.example.com", [
            ["/", "Prefix", "root"],
            ["/api", "Prefix", "api"],
            ["/api/v2", "Prefix", "api-v2"],
            ["/api/v2", "Exact", "api-v2-exact"],
            ["/static", "ImplementationSpecific", "static"]
          ])
        ]
      })
    ])
    const cases: ReadonlyArray<[string, string | undefined]> = [
      ["/", "root"],
      ["/index.html", "root"],
      ["/api", "api"],
      ["/api/", "api"],
      ["/apix", "root"],
      ["/api/v1/users", "api"],
      ["/api/v2", "api-v2-exact"],
      ["/api/v2/", "api-v2"],
      ["/api/v2/users", "api-v2"],
      ["/static/app.js", "static"]
    ]
    for (const [path, svc] of cases) expect([path, routed(table, "shop.example.com", path)]).toEqual([path, svc])
  })

  it("matches hosts exactly, then by wildcard (one label), then rules without a host", () => {
    const table = tableOf([
      ingress("hosts", {
        rules: [
          rule("foo.example.com", [["/", "Prefix", "foo"]]),
          rule("*.example.com", [["/", "Prefix", "wild"]]),
          rule("only-api.example.com", [["/api", "Prefix", "only-api"]]),
          rule("only-api.other.test", [["/api", "Prefix", "only-api-other"]]),
          rule(undefined, [["/", "Prefix", "catch-all"]])
        ]
      })
    ])
    const cases: ReadonlyArray<[string, string | undefined]> = [
      ["foo.example.com", "foo"],
      ["FOO.Example.COM:8080", "foo"],
      ["foo.example.com.", "foo"],
      ["bar.example.com", "wild"],
      ["bar.example.com:443", "wild"],
      ["baz.bar.example.com", "catch-all"],
      ["example.com", "catch-all"],
      ["other.test", "catch-all"],
      ["127.0.0.1:8080", "catch-all"],
      ["[::1]:8080", "catch-all"]
    ]
    for (const [host, svc] of cases) expect([host, routed(table, host, "/x")]).toEqual([host, svc])
    // A host whose rules do not match the path falls through to the wildcard, then the host-less rules.
    expect(routed(table, "only-api.example.com", "/api/x")).toBe("only-api")
    expect(routed(table, "only-api.example.com", "/other")).toBe("wild")
    expect(routed(table, "only-api.other.test", "/api/x")).toBe("only-api-other")
    expect(routed(table, "only-api.other.test", "/other")).toBe("catch-all")
  })

  it("sends what no rule matches to the host's Ingress default backend, else the oldest default backend, else nowhere", () => {
    const table = tableOf([
      ingress("older", { defaultBackend: backend("global-default"), rules: [rule("a.test", [["/a", "Prefix", "a"]])] }, { created: "2025-01-01T00:00:00Z" }),
      ingress("newer", { defaultBackend: backend("b-default"), rules: [rule("b.test", [["/b", "Exact", "b"]])] }, { created: "2025-02-01T00:00:00Z" })
    ])
    expect(routed(table, "a.test", "/a/1")).toBe("a")
    expect(routed(table, "a.test", "/elsewhere")).toBe("global-default")
    expect(routed(table, "b.test", "/b")).toBe("b")
    expect(routed(table, "b.test", "/b/1")).toBe("b-default")
    expect(routed(table, "unknown.test", "/")).toBe("global-default")
    expect(IngressRoutes.lookup(table, "unknown.test", "/")).toMatchObject({ ingress: "default/older", path: undefined })

    const none = tableOf([ingress("only", { rules: [rule("a.test", [["/", "Prefix", "a"]])] })])
    expect(IngressRoutes.lookup(none, "b.test", "/")).toBeUndefined()
  })

  it("lets the older Ingress keep a host and path two Ingresses both claim", () => {
    const table = tableOf([
      ingress("second", { rules: [rule("x.test", [["/", "Prefix", "second"], ["/only-second", "Prefix", "second-extra"]])] }, { created: "2025-03-01T00:00:00Z" }),
      ingress("first", { rules: [rule("x.test", [["/", "Prefix", "first"]])] }, { created: "2025-01-01T00:00:00Z" })
    ])
    expect(routed(table, "x.test", "/")).toBe("first")
    expect(routed(table, "x.test", "/only-second/y")).toBe("second-extra")
    expect(table.served).toEqual(["default/first", "default/second"])
  })
})

describe("IngressRoutes.isServed", () => {
  const other = { apiVersion: "networking.k8s.io/v1", kind: "IngressClass", metadata: { name: "nginx" }, spec: { controller: "k8s.io/ingress-nginx" } }
  const mine = { apiVersion: "networking.k8s.io/v1", kind: "IngressClass", metadata: { name: "public" }, spec: { controller: "fleet.koder.dev/ingress" } }
  const noClass = (o: Json = {}) => ({ ...ingress("i", { rules: [] }), spec: { rules: [] }, ...o })
  const cases: ReadonlyArray<[string, Json, ReadonlyArray<Json>, boolean]> = [
    ["class fleet", ingress("i", {}), [fleetClass], true],
    ["class fleet before its IngressClass exists", ingress("i", {}), [], true],
    ["another controller's class", ingress("i", { ingressClassName: "nginx" }), [fleetClass, other], false],
    ["a class of Fleet's controller under another name", ingress("i", { ingressClassName: "public" }), [fleetClass, mine], true],
    ["no class, fleet is the default", noClass(), [fleetClass, other], true],
    ["no class, fleet is not the default", noClass(), [IngressRoutes.fleetIngressClass(false), other], false],
    ["legacy annotation naming fleet", noClass({ metadata: { name: "i", namespace: "default", annotations: { "kubernetes.io/ingress.class": "fleet" } } }), [IngressRoutes.fleetIngressClass(false)], true],
    ["legacy annotation naming nginx", noClass({ metadata: { name: "i", namespace: "default", annotations: { "kubernetes.io/ingress.class": "nginx" } } }), [fleetClass, other], false],
    ["being deleted", { ...ingress("i", {}), metadata: { name: "i", namespace: "default", deletionTimestamp: "2025-01-01T00:00:00Z" } }, [fleetClass], false]
  ]
  for (const [what, ing, classes, expected] of cases) {
    it(`${what}: ${expected ? "served" : "not served"}`, () => expect(IngressRoutes.isServed(ing, classes)).toBe(expected))
  }
})

describe("IngressRoutes backends", () => {
  const route = (port: number | string, services: ReadonlyArray<Json>, slices: ReadonlyArray<Json>) =>
    IngressRoutes.lookup(
      IngressRoutes.build({
        ingresses: [ingress("i", { defaultBackend: backend("web", port) })],
        ingressClasses: [fleetClass],
        services,
        endpointSlices: slices
      }),
      "any",
      "/"
    )!.backend

  it("are the ready endpoints of the named Service port across its slices, deduplicated", () => {
    const b = route(
      80,
      [service("web", [{ name: "http", port: 80 }, { name: "admin", port: 9000 }])],
      [
        slice("web", 31001, [{ ip: "10.0.0.2" }, { ip: "10.0.0.1", ready: true }, { ip: "10.0.0.3", ready: false }]),
        slice("web", 31002, [{ ip: "10.0.0.4" }]),
        { ...slice("web", 31002, [{ ip: "10.0.0.4" }]), metadata: { name: "dup", namespace: "default", labels: { "kubernetes.io/service-name": "web" } } },
        slice("web", 39000, [{ ip: "10.0.0.9" }], { portName: "admin" }),
        slice("other", 31005, [{ ip: "10.0.0.5" }])
      ]
    )
    expect(b.problem).toBeUndefined()
    expect(b.targets).toEqual([
      { address: "10.0.0.1", port: 31001 },
      { address: "10.0.0.2", port: 31001 },
      { address: "10.0.0.4", port: 31002 }
    ])
  })

  it("find the Service port by name", () => {
    const b = route("admin", [service("web", [{ name: "http", port: 80 }, { name: "admin", port: 9000 }])], [slice("web", 39000, [{ ip: "10.0.0.9" }], { portName: "admin" })])
    expect(b.targets).toEqual([{ address: "10.0.0.9", port: 39000 }])
  })

  it("say why there is nothing to send to", () => {
    expect(route(80, [], []).problem).toBe("ServiceNotFound")
    expect(route(81, [service("web")], []).problem).toBe("PortNotFound")
    expect(route(80, [service("web")], [slice("web", 31001, [{ ip: "10.0.0.1", ready: false }])])).toMatchObject({ problem: "NoReadyEndpoints", namespace: "default", service: "web", port: "80" })
    expect(IngressRoutes.describeBackend(route(80, [service("web")], []))).toBe("default/web:80")
  })

  it("of an ExternalName Service are its name and the port", () => {
    const b = route(443, [service("web", [{ name: "https", port: 443 }], { spec: { type: "ExternalName", externalName: "example.org" } })], [])
    expect(b.targets).toEqual([{ address: "example.org", port: 443 }])
  })
})

describe("IngressRoutes.tlsFor", () => {
  const table = IngressRoutes.build({
    ingresses: [
      ingress("tls", {
        tls: [
          { hosts: ["secure.example.com"], secretName: "secure-cert" },
          { hosts: ["*.apps.example.com"], secretName: "apps-wildcard" },
          { secretName: "fallback-cert" }
        ],
        rules: [rule("secure.example.com", [["/", "Prefix", "s"]])]
      })
    ],
    ingressClasses: [fleetClass],
    services: [],
    endpointSlices: []
  })
  const cases: ReadonlyArray<[string | undefined, string | undefined]> = [
    ["secure.example.com", "secure-cert"],
    ["SECURE.example.com", "secure-cert"],
    ["one.apps.example.com", "apps-wildcard"],
    ["two.one.apps.example.com", "fallback-cert"],
    ["elsewhere.test", "fallback-cert"],
    [undefined, "fallback-cert"]
  ]
  for (const [name, secret] of cases) {
    it(`serves ${String(name)} with ${String(secret)}`, () => expect(IngressRoutes.tlsFor(table, name)?.secretName).toBe(secret))
  }

  it("has no certificate for a name when no TLS entry claims it", () => {
    const bare = IngressRoutes.build({ ingresses: [ingress("t", { tls: [{ hosts: ["a.test"], secretName: "a" }], rules: [] })], ingressClasses: [fleetClass], services: [], endpointSlices: [] })
    expect(IngressRoutes.tlsFor(bare, "b.test")).toBeUndefined()
    expect(IngressRoutes.tlsFor(bare, "a.test")).toEqual({ namespace: "default", secretName: "a", ingress: "default/t" })
  })
})

describe("IngressRoutes.loadBalancerStatus", () => {
  it("names the proxy by IP (or host name) with its ports", () => {
    expect(IngressRoutes.loadBalancerStatus("127.0.0.1", [8080, 8443])).toEqual({ loadBalancer: { ingress: [{ ip: "127.0.0.1", ports: [{ port: 8080, protocol: "TCP" }, { port: 8443, protocol: "TCP" }] }] } })
    expect(IngressRoutes.loadBalancerStatus("ingress.example.com", [])).toEqual({ loadBalancer: { ingress: [{ hostname: "ingress.example.com" }] } })
  })
})
