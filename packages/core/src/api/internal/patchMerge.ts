/**
 * RFC 7386 JSON Merge Patch: `null` deletes a member, objects merge recursively, everything else
 * (arrays included) replaces. The result shares nothing with either input.
 */
import { clone, getOwn, hasOwn, isObject, setOwn, type JsonObject } from "./patchValue.js"

/** `MergePatch(target, patch)` from RFC 7386 §2, returning a fresh value. */
export const applyMergePatch = (target: unknown, patch: unknown): unknown => {
  if (!isObject(patch)) return clone(patch)
  const result: JsonObject = {}
  const base = isObject(target) ? target : {}
  // Existing members keep their order; members the patch adds come after them.
  for (const key of Object.keys(base)) {
    if (!hasOwn(patch, key)) setOwn(result, key, clone(base[key]))
    else if (patch[key] !== null) setOwn(result, key, applyMergePatch(base[key], patch[key]))
  }
  for (const key of Object.keys(patch)) {
    if (hasOwn(base, key) || patch[key] === null) continue
    setOwn(result, key, applyMergePatch(getOwn(base, key), patch[key]))
  }
  return result
}
