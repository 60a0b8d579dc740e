import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as NodeHeartbeat from "../../src/agent/NodeHeartbeat.js"
import type * as NodeStatus from "../../src/agent/NodeStatus.js"
import * as RuntimeCapabilities from "../../src/agent/RuntimeCapabilities.js"
import * as Conditions from "../../src/object/Conditions.js"
import { labelsOf, uidOf } from "../../src/object/Metadata.js"
import * as ResourceRefs from "../../src/object/ResourceRefs.js"
import * as Views from "../../src/object/Views.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import * as Runtime from "../../src/runtime/Runtime.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

const facts: NodeStatus.Facts = {
  nodeName: "hb-0",
  hostname: "hb-0",
  os: "linux",
  arch: "amd64",
  region: "local",
  capacity: { cpu: "4", memory: "8Gi", pods: "110" },
  allocatable: { cpu: "2", memory: "4Gi", pods: "110" },
  internalIP: "127.0.0.1",
  port: 9301,
  nodeInfo: { machineID: "m", systemUUID: "s", bootID: "b", kernelVersion: "6.1", osImage: "test", containerRuntimeVersion: "memory://0.1.0", kubeletVersion: "v1.31.0-fleet" }
}

// A runtime whose `info` fails while `down`.
const switchable = (runtime: Runtime.RuntimeService) => {
  const state = { down: false }
  const service: Runtime.RuntimeService = {
    ...runtime,
    info: Effect.suspend(() => (state.down ? Effect.fail(new Runtime.Unavailable({ message: "socket closed" })) : runtime.info))
  }
  return { service, state }
}

const world = Effect.gen(function* () {
  const cluster = yield* TestCluster.make({ nodes: [] })
  const { runtime } = yield* MemoryRuntime.make({ info: { capabilities: { ...MemoryRuntime.defaultInfo.capabilities, limits: { cpu: true, memory: false, pids: false } } } })
  const { service, state } = switchable(runtime)
  const capabilities = RuntimeCapabilities.make(service)
  const heartbeat = NodeHeartbeat.make({ client: cluster.client, runtime: service, capabilities, facts, allowUnenforcedLimits: false, nodeStatusReportMs: 60_000 })
  const node = Effect.map(cluster.client.get(ResourceRefs.Node, undefined, "hb-0"), Views.node)
  return { cluster, heartbeat, runtime: state, capabilities, node }
})

describe("NodeHeartbeat", () => {
  it.live("registers the Node with its labels and a Ready status, and renews (or recreates) its Lease", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { cluster, heartbeat, node } = yield* world
        yield* heartbeat.register
        const n = yield* node
        expect(labelsOf(n as never)["kubernetes.io/hostname"]).toBe("hb-0")
        expect(Conditions.get(n.status?.conditions as ReadonlyArray<Conditions.Condition>, "Ready")?.status).toBe("True")
        expect(heartbeat.state.nodeUid).toBe(n.metadata.uid)
        expect(heartbeat.state.reported?.conditions.length).toBeGreaterThan(0)
        // Registering again (an agent restart) takes the Node over.
        yield* heartbeat.register
        yield* heartbeat.renewLease
        const lease = Views.lease(yield* cluster.client.get(ResourceRefs.Lease, "kube-node-lease", "hb-0"))
        expect(lease.spec?.holderIdentity).toBe("hb-0")
        expect(lease.metadata.ownerReferences?.[0]?.uid).toBe(n.metadata.uid)
        yield* heartbeat.renewLease
      })
    )
  )

  it.live("reports a runtime that went down (keeping its last limits), and registers a deleted Node again", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { cluster, heartbeat, runtime, capabilities, node } = yield* world
        yield* capabilities.get
        yield* heartbeat.register
        const firstUid = heartbeat.state.nodeUid
        runtime.down = true
        yield* heartbeat.reportStatus
        const down = (yield* node).status?.conditions as ReadonlyArray<Conditions.Condition>
        expect(Conditions.get(down, "Ready")).toMatchObject({ status: "False", message: "container runtime is down: socket closed" })
        expect(Conditions.get(down, "LimitsEnforced")?.status).toBe("False")
        // Nothing changed: no write until the report interval.
        const reportedAt = heartbeat.state.lastReportMs
        yield* heartbeat.reportStatus
        expect(heartbeat.state.lastReportMs).toBe(reportedAt)
        runtime.down = false
        yield* cluster.client.delete(ResourceRefs.Node, undefined, "hb-0")
        yield* heartbeat.reportStatus
        const again = yield* node
        expect(uidOf(again as never)).not.toBe(firstUid)
        expect(heartbeat.state.nodeUid).toBe(again.metadata.uid)
      })
    )
  )

  it.effect("health: from the runtime's answer, or its last capabilities while it is down", () =>
    Effect.gen(function* () {
      const info = MemoryRuntime.defaultInfo
      const state = { down: true }
      const runtime = { info: Effect.suspend(() => (state.down ? Effect.fail(new Runtime.Unavailable({ message: "gone" })) : Effect.succeed(info))) } as unknown as Runtime.RuntimeService
      const capabilities = RuntimeCapabilities.make(runtime)
      const deps = { runtime, capabilities, allowUnenforcedLimits: true }
      expect(yield* NodeHeartbeat.health(deps)).toEqual({ runtimeReady: false, message: "container runtime is down: gone" })
      state.down = false
      expect(yield* NodeHeartbeat.health(deps)).toEqual({ runtimeReady: true, limits: { cpu: false, memory: false, allowUnenforced: true } })
      yield* capabilities.get
      state.down = true
      expect(yield* NodeHeartbeat.health(deps)).toMatchObject({ runtimeReady: false, limits: { cpu: false, memory: false, allowUnenforced: true } })
    })
  )
})
