import { describe, expect, it } from "vitest"
import * as HostPorts from "../../src/agent/HostPorts.js"
import type * as Pod from "../../src/model/Pod.js"

const pod = (spec: Partial<Pod.PodSpec>): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { containers: [{ name: "app", image: "i" }], ...spec }
})

const web = pod({
  containers: [
    { name: "app", image: "i", ports: [{ name: "http", containerPort: 8080 }, { name: "admin-api", containerPort: 9000 }] },
    { name: "metrics", image: "i", ports: [{ containerPort: 9100 }, { name: "dns", containerPort: 53, protocol: "UDP" }] }
  ]
})

describe("HostPorts", () => {
  it("assigns a host port to every declared port, keeping explicit hostPorts", () => {
    const p = pod({ containers: [{ name: "app", image: "i", ports: [{ containerPort: 80, hostPort: 8081 }, { containerPort: 81 }] }] })
    const requests = HostPorts.requests(p)
    expect(HostPorts.needed(requests)).toBe(1)
    expect(HostPorts.assign(requests, [31000])).toEqual([
      { containerName: "app", containerPort: 80, protocol: "TCP", hostPort: 8081 },
      { containerName: "app", containerPort: 81, protocol: "TCP", hostPort: 31000 }
    ])
    expect(HostPorts.assign(HostPorts.requests(web), [1, 2])).toBeUndefined()
  })

  it("keeps the declared numbers of a hostNetwork pod", () => {
    const p = pod({ hostNetwork: true, containers: [{ name: "app", image: "i", ports: [{ containerPort: 80 }] }] })
    expect(HostPorts.needed(HostPorts.requests(p))).toBe(0)
    expect(HostPorts.assign(HostPorts.requests(p), [])?.[0]?.hostPort).toBe(80)
  })

  const assigned = HostPorts.assign(HostPorts.requests(web), [31001, 31002, 31003, 31004])!

  it("passes PORT (the container's first) and FLEET_PORT_<NAME> (every port of the pod)", () => {
    const all = { FLEET_PORT_HTTP: "31001", FLEET_PORT_ADMIN_API: "31002", FLEET_PORT_9100: "31003", FLEET_PORT_DNS: "31004" }
    expect(Object.fromEntries(HostPorts.env(assigned, "app").map((v) => [v.name, v.value]))).toEqual({ PORT: "31001", ...all })
    expect(Object.fromEntries(HostPorts.env(assigned, "metrics").map((v) => [v.name, v.value]))).toEqual({ PORT: "31003", ...all })
    expect(HostPorts.env([], "app")).toEqual([])
  })

  const resolveCases: ReadonlyArray<[string, string, number | string, number | undefined]> = [
    ["a number", "app", 8080, 31001],
    ["a numeric string", "app", "9000", 31002],
    ["a port name", "app", "admin-api", 31002],
    ["another container's port by number", "app", 9100, 31003],
    ["an undeclared port stays as is", "app", 7000, 7000],
    ["an unknown name", "app", "nope", undefined]
  ]
  it.each(resolveCases)("resolves probe ports: %s", (_name, container, port, want) => {
    expect(HostPorts.resolve(web, assigned, container, port)).toBe(want)
  })

  it("round-trips through the container label and detects a changed spec", () => {
    expect(HostPorts.decode(HostPorts.encode(assigned))).toEqual(assigned)
    expect(HostPorts.decode("not json")).toEqual([])
    expect(HostPorts.matches(HostPorts.requests(web), assigned)).toBe(true)
    expect(HostPorts.matches(HostPorts.requests(pod({})), assigned)).toBe(false)
  })
})
