import { describe, expect, it } from "vitest"
import * as DnsRecords from "../../src/network/DnsRecords.js"

type Json = Record<string, unknown>

const svc = (ns: string, name: string, spec: Json): Json => ({ apiVersion: "v1", kind: "Service", metadata: { namespace: ns, name }, spec })
const slice = (ns: string, service: string, ports: ReadonlyArray<Json>, endpoints: ReadonlyArray<Json>): Json => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: { namespace: ns, name: `${service}-x`, labels: { "kubernetes.io/service-name": service } },
  addressType: "IPv4",
  ports,
  endpoints
})
const ep = (ip: string, ready = true, hostname?: string): Json => ({ addresses: [ip], conditions: { ready }, ...(hostname === undefined ? {} : { hostname }) })

const services = [
  svc("shop", "web", { clusterIP: "10.96.0.20", clusterIPs: ["10.96.0.20"], ports: [{ name: "http", port: 80 }, { name: "metrics", port: 9090, protocol: "TCP" }] }),
  svc("shop", "dual", { clusterIP: "10.96.0.21", clusterIPs: ["10.96.0.21", "fd00::21"], ports: [{ port: 80 }] }),
  svc("shop", "db", { clusterIP: "None", ports: [{ name: "pg", port: 5432 }] }),
  svc("shop", "ext", { type: "ExternalName", externalName: "db.example.com." })
]
const slices = [
  slice("shop", "db", [{ name: "pg", port: 5432, protocol: "TCP" }], [ep("10.1.0.5", true, "db-0"), ep("10.1.0.6", true, "db-1"), ep("10.1.0.7", false, "db-2"), ep("10.1.0.8")]),
  slice("shop", "web", [{ name: "http", port: 8080, protocol: "TCP" }], [ep("10.1.0.9")])
]
const view: DnsRecords.View = {
  service: (ns, name) => services.find((s) => (s["metadata"] as Json)["namespace"] === ns && (s["metadata"] as Json)["name"] === name),
  slices: (ns, name) => slices.filter((s) => (s["metadata"] as Json)["namespace"] === ns && ((s["metadata"] as Json)["labels"] as Json)["kubernetes.io/service-name"] === name),
  hasNamespace: (ns) => services.some((s) => (s["metadata"] as Json)["namespace"] === ns)
}

// What a test reads of an answer: rcode, then "TYPE data" per answer record.
const brief = (a: DnsRecords.Answer): string | ReadonlyArray<string> => {
  if (a._tag !== "Found") return a._tag
  return a.answers.map((r) => (r.type === "SRV" ? `SRV ${r.data.port} ${r.data.target}` : r.type === "SOA" ? "SOA" : `${r.type} ${r.data}`))
}

