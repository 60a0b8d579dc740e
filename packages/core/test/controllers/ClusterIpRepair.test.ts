import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as ClusterIpAllocator from "../../src/admission/ClusterIpAllocator.js"
import * as ClusterIpRepair from "../../src/controllers/ClusterIpRepair.js"

type Json = Record<string, unknown>

const T0 = Date.parse("2025-01-01T00:00:00Z")
const at = (s: number) => new Date(T0 + s * 1000).toISOString().replace(/\.\d+Z$/, "Z")
const ranges = Either.getOrThrow(ClusterIpAllocator.parseRanges("10.96.0.0/12,fd00:10:96::/112")).all

const svc = (name: string, ips: ReadonlyArray<string>, type = "ClusterIP"): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: "default", uid: `uid-${name}` },
  spec: { type, clusterIP: ips[0], clusterIPs: ips }
})

const address = (ip: string, parent: Json, createdAt = 0, labels?: Record<string, string>): Json => {
  const o = ClusterIpAllocator.ipAddressFor(ip, { namespace: "default", name: "x" })
  return {
    ...o,
    metadata: { ...(o["metadata"] as Json), ...(labels === undefined ? {} : { labels }), uid: `ip-${ip}`, creationTimestamp: at(createdAt) },
    spec: { parentRef: parent }
  }
}
const ref = (name: string, extra: Json = {}) => ({ group: "", resource: "services", namespace: "default", name, ...extra })

describe("ClusterIpRepair.decideService", () => {
  const web = svc("web", ["10.96.4.4"])
  type Want = ReadonlyArray<[string, string]>
  const cases: ReadonlyArray<[string, Json | undefined, Record<string, Json>, Record<string, Json>, Want]> = [
    ["the Service is gone", undefined, {}, {}, []],
    ["its IPAddress is right", web, { "10.96.4.4": address("10.96.4.4", ref("web")) }, {}, []],
    ["no IPAddress: create one", web, {}, {}, [["Create", "ClusterIPNotAllocated: Cluster IP [IPv4]: 10.96.4.4 is not allocated; repairing"]]],
    [
      "the IPAddress points at a Service that is gone: recreate it for this one",
      web,
      { "10.96.4.4": address("10.96.4.4", ref("old")) },
      {},
      [["Recreate", "ClusterIPNotAllocated: the ClusterIP [IPv4]: 10.96.4.4 for Service default/web has a wrong reference; repairing"]]
    ],
    [
      "the IPAddress points at something that is not a Service",
      web,
      { "10.96.4.4": address("10.96.4.4", { group: "gateway.networking.k8s.io", resource: "gateways", name: "gw" }) },
      {},
      [["Recreate", "ClusterIPNotAllocated: the ClusterIP [IPv4]: 10.96.4.4 for Service default/web has a wrong reference; repairing"]]
    ],
    [
      "another live Service holds the same IP: only an event",
      web,
      { "10.96.4.4": address("10.96.4.4", ref("db")) },
      { db: svc("db", ["10.96.4.4"]) },
      [["Event", "ClusterIPAlreadyAllocated: Cluster IP [IPv4]:10.96.4.4 was assigned to multiple services; please recreate service"]]
    ],
    ["another Service that no longer has the IP: left to the IPAddress loop", web, { "10.96.4.4": address("10.96.4.4", ref("db")) }, { db: svc("db", ["10.96.9.9"]) }, []],
    [
      "wrong labels: recreate",
      web,
      { "10.96.4.4": address("10.96.4.4", ref("web"), 0, { "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io" }) },
      {},
      [["Recreate", "ClusterIPNotAllocated: the ClusterIP [IPv4]: 10.96.4.4 for Service default/web has wrong labels; repairing"]]
    ],
    ["outside every range: an event", svc("far", ["192.168.1.1"]), {}, {}, [["Event", "ClusterIPOutOfRange: Cluster IP [IPv4]: 192.168.1.1 is not within any configured Service CIDR; please recreate service"]]],
    ["not an IP: an event", svc("bad", ["10.96.0.300"]), {}, {}, [["Event", "ClusterIPNotValid: Cluster IP 10.96.0.300 is not a valid IP; please recreate Service"]]],
    ["headless and ExternalName Services hold nothing", svc("h", ["None"]), {}, {}, []],
    ["ExternalName", svc("e", [], "ExternalName"), {}, {}, []],
    [
      "each address of a dual-stack Service",
      svc("dual", ["10.96.4.5", "fd00:10:96::5"]),
      { "10.96.4.5": address("10.96.4.5", ref("dual")) },
      {},
      [["Create", "ClusterIPNotAllocated: Cluster IP [IPv6]: fd00:10:96::5 is not allocated; repairing"]]
    ]
  ]
  it.each(cases)("%s", (_what, service, ips, services, want) => {
    const actions = ClusterIpRepair.decideService(service, (n) => ips[n], (_ns, n) => services[n], ranges)
    expect(actions.map((a) => [a._tag, `${a.event.reason}: ${a.event.message}`])).toEqual(want)
  })

  it("creates the IPAddress the allocator would have", () => {
    const [action] = ClusterIpRepair.decideService(svc("web", ["10.96.4.4"]), () => undefined, () => undefined, ranges)
    expect(action).toMatchObject({ _tag: "Create", ipAddress: ClusterIpAllocator.ipAddressFor("10.96.4.4", { namespace: "default", name: "web" }) })
  })
})

