/**
 * Reading and writing `metadata` of any object, the way every controller, plugin and admission
 * step must agree on: names, namespaces, uids, labels and annotations, owner references and the
 * controlling owner, deletion, and the `namespace/name` key work queues carry. Absent parts read
 * as empty ("" or {}), never as undefined, so callers compare without guarding.
 */
import { asArray, asFiniteNumber, asObject, asString, asStringMap, asStrings, isJsonObject, type JsonObject } from "./Json.js"

/** An owner reference as it appears in `metadata.ownerReferences` (a type, not an interface, so it reads as a JSON object too). */
export type OwnerReference = {
  readonly apiVersion: string
  readonly kind: string
  readonly name: string
  readonly uid: string
  readonly controller?: boolean
  readonly blockOwnerDeletion?: boolean
}

/** `metadata` of an object (empty when absent). */
export const metadataOf = (o: JsonObject): JsonObject => asObject(o["metadata"])

/** `metadata.name` ("" when absent). */
export const nameOf = (o: JsonObject): string => asString(metadataOf(o)["name"])

/** `metadata.namespace` ("" for cluster-scoped objects). */
export const namespaceOf = (o: JsonObject): string => asString(metadataOf(o)["namespace"])

/**
 * `metadata.namespace`, or undefined when absent: the form the client and informers take, where
 * undefined means "cluster-scoped" or "every namespace" and "" would name no namespace at all.
 */
export const namespaceOrUndefined = (o: JsonObject): string | undefined => {
  const ns = metadataOf(o)["namespace"]
  return typeof ns === "string" ? ns : undefined
}

/** `metadata.uid` ("" before the server assigned one). */
export const uidOf = (o: JsonObject): string => asString(metadataOf(o)["uid"])

/** `metadata.resourceVersion` ("" when absent). */
export const resourceVersionOf = (o: JsonObject): string => asString(metadataOf(o)["resourceVersion"])

/** `metadata.generation` (0 when absent). */
export const generationOf = (o: JsonObject): number => asFiniteNumber(metadataOf(o)["generation"]) ?? 0

/** `metadata.creationTimestamp` in milliseconds since the epoch (undefined when absent or unreadable). */
export const creationMs = (o: JsonObject): number | undefined => timeMs(metadataOf(o)["creationTimestamp"])

/** `metadata.finalizers` ([] when absent). */
export const finalizersOf = (o: JsonObject): ReadonlyArray<string> => asStrings(metadataOf(o)["finalizers"])

/** `metadata.labels` ({} when absent). */
export const labelsOf = (o: JsonObject): Readonly<Record<string, string>> => asStringMap(metadataOf(o)["labels"])

/** `metadata.annotations` ({} when absent). */
export const annotationsOf = (o: JsonObject): Readonly<Record<string, string>> => asStringMap(metadataOf(o)["annotations"])

/** `metadata.ownerReferences` ([] when absent). */
export const ownerReferencesOf = (o: JsonObject): ReadonlyArray<OwnerReference> =>
  asArray(metadataOf(o)["ownerReferences"]).map((r) => asObject(r) as unknown as OwnerReference) // shape checked by the ObjectMeta schema on write

/** The owner reference marked `controller: true`, if any. */
export const controllerRefOf = (o: JsonObject): OwnerReference | undefined => {
  // Key mappers call this on every change: no array is built.
  const refs = metadataOf(o)["ownerReferences"]
  if (!Array.isArray(refs)) return undefined
  for (const r of refs) if (isJsonObject(r) && r["controller"] === true) return r as unknown as OwnerReference // shape checked by the ObjectMeta schema on write
  return undefined
}

/** Whether `o` is controlled by the object with this uid. */
export const isControlledBy = (o: JsonObject, uid: string): boolean => controllerRefOf(o)?.uid === uid

/** An owner reference to `owner`; `controller` marks it as the managing controller. */
export const ownerReference = (owner: JsonObject, controller = true): JsonObject => ({
  apiVersion: owner["apiVersion"],
  kind: owner["kind"],
  name: metadataOf(owner)["name"],
  uid: metadataOf(owner)["uid"],
  ...(controller ? { controller: true, blockOwnerDeletion: true } : {})
})

/** Whether deletion of the object has begun (`metadata.deletionTimestamp` is set). */
export const isTerminating = (o: JsonObject): boolean => metadataOf(o)["deletionTimestamp"] !== undefined

/** `namespace/name`, or `name` for cluster-scoped objects: the key controllers queue. */
export const keyOf = (o: JsonObject): string => {
  const ns = namespaceOf(o)
  return ns ? `${ns}/${nameOf(o)}` : nameOf(o)
}

/** Splits a key made by `keyOf`. */
export const splitKey = (key: string): { readonly namespace: string | undefined; readonly name: string } => {
  const i = key.indexOf("/")
  return i < 0 ? { namespace: undefined, name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) }
}

/** Milliseconds since the epoch of an RFC 3339 time, or undefined. */
export const timeMs = (value: unknown): number | undefined => {
  if (typeof value !== "string") return undefined
  const t = Date.parse(value)
  return Number.isFinite(t) ? t : undefined
}

/** An RFC 3339 time at second precision, as Kubernetes writes `metav1.Time`. */
export const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")
