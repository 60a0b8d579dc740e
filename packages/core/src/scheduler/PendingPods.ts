/**
 * Which pods are the scheduler's to place, and what of a pod's state it reads outside the
 * snapshot: bound or not, finished or not, its scheduler name and its nomination.
 */
import * as Views from "../object/Views.js"
import * as Pods from "../object/Pods.js"
import type { JsonObject } from "../object/Json.js"
import * as Profiles from "./Profiles.js"

/** Whether the pod has a node (`spec.nodeName`). */
export const isBound = (pod: JsonObject): boolean => (Views.pod(pod).spec?.nodeName ?? "") !== ""

/** Whether the pod ran to its end (Succeeded or Failed): it holds no room any more. */
export const isFinished = (pod: JsonObject): boolean => {
  const phase = Pods.phase(pod)
  return phase === "Succeeded" || phase === "Failed"
}

/** The profile a pod asks for (`spec.schedulerName`, else `default-scheduler`). */
export const schedulerNameOf = (pod: JsonObject): string => Views.pod(pod).spec?.schedulerName || Profiles.DefaultSchedulerName

/** Answers whether a pod is this scheduler's to place (unbound, not finished or deleting, one of its profiles). */
export const isPending = (pod: JsonObject, names: ReadonlySet<string>): boolean => !isBound(pod) && Pods.isActive(pod) && names.has(schedulerNameOf(pod))

/** `status.nominatedNodeName` ("" when none). */
export const nominatedNodeOf = (pod: JsonObject): string => Views.pod(pod).status?.nominatedNodeName ?? ""