describe("ClusterIpRepair.decideIPAddress", () => {
  const grace = 60_000
  const cases: ReadonlyArray<[string, Json | undefined, Json | undefined, number, string]> = [
    ["gone already", undefined, undefined, 0, "None"],
    ["its Service has it", address("10.96.4.4", ref("web")), svc("web", ["10.96.4.4"]), 0, "None"],
    ["its Service has it among two", address("fd00:10:96::4", ref("web")), svc("web", ["10.96.4.4", "fd00:10:96::4"]), 0, "None"],
    ["its Service is not found yet: wait out the grace period", address("10.96.4.4", ref("web"), 0), undefined, 10, "Requeue 50000"],
    ["its Service is not found after the grace period: leaked", address("10.96.4.4", ref("web"), 0), undefined, 61, "Delete IPAddressNotAllocated: IPAddress: 10.96.4.4 for Service default/web appears to have leaked: cleaning up"],
    ["its Service has another IP", address("10.96.4.4", ref("web")), svc("web", ["10.96.7.7"]), 0, "Delete IPAddressWrongReference: IPAddress: 10.96.4.4 for Service default/web has a wrong reference; cleaning up"],
    ["its Service turned ExternalName", address("10.96.4.4", ref("web")), svc("web", [], "ExternalName"), 0, "Delete IPAddressWrongReference: IPAddress: 10.96.4.4 for Service default/web has a wrong reference; cleaning up"],
    [
      "it no longer points at a Service",
      address("10.96.4.4", { group: "", resource: "pods", namespace: "default", name: "p" }),
      undefined,
      0,
      'Delete IPAddressNotAllocated: IPAddress 10.96.4.4 appears to have been modified, not referencing a Service {"group":"","name":"p","namespace":"default","resource":"pods"}: cleaning up'
    ],
    ["another allocator's address is not ours to judge", address("10.96.4.4", ref("web"), 0, { "ipaddress.kubernetes.io/managed-by": "someone-else" }), undefined, 999, "None"]
  ]
  it.each(cases)("%s", (_what, ip, parent, nowS, want) => {
    const a = ClusterIpRepair.decideIPAddress(ip, parent, T0 + nowS * 1000, grace)
    expect(a._tag === "Delete" ? `Delete ${a.event.reason}: ${a.event.message}` : a._tag === "Requeue" ? `Requeue ${a.afterMs}` : a._tag).toBe(want)
  })
})

describe("ClusterIpRepair.decide", () => {
  it("routes namespaced keys to the Service loop and bare names to the IPAddress loop", () => {
    const view = {
      service: (_ns: string, n: string) => (n === "web" ? svc("web", ["10.96.4.4"]) : undefined),
      ipAddress: (n: string) => (n === "10.96.9.9" ? address("10.96.9.9", ref("web")) : undefined),
      ranges,
      now: T0,
      graceMs: 1000
    }
    expect(ClusterIpRepair.decide("default/web", view)).toMatchObject({ _tag: "Service", actions: [{ _tag: "Create" }] })
    expect(ClusterIpRepair.decide("10.96.9.9", view)).toMatchObject({ _tag: "IPAddress", action: { _tag: "Delete" } })
    expect(ClusterIpRepair.decide("fd00:10:96::1", view)).toEqual({ _tag: "IPAddress", action: { _tag: "None" } })
  })
})
