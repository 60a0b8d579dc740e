/**
 * Simulated node agents for the test cluster: each node renews its Lease in `kube-node-lease` and
 * keeps its Ready condition True while its heartbeat runs; the pods bound to it start, run,
 * become ready, exit, restart and terminate as a kubelet would report them — without running
 * anything. A node whose heartbeats are stopped goes silent altogether (no lease, no pod status,
 * no deletion confirmations), which is what a partitioned or dead host looks like to the control
 * plane.
 *
 * Pod behaviour is steered by annotations on the pod (usually its template):
 *   sim.fleet.koder.dev/exit-code  the containers exit with this code (else they run forever)
 *   sim.fleet.koder.dev/run-ms     …after running this long (default 0)
 *   sim.fleet.koder.dev/ready      "false": the pod runs but never becomes Ready
 */
import { Effect, type Scope } from "effect"
import type * as Client from "../client/Client.js"
import type * as Controller from "../controllers/Controller.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import { addNode, removeNode, startHeartbeat, stopHeartbeat } from "./internal/simulatedNode.js"
import { reconcile } from "./internal/simulatedPod.js"
import { type Simulation, podStateOf } from "./internal/simulation.js"

/** The annotations that steer a simulated pod (exit code, run time, readiness). */
export { exitCodeAnnotation, readyAnnotation, runMsAnnotation } from "./internal/simulatedPod.js"

/** The node object the cluster creates for a `NodeSpec`. */
export { nodeObject } from "./internal/simulatedNode.js"

/** A node of the test cluster. */
export interface NodeSpec {
  readonly name: string
  readonly labels?: Readonly<Record<string, string>>
  readonly taints?: ReadonlyArray<{
    readonly key: string
    readonly value?: string
    readonly effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute"
  }>
  /** Allocatable resources (default cpu 8, memory 32Gi, pods 110). */
  readonly capacity?: Readonly<{ cpu?: string; memory?: string; pods?: string }>
}

/** Options of the simulation. */
export interface Options {
  /** How long a bound pod takes to be Running (default 20 ms). */
  readonly podStartupMs?: number
  /** How often nodes renew their lease (default 200 ms). */
  readonly heartbeatMs?: number
}

/** The simulated agents of a cluster. */
export interface Kubelets {
  /** The reconciler that moves pods through their lives; run it with the other controllers. */
  readonly reconciler: Controller.Reconciler
  /** Register a node, create its Node object and start its heartbeat. */
  readonly addNode: (spec: NodeSpec) => Effect.Effect<void, unknown>
  /** Stop a node's agent and delete its Node object. */
  readonly removeNode: (name: string) => Effect.Effect<void, unknown>
  /** Silence a node: no heartbeats, no pod updates. */
  readonly stopHeartbeats: (name: string) => void
  /** Let a silenced node talk again. */
  readonly resumeHeartbeats: (name: string) => void
  /** Make the containers of a pod exit with code 1 (restarted or failed per restartPolicy). */
  readonly crashContainer: (namespace: string, name: string) => void
  /** Force a pod's readiness (overrides the annotation). */
  readonly setReady: (namespace: string, name: string, ready: boolean) => void
  /** Set by the cluster: queue a pod key on the reconciler. */
  bindQueue: (enqueue: (key: string) => void) => void
}

/** The `Kubelets` handle over a simulation's state. */
const kubeletsOf = (sim: Simulation): Kubelets => ({
  reconciler: {
    name: "simulated-kubelet",
    primary: ResourceRefs.Pod,
    workers: 4,
    reconcile: (key) => reconcile(sim, key)
  },
  addNode: (spec) => addNode(sim, spec),
  removeNode: (name) => removeNode(sim, name),
  stopHeartbeats: (name) => {
    const state = sim.nodes.get(name)
    if (state === undefined) return
    state.alive = false
    stopHeartbeat(sim, name)
  },
  resumeHeartbeats: (name) => {
    const state = sim.nodes.get(name)
    if (state === undefined) return
    state.alive = true
    startHeartbeat(sim, name)
    // Catch up on everything that happened to its pods while it was silent.
    for (const key of sim.pods.keys()) sim.enqueue(key)
  },
  crashContainer: (namespace, name) => {
    const key = `${namespace}/${name}`
    podStateOf(sim, key).crash = true
    sim.enqueue(key)
  },
  setReady: (namespace, name, ready) => {
    const key = `${namespace}/${name}`
    podStateOf(sim, key).readyOverride = ready
    sim.enqueue(key)
  },
  bindQueue: (f) => {
    sim.enqueue = f
  }
})

/** Make the simulation; heartbeats live in the current scope. */
export const make = (client: Client.Client, options: Options = {}): Effect.Effect<Kubelets, never, Scope.Scope> =>
  Effect.gen(function* () {
    const sim: Simulation = {
      client,
      startupMs: options.podStartupMs ?? 20,
      heartbeatMs: options.heartbeatMs ?? 200,
      nodes: new Map(),
      pods: new Map(),
      enqueue: () => undefined,
      nodeCount: 0
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => [...sim.nodes.keys()].forEach((n) => stopHeartbeat(sim, n))))
    return kubeletsOf(sim)
  })
