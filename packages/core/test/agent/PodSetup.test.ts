import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as ContainerIdentity from "../../src/agent/ContainerIdentity.js"
import * as HostPortAllocator from "../../src/agent/HostPortAllocator.js"
import * as HostPorts from "../../src/agent/HostPorts.js"
import * as PodSetup from "../../src/agent/PodSetup.js"
import * as PodStates from "../../src/agent/PodStates.js"
import type * as VolumePlan from "../../src/agent/VolumePlan.js"
import * as VolumeWriter from "../../src/agent/VolumeWriter.js"
import type * as Client from "../../src/client/Client.js"
import type * as Pod from "../../src/model/Pod.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import type * as Runtime from "../../src/runtime/Runtime.js"

const pod = (spec: Partial<Pod.PodSpec> = {}, status?: Pod.PodStatus): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { containers: [{ name: "app", image: "x", ports: [{ name: "http", containerPort: 8080 }, { containerPort: 53, protocol: "UDP", hostPort: 5353 }] }], ...spec },
  ...(status === undefined ? {} : { status })
})

const noLookup: VolumePlan.Lookup = { configMap: () => undefined, secret: () => undefined, claim: () => undefined, volume: () => undefined, token: () => undefined }

const world = (network: "host" | "pod" = "host", node: Record<string, unknown> = {}) =>
  Effect.gen(function* () {
    const { runtime, control } = yield* MemoryRuntime.make()
    const writer = VolumeWriter.makeMemory()
    const nodeGets: Array<string> = []
    const client = { get: (_r: unknown, _ns: unknown, name: string) => Effect.sync(() => (nodeGets.push(name), node)) } as unknown as Client.Client
    const deps: PodSetup.Deps = {
      client,
      runtime,
      allocator: HostPortAllocator.makeMemory(31_000),
      writer: writer.service,
      nodeName: "n1",
      network,
      internalIP: "10.0.0.1",
      nodeAllocatable: { cpu: "2" },
      dataDir: "/data",
      memoryDir: "/shm"
    }
    return { deps, runtime, control, writer, nodeGets, table: new Map() as PodStates.Table }
  })

