/**
 * What the node-local plugins read of a pod, each part as a string: the `sign` of those plugins
 * (upstream's PodSignature parts). Two pods with equal parts get equal verdicts and scores on the
 * same NodeInfo from the plugins that sign with them, which is what lets opportunistic batching
 * (`Batch.ts`) reuse a cycle's results for the next pod of a Deployment.
 *
 * Parts are conservative: they serialise the fields a plugin reads as the pod has them, so two pods
 * that differ only in key order or spelling (`1000m` and `1`) sign differently and merely miss a
 * batch; equal strings always mean equal inputs.
 */
import type { PodInfo } from "./Snapshot.js"
import * as Snapshot from "./Snapshot.js"

const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])
const spec = (pod: PodInfo) => obj(pod.pod["spec"])
const json = (v: unknown): string => JSON.stringify(v ?? null)

/** The requests the resource plugins add up (requested and the non-zero scoring variant). */
export const requests = (pod: PodInfo): string => Snapshot.requestsSignature(pod)

/** `spec.tolerations` (TaintToleration, NodeUnschedulable). */
export const tolerations = (pod: PodInfo): string => json(spec(pod)["tolerations"])

/** `spec.nodeSelector` and `spec.affinity.nodeAffinity` (NodeAffinity). */
export const nodeSelection = (pod: PodInfo): string => {
  const s = spec(pod)
  return `${json(s["nodeSelector"])}|${json(obj(s["affinity"])["nodeAffinity"])}`
}

/** `spec.nodeName` (NodeName). */
export const nodeName = (pod: PodInfo): string => pod.nodeName ?? ""

/** The containers' and sidecars' ports (NodePorts reads their host ports). */
export const ports = (pod: PodInfo): string => {
  const s = spec(pod)
  let out = ""
  for (const c of arr(s["initContainers"])) if (obj(c)["restartPolicy"] === "Always") out += json(obj(c)["ports"])
  out += "|"
  for (const c of arr(s["containers"])) out += json(obj(c)["ports"])
  return out
}
