/** The isolated mode's Service ruleset: ClusterIP DNAT spread over ready endpoints, rejects, masquerade, DNS. */
import { describe, expect, it } from "@effect/vitest"
import * as ServiceRules from "../../src/network/ServiceRules.js"

const service = (name: string, spec: Record<string, unknown>) => ({ metadata: { namespace: "shop", name }, spec })
const slice = (svc: string, ports: ReadonlyArray<Record<string, unknown>>, endpoints: ReadonlyArray<{ ip: string; ready?: boolean; terminating?: boolean; serving?: boolean }>) => ({
  metadata: { namespace: "shop", name: `${svc}-x`, labels: { "kubernetes.io/service-name": svc } },
  addressType: "IPv4",
  ports,
  endpoints: endpoints.map((e) => ({ addresses: [e.ip], conditions: { ready: e.ready ?? true, ...(e.terminating === undefined ? {} : { terminating: e.terminating }), ...(e.serving === undefined ? {} : { serving: e.serving }) } }))
})

describe("ServiceRules.fromCluster", () => {
  it("takes ClusterIP Services with their ready backends per port; skips headless and ExternalName", () => {
    const services = [
      service("web", { clusterIP: "10.43.0.10", clusterIPs: ["10.43.0.10"], ports: [{ name: "http", port: 80 }, { name: "dns", port: 53, protocol: "UDP" }] }),
      service("headless", { clusterIP: "None", ports: [{ port: 80 }] }),
      service("ext", { type: "ExternalName", externalName: "example.com" }),
      service("empty", { clusterIP: "10.43.0.11", ports: [{ port: 8080 }] })
    ]
    const slices = [
      slice("web", [{ name: "http", port: 8080, protocol: "TCP" }, { name: "dns", port: 5353, protocol: "UDP" }], [{ ip: "10.42.1.2" }, { ip: "10.42.2.2" }, { ip: "10.42.1.3", ready: false }])
    ]
    expect(ServiceRules.fromCluster(services, slices)).toEqual([
      { name: "shop/empty", clusterIPs: ["10.43.0.11"], ports: [{ port: 8080, protocol: "TCP", backends: [] }] },
      {
        name: "shop/web",
        clusterIPs: ["10.43.0.10"],
        ports: [
          { port: 80, protocol: "TCP", backends: [{ address: "10.42.1.2", port: 8080 }, { address: "10.42.2.2", port: 8080 }] },
          { port: 53, protocol: "UDP", backends: [{ address: "10.42.1.2", port: 5353 }, { address: "10.42.2.2", port: 5353 }] }
        ]
      }
    ])
  })

  it("falls back to serving-terminating endpoints when none is ready", () => {
    const services = [service("web", { clusterIP: "10.43.0.10", ports: [{ port: 80 }] })]
    const slices = [slice("web", [{ name: "", port: 8080, protocol: "TCP" }], [{ ip: "10.42.1.2", ready: false, serving: true, terminating: true }])]
    expect(ServiceRules.fromCluster(services, slices)[0]!.ports[0]!.backends).toEqual([{ address: "10.42.1.2", port: 8080 }])
  })
})

describe("ServiceRules.render", () => {
  const input: ServiceRules.Input = {
    services: [
      { name: "shop/web", clusterIPs: ["10.43.0.10"], ports: [{ port: 80, protocol: "TCP", backends: [{ address: "10.42.1.2", port: 8080 }, { address: "10.42.2.2", port: 8080 }] }] },
      { name: "shop/one", clusterIPs: ["10.43.0.12"], ports: [{ port: 53, protocol: "UDP", backends: [{ address: "10.42.1.9", port: 5353 }] }] },
      { name: "shop/empty", clusterIPs: ["10.43.0.11"], ports: [{ port: 8080, protocol: "TCP", backends: [] }] }
    ],
    podCidr: "10.42.1.0/24",
    clusterCidrs: ["10.42.1.0/24", "10.42.2.0/24"],
    bridge: "fleet0",
    dns: { gateway: "10.42.1.1", target: { address: "192.168.5.1", port: 5353 } }
  }
  const text = ServiceRules.render(input)

  it("replaces the whole table in one transaction", () => {
    expect(text.startsWith("table ip fleet\ndelete table ip fleet\ntable ip fleet {\n")).toBe(true)
    expect(ServiceRules.render({ ...input, table: "t1" })).toContain("table ip t1 {")
  })

  it("sends a ClusterIP port to a random ready endpoint, a single endpoint straight", () => {
    expect(text).toContain('ip daddr 10.43.0.10 tcp dport 80 goto svc-0-0 comment "shop/web:80/TCP"')
    expect(text).toContain("numgen random mod 2 vmap { 0 : goto svc-0-0-ep-0, 1 : goto svc-0-0-ep-1 }")
    expect(text).toContain("meta l4proto tcp dnat to 10.42.2.2:8080")
    expect(text).toContain("ip daddr 10.43.0.12 udp dport 53 goto svc-1-0")
    expect(text).toMatch(/chain svc-1-0 \{\n\t\tgoto svc-1-0-ep-0\n/)
  })

  it("rejects connections to a Service without endpoints instead of letting them hang", () => {
    expect(text).toContain('ip daddr 10.43.0.11 tcp dport 8080 reject with tcp reset comment "shop/empty:8080/TCP"')
    expect(text).not.toContain("goto svc-2-0")
  })

  it("masquerades pods leaving the cluster and a pod reaching itself, not pod-to-pod traffic", () => {
    expect(text).toContain('ip saddr 10.42.1.0/24 ip daddr != { 10.42.1.0/24, 10.42.2.0/24 } oifname != "fleet0" masquerade')
    expect(text).toContain("ip saddr 10.42.2.2 meta mark set meta mark | 16384")
    expect(text).toContain("meta mark & 16384 == 16384 masquerade")
  })

  it("sends the pods' DNS at the gateway to the node's DNS server", () => {
    expect(text).toContain("ip daddr 10.42.1.1 udp dport 53 dnat to 192.168.5.1:5353")
    expect(text).toContain("ip daddr 10.42.1.1 tcp dport 53 dnat to 192.168.5.1:5353")
    const { dns: _dns, ...withoutDns } = input
    expect(ServiceRules.render(withoutDns)).not.toContain("dport 53 dnat")
  })

  it("without a pod CIDR (no block yet) masquerades nothing but still serves ClusterIPs", () => {
    const t = ServiceRules.render({ ...input, podCidr: undefined })
    expect(t).not.toContain("pods to the outside")
    expect(t).toContain("goto svc-0-0")
  })
})