describe("PodSetup", () => {
  it.scoped("host ports: allocated free of every pod's, kept, re-adopted from containers or the status", () =>
    Effect.gen(function* () {
      const { deps, table } = yield* world()
      PodStates.stateOf(table, "other").hostPorts = [{ containerName: "x", containerPort: 1, protocol: "TCP", hostPort: 31000 }]
      const state = PodStates.stateOf(table, "u1")
      const ports = yield* PodSetup.ensureHostPorts(deps, table, state, pod(), [])
      expect(ports.map((a) => [a.containerPort, a.hostPort])).toEqual([[8080, 31001], [53, 5353]])
      expect(yield* PodSetup.ensureHostPorts(deps, table, state, pod(), [])).toBe(ports)
      // After a restart: what the containers' label says, else what the status says.
      const labelled = { spec: { labels: { [ContainerIdentity.Labels.hostPorts]: HostPorts.encode(ports) } } } as unknown as Runtime.Container
      const adopted = PodStates.stateOf(new Map(), "u1")
      expect(yield* PodSetup.ensureHostPorts(deps, new Map(), adopted, pod(), [labelled])).toEqual(ports)
      const reported = PodStates.stateOf(new Map(), "u1")
      expect(yield* PodSetup.ensureHostPorts(deps, new Map(), reported, pod({}, { hostPorts: ports }), [])).toEqual(ports)
    })
  )

  it.scoped("host ports in pod network mode: the container port itself unless fixed", () =>
    Effect.gen(function* () {
      const { deps, table } = yield* world("pod")
      const ports = yield* PodSetup.ensureHostPorts(deps, table, PodStates.stateOf(table, "u1"), pod(), [])
      expect(ports.map((a) => a.hostPort)).toEqual([8080, 5353])
    })
  )

  it.scoped("sandbox: made once with the pod's ports and labels; a dead one replaced", () =>
    Effect.gen(function* () {
      const { deps, runtime, control, table } = yield* world()
      const state = PodStates.stateOf(table, "u1")
      const ports = yield* PodSetup.ensureHostPorts(deps, table, state, pod(), [])
      const sandbox = yield* PodSetup.ensureSandbox(deps, { podCidr: undefined }, state, pod(), ports)
      expect(sandbox.spec).toMatchObject({ podUid: "u1", name: "web", network: "host", ports: [{ name: "http", containerPort: 8080, hostPort: 31000, protocol: "TCP" }, { containerPort: 53, hostPort: 5353, protocol: "UDP" }] })
      expect(yield* PodSetup.ensureSandbox(deps, { podCidr: undefined }, state, pod(), ports)).toBe(sandbox)
      expect((yield* control.calls).map((c) => c.op)).toEqual(["sandbox.create"])
      // Another agent's record (a restart) adopts the existing sandbox.
      const again = yield* PodSetup.ensureSandbox(deps, { podCidr: undefined }, PodStates.stateOf(new Map(), "u1"), pod(), ports)
      expect(again.id).toBe(sandbox.id)
      expect((yield* runtime.sandboxes.list()).length).toBe(1)
    })
  )

  it.scoped("sandbox in pod network mode: the node's pod CIDR, read once, and its gateway as DNS", () =>
    Effect.gen(function* () {
      const { deps, nodeGets, table } = yield* world("pod", { spec: { podCIDR: "10.244.1.0/24" } })
      const setup: PodSetup.State = { podCidr: undefined }
      const sandbox = yield* PodSetup.ensureSandbox(deps, setup, PodStates.stateOf(table, "u1"), pod(), [])
      expect(sandbox.spec).toMatchObject({ network: "pod", podCidr: "10.244.1.0/24", dns: { nameservers: ["10.244.1.1"] } })
      yield* PodSetup.ensureSandbox(deps, setup, PodStates.stateOf(table, "u2"), { ...pod(), metadata: { name: "b", namespace: "default", uid: "u2" } }, [])
      expect(nodeGets).toEqual(["n1"])
      const host = yield* PodSetup.ensureSandbox(deps, setup, PodStates.stateOf(table, "u3"), { ...pod({ hostNetwork: true }), metadata: { name: "h", namespace: "default", uid: "u3" } }, [])
      expect(host.spec.network).toBe("host")
    })
  )

  it.scoped("sandbox in pod network mode before the node has a CIDR: Invalid", () =>
    Effect.gen(function* () {
      const { deps, table } = yield* world("pod", { spec: {} })
      const failed = yield* Effect.either(PodSetup.ensureSandbox(deps, { podCidr: undefined }, PodStates.stateOf(table, "u1"), pod(), []))
      expect(failed._tag === "Left" && failed.left.message).toMatch(/has no pod CIDR yet/)
    })
  )

  it.scoped("volumes: written from the plan; a failed source is the FailedMount message; the pod's directories removed", () =>
    Effect.gen(function* () {
      const { deps, writer, table } = yield* world()
      const state = PodStates.stateOf(table, "u1")
      const ok = yield* PodSetup.prepareVolumes(deps, state, pod({ volumes: [{ name: "scratch", emptyDir: {} }] }), noLookup)
      expect(ok._tag).toBe("Right")
      expect(writer.dirs().some((d) => d.startsWith("/data/pods/u1/"))).toBe(true)
      const bad = yield* PodSetup.prepareVolumes(deps, state, pod({ volumes: [{ name: "etc", hostPath: { path: "/nope", type: "Directory" } }] }), noLookup)
      expect(bad._tag === "Left" && bad.left).toMatch(/^MountVolume.SetUp failed for volume "etc" : hostPath type check failed/)
      yield* PodSetup.removePodDirs(deps, "u1")
      expect(writer.dirs().some((d) => d.startsWith("/data/pods/u1/"))).toBe(false)
    })
  )

  it("sandboxSpec: hostname, and no DNS without a CIDR", () => {
    const spec = PodSetup.sandboxSpec(pod({ hostname: "h1" }), false, undefined, [])
    expect(spec).toMatchObject({ hostname: "h1", network: "host", ports: [] })
    expect(spec.dns).toBeUndefined()
    expect(spec.podCidr).toBeUndefined()
  })
})
