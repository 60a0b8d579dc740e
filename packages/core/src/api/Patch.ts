/**
 * Applies the body of a Kubernetes PATCH request to an object, purely: JSON Patch (RFC 6902),
 * JSON Merge Patch (RFC 7386) and strategic merge patch (built-in kinds only, with Kubernetes'
 * merge keys), chosen by the request's Content-Type. Inputs are never changed; every failure is a
 * `PatchError` that `toApiError` turns into the Status kube-apiserver would send (400, 413, 415,
 * 422). What a patch can make the server compute is bounded: at most 10,000 JSON Patch operations
 * (413), at most 3 MiB copied by `copy` operations (422), a result no larger than the object size
 * limit (413), and merges that take time linear in the object and the patch. Server-side apply (`application/apply-patch+yaml`) is ServerSideApply.ts.
 *
 *   Content-Type ──parseContentType──▶ PatchType ──┬─ json      ─▶ jsonPatch
 *                                                  ├─ merge     ─▶ mergePatch
 *                                                  └─ strategic ─▶ strategicMergePatch(mergeKeysFor(kind))
 */
import { Either, Option } from "effect"
import * as Kinds from "../model/Kinds.js"
import type * as ApiError from "./ApiError.js"
import type { PatchError } from "./ApiError.js"
import { applyJsonPatch } from "./internal/patchJson.js"
import { applyMergePatch } from "./internal/patchMerge.js"
import { builtInMergeKeys as builtIn, objectMetaMergeKeys } from "./internal/patchMergeKeys.js"
import { malformed, notApplicable, tooLarge, unsupported } from "./internal/patchError.js"
import { applyStrategicMergePatch, byValue as byValueKey, type MergeKeys as Keys } from "./internal/patchStrategic.js"
import { depthAtMost, getOwn, isObject, jsonSizeAtMost, maxDepth } from "./internal/patchValue.js"
import { maxBodyDepth, maxObjectBytes } from "./Body.js"

// Defined in the API layer's error module; re-exported so `Patch.PatchError` stays.
export { PatchError } from "./ApiError.js"
export { maxCopyBytes, maxOperations } from "./internal/patchJson.js"
export type { PatchErrorReason } from "./ApiError.js"

/** The patch formats, named as `kubectl patch --type` names them. */
export type PatchType = "json" | "merge" | "strategic"

/** The PATCH media types: the three patch formats here, and server-side apply (ServerSideApply.ts via Rest.ts). */
export const contentTypes = {
  json: "application/json-patch+json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
  apply: "application/apply-patch+yaml"
} as const

/** The media types a PATCH may use here, as a 415 lists them. */
export const accepted: ReadonlyArray<string> = [contentTypes.json, contentTypes.merge, contentTypes.strategic, contentTypes.apply]

// What kube-apiserver accepts for kinds without strategic merge support (custom resources).
const acceptedWithoutStrategic: ReadonlyArray<string> = [contentTypes.json, contentTypes.merge, contentTypes.apply]

const byMediaType: ReadonlyMap<string, PatchType> = new Map([
  [contentTypes.json, "json"],
  [contentTypes.merge, "merge"],
  [contentTypes.strategic, "strategic"]
])

/**
 * The patch format a `Content-Type` header names, ignoring parameters such as `; charset=utf-8`
 * and case; anything else (including server-side apply) is a 415 `PatchError`.
 */
export const parseContentType = (header: string | undefined): Either.Either<PatchType, PatchError> => {
  const mediaType = (header ?? "").split(";")[0]?.trim().toLowerCase() ?? ""
  const type = byMediaType.get(mediaType)
  if (type !== undefined) return Either.right(type)
  // Server-side apply is not a patch format: Rest.ts applies it before any patch is parsed.
  const detail =
    mediaType === contentTypes.apply ? `${contentTypes.apply} is server-side apply, not a patch format` : `unsupported patch media type ${JSON.stringify(mediaType)}`
  return Either.left(unsupported(detail, accepted))
}

/** The Status kube-apiserver answers a patch failure with. */
export const toApiError = (error: PatchError): ApiError.ApiError => error.toApiError()

/**
 * List merge strategies of one kind for strategic merge patch: a dotted field path with `[]`
 * after each list crossed (`spec.template.spec.containers[].env`) → the list's merge key
 * (`name`), or `byValue` for a primitive list merged as a set. Unlisted lists are replaced.
 */
export type MergeKeys = Keys

/** The `MergeKeys` value for a list of primitives that merges as a set (e.g. finalizers). */
export const byValue: typeof byValueKey = byValueKey

/** Kubernetes' merge keys for each built-in kind, keyed `apiVersion/kind` (`"apps/v1/Deployment"`). */
export const builtInMergeKeys: Readonly<Record<string, MergeKeys>> = builtIn

/**
 * The merge keys for a kind, if it supports strategic merge patch: built-in kinds do (a built-in
 * kind missing from the table gets its metadata's keys), custom resources do not.
 */
