/**
 * The agent's NetworkPolicy loop against the in-process API and the memory runtime: a selected
 * pod's rules reach the runtime before its container starts, follow a peer's new label within
 * 2 s, are re-sent only when they change, and are removed with the policy. Where the runtime
 * cannot enforce, a selected pod runs with a Warning Event, or with `networkPolicyStrict` is not
 * started at all.
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
const PolicyRef = { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy" } as const
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

const app = { name: "app", image: "node:20", command: ["node", "server.js"], ports: [{ name: "http", containerPort: 8080 }] }
const local = (name: string, labels: Json = {}): Json => ({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: "default", labels }, spec: { nodeName: "agent-0", containers: [app] } })
// Peers on no node (nothing runs them): their addresses are written by the test, as another node's agent would.
const peer = (name: string, labels: Json): Json => ({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: "default", labels }, spec: { nodeSelector: { nowhere: "true" }, containers: [app] } })

const allowFromA: Json = {
  apiVersion: "networking.k8s.io/v1",
  kind: "NetworkPolicy",
  metadata: { name: "b-from-a", namespace: "default" },
  spec: { podSelector: { matchLabels: { app: "b" } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: "a" } } }], ports: [{ port: "http" }] }] }
}

const world = (networkPolicy: boolean, strict = false) =>
  Effect.gen(function* () {
    const cluster = yield* TestCluster.make({ nodes: [], scheduler: false })
    const { runtime, control } = yield* MemoryRuntime.make({ info: { ...MemoryRuntime.defaultInfo, capabilities: { ...MemoryRuntime.defaultInfo.capabilities, networkPolicy } } })
    const agent = yield* Agent.make({
      facts,
      dataDir: "/var/lib/fleet",
      relistMs: 50,
      resyncMs: 300,
      leaseRenewMs: 100,
      objectTtlMs: 0,
      runtimeName: "memory",
      networkPolicyStrict: strict
    }).pipe(
      Effect.provideService(ApiClient, cluster.client),
      Effect.provideService(Runtime.Runtime, runtime),
      Effect.provideService(Prober.Prober, Prober.makeMemory().service),
      Effect.provideService(VolumeWriter.VolumeWriter, VolumeWriter.makeMemory().service),
      Effect.provideService(HostPortAllocator.HostPortAllocator, HostPortAllocator.makeMemory(31_000))
    )
    yield* agent.synced
    const setIP = (name: string, ip: string) =>
      cluster.client.patch(PodRef, "default", name, "merge", { status: { podIP: ip, podIPs: [{ ip }] } }, "status")
    const get = (name: string) => Effect.map(cluster.client.get(PodRef, "default", name), (p) => p as Json)
    /** The rules the runtime holds for a pod's sandbox. */
    const rulesOf = (name: string) =>
      Effect.gen(function* () {
        const uid = (yield* get(name)).metadata.uid as string
        const [sandbox] = yield* runtime.sandboxes.list({ podUid: uid })
        return sandbox === undefined ? undefined : (yield* control.networkPolicies).get(sandbox.id)
      })
    const policyCalls = Effect.map(control.calls, (calls) => calls.filter((c) => c.op === "container.networkPolicy").length)
    return { cluster, runtime, control, setIP, get, rulesOf, policyCalls }
  })

