/**
 * What the API server does to every object's metadata on its way in and out, as pure functions:
 * the stored form (no resourceVersion: the store revision is the resourceVersion), create-time
 * fields (uid, creationTimestamp, generation, name from generateName, the region label), and the
 * update rules common to all kinds (immutable identity, status and spec split, generation bumps).
 */
import { Either } from "effect"
import * as FieldError from "../model/FieldError.js"
import * as Meta from "../model/Meta.js"
import * as Status from "../model/Status.js"
import type { KeyValue } from "../store/Store.js"
import * as ApiError from "./ApiError.js"
import { maxObjectBytes } from "./Body.js"
import type { JsonObject, Resource } from "./Registry.js"
import { asObject, jsonEqual } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"

/** An object's metadata as a mutable-free record. */
export type Metadata = Record<string, unknown>

/** The metadata of an object (empty when absent): `Metadata.metadataOf`, under the name the API code reads it by. */
export const meta: (o: JsonObject) => Metadata = metadataOf

/** The object with its metadata replaced. */
export const withMeta = (o: JsonObject, m: Metadata): JsonObject => ({ ...o, metadata: m })

/** Read a stored value as the API serves it: `metadata.resourceVersion` is the key's revision. */
export const fromStored = (kv: Pick<KeyValue, "value" | "modRevision">): JsonObject => {
  const o = JSON.parse(kv.value) as JsonObject // the store holds only objects the API wrote
  return withMeta(o, { ...meta(o), resourceVersion: String(kv.modRevision) })
}

/** Serialize for the store (without resourceVersion), or 413 when over the object size limit. */
export const toStored = (o: JsonObject): Either.Either<string, ApiError.ApiError> => {
  const { resourceVersion: _rv, ...m } = meta(o)
  const text = JSON.stringify(withMeta(o, m))
  return text.length > maxObjectBytes
    ? Either.left(ApiError.of(Status.requestEntityTooLarge(`the object is ${text.length} bytes; the limit is ${maxObjectBytes}`)))
    : Either.right(text)
}

const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

/** Kubernetes' generateName suffix: five characters without vowels or confusable digits. */
export const randomSuffix = (random: () => number): string => {
  let s = ""
  for (let i = 0; i < 5; i++) s += nameAlphabet[Math.floor(random() * nameAlphabet.length)]!
  return s
}

/** RFC 3339 at second precision, as metav1.Time. */
export const timestamp = (millis: number): string => new Date(Math.floor(millis / 1000) * 1000).toISOString().replace(".000Z", "Z")

/** What a create needs besides the body. */
export interface CreateContext {
  readonly namespace: string | undefined
  readonly now: number
  readonly uid: string
  readonly region: string
  readonly random: () => number
}

/** Type information in a body must agree with the URL's resource. */
export const checkType = (resource: Resource, o: JsonObject): Either.Either<JsonObject, ApiError.ApiError> => {
  // Like kube-apiserver, a body without type information takes it from the URL (client-node
  // sends typed objects without apiVersion/kind).
  const apiVersion = o["apiVersion"] === "" ? undefined : o["apiVersion"]
  const kind = o["kind"] === undefined || o["kind"] === "" ? resource.kind : o["kind"]
  if (kind !== resource.kind || (apiVersion !== undefined && apiVersion !== resource.apiVersion)) {
    return Either.left(
      ApiError.badRequest(
        `the body is a ${String(apiVersion)}, Kind=${String(kind)}, but the URL is for ${resource.apiVersion}, Kind=${resource.kind}`
      )
    )
  }
  return Either.right({ ...o, apiVersion: resource.apiVersion, kind: resource.kind })
}

/** The URL's namespace wins; a different one in the body is a 400, as in Kubernetes. */
export const checkNamespace = (resource: Resource, o: JsonObject, namespace: string | undefined): Either.Either<JsonObject, ApiError.ApiError> => {
  const m = meta(o)
  if (!resource.namespaced) {
    if (m["namespace"] !== undefined && m["namespace"] !== "") {
      return Either.left(ApiError.badRequest(`${resource.kind} is cluster-scoped: metadata.namespace must be empty`))
    }
    return Either.right(o)
  }
  if (m["namespace"] !== undefined && m["namespace"] !== "" && m["namespace"] !== namespace) {
    return Either.left(ApiError.badRequest("the namespace of the provided object does not match the namespace sent on the request"))
  }
  return Either.right(withMeta(o, { ...m, namespace }))
}

const invalid = (resource: Resource, name: string, errors: ReadonlyArray<FieldError.FieldError>) =>
  ApiError.of(Status.invalid({ group: resource.group, kind: resource.kind }, name, errors))

