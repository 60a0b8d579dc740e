import { describe, expect, it } from "vitest"
import * as NodeStatus from "../../src/agent/NodeStatus.js"

const facts: NodeStatus.Facts = {
  nodeName: "host-a",
  hostname: "host-a",
  os: "linux",
  arch: "amd64",
  region: "eu-west",
  capacity: { cpu: "4", memory: "8Gi", pods: "110" },
  allocatable: { cpu: "3500m", memory: "7Gi", pods: "110" },
  internalIP: "192.168.1.10",
  port: 9301,
  nodeInfo: { machineID: "m", systemUUID: "s", bootID: "b", kernelVersion: "6.1", osImage: "Debian", containerRuntimeVersion: "kbox://0.1.0", kubeletVersion: "v1.31.0-fleet" }
}

const T = Date.parse("2024-05-01T10:00:00Z")

describe("NodeStatus", () => {
  it("registers a node with the well-known labels, resources, Ready and its agent port", () => {
    const node = NodeStatus.nodeObject(facts, { runtimeReady: true }, T) as any
    expect(node.metadata.labels).toMatchObject({
      "kubernetes.io/hostname": "host-a",
      "kubernetes.io/os": "linux",
      "kubernetes.io/arch": "amd64",
      "fleet.koder.dev/region": "eu-west",
      "topology.kubernetes.io/region": "eu-west"
    })
    expect(node.status.allocatable).toEqual({ cpu: "3500m", memory: "7Gi", pods: "110" })
    expect(node.status.conditions.map((c: any) => `${c.type}=${c.status}`)).toEqual(["MemoryPressure=False", "DiskPressure=False", "PIDPressure=False", "Ready=True"])
    expect(node.status.conditions[3]).toMatchObject({ reason: "KubeletReady", message: "kubelet is posting ready status", lastHeartbeatTime: "2024-05-01T10:00:00Z" })
    expect(node.status.daemonEndpoints).toEqual({ kubeletEndpoint: { Port: 9301 } })
    expect(node.status.addresses).toEqual([{ type: "InternalIP", address: "192.168.1.10" }, { type: "Hostname", address: "host-a" }])
  })

  it("keeps transition times while a condition holds; a down runtime makes the node not ready", () => {
    const first = NodeStatus.conditionsOf({ runtimeReady: true }, undefined, T)
    const later = NodeStatus.conditionsOf({ runtimeReady: true }, first, T + 60_000)
    expect(later[3]).toMatchObject({ lastTransitionTime: "2024-05-01T10:00:00Z", lastHeartbeatTime: "2024-05-01T10:01:00Z" })
    const down = NodeStatus.conditionsOf({ runtimeReady: false }, later, T + 70_000)
    expect(down[3]).toMatchObject({ status: "False", reason: "KubeletNotReady", message: "container runtime is down", lastTransitionTime: "2024-05-01T10:01:10Z" })
  })

  it("reports the status only when it changed or the report interval passed", () => {
    const a = NodeStatus.statusOf(facts, { runtimeReady: true }, undefined, T)
    const b = NodeStatus.statusOf(facts, { runtimeReady: true }, a["conditions"] as any, T + 10_000)
    expect(NodeStatus.reportDue(a, b, T, T + 10_000, 60_000)).toBe(false)
    expect(NodeStatus.reportDue(a, b, T, T + 60_000, 60_000)).toBe(true)
    const c = NodeStatus.statusOf({ ...facts, allocatable: { cpu: "1" } }, { runtimeReady: true }, a["conditions"] as any, T + 10_000)
    expect(NodeStatus.reportDue(a, c, T, T + 10_000, 60_000)).toBe(true)
  })

  it("builds the heartbeat lease the node lifecycle controller reads", () => {
    expect(NodeStatus.leaseObject("host-a", "uid-1", T + 123)).toEqual({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "host-a", namespace: "kube-node-lease", ownerReferences: [{ apiVersion: "v1", kind: "Node", name: "host-a", uid: "uid-1" }] },
      spec: { holderIdentity: "host-a", leaseDurationSeconds: 40, renewTime: "2024-05-01T10:00:00.123000Z" }
    })
  })
})
