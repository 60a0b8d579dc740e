import { describe, expect, it } from "vitest"
import * as ServiceBackends from "../../src/network/ServiceBackends.js"

type Json = Record<string, unknown>

const service = (ports: ReadonlyArray<Json>): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "shop" },
  spec: { ports }
})

const slice = (name: string, ports: ReadonlyArray<Json>, endpoints: ReadonlyArray<Json>, extra: Json = {}): Json => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: { name, namespace: "shop", labels: { [ServiceBackends.serviceNameLabel]: "web" } },
  addressType: "IPv4",
  ports,
  endpoints,
  ...extra
})

const ep = (ip: string, conditions: Json = { ready: true }, extra: Json = {}): Json => ({ addresses: [ip], conditions, ...extra })

describe("ServiceBackends", () => {
  const svc = service([
    { name: "http", port: 80, targetPort: "http" },
    { name: "metrics", port: 9090, protocol: "TCP", nodePort: 30090 }
  ])

  it("finds a Service port by name or number, defaulting the protocol", () => {
    expect(ServiceBackends.servicePort(svc, { name: "http" })).toMatchObject({ name: "http", port: 80, protocol: "TCP", nodePort: undefined })
    expect(ServiceBackends.servicePort(svc, { number: 9090 })).toMatchObject({ name: "metrics", nodePort: 30090 })
    expect(ServiceBackends.servicePort(svc, { number: 81 })).toBeUndefined()
    expect(ServiceBackends.servicePort(svc, { name: "http", protocol: "UDP" })).toBeUndefined()
  })

  const cases: ReadonlyArray<[string, ReadonlyArray<Json>, ReadonlyArray<string>]> = [
    ["ready endpoints, sorted, on each pod's own port (host mode)", [
      slice("a", [{ name: "http", port: 31002, protocol: "TCP" }], [ep("10.0.0.9")]),
      slice("b", [{ name: "http", port: 31001, protocol: "TCP" }], [ep("10.0.0.2")])
    ], ["10.0.0.2:31001", "10.0.0.9:31002"]],
    ["not-ready endpoints are left out", [
      slice("a", [{ name: "http", port: 8080, protocol: "TCP" }], [ep("10.0.0.1"), ep("10.0.0.2", { ready: false, serving: false })])
    ], ["10.0.0.1:8080"]],
    ["unknown readiness counts as ready", [slice("a", [{ name: "http", port: 8080, protocol: "TCP" }], [ep("10.0.0.3", {})])], ["10.0.0.3:8080"]],
    ["nothing ready: serving-terminating ones are the fallback", [
      slice("a", [{ name: "http", port: 8080, protocol: "TCP" }], [
        ep("10.0.0.1", { ready: false, serving: true, terminating: true }),
        ep("10.0.0.2", { ready: false, serving: false, terminating: true })
      ])
    ], ["10.0.0.1:8080"]],
    ["slices without this port name are ignored", [slice("a", [{ name: "metrics", port: 9090, protocol: "TCP" }], [ep("10.0.0.1")])], []],
    ["another Service's slices are ignored", [
      { ...slice("a", [{ name: "http", port: 80, protocol: "TCP" }], [ep("10.0.0.1")]), metadata: { name: "a", namespace: "shop", labels: { [ServiceBackends.serviceNameLabel]: "api" } } }
    ], []],
    ["FQDN slices are ignored", [slice("a", [{ name: "http", port: 80, protocol: "TCP" }], [{ addresses: ["example.com"] }], { addressType: "FQDN" })], []],
    ["an endpoint listed twice counts once, the ready entry winning", [
      slice("a", [{ name: "http", port: 80, protocol: "TCP" }], [ep("10.0.0.1", { ready: false, serving: false })]),
      slice("b", [{ name: "http", port: 80, protocol: "TCP" }], [ep("10.0.0.1")])
    ], ["10.0.0.1:80"]]
  ]
  it.each(cases)("%s", (_, slices, want) => {
    expect(ServiceBackends.readyBackends(svc, slices, { name: "http" }).map(ServiceBackends.hostPort)).toEqual(want)
  })

  it("carries hostname, node and pod of an endpoint", () => {
    const slices = [slice("a", [{ name: "http", port: 80, protocol: "TCP" }], [ep("10.0.0.1", { ready: true }, { hostname: "db-0", nodeName: "n1", targetRef: { kind: "Pod", namespace: "shop", name: "db-0" } })])]
    expect(ServiceBackends.readyBackends(svc, slices, { name: "http" })).toEqual([
      { address: "10.0.0.1", port: 80, ready: true, serving: true, terminating: false, hostname: "db-0", nodeName: "n1", pod: "shop/db-0" }
    ])
  })

  it("writes IPv6 backends in brackets", () => {
    expect(ServiceBackends.hostPort({ address: "fd00::1", port: 80 })).toBe("[fd00::1]:80")
  })
})