/** Prepare a decoded object for its first write. */
export const prepareCreate = (resource: Resource, decoded: JsonObject, ctx: CreateContext): Either.Either<JsonObject, ApiError.ApiError> => {
  const m = meta(decoded)
  let name = typeof m["name"] === "string" ? m["name"] : ""
  if (name === "") {
    const generateName = typeof m["generateName"] === "string" ? m["generateName"] : ""
    if (generateName === "") {
      return Either.left(invalid(resource, "", [FieldError.required("metadata.name", "name or generateName is required")]))
    }
    name = `${generateName}${randomSuffix(ctx.random)}`
  }
  // Labels passed the ObjectMeta schema when the body was decoded.
  const labels = Meta.withRegionDefault({ labels: (m["labels"] as Record<string, string> | undefined) ?? {} }, ctx.region).labels
  const {
    resourceVersion: _rv,
    deletionTimestamp: _dt,
    deletionGracePeriodSeconds: _dg,
    ...rest
  } = m
  const metadata: Metadata = {
    ...rest,
    name,
    uid: ctx.uid,
    creationTimestamp: timestamp(ctx.now),
    labels
  }
  if (resource.strategy.tracksGeneration) metadata["generation"] = 1
  else delete metadata["generation"]
  const object = resource.strategy.prepareForCreate(resource.strategy.defaults(withMeta(decoded, metadata)))
  const errors = resource.strategy.validate(object)
  return errors.length > 0 ? Either.left(invalid(resource, name, errors)) : Either.right(object)
}

/** Which part of an object an update may change. */
export type UpdateTarget = "main" | "status" | "finalize"

/**
 * Merge an update into the current object: identity and server-owned fields come from `old`;
 * the main resource ignores status (when there is a status subresource) and the status
 * subresource ignores everything else; generation moves when spec does.
 */
export const prepareUpdate = (
  resource: Resource,
  decoded: JsonObject,
  old: JsonObject,
  target: UpdateTarget
): Either.Either<JsonObject, ApiError.ApiError> => {
  const oldMeta = meta(old)
  const newMeta = meta(decoded)
  const name = String(oldMeta["name"] ?? "")
  if (newMeta["name"] !== undefined && newMeta["name"] !== oldMeta["name"]) {
    return Either.left(ApiError.badRequest(`the name of the object (${String(newMeta["name"])}) does not match the name on the URL (${name})`))
  }
  let next: JsonObject
  if (target === "status") {
    next = { ...old, status: decoded["status"] }
  } else if (target === "finalize") {
    // A Namespace's `finalize` subresource changes only spec.finalizers.
    next = { ...old, spec: { ...asObject(old["spec"]), finalizers: asObject(decoded["spec"])["finalizers"] ?? [] } }
  } else {
    const metadata: Metadata = {
      ...newMeta,
      name: oldMeta["name"],
      uid: oldMeta["uid"],
      creationTimestamp: oldMeta["creationTimestamp"],
      deletionTimestamp: oldMeta["deletionTimestamp"],
      deletionGracePeriodSeconds: oldMeta["deletionGracePeriodSeconds"],
      generation: oldMeta["generation"]
    }
    if (resource.namespaced) metadata["namespace"] = oldMeta["namespace"]
    for (const k of Object.keys(metadata)) if (metadata[k] === undefined) delete metadata[k]
    // A body that omits the region label keeps the stored one; only changing it is refused.
    // Both metadata passed the ObjectMeta schema; the region helpers read only their labels.
    const oldRegion = Meta.regionOf(oldMeta as Meta.ObjectMeta)
    if (oldRegion !== undefined && Meta.regionOf(metadata as Meta.ObjectMeta) === undefined) {
      metadata["labels"] = { ...((metadata["labels"] as Record<string, string> | undefined) ?? {}), [Meta.RegionLabel]: oldRegion }
    }
    if (Meta.regionChanged(oldMeta as Meta.ObjectMeta, metadata as Meta.ObjectMeta)) {
      return Either.left(invalid(resource, name, [FieldError.invalid(`metadata.labels[${Meta.RegionLabel}]`, Meta.regionOf(metadata as Meta.ObjectMeta) ?? "", "field is immutable")]))
    }
    next = resource.strategy.defaults(withMeta(decoded, metadata))
    if (resource.strategy.prepareForUpdate !== undefined) next = resource.strategy.prepareForUpdate(next, old)
    if (resource.subresources.status) next = { ...next, status: old["status"] }
    // Namespace finalizers change only through `finalize`, as in Kubernetes.
    if (resource.group === "" && resource.kind === "Namespace") {
      const spec: JsonObject = { ...asObject(next["spec"]), finalizers: asObject(old["spec"])["finalizers"] }
      if (spec["finalizers"] === undefined) delete spec["finalizers"]
      next = { ...next, spec }
    }
    if (next["status"] === undefined) delete next["status"]
    const errors = [...resource.strategy.validate(next), ...resource.strategy.validateUpdate(next, old)]
    if (errors.length > 0) return Either.left(invalid(resource, name, errors))
  }
  if (resource.strategy.tracksGeneration && !jsonEqual(next["spec"], old["spec"])) {
    const m = meta(next)
    next = withMeta(next, { ...m, generation: Number(oldMeta["generation"] ?? 0) + 1 })
  }
  return Either.right(next)
}

/** Whether two objects are the same apart from resourceVersion (an update that changes nothing). */
export const sameObject = (a: JsonObject, b: JsonObject): boolean => {
  const strip = (o: JsonObject) => {
    const { resourceVersion: _rv, ...m } = meta(o)
    return withMeta(o, m)
  }
  return jsonEqual(strip(a), strip(b))
}

/** Finalizers of an object. */
export const finalizers = (o: JsonObject): ReadonlyArray<string> => {
  const f = meta(o)["finalizers"]
  return Array.isArray(f) ? (f as Array<string>) : []
}
