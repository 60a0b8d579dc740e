/**
 * Limits the node cannot enforce: a pod with cpu or memory limits on a runtime without cgroup
 * controllers fails (`UnenforceableLimits`, with a Warning Event), unless the agent runs them
 * unenforced (`allowUnenforcedLimits`): then it runs, with a Warning Event saying so, and the Node
 * says `LimitsEnforced=False`. A runtime that enforces them admits the pod without a word.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Agent from "../../src/agent/Agent.js"
import * as HostPortAllocator from "../../src/agent/HostPortAllocator.js"
import type * as NodeStatus from "../../src/agent/NodeStatus.js"
import * as Prober from "../../src/agent/Prober.js"
import * as VolumeWriter from "../../src/agent/VolumeWriter.js"
import * as Pods from "../../src/object/Pods.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import * as Runtime from "../../src/runtime/Runtime.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import { ApiClient } from "../../src/client/ApiClient.js"

type Json = Record<string, any>

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const NodeRef = { apiVersion: "v1", kind: "Node" } as const
const EventRef = { apiVersion: "v1", kind: "Event" } as const

const facts: NodeStatus.Facts = {
  nodeName: "agent-0",
  hostname: "agent-0",
  os: "linux",
  arch: "amd64",
  region: "local",
  capacity: { cpu: "4", memory: "8Gi", pods: "110" },
  allocatable: { cpu: "2", memory: "4Gi", pods: "110" },
  internalIP: "127.0.0.1",
  port: 9301,
  nodeInfo: { machineID: "m", systemUUID: "s", bootID: "b", kernelVersion: "6.1", osImage: "test", containerRuntimeVersion: "memory://0.1.0", kubeletVersion: "v1.31.0-fleet" }
}

const limited = (name: string, limits: Json): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { nodeName: "agent-0", containers: [{ name: "app", image: "i", command: ["x"], resources: { limits } }] }
})

const run = (limits: Runtime.Capabilities["limits"], allowUnenforcedLimits: boolean) =>
  Effect.gen(function* () {
    const cluster = yield* TestCluster.make({ nodes: [] })
    const { runtime } = yield* MemoryRuntime.make({ info: { ...MemoryRuntime.defaultInfo, capabilities: { ...MemoryRuntime.defaultInfo.capabilities, limits } } })
    const agent = yield* Agent.make({
      facts,
      dataDir: "/var/lib/fleet",
      relistMs: 50,
      resyncMs: 300,
      leaseRenewMs: 100,
      nodeStatusReportMs: 1_000,
      objectTtlMs: 0,
      eventDelayMs: 0,
      allowUnenforcedLimits
    }).pipe(
      Effect.provideService(ApiClient, cluster.client),
      Effect.provideService(Runtime.Runtime, runtime),
      Effect.provideService(Prober.Prober, Prober.makeMemory().service),
      Effect.provideService(VolumeWriter.VolumeWriter, VolumeWriter.makeMemory().service),
      Effect.provideService(HostPortAllocator.HostPortAllocator, HostPortAllocator.makeMemory(31_000))
    )
    yield* agent.synced
    const podWhen = (name: string, check: (p: Json) => boolean) =>
      cluster.eventually(Effect.flatMap(cluster.client.get(PodRef, "default", name), (p) => (check(p as Json) ? Effect.succeed(p as Json) : Effect.fail(new Error(`${name}: ${JSON.stringify(p["status"])}`)))), { timeoutMs: 10_000 })
    const eventFor = (name: string, reason: string) =>
      cluster.eventually(
        Effect.flatMap(cluster.client.list(EventRef, { namespace: "default" }), (l) => {
          const e = (l.items as ReadonlyArray<Json>).find((e) => e.involvedObject?.name === name && e.reason === reason)
          return e === undefined ? Effect.fail(new Error(`no ${reason} event for ${name}`)) : Effect.succeed(e)
        }),
        { timeoutMs: 10_000 }
      )
    const limitsCondition = cluster.eventually(
      Effect.flatMap(cluster.client.get(NodeRef, undefined, "agent-0"), (n) => {
        const c = Pods.condition(n, "LimitsEnforced")
        return c === undefined ? Effect.fail(new Error("no LimitsEnforced condition")) : Effect.succeed(c as Json)
      }),
      { timeoutMs: 10_000 }
    )
    return { cluster, runtime, podWhen, eventFor, limitsCondition }
  })

const none = { cpu: false, memory: false, pids: false }

describe("Agent and limits the node cannot enforce", () => {
  it.live("refuses a pod with a memory limit: Failed, UnenforceableLimits, a Warning Event, nothing started", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* run(none, false)
        yield* w.cluster.client.create(limited("hog", { memory: "64Mi" }))
        const p = yield* w.podWhen("hog", (p) => p.status?.phase === "Failed")
        expect(p.status.reason).toBe("UnenforceableLimits")
        expect(p.status.message).toContain("cannot enforce the pod's memory limits")
        const e = yield* w.eventFor("hog", "UnenforceableLimits")
        expect(e.type).toBe("Warning")
        expect(yield* w.runtime.containers.list({ labels: { [Runtime.Labels.podName]: "hog" } })).toEqual([])
        expect(yield* w.limitsCondition).toMatchObject({ status: "False", reason: "UnenforceableLimits" })
        // A pod without limits runs as before.
        yield* w.cluster.client.create({ ...limited("plain", {}), spec: { nodeName: "agent-0", containers: [{ name: "app", image: "i", command: ["x"] }] } })
        yield* w.podWhen("plain", (p) => p.status?.phase === "Running")
      })
    )
  )

  it.live("runs it when the node allows unenforced limits, with a Warning Event and LimitsEnforced=False on the Node", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* run(none, true)
        yield* w.cluster.client.create(limited("hog", { memory: "64Mi", cpu: "100m" }))
        yield* w.podWhen("hog", (p) => p.status?.phase === "Running")
        const e = yield* w.eventFor("hog", "LimitsNotEnforced")
        expect(e.type).toBe("Warning")
        expect(e.message).toContain("does not enforce this pod's cpu and memory limits")
        expect(yield* w.limitsCondition).toMatchObject({ status: "False", reason: "LimitsNotEnforced" })
      })
    )
  )

  it.live("admits it without a word where the runtime enforces them (LimitsEnforced=True)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* run({ cpu: true, memory: true, pids: true }, false)
        yield* w.cluster.client.create(limited("hog", { memory: "64Mi" }))
        yield* w.podWhen("hog", (p) => p.status?.phase === "Running")
        expect(yield* w.limitsCondition).toMatchObject({ status: "True" })
        const events = (yield* w.cluster.client.list(EventRef, { namespace: "default" })).items as ReadonlyArray<Json>
        expect(events.filter((e) => e.reason === "LimitsNotEnforced" || e.reason === "UnenforceableLimits")).toEqual([])
      })
    )
  )
})
