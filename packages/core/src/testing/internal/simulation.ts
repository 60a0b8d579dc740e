/**
 * The state of the simulated kubelets, shared by the node side (`simulatedNode.ts`: leases,
 * node status) and the pod side (`simulatedPod.ts`: pod lives): which nodes exist and talk, and
 * where each pod is in its simulated life.
 */
import type { Fiber } from "effect"
import type * as Client from "../../client/Client.js"

/** One simulated node's agent. */
export interface NodeState {
  readonly index: number
  /** False while its heartbeats are stopped: the node says nothing at all. */
  alive: boolean
  nextIp: number
  heartbeat: Fiber.RuntimeFiber<void> | undefined
}

/** Where one pod is in its simulated life. */
export interface PodState {
  boundAt: number
  runningAt: number | undefined
  restarts: number
  crash: boolean
  readyOverride: boolean | undefined
}

/** Everything the simulated kubelets share. */
export interface Simulation {
  readonly client: Client.Client
  readonly startupMs: number
  readonly heartbeatMs: number
  readonly nodes: Map<string, NodeState>
  /** By pod key (`namespace/name`). */
  readonly pods: Map<string, PodState>
  /** Queues a pod key on the reconciler (set by the cluster through `bindQueue`). */
  enqueue: (key: string) => void
  /** Nodes registered so far: the next node's index (its addresses). */
  nodeCount: number
}

/** The pod's state, created (not yet bound) when the simulation has none. */
export const podStateOf = (sim: Simulation, key: string): PodState => {
  const state = sim.pods.get(key) ?? {
    boundAt: 0,
    runningAt: undefined,
    restarts: 0,
    crash: false,
    readyOverride: undefined
  }
  sim.pods.set(key, state)
  return state
}
