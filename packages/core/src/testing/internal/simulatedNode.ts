/**
 * The node side of a simulated kubelet: registration status (capacity, addresses, node info),
 * and the heartbeat that renews its Lease in `kube-node-lease` and keeps its Ready condition True.
 */
import { Clock, Effect, Fiber } from "effect"
import type { JsonObject } from "../../object/Json.js"
import { rfc3339 } from "../../object/Metadata.js"
import * as Pods from "../../object/Pods.js"
import * as ResourceRefs from "../../object/ResourceRefs.js"
import type { NodeSpec } from "../SimulatedKubelet.js"
import type { NodeState, Simulation } from "./simulation.js"

/** MicroTime (`2024-01-02T03:04:05.123456Z`), as Leases carry. */
const microTime = (ms: number) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z")

/** The conditions of a healthy node, all observed `now`. */
const readyConditions = (now: string): ReadonlyArray<JsonObject> => [
  {
    type: "MemoryPressure",
    status: "False",
    reason: "KubeletHasSufficientMemory",
    message: "kubelet has sufficient memory available",
    lastHeartbeatTime: now,
    lastTransitionTime: now
  },
  {
    type: "DiskPressure",
    status: "False",
    reason: "KubeletHasNoDiskPressure",
    message: "kubelet has no disk pressure",
    lastHeartbeatTime: now,
    lastTransitionTime: now
  },
  {
    type: "PIDPressure",
    status: "False",
    reason: "KubeletHasSufficientPID",
    message: "kubelet has sufficient PID available",
    lastHeartbeatTime: now,
    lastTransitionTime: now
  },
  {
    type: "Ready",
    status: "True",
    reason: "KubeletReady",
    message: "kubelet is posting ready status",
    lastHeartbeatTime: now,
    lastTransitionTime: now
  }
]

/** The status a node registers with: capacity (cpu 8, memory 32Gi, pods 110 by default), Ready, addresses, info. */
const registrationStatus = (spec: NodeSpec, index: number, now: string): JsonObject => {
  const allocatable = {
    cpu: spec.capacity?.cpu ?? "8",
    memory: spec.capacity?.memory ?? "32Gi",
    pods: spec.capacity?.pods ?? "110"
  }
  return {
    capacity: allocatable,
    allocatable,
    conditions: readyConditions(now),
    addresses: [
      { type: "InternalIP", address: `10.0.0.${index + 2}` },
      { type: "Hostname", address: spec.name }
    ],
    nodeInfo: {
      machineID: spec.name,
      systemUUID: spec.name,
      bootID: spec.name,
      kernelVersion: "6.1.0-sim",
      osImage: "Fleet simulated node",
      kubeletVersion: "v1.31.0-fleet-sim",
      kubeProxyVersion: "",
      operatingSystem: "linux",
      architecture: "amd64",
      containerRuntimeVersion: "sim://1"
    }
  }
}

/** The node object the cluster creates for `spec`. */
export const nodeObject = (spec: NodeSpec): JsonObject => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: {
    name: spec.name,
    labels: { "kubernetes.io/hostname": spec.name, "kubernetes.io/os": "linux", ...(spec.labels ?? {}) }
  },
  spec: spec.taints === undefined || spec.taints.length === 0 ? {} : { taints: spec.taints }
})

/** One beat: renew (or create) the node's Lease, and set it Ready again if it is not; silent while not alive. */
const heartbeat = (sim: Simulation, name: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    const state = sim.nodes.get(name)
    if (state === undefined || !state.alive) return
    const now = yield* Clock.currentTimeMillis
    const renewed = yield* Effect.either(
      sim.client.patch(ResourceRefs.Lease, "kube-node-lease", name, "merge", {
        spec: { renewTime: microTime(now), holderIdentity: name }
      })
    )
    if (renewed._tag === "Left") {
      yield* Effect.ignore(
        sim.client.create({
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: { name, namespace: "kube-node-lease" },
          spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: microTime(now) }
        })
      )
    }
    const node = yield* Effect.either(sim.client.get(ResourceRefs.Node, undefined, name))
    if (node._tag === "Right" && Pods.condition(node.right, "Ready")?.["status"] !== "True") {
      const status = { conditions: readyConditions(rfc3339(now)) }
      yield* Effect.ignore(sim.client.patch(ResourceRefs.Node, undefined, name, "merge", { status }, "status"))
    }
  }).pipe(Effect.ignore)

/** Start the node's heartbeat loop (once). */
export const startHeartbeat = (sim: Simulation, name: string): void => {
  const state = sim.nodes.get(name)
  if (state === undefined || state.heartbeat !== undefined) return
  state.heartbeat = Effect.runFork(
    Effect.forever(heartbeat(sim, name).pipe(Effect.zipRight(Effect.sleep(sim.heartbeatMs)))).pipe(Effect.interruptible)
  )
}

/** Stop the node's heartbeat loop, if it runs. */
export const stopHeartbeat = (sim: Simulation, name: string): void => {
  const state = sim.nodes.get(name)
  if (state?.heartbeat === undefined) return
  Effect.runFork(Fiber.interrupt(state.heartbeat))
  state.heartbeat = undefined
}

/** Register a node: its agent, its Node object (kept if it exists) and status, then its heartbeat. */
export const addNode = (sim: Simulation, spec: NodeSpec): Effect.Effect<void, unknown> =>
  Effect.gen(function* () {
    const state: NodeState = { index: sim.nodeCount++, alive: true, nextIp: 0, heartbeat: undefined }
    sim.nodes.set(spec.name, state)
    yield* sim.client.create(nodeObject(spec)).pipe(Effect.catchIf((e) => e.status.code === 409, () => Effect.void))
    const status = registrationStatus(spec, state.index, rfc3339(yield* Clock.currentTimeMillis))
    yield* sim.client.patch(ResourceRefs.Node, undefined, spec.name, "merge", { status }, "status")
    startHeartbeat(sim, spec.name)
  })

/** Stop a node's agent and delete its Node object (gone already is fine). */
export const removeNode = (sim: Simulation, name: string): Effect.Effect<void, unknown> =>
  Effect.gen(function* () {
    stopHeartbeat(sim, name)
    sim.nodes.delete(name)
    yield* sim.client
      .delete(ResourceRefs.Node, undefined, name)
      .pipe(Effect.catchIf((e) => e.status.code === 404, () => Effect.void))
  })
