/**
 * NodePorts: a pod that asks for host ports goes only where they are free, as upstream
 * kube-scheduler's `nodeports` plugin: PreFilter collects the pod's host ports (containers and
 * restartable — sidecar — init containers, `hostPort > 0`; Skip when there are none), Filter
 * rejects a node where one is taken with `node(s) didn't have free ports for the requested pod
 * ports` (Unschedulable: preemption can free a port).
 *
 * Conflicts follow upstream's `HostPortInfo.CheckConflict`: an empty hostIP means `0.0.0.0` and an
 * empty protocol `TCP`; a wanted `0.0.0.0` port conflicts with that protocol/port on any IP, a
 * wanted specific IP conflicts with the same IP or `0.0.0.0`. The node's ports come from the
 * snapshot as `protocol/hostIP/port` strings (NodeInfo.usedPorts).
 */
import type { CycleState, Factory, FilterPlugin, PreFilterPlugin, PreFilterResult, Status } from "../Framework.js"
import { status, success } from "../Framework.js"
import type { NodeInfo, PodInfo } from "../Snapshot.js"
import * as Signature from "../Signature.js"
import { asArray, asObject, asString } from "../../object/Json.js"

/** The plugin's name in profiles and the registry. */
export const name = "NodePorts"

/** Upstream's reason for a node where a wanted host port is taken. */
export const ErrReason = "node(s) didn't have free ports for the requested pod ports"

/** The address that binds every IP. */
export const DefaultBindAllHostIP = "0.0.0.0"

const rejected: Status = status("Unschedulable", ErrReason)
const skip: PreFilterResult = { status: status("Skip") }
const proceed: PreFilterResult = { status: success }
const stateKey = `PreFilter${name}`


/** One wanted host port, with the strings Filter compares against `usedPorts` built once. */
export interface WantedPort {
  readonly protocol: string
  readonly hostIP: string
  readonly port: number
  /** `protocol/hostIP/port`. */
  readonly key: string
  /** `protocol/0.0.0.0/port`. */
  readonly anyKey: string
  /** `protocol/`, to find this protocol on any IP. */
  readonly prefix: string
  /** `/port`. */
  readonly suffix: string
}

/** A `usedPorts` entry, `protocol/hostIP/port`, with upstream's defaults for empty fields. */
export const portKey = (protocol: string, hostIP: string, port: number): string =>
  `${protocol === "" ? "TCP" : protocol}/${hostIP === "" ? DefaultBindAllHostIP : hostIP}/${port}`

/** The host ports a pod asks for: its containers' and its restartable init containers' ports with `hostPort > 0`. */
export const hostPortsOf = (pod: PodInfo): ReadonlyArray<WantedPort> => {
  const spec = asObject(pod.pod["spec"])
  const out: Array<WantedPort> = []
  const collect = (container: unknown) => {
    for (const p of asArray(asObject(container)["ports"])) {
      const port = asObject(p)
      const hostPort = port["hostPort"]
      if (typeof hostPort !== "number" || hostPort <= 0) continue
      const protocol = asString(port["protocol"]) === "" ? "TCP" : asString(port["protocol"])
      const hostIP = asString(port["hostIP"]) === "" ? DefaultBindAllHostIP : asString(port["hostIP"])
      out.push({
        protocol,
        hostIP,
        port: hostPort,
        key: portKey(protocol, hostIP, hostPort),
        anyKey: portKey(protocol, DefaultBindAllHostIP, hostPort),
        prefix: `${protocol}/`,
        suffix: `/${hostPort}`
      })
    }
  }
  // Sidecars (init containers with restartPolicy Always) keep their ports for the pod's life.
  for (const c of asArray(spec["initContainers"])) if (asObject(c)["restartPolicy"] === "Always") collect(c)
  for (const c of asArray(spec["containers"])) collect(c)
  return out
}

/** Whether one wanted port is already taken on the node (upstream's `CheckConflict`). */
const conflicts = (want: WantedPort, used: ReadonlySet<string>): boolean => {
  if (want.hostIP !== DefaultBindAllHostIP) return used.has(want.anyKey) || used.has(want.key)
  // 0.0.0.0 binds every address: any IP holding this protocol/port is in the way.
  for (const key of used) if (key.startsWith(want.prefix) && key.endsWith(want.suffix)) return true
  return false
}

/** Whether every wanted port is free on the node. */
export const fitsPorts = (wanted: ReadonlyArray<WantedPort>, node: NodeInfo): boolean => {
  const used = node.usedPorts
  if (used.size === 0) return true
  for (let i = 0; i < wanted.length; i++) if (conflicts(wanted[i]!, used)) return false
  return true
}

/** The plugin: PreFilter and Filter. */
export const make = (): PreFilterPlugin & FilterPlugin => ({
  name,
  sign: Signature.ports,
  preFilter: (state: CycleState, pod) => {
    const wanted = hostPortsOf(pod)
    if (wanted.length === 0) return skip
    state.write(stateKey, wanted)
    return proceed
  },
  filter: (state, pod, node) => {
    const wanted = state.read<ReadonlyArray<WantedPort>>(stateKey) ?? hostPortsOf(pod)
    return fitsPorts(wanted, node) ? success : rejected
  }
})

/** Builds the plugin (no arguments). */
export const factory: Factory = () => make()