describe("DnsRecords.resolve", () => {
  const cases: ReadonlyArray<[string, string, string, string | ReadonlyArray<string>]> = [
    ["a Service's cluster IP", "web.shop.svc.cluster.local", "A", ["A 10.96.0.20"]],
    ["names are case-insensitive, trailing dot or not", "Web.Shop.SVC.cluster.local.", "A", ["A 10.96.0.20"]],
    ["no IPv6 address: NODATA", "web.shop.svc.cluster.local", "AAAA", []],
    ["dual-stack: AAAA", "dual.shop.svc.cluster.local", "AAAA", ["AAAA fd00::21"]],
    ["a headless Service: its ready endpoints", "db.shop.svc.cluster.local", "A", ["A 10.1.0.5", "A 10.1.0.6", "A 10.1.0.8"]],
    ["a StatefulSet pod's hostname", "db-1.db.shop.svc.cluster.local", "A", ["A 10.1.0.6"]],
    ["a not-ready pod's hostname is unknown", "db-2.db.shop.svc.cluster.local", "A", "NxDomain"],
    ["an endpoint without hostname, by its dashed address", "10-1-0-8.db.shop.svc.cluster.local", "A", ["A 10.1.0.8"]],
    ["hostnames only under headless Services", "x.web.shop.svc.cluster.local", "A", "NxDomain"],
    ["SRV of a named port: the Service name", "_http._tcp.web.shop.svc.cluster.local", "SRV", ["SRV 80 web.shop.svc.cluster.local"]],
    ["SRV of a headless Service: each ready endpoint", "_pg._tcp.db.shop.svc.cluster.local", "SRV", ["SRV 5432 db-0.db.shop.svc.cluster.local", "SRV 5432 db-1.db.shop.svc.cluster.local", "SRV 5432 10-1-0-8.db.shop.svc.cluster.local"]],
    ["SRV on the Service name: every named port", "web.shop.svc.cluster.local", "SRV", ["SRV 80 web.shop.svc.cluster.local", "SRV 9090 web.shop.svc.cluster.local"]],
    ["SRV of an unknown port", "_grpc._tcp.web.shop.svc.cluster.local", "SRV", "NxDomain"],
    ["SRV of the wrong protocol", "_http._udp.web.shop.svc.cluster.local", "SRV", "NxDomain"],
    ["ExternalName: CNAME", "ext.shop.svc.cluster.local", "A", ["CNAME db.example.com"]],
    ["an unknown Service", "nope.shop.svc.cluster.local", "A", "NxDomain"],
    ["an unknown namespace", "web.nowhere.svc.cluster.local", "A", "NxDomain"],
    ["a namespace name: NODATA", "shop.svc.cluster.local", "A", []],
    ["anything else in the zone", "foo.cluster.local", "A", "NxDomain"],
    ["the zone's SOA", "cluster.local", "SOA", ["SOA"]],
    ["a pod by address", "10-1-0-9.shop.pod.cluster.local", "A", ["A 10.1.0.9"]],
    ["short form <svc>.<ns>", "web.shop", "A", ["A 10.96.0.20"]],
    ["short form <svc>.<ns>.svc", "web.shop.svc", "A", ["A 10.96.0.20"]],
    ["short form of a StatefulSet pod", "db-0.db.shop", "A", ["A 10.1.0.5"]],
    ["short form SRV", "_http._tcp.web.shop", "SRV", ["SRV 80 web.shop.svc.cluster.local"]],
    ["a short form that names no Service is not ours", "example.com", "A", "NotOurs"],
    ["a single label is not ours", "localhost", "A", "NotOurs"],
    ["outside the zone", "www.example.org", "A", "NotOurs"]
  ]
  it.each(cases)("%s: %s %s", (_, name, type, want) => expect(brief(DnsRecords.resolve(name, type, view))).toEqual(want))

  it("keeps the asked name's case as the owner, 5 s TTLs, and the SOA as authority of NODATA and NXDOMAIN", () => {
    const a = DnsRecords.resolve("WEB.shop.svc.cluster.local", "A", view)
    expect(a).toEqual({ _tag: "Found", answers: [{ type: "A", name: "WEB.shop.svc.cluster.local", ttl: 5, data: "10.96.0.20" }], additionals: [], authorities: [] })
    const nodata = DnsRecords.resolve("web.shop.svc.cluster.local", "AAAA", view)
    expect(nodata._tag === "Found" && nodata.authorities.map((r) => [r.type, r.name, r.data])).toEqual([
      ["SOA", "cluster.local", { mname: "ns.dns.cluster.local", rname: "hostmaster.cluster.local", serial: 1, refresh: 7200, retry: 1800, expire: 86400, minimum: 5 }]
    ])
    const nx = DnsRecords.resolve("nope.shop.svc.cluster.local", "A", view)
    expect(nx._tag === "NxDomain" && nx.authorities[0]!.type).toBe("SOA")
  })

  it("gives SRV targets' addresses as additionals", () => {
    const a = DnsRecords.resolve("_pg._tcp.db.shop.svc.cluster.local", "SRV", view)
    expect(a._tag === "Found" && a.additionals.map((r) => `${r.name} ${r.type} ${String(r.data)}`)).toEqual([
      "db-0.db.shop.svc.cluster.local A 10.1.0.5",
      "db-1.db.shop.svc.cluster.local A 10.1.0.6",
      "10-1-0-8.db.shop.svc.cluster.local A 10.1.0.8"
    ])
  })

  it("answers another cluster domain", () => {
    expect(brief(DnsRecords.resolve("web.shop.svc.fleet.internal", "A", view, { domain: "fleet.internal" }))).toEqual(["A 10.96.0.20"])
    expect(brief(DnsRecords.resolve("web.shop.svc.cluster.local", "A", view, { domain: "fleet.internal" }))).toBe("NotOurs")
  })
})
