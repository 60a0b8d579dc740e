/**
 * NodeName: a pod that names its node (`spec.nodeName`) may only go there, as upstream
 * kube-scheduler's `nodename` plugin: Filter rejects every other node with
 * `node(s) didn't match the requested node name` (UnschedulableAndUnresolvable — preemption
 * cannot change a name).
 *
 * Beyond upstream (which only filters), PreFilter narrows the cycle to that one node, so the
 * framework does not walk thousands of nodes to reject all but one; and it answers Skip for a
 * pod without `spec.nodeName`, whose Filter would pass everywhere.
 */
import type { Factory, FilterPlugin, PreFilterPlugin, PreFilterResult, Status } from "../Framework.js"
import { status, success } from "../Framework.js"
import * as Signature from "../Signature.js"

/** The plugin's name in profiles and the registry. */
export const name = "NodeName"

/** Upstream's reason for a node other than the requested one. */
export const ErrReason = "node(s) didn't match the requested node name"

const rejected: Status = status("UnschedulableAndUnresolvable", ErrReason)
const skip: PreFilterResult = { status: status("Skip") }

/** The node the pod asks for, if any (an empty name asks for none). */
const requested = (nodeName: string | undefined): string | undefined => (nodeName === undefined || nodeName === "" ? undefined : nodeName)

/** The plugin: PreFilter (narrowing) and Filter. */
export const make = (): PreFilterPlugin & FilterPlugin => ({
  name,
  sign: Signature.nodeName,
  preFilter: (_state, pod) => {
    const nodeName = requested(pod.nodeName)
    return nodeName === undefined ? skip : { status: success, nodeNames: new Set([nodeName]) }
  },
  filter: (_state, pod, node) => {
    const nodeName = requested(pod.nodeName)
    return nodeName === undefined || nodeName === node.name ? success : rejected
  }
})

/** Builds the plugin (no arguments). */
export const factory: Factory = () => make()
