/**
 * TaintToleration: keeps pods off nodes whose taints they do not tolerate and steers them away
 * from `PreferNoSchedule` taints, as upstream kube-scheduler's `tainttoleration` plugin. The
 * matching rules are the shared ones in `../TaintToleration.ts`.
 *
 * - Filter: the first `NoSchedule`/`NoExecute` taint no toleration tolerates rejects the node with
 *   `node(s) had untolerated taint {key: value}` (upstream's exact wording; UnschedulableAndUnresolvable,
 *   preemption cannot remove a taint).
 * - Score: the number of `PreferNoSchedule` taints the pod does not tolerate, normalised reversed
 *   (fewest intolerable taints → 100), with upstream's DefaultNormalizeScore.
 *
 * Beyond upstream (whose Filter reads the pod's tolerations on every node), PreFilter reads them
 * once into the cycle state; Filter falls back to reading them itself when PreFilter did not run.
 */
import type { CycleState, Factory, FilterPlugin, PreFilterPlugin, PreScorePlugin, ScorePlugin, Status } from "../Framework.js"
import { MaxScore, status, success } from "../Framework.js"
import type { PodInfo } from "../Snapshot.js"
import * as TaintToleration from "../../matching/TaintToleration.js"
import { defaultNormalizeScore } from "./NodeAffinityPlugin.js"
import * as Signature from "../Signature.js"
import { asObject, asString } from "../../object/Json.js"

/** The plugin's name in profiles and the registry. */
export const name = "TaintToleration"

const preFilterKey = `PreFilter${name}`
const preScoreKey = `PreScore${name}`


/** The pod's tolerations. */
const tolerationsOf = (pod: PodInfo): ReadonlyArray<TaintToleration.TolerationLike> => TaintToleration.tolerationsOf(asObject(pod.pod["spec"]))

/** Whether a taint keeps pods off the node (upstream's `DoNotScheduleTaintsFilterFunc`). */
const doNotSchedule = (taint: TaintToleration.TaintLike): boolean => taint.effect === "NoSchedule" || taint.effect === "NoExecute"

/** Upstream's reason for a node with an untolerated taint: `node(s) had untolerated taint {key: value}`. */
export const reason = (taint: TaintToleration.TaintLike): string => `node(s) had untolerated taint {${asString(taint.key)}: ${asString(taint.value)}}`

// A node's taint objects live as long as the node does, so one verdict per taint object is
// built once and reused on every cycle that hits it: the rejecting path allocates nothing either.
const verdicts = new WeakMap<object, Status>()
const rejected = (taint: TaintToleration.TaintLike): Status => {
  let verdict = verdicts.get(taint)
  if (verdict === undefined) {
    verdict = status("UnschedulableAndUnresolvable", reason(taint))
    verdicts.set(taint, verdict)
  }
  return verdict
}

// `TaintToleration.tolerates` and `untoleratedTaint`, as plain loops over the shared
// `toleratesTaint` rule: Filter and Score run per node, and these allocate no callbacks.
const anyTolerates = (tolerations: ReadonlyArray<TaintToleration.TolerationLike>, taint: TaintToleration.TaintLike): boolean => {
  for (let i = 0; i < tolerations.length; i++) if (TaintToleration.toleratesTaint(tolerations[i]!, taint)) return true
  return false
}

/** The first `NoSchedule`/`NoExecute` taint none of `tolerations` tolerates (upstream's `FindMatchingUntoleratedTaint` with `DoNotScheduleTaintsFilterFunc`). */
export const untoleratedDoNotScheduleTaint = (
  taints: ReadonlyArray<TaintToleration.TaintLike>,
  tolerations: ReadonlyArray<TaintToleration.TolerationLike>
): TaintToleration.TaintLike | undefined => {
  for (let i = 0; i < taints.length; i++) {
    const taint = taints[i]!
    if (doNotSchedule(taint) && !anyTolerates(tolerations, taint)) return taint
  }
  return undefined
}

/** The number of `PreferNoSchedule` taints none of `tolerations` tolerates. */
export const countIntolerablePreferNoSchedule = (
  taints: ReadonlyArray<TaintToleration.TaintLike>,
  tolerations: ReadonlyArray<TaintToleration.TolerationLike>
): number => {
  let count = 0
  for (let i = 0; i < taints.length; i++) {
    const taint = taints[i]!
    if (taint.effect === "PreferNoSchedule" && !anyTolerates(tolerations, taint)) count++
  }
  return count
}

/** The tolerations that can tolerate a `PreferNoSchedule` taint (that effect, or every effect). */
const preferNoScheduleTolerations = (pod: PodInfo): ReadonlyArray<TaintToleration.TolerationLike> =>
  tolerationsOf(pod).filter((t) => asString(t.effect) === "" || t.effect === "PreferNoSchedule")

/** The plugin: PreFilter, Filter, PreScore, Score (+ normalize). */
export const make = (): PreFilterPlugin & FilterPlugin & PreScorePlugin & ScorePlugin => ({
  name,
  sign: Signature.tolerations,
  preFilter: (state: CycleState, pod) => {
    state.write(preFilterKey, tolerationsOf(pod))
    return { status: success }
  },
  filter: (state, pod, node) => {
    if (node.taints.length === 0) return success
    const tolerations = state.read<ReadonlyArray<TaintToleration.TolerationLike>>(preFilterKey) ?? tolerationsOf(pod)
    const taint = untoleratedDoNotScheduleTaint(node.taints, tolerations)
    return taint === undefined ? success : rejected(taint)
  },
  preScore: (state, pod, nodes) => {
    if (nodes.length === 0) return success
    state.write(preScoreKey, preferNoScheduleTolerations(pod))
    return success
  },
  score: (state, pod, node) => {
    if (node.taints.length === 0) return 0
    const tolerations = state.read<ReadonlyArray<TaintToleration.TolerationLike>>(preScoreKey) ?? preferNoScheduleTolerations(pod)
    return countIntolerablePreferNoSchedule(node.taints, tolerations)
  },
  normalize: (_state, _pod, scores) => defaultNormalizeScore(MaxScore, true, scores)
})

/** Builds the plugin (no arguments). */
export const factory: Factory = () => make()
