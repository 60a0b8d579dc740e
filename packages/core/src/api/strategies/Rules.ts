/**
 * The building blocks every group's strategies share: the neutral strategy they start from,
 * defaulting over JSON (a field is defaulted only when absent, and a new object is returned), the
 * "field is immutable" rule, and running a model module's typed validator on a JSON object.
 */
import { Either, type Schema } from "effect"
import { decodeObject } from "../../model/Decode.js"
import * as FieldError from "../../model/FieldError.js"
import { isJsonObject, jsonEqual, type JsonObject } from "../../object/Json.js"
import type { Strategy } from "../Strategy.js"

/**
 * `v` when it is a JSON object, else undefined. Defaulting must tell an absent part (left absent)
 * from an empty one (filled in), which `asObject` does not.
 */
export const objectAt = (v: unknown): JsonObject | undefined => (isJsonObject(v) ? v : undefined)

/** `o` with `key` set to `value` when it is absent (a copy; `o` itself when present). */
export const withDefault = (o: JsonObject, key: string, value: unknown): JsonObject => (o[key] === undefined ? { ...o, [key]: value } : o)

/** `o` with its `spec` replaced by `f(spec)`; `o` itself when it has no spec object. */
export const withSpec = (o: JsonObject, f: (spec: JsonObject) => JsonObject): JsonObject => {
  const spec = objectAt(o["spec"])
  return spec ? { ...o, spec: f(spec) } : o
}

/** An "field is immutable" error at `path` unless `a` and `b` are equal JSON. */
export const immutable = (path: string, a: unknown, b: unknown): ReadonlyArray<FieldError.FieldError> =>
  jsonEqual(a, b) ? [] : [FieldError.invalid(path, a, "field is immutable")]

/** No rule. */
export const none = (): ReadonlyArray<FieldError.FieldError> => []

/**
 * Runs a typed validator of a model module on a JSON object. The object was decoded before
 * defaulting, but admission may have changed it since, so it is decoded again: a shape error is
 * reported as such instead of reaching the validator.
 */
export const typed =
  <A, I>(schema: Schema.Schema<A, I, never>, validate: (a: A) => ReadonlyArray<FieldError.FieldError>) =>
  (o: JsonObject): ReadonlyArray<FieldError.FieldError> => {
    const decoded = decodeObject(schema, o)
    return Either.isLeft(decoded) ? decoded.left : validate(decoded.right)
  }

/** `typed` for update rules; a stored object that no longer decodes imposes nothing. */
export const typedUpdate =
  <A, I>(schema: Schema.Schema<A, I, never>, validate: (a: A, old: A) => ReadonlyArray<FieldError.FieldError>) =>
  (o: JsonObject, old: JsonObject): ReadonlyArray<FieldError.FieldError> => {
    const decoded = decodeObject(schema, o)
    const previous = decodeObject(schema, old)
    if (Either.isLeft(decoded)) return decoded.left
    return Either.isLeft(previous) ? [] : validate(decoded.right, previous.right)
  }

/** The neutral strategy: no defaults, no rules (kinds without special rules, custom resources). */
export const neutral: Strategy = {
  defaults: (o) => o,
  prepareForCreate: (o) => o,
  validate: none,
  validateUpdate: none,
  tracksGeneration: false,
  deleteReturnsObject: false
}
