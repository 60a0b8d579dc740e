import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as HandlerRunner from "../../src/agent/HandlerRunner.js"
import * as HostPortAllocator from "../../src/agent/HostPortAllocator.js"
import * as ObjectCache from "../../src/agent/ObjectCache.js"
import * as PodStates from "../../src/agent/PodStates.js"
import * as PodWorker from "../../src/agent/PodWorker.js"
import * as PolicyEnforcement from "../../src/agent/PolicyEnforcement.js"
import * as ProbeManager from "../../src/agent/ProbeManager.js"
import * as Prober from "../../src/agent/Prober.js"
import * as Relist from "../../src/agent/Relist.js"
import * as RuntimeCapabilities from "../../src/agent/RuntimeCapabilities.js"
import * as TokenCache from "../../src/agent/TokenCache.js"
import * as VolumeWriter from "../../src/agent/VolumeWriter.js"
import type * as Pod from "../../src/model/Pod.js"
import * as ResourceRefs from "../../src/object/ResourceRefs.js"
import * as Views from "../../src/object/Views.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import * as Runtime from "../../src/runtime/Runtime.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

const internalIP = "127.0.0.1"
const allocatable = { cpu: "2", memory: "4Gi", pods: "110" }

// One pod worker's dependencies wired as Agent.make wires them, on the memory runtime and an
// in-process cluster; `pods` plays the informer.
const world = Effect.gen(function* () {
  const cluster = yield* TestCluster.make({ nodes: [] })
  const { runtime, control } = yield* MemoryRuntime.make()
  const client = cluster.client
  const prober = Prober.makeMemory()
  const writer = VolumeWriter.makeMemory()
  const events: Array<string> = []
  const queued: Array<string> = []
  const emit: PodStates.Emit = (pod, type, reason) => Effect.sync(() => void events.push(`${pod.metadata.name} ${type} ${reason}`))
  const run = (pod: Pod.Pod, state: PodStates.PodState, name: string, id: string, handler: HandlerRunner.Handler, timeoutMs: number) =>
    HandlerRunner.run(runtime, prober.service, pod, { host: internalIP, hostPorts: state.hostPorts ?? [] }, name, id, handler, timeoutMs)
  const probes = yield* ProbeManager.make({ run, emit, onChange: (uid) => void queued.push(uid) })
  const policy = yield* PolicyEnforcement.make({ client, nodeName: "n1", strict: false, emit }).pipe(Effect.provideService(Runtime.Runtime, runtime))
  const capabilities = RuntimeCapabilities.make(runtime)
  const setup = { client, runtime, allocator: HostPortAllocator.makeMemory(31_000), writer: writer.service, nodeName: "n1", network: "host" as const, internalIP, nodeAllocatable: allocatable, dataDir: "/data", memoryDir: undefined }
  const pods = new Map<string, Pod.Pod>()
  const states: PodStates.Table = new Map()
  const deps: PodWorker.Deps = {
    client,
    runtime,
    setup,
    setupState: { podCidr: undefined },
    actions: {
      runtime,
      policy,
      capabilities,
      emit,
      run,
      specContext: (state, caps) => ({ hostIP: internalIP, podIP: internalIP, nodeAllocatable: allocatable, defaultEnv: {}, network: "host", sandboxId: state.sandbox?.id ?? "", hostPorts: state.hostPorts ?? [], capabilities: caps })
    },
    status: { client, observeStart: () => undefined },
    objects: ObjectCache.make(client, 0),
    tokens: TokenCache.make(client),
    probes,
    relist: Relist.make(runtime, (uid) => void queued.push(uid)),
    admission: { allocatable, allowUnenforcedLimits: false },
    pods,
    states,
    emit,
    runtimeName: "memory"
  }
  // Create a pod bound to the node and let the worker see it.
  const add = (name: string, spec: Partial<Pod.PodSpec> = {}) =>
    Effect.gen(function* () {
      const created = yield* client.create({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: "default" },
        spec: { nodeName: "n1", containers: [{ name: "app", image: "node:20", command: ["node", "server.js"] }], ...spec }
      })
      const pod = PodStates.asPod(created)
      pods.set(pod.metadata.uid!, pod)
      return pod
    })
  const apiPod = (name: string) => Effect.map(client.get(ResourceRefs.Pod, "default", name), Views.pod)
  return { deps, runtime, control, writer, events, add, apiPod, pods, states }
})

describe("PodWorker", () => {
  it.live("a new pod: admitted, sandbox, one container created and started, its status written once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { deps, control, events, add, apiPod, states } = yield* world
        const pod = yield* add("web")
        const uid = pod.metadata.uid!
        yield* PodWorker.sync(deps, uid)
        expect((yield* control.calls).map((c) => c.op)).toEqual(["sandbox.create", "container.create", "container.start"])
        expect(states.get(uid)).toMatchObject({ admitted: true, volumesReady: true })
        expect(events).toEqual(["web Normal ImageNotUsed", "web Normal Started"])
        const status = (yield* apiPod("web")).status
        expect(status?.phase).toBe("Running")
        expect(status?.containerStatuses?.[0]).toMatchObject({ name: "app", started: true, state: { running: {} } })
        // Nothing changed: another sync makes no runtime call and writes nothing.
        const written = states.get(uid)!.lastStatus
        yield* PodWorker.sync(deps, uid)
        expect((yield* control.calls)).toHaveLength(3)
        expect(states.get(uid)!.lastStatus).toBe(written)
      })
    )
  )

  it.live("a pod gone from the API: its containers are stopped, then it is cleaned up and forgotten", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { deps, runtime, writer, add, pods, states } = yield* world
        const pod = yield* add("gone", {
          containers: [{ name: "app", image: "node:20", command: ["x"], volumeMounts: [{ name: "scratch", mountPath: "/scratch" }] }],
          volumes: [{ name: "scratch", emptyDir: {} }]
        })
        const uid = pod.metadata.uid!
        yield* PodWorker.sync(deps, uid)
        expect(writer.dirs().some((d) => d.startsWith(`/data/pods/${uid}/`))).toBe(true)
        pods.delete(uid)
        for (let i = 0; i < 5 && states.has(uid); i++) yield* PodWorker.sync(deps, uid)
        expect(states.has(uid)).toBe(false)
        expect(yield* runtime.containers.list({ labels: { [Runtime.Labels.podUid]: uid }, state: "running" })).toEqual([])
        expect(yield* runtime.sandboxes.list({ podUid: uid })).toEqual([])
        expect(writer.dirs().some((d) => d.startsWith(`/data/pods/${uid}/`))).toBe(false)
      })
    )
  )

  it.live("a uid never known with nothing left: no runtime writes, no record", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { deps, control, states } = yield* world
        expect(yield* PodWorker.sync(deps, "nobody")).toBeUndefined()
        expect(yield* control.calls).toEqual([])
        expect(states.size).toBe(0)
      })
    )
  )

  it.live("a pod that does not fit fails with the kubelet's reason; nothing starts", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { deps, control, events, add, apiPod } = yield* world
        const pod = yield* add("big", { containers: [{ name: "app", image: "node:20", command: ["x"], resources: { requests: { cpu: "3" } } }] })
        yield* PodWorker.sync(deps, pod.metadata.uid!)
        // The refusal is in the status (its Event is the limits check's alone).
        expect(events).toEqual([])
        expect(yield* control.calls).toEqual([])
        expect((yield* apiPod("big")).status).toMatchObject({ phase: "Failed", reason: "OutOfcpu" })
      })
    )
  )
})
