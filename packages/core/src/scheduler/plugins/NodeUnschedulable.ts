/**
 * NodeUnschedulable: a cordoned node (`spec.unschedulable: true`) takes only pods that tolerate
 * the `node.kubernetes.io/unschedulable:NoSchedule` taint, as upstream kube-scheduler's
 * `nodeunschedulable` plugin; others get `node(s) were unschedulable`, UnschedulableAndUnresolvable.
 *
 * Beyond upstream (Filter only), PreFilter decides the toleration once per cycle: a pod that
 * tolerates the taint answers Skip (its Filter could never fail), and for the others Filter reads
 * the answer instead of re-reading the pod's tolerations on every cordoned node. Without
 * PreFilter, Filter works it out itself.
 */
import type { CycleState, Factory, FilterPlugin, PreFilterPlugin, PreFilterResult, Status } from "../Framework.js"
import { status, success } from "../Framework.js"
import type { PodInfo } from "../Snapshot.js"
import * as TaintToleration from "../../matching/TaintToleration.js"
import * as Signature from "../Signature.js"
import { asObject } from "../../object/Json.js"

/** The plugin's name in profiles and the registry. */
export const name = "NodeUnschedulable"

/** Upstream's reason for a cordoned node. */
export const ErrReason = "node(s) were unschedulable"

/** The taint a pod tolerates to be placed on a cordoned node (`node.kubernetes.io/unschedulable:NoSchedule`). */
export const unschedulableTaint: TaintToleration.TaintLike = { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" }

const rejected: Status = status("UnschedulableAndUnresolvable", ErrReason)
const skip: PreFilterResult = { status: status("Skip") }
const proceed: PreFilterResult = { status: success }
const stateKey = `PreFilter${name}`


/** Whether the pod tolerates the unschedulable taint. */
export const toleratesUnschedulable = (pod: PodInfo): boolean =>
  TaintToleration.tolerates(TaintToleration.tolerationsOf(asObject(pod.pod["spec"])), unschedulableTaint)

/** The plugin: PreFilter and Filter. */
export const make = (): PreFilterPlugin & FilterPlugin => ({
  name,
  sign: Signature.tolerations,
  preFilter: (state: CycleState, pod) => {
    const tolerated = toleratesUnschedulable(pod)
    state.write(stateKey, tolerated)
    return tolerated ? skip : proceed
  },
  filter: (state, pod, node) => {
    if (!node.unschedulable) return success
    const tolerated = state.read<boolean>(stateKey) ?? toleratesUnschedulable(pod)
    return tolerated ? success : rejected
  }
})

/** Builds the plugin (no arguments). */
export const factory: Factory = () => make()
