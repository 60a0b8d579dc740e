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
import { asArray, asObject } from "../object/Json.js"

const spec = (pod: PodInfo) => asObject(pod.pod["spec"])
const json = (v: unknown): string => JSON.stringify(v ?? null)

/** The requests the resource plugins add up (requested and the non-zero scoring variant). */
export const requests = (pod: PodInfo): string => Snapshot.requestsSignature(pod)

/** `spec.tolerations` (TaintToleration, NodeUnschedulable). */
export const tolerations = (pod: PodInfo): string => json(spec(pod)["tolerations"])

/** `spec.nodeSelector` and `spec.affinity.nodeAffinity` (NodeAffinity). */
export const nodeSelection = (pod: PodInfo): string => {
  const s = spec(pod)
  return `${json(s["nodeSelector"])}|${json(asObject(s["affinity"])["nodeAffinity"])}`
}

/** `spec.nodeName` (NodeName). */
export const nodeName = (pod: PodInfo): string => pod.nodeName ?? ""

/** The containers' and sidecars' ports (NodePorts reads their host ports). */
export const ports = (pod: PodInfo): string => {
  const s = spec(pod)
  let out = ""
  for (const c of asArray(s["initContainers"])) if (asObject(c)["restartPolicy"] === "Always") out += json(asObject(c)["ports"])
  out += "|"
  for (const c of asArray(s["containers"])) out += json(asObject(c)["ports"])
  return out
}
