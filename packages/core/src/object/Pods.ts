/**
 * What the workload controllers ask of pods and owners, in one place so every controller counts
 * the same way: which pods are active, ready, available; the controlling owner reference; a pod
 * stamped from a template; and the stable template hash (`pod-template-hash`,
 * `controller-revision-hash`) Kubernetes derives with FNV-32a and a safe alphabet.
 */
import { asArray, asObject, stableJson, type JsonObject } from "./Json.js"
import { isTerminating, metadataOf, ownerReference } from "./Metadata.js"

/** The pod's phase (`Pending` when unset). */
export const phase = (pod: JsonObject): string => String(asObject(pod["status"])["phase"] ?? "Pending")

/** A pod that runs or will run: not finished and not being deleted (what a ReplicaSet counts). */
export const isActive = (pod: JsonObject): boolean => {
  const p = phase(pod)
  return p !== "Succeeded" && p !== "Failed" && !isTerminating(pod)
}

/** A condition of an object's status by type. */
export const condition = (o: JsonObject, type: string): JsonObject | undefined =>
  asArray(asObject(o["status"])["conditions"]).map(asObject).find((c) => c["type"] === type)

/** Whether the pod's `Ready` condition is True. */
export const isReady = (pod: JsonObject): boolean => condition(pod, "Ready")?.["status"] === "True"

/**
 * Whether the pod has been ready for at least `minReadySeconds` at `nowMs` (Kubernetes'
 * "available"); with 0 it is the same as ready.
 */
export const isAvailable = (pod: JsonObject, minReadySeconds: number, nowMs: number): boolean => {
  if (!isReady(pod)) return false
  if (minReadySeconds <= 0) return true
  const since = Date.parse(String(condition(pod, "Ready")?.["lastTransitionTime"] ?? ""))
  return Number.isFinite(since) && since + minReadySeconds * 1000 <= nowMs
}

/** Milliseconds until a ready pod becomes available, or undefined when it is already (or not ready). */
export const msUntilAvailable = (pod: JsonObject, minReadySeconds: number, nowMs: number): number | undefined => {
  if (!isReady(pod) || minReadySeconds <= 0) return undefined
  const since = Date.parse(String(condition(pod, "Ready")?.["lastTransitionTime"] ?? ""))
  if (!Number.isFinite(since)) return undefined
  const left = since + minReadySeconds * 1000 - nowMs
  return left > 0 ? left : undefined
}

// Kubernetes' rand.SafeEncodeString alphabet: no vowels or look-alikes, so hashes never spell words.
const alphabet = "bcdfghjklmnpqrstvwxz2456789"

/** FNV-32a of `text`. */
export const fnv32a = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/**
 * The hash naming a pod template (`pod-template-hash`), salted with the owner's `collisionCount`
 * so that a collision can be escaped by bumping it, as Kubernetes does.
 */
export const templateHash = (template: unknown, collisionCount?: number): string => {
  const n = fnv32a(stableJson(template) + (collisionCount === undefined ? "" : `#${collisionCount}`))
  return String(n)
    .split("")
    .map((d) => alphabet[(Number(d) * 7 + 3) % alphabet.length])
    .join("")
}

/**
 * A pod stamped from `template`, controlled by `owner`: its labels, annotations and spec, plus
 * `extraLabels`, named `name` or generated from `generateName`.
 */
export const fromTemplate = (
  template: JsonObject,
  owner: JsonObject,
  options: { readonly name?: string; readonly generateName?: string; readonly extraLabels?: Record<string, string>; readonly extraAnnotations?: Record<string, string> }
): JsonObject => {
  const tm = asObject(template["metadata"])
  const labels = { ...(asObject(tm["labels"]) as Record<string, string>), ...(options.extraLabels ?? {}) }
  const annotations = { ...(asObject(tm["annotations"]) as Record<string, string>), ...(options.extraAnnotations ?? {}) }
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      ...(options.name !== undefined ? { name: options.name } : { generateName: options.generateName ?? `${String(metadataOf(owner)["name"])}-` }),
      namespace: metadataOf(owner)["namespace"],
      labels,
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      ...(asArray(tm["finalizers"]).length > 0 ? { finalizers: tm["finalizers"] } : {}),
      ownerReferences: [ownerReference(owner)]
    },
    spec: structuredClone(asObject(template["spec"]))
  }
}
