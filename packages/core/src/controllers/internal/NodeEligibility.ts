/**
 * The DaemonSet's question about a node: "should it run a daemon pod, and may an existing one keep
 * running" (`shouldRunDaemonPod`, upstream's `NodeShouldRunDaemonPod`), with the tolerations a
 * DaemonSet adds to every pod (`withDaemonTolerations`) and the `metadata.name` affinity that pins
 * a daemon pod to its node. The matching rules themselves are the scheduler's
 * (`scheduler/TaintToleration.ts`, `scheduler/NodeAffinity.ts`).
 */
import type { JsonObject } from "../../informer/Informer.js"
import { matchesNodeSelectorAndAffinity } from "../../matching/NodeAffinity.js"
import { taintsOf, tolerationsOf, untoleratedTaint, type TolerationLike } from "../../matching/TaintToleration.js"
import { asArray, asObject, asString } from "../../object/Json.js"

/** The taint keys Kubernetes puts on nodes, which daemon pods tolerate. */
export const TaintKeys = {
  notReady: "node.kubernetes.io/not-ready",
  unreachable: "node.kubernetes.io/unreachable",
  diskPressure: "node.kubernetes.io/disk-pressure",
  memoryPressure: "node.kubernetes.io/memory-pressure",
  pidPressure: "node.kubernetes.io/pid-pressure",
  unschedulable: "node.kubernetes.io/unschedulable",
  networkUnavailable: "node.kubernetes.io/network-unavailable"
} as const

/**
 * The tolerations a DaemonSet adds to each of its pods (upstream `AddOrUpdateDaemonPodTolerations`):
 * no eviction when the node goes not-ready or unreachable (NoExecute, forever), scheduling despite
 * disk, memory and PID pressure and cordoning (NoSchedule), and despite an unavailable network for
 * host-network pods.
 */
export const daemonTolerations = (podSpec: Record<string, unknown>): ReadonlyArray<TolerationLike> => [
  { key: TaintKeys.notReady, operator: "Exists", effect: "NoExecute" },
  { key: TaintKeys.unreachable, operator: "Exists", effect: "NoExecute" },
  { key: TaintKeys.diskPressure, operator: "Exists", effect: "NoSchedule" },
  { key: TaintKeys.memoryPressure, operator: "Exists", effect: "NoSchedule" },
  { key: TaintKeys.pidPressure, operator: "Exists", effect: "NoSchedule" },
  { key: TaintKeys.unschedulable, operator: "Exists", effect: "NoSchedule" },
  ...(podSpec["hostNetwork"] === true ? [{ key: TaintKeys.networkUnavailable, operator: "Exists", effect: "NoSchedule" }] : [])
]

// Upstream's `MatchToleration`: the same toleration up to `tolerationSeconds`.
const sameToleration = (a: TolerationLike, b: TolerationLike) =>
  asString(a.key) === asString(b.key) && asString(a.effect) === asString(b.effect) && (asString(a.operator) || "Equal") === (asString(b.operator) || "Equal") && asString(a.value) === asString(b.value)

/**
 * `podSpec` with the daemon tolerations added; a toleration the user already wrote for the same
 * key/operator/value/effect is replaced (so a `tolerationSeconds` on not-ready does not bound it).
 */
export const withDaemonTolerations = (podSpec: Record<string, unknown>): Record<string, unknown> => {
  const tolerations: Array<TolerationLike> = [...tolerationsOf(podSpec)]
  for (const t of daemonTolerations(podSpec)) {
    const i = tolerations.findIndex((u) => sameToleration(u, t))
    if (i < 0) tolerations.push(t)
    else tolerations[i] = t
  }
  return { ...podSpec, tolerations }
}

/**
 * Required node affinity pinning a pod to `nodeName` by `matchFields metadata.name In [node]`
 * (upstream `ReplaceDaemonSetPodNodeNameNodeAffinity`): any required terms are replaced, since
 * the DaemonSet controller already checked them; other affinity is kept.
 */
export const withNodeNameAffinity = (affinity: Record<string, unknown> | undefined, nodeName: string): Record<string, unknown> => {
  const required = { nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: [nodeName] }] }] }
  const a = asObject(affinity)
  return { ...a, nodeAffinity: { ...asObject(a["nodeAffinity"]), requiredDuringSchedulingIgnoredDuringExecution: required } }
}

/**
 * The node a pod is bound to (`spec.nodeName`), or, while unscheduled, the one its required
 * affinity pins it to with a single `metadata.name In [node]` field term (upstream
 * `GetTargetNodeName`).
 */
export const targetNodeName = (pod: JsonObject): string | undefined => {
  const spec = asObject(pod["spec"])
  const bound = asString(spec["nodeName"])
  if (bound !== "") return bound
  const terms = asArray(asObject(asObject(asObject(spec["affinity"])["nodeAffinity"])["requiredDuringSchedulingIgnoredDuringExecution"])["nodeSelectorTerms"]).map(asObject)
  for (const term of terms) {
    for (const f of asArray(term["matchFields"]).map(asObject)) {
      const values = asArray(f["values"])
      if (f["key"] === "metadata.name" && f["operator"] === "In" && values.length === 1) return asString(values[0])
    }
  }
  return undefined
}

/** The verdict for one node (upstream `NodeShouldRunDaemonPod`). */
export interface DaemonVerdict {
  /** A daemon pod should be created on the node if it has none. */
  readonly shouldRun: boolean
  /** A daemon pod already there may stay (it tolerates every NoExecute taint). */
  readonly shouldContinueRunning: boolean
}

/**
 * Whether `node` should run a pod of the DaemonSet whose pod template is `template`: the
 * template's `nodeName` (if any) names it, its nodeSelector and required affinity match, and
 * every NoSchedule/NoExecute taint is tolerated by the template's tolerations plus the daemon
 * ones. A node failing only on taints may keep an existing pod unless a NoExecute taint is not
 * tolerated.
 */
export const shouldRunDaemonPod = (template: JsonObject, node: JsonObject): DaemonVerdict => {
  const spec = withDaemonTolerations(asObject(template["spec"]))
  const nodeName = asString(asObject(node["metadata"])["name"])
  const pinned = asString(spec["nodeName"])
  if (pinned !== "" && pinned !== nodeName) return { shouldRun: false, shouldContinueRunning: false }
  if (!matchesNodeSelectorAndAffinity(spec, node)) return { shouldRun: false, shouldContinueRunning: false }
  const taints = taintsOf(node)
  const tolerations = tolerationsOf(spec)
  const fitsTaints = untoleratedTaint(taints, tolerations, (t) => t.effect === "NoSchedule" || t.effect === "NoExecute") === undefined
  if (fitsTaints) return { shouldRun: true, shouldContinueRunning: true }
  return { shouldRun: false, shouldContinueRunning: untoleratedTaint(taints, tolerations, (t) => t.effect === "NoExecute") === undefined }
}
