/**
 * What the workload controllers ask of pods and owners, in one place so every controller counts
 * the same way: which pods are active, ready, available; the controlling owner reference; a pod
 * stamped from a template; and the stable template hash (`pod-template-hash`,
 * `controller-revision-hash`) Kubernetes derives with FNV-32a and a safe alphabet.
 */
import type { JsonObject } from "./Informer.js"

const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

/** `metadata` of an object (empty when absent). */
export const meta = (o: JsonObject): Record<string, unknown> => obj(o["metadata"])

/** An owner reference to `owner`; `controller` marks it as the managing controller. */
export const ownerReference = (owner: JsonObject, controller = true): Record<string, unknown> => ({
  apiVersion: owner["apiVersion"],
  kind: owner["kind"],
  name: meta(owner)["name"],
  uid: meta(owner)["uid"],
  ...(controller ? { controller: true, blockOwnerDeletion: true } : {})
})

/** The owner reference marked `controller: true`, if any. */
export const controllerRef = (o: JsonObject): Record<string, unknown> | undefined =>
  arr(meta(o)["ownerReferences"]).map(obj).find((r) => r["controller"] === true)

/** Whether `o` is controlled by the object with this uid. */
export const isControlledBy = (o: JsonObject, uid: string): boolean => controllerRef(o)?.["uid"] === uid

/** The pod's phase (`Pending` when unset). */
export const phase = (pod: JsonObject): string => String(obj(pod["status"])["phase"] ?? "Pending")

/** Whether deletion of the object has begun. */
export const isTerminating = (o: JsonObject): boolean => meta(o)["deletionTimestamp"] !== undefined

/** A pod that runs or will run: not finished and not being deleted (what a ReplicaSet counts). */
export const isActive = (pod: JsonObject): boolean => {
  const p = phase(pod)
  return p !== "Succeeded" && p !== "Failed" && !isTerminating(pod)
}

/** A condition of an object's status by type. */
export const condition = (o: JsonObject, type: string): Record<string, unknown> | undefined =>
  arr(obj(o["status"])["conditions"]).map(obj).find((c) => c["type"] === type)

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

/** JSON with object keys sorted, so equal values always serialize (and hash) the same. */
export const stableJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`
  if (typeof value === "object" && value !== null) {
    const o = value as Record<string, unknown>
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson(o[k])}`)
      .join(",")}}`
  }
  return JSON.stringify(value)
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
  const tm = obj(template["metadata"])
  const labels = { ...(obj(tm["labels"]) as Record<string, string>), ...(options.extraLabels ?? {}) }
  const annotations = { ...(obj(tm["annotations"]) as Record<string, string>), ...(options.extraAnnotations ?? {}) }
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      ...(options.name !== undefined ? { name: options.name } : { generateName: options.generateName ?? `${String(meta(owner)["name"])}-` }),
      namespace: meta(owner)["namespace"],
      labels,
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      ...(arr(tm["finalizers"]).length > 0 ? { finalizers: tm["finalizers"] } : {}),
      ownerReferences: [ownerReference(owner)]
    },
    spec: structuredClone(obj(template["spec"]))
  }
}

/** Milliseconds since the epoch of an RFC 3339 time, or undefined. */
export const timeMs = (value: unknown): number | undefined => {
  if (typeof value !== "string") return undefined
  const t = Date.parse(value)
  return Number.isFinite(t) ? t : undefined
}

/** An RFC 3339 time at second precision, as Kubernetes writes `metav1.Time`. */
export const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")