export const mergeKeysFor = (apiVersion: string, kind: string): Option.Option<MergeKeys> => {
  const keys = builtInMergeKeys[`${apiVersion}/${kind}`]
  if (keys !== undefined) return Option.some(keys)
  return Option.map(Kinds.kindFor(apiVersion, kind), () => objectMetaMergeKeys)
}

/** Whether kube-apiserver would accept a strategic merge patch for this kind (built-ins only). */
export const supportsStrategic = (apiVersion: string, kind: string): boolean =>
  Option.isSome(mergeKeysFor(apiVersion, kind))

const tooDeep = () => malformed(`the patch nests deeper than ${maxDepth} levels`)

/** Applies an RFC 6902 JSON Patch (an array of operations) to `original`. */
export const jsonPatch = (original: unknown, patch: unknown): Either.Either<unknown, PatchError> =>
  depthAtMost(patch, maxDepth) ? applyJsonPatch(original, patch) : Either.left(tooDeep())

/** Applies an RFC 7386 JSON Merge Patch to `original`. */
export const mergePatch = (original: unknown, patch: unknown): Either.Either<unknown, PatchError> =>
  depthAtMost(patch, maxDepth) ? Either.right(applyMergePatch(original, patch)) : Either.left(tooDeep())

/** Applies a Kubernetes strategic merge patch (an object) to `original` using `mergeKeys`. */
export const strategicMergePatch = (
  original: unknown,
  patch: unknown,
  mergeKeys: MergeKeys
): Either.Either<unknown, PatchError> =>
  depthAtMost(patch, maxDepth) ? applyStrategicMergePatch(original, patch, mergeKeys) : Either.left(tooDeep())

/**
 * Applies a PATCH body of media type `contentType` to the object `original`. For strategic merge
 * patch, `mergeKeys` is a table, or the `apiVersion/kind` (`"apps/v1/Deployment"`) whose keys to
 * use, and defaults to `original`'s own apiVersion/kind; a kind without merge keys (a custom
 * resource) is 415, as in kube-apiserver. The result must still be a JSON object nested at most
 * `Body.maxBodyDepth` deep (else 422), and at most the object size limit (`Body.maxObjectBytes`)
 * of JSON (else 413).
 */
export const apply = (
  contentType: string,
  original: unknown,
  patchBody: unknown,
  mergeKeys?: MergeKeys | string
): Either.Either<unknown, PatchError> =>
  Either.flatMap(parseContentType(contentType), (type) => {
    const patched = applyByType(type, original, patchBody, mergeKeys)
    return Either.flatMap(patched, (result) => {
      if (!isObject(result)) return Either.left(notApplicable("the patched document is not a JSON object"))
      // Checked here, before the result is decoded, validated and admitted: a patch that grew the
      // object past what the store keeps costs no more work than computing it.
      const size = jsonSizeAtMost(result, maxObjectBytes)
      if (size > maxObjectBytes) return Either.left(tooLarge(`the patched object is larger than the limit of ${maxObjectBytes} bytes`))
      // A patch may nest a value as deep as a body may, under a path that is already deep: the
      // result is held to the bodies' limit too, or repeated patches could nest without end.
      return depthAtMost(result, maxBodyDepth)
        ? Either.right(result)
        : Either.left(notApplicable(`the patched object nests deeper than ${maxBodyDepth} levels`))
    })
  })

const applyByType = (
  type: PatchType,
  original: unknown,
  patchBody: unknown,
  mergeKeys: MergeKeys | string | undefined
): Either.Either<unknown, PatchError> => {
  switch (type) {
    case "json":
      return jsonPatch(original, patchBody)
    case "merge":
      // A merge patch that is not an object would replace the whole object: never what an API
      // client means, and kube-apiserver rejects it too.
      return isObject(patchBody)
        ? mergePatch(original, patchBody)
        : Either.left(malformed("Invalid JSON Patch: a merge patch must be a JSON object"))
    case "strategic": {
      const keys =
        mergeKeys === undefined ? keysOf(original) : typeof mergeKeys === "string" ? keysNamed(mergeKeys) : Option.some(mergeKeys)
      if (Option.isNone(keys)) {
        return Either.left(
          unsupported(`${contentTypes.strategic} is not supported for custom resources`, acceptedWithoutStrategic)
        )
      }
      return strategicMergePatch(original, patchBody, keys.value)
    }
  }
}

// "apps/v1/Deployment" → ("apps/v1", "Deployment"); the kind is after the last slash.
const keysNamed = (apiVersionKind: string): Option.Option<MergeKeys> => {
  const slash = apiVersionKind.lastIndexOf("/")
  return slash < 0 ? Option.none() : mergeKeysFor(apiVersionKind.slice(0, slash), apiVersionKind.slice(slash + 1))
}

const keysOf = (object: unknown): Option.Option<MergeKeys> => {
  if (!isObject(object)) return Option.none()
  const apiVersion = getOwn(object, "apiVersion")
  const kind = getOwn(object, "kind")
  return typeof apiVersion === "string" && typeof kind === "string" ? mergeKeysFor(apiVersion, kind) : Option.none()
}