describe("Agent: NetworkPolicy enforcement", () => {
  it.live("applies a selected pod's rules before it starts, follows a peer's new label within 2 s, re-sends only changes", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world(true)
        yield* w.cluster.client.create(allowFromA)
        yield* w.cluster.client.create(peer("a", { role: "a" }))
        yield* w.cluster.client.create(peer("c", { role: "c" }))
        yield* w.setIP("a", "10.42.1.5")
        yield* w.setIP("c", "10.42.1.6")
        yield* w.cluster.client.create(local("b", { app: "b" }))
        yield* w.cluster.eventually(Effect.flatMap(w.get("b"), (p) => (Pods.isReady(p) ? Effect.void : Effect.fail(new Error("b not ready")))))
        // Before its first start: the call precedes the container's start in the runtime's log.
        const ops = (yield* w.control.calls).map((c) => c.op)
        expect(ops.indexOf("container.networkPolicy")).toBeGreaterThan(-1)
        expect(ops.indexOf("container.networkPolicy")).toBeLessThan(ops.indexOf("container.start"))
        const only = (cidrs: ReadonlyArray<string>) => ({
          ingress: { isolated: true, allow: [{ cidrs, ports: [{ protocol: "TCP", port: 8080 }] }] },
          egress: { isolated: false, allow: [] }
        })
        expect(yield* w.rulesOf("b")).toEqual(only(["10.42.1.5/32"]))
        const calls = yield* w.policyCalls

        // C gains the label: B's rules follow, well within 2 s.
        const t0 = Date.now()
        yield* w.cluster.client.patch(PodRef, "default", "c", "merge", { metadata: { labels: { role: "a" } } })
        yield* w.cluster.eventually(
          Effect.flatMap(w.rulesOf("b"), (r) => (JSON.stringify(r) === JSON.stringify(only(["10.42.1.5/32", "10.42.1.6/32"])) ? Effect.void : Effect.fail(new Error(JSON.stringify(r))))),
          { timeoutMs: 2_000, intervalMs: 10 }
        )
        expect(Date.now() - t0).toBeLessThan(2_000)
        expect(yield* w.policyCalls).toBe(calls + 1)

        // A change that does not alter the rules (an annotation, an unselected pod's label) sends nothing.
        yield* w.cluster.client.patch(PodRef, "default", "c", "merge", { metadata: { annotations: { note: "x" } } })
        yield* w.cluster.client.create(local("d", { app: "d" }))
        yield* w.cluster.eventually(Effect.flatMap(w.get("d"), (p) => (Pods.isReady(p) ? Effect.void : Effect.fail(new Error("d not ready")))))
        yield* Effect.sleep("300 millis")
        expect(yield* w.policyCalls).toBe(calls + 1)

        // A peer's new address too.
        yield* w.setIP("a", "10.42.1.9")
        yield* w.cluster.eventually(
          Effect.flatMap(w.rulesOf("b"), (r) => (JSON.stringify(r) === JSON.stringify(only(["10.42.1.6/32", "10.42.1.9/32"])) ? Effect.void : Effect.fail(new Error(JSON.stringify(r))))),
          { timeoutMs: 2_000, intervalMs: 10 }
        )

        // The policy goes: B is open again.
        yield* w.cluster.client.delete(PolicyRef, "default", "b-from-a")
        yield* w.cluster.eventually(
          Effect.flatMap(w.rulesOf("b"), (r) => (r?.ingress.isolated === false ? Effect.void : Effect.fail(new Error(JSON.stringify(r))))),
          { timeoutMs: 2_000, intervalMs: 10 }
        )
      })
    )
  )

  it.live("a runtime that cannot enforce: the selected pod runs with a Warning Event, unselected pods cost no call", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world(false)
        yield* w.cluster.client.create(allowFromA)
        yield* w.cluster.client.create(local("b", { app: "b" }))
        yield* w.cluster.client.create(local("free", { app: "free" }))
        for (const name of ["b", "free"]) yield* w.cluster.eventually(Effect.flatMap(w.get(name), (p) => (Pods.isReady(p) ? Effect.void : Effect.fail(new Error(`${name} not ready`)))))
        const events = yield* w.cluster.eventually(
          Effect.flatMap(w.cluster.client.list(EventRef, { namespace: "default" }), (l) => {
            const found = (l.items as ReadonlyArray<Json>).filter((e) => e.reason === "NetworkPolicyNotEnforced")
            return found.length > 0 ? Effect.succeed(found) : Effect.fail(new Error("no event"))
          })
        )
        expect(events.map((e) => e.involvedObject.name)).toEqual(["b"])
        expect(events[0]!.type).toBe("Warning")
        expect(events[0]!.message).toContain("the pod runs unprotected")
      })
    )
  )

  it.live("--network-policy-strict: a selected pod that cannot be protected is not started; others are", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world(false, true)
        yield* w.cluster.client.create(allowFromA)
        yield* w.cluster.client.create(local("b", { app: "b" }))
        yield* w.cluster.client.create(local("free", { app: "free" }))
        yield* w.cluster.eventually(Effect.flatMap(w.get("free"), (p) => (Pods.isReady(p) ? Effect.void : Effect.fail(new Error("free not ready")))))
        const waiting = yield* w.cluster.eventually(
          Effect.flatMap(w.get("b"), (p) => {
            const state = p.status?.containerStatuses?.[0]?.state?.waiting
            return state?.reason === "NetworkPolicyNotEnforced" ? Effect.succeed(state) : Effect.fail(new Error(JSON.stringify(p.status)))
          })
        )
        expect(waiting.message).toContain("not started")
        const running = yield* w.runtime.containers.list({ state: "running" })
        expect(running.map((c) => c.spec.labels?.[Runtime.Labels.podName])).toEqual(["free"])
      })
    )
  )
})
