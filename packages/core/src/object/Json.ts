/**
 * JSON as Fleet carries it: the one `JsonObject` type every layer shares, the narrowing readers
 * for values whose shape a schema has not promised (`asObject`, `asArray`, `asString`), and the
 * two comparisons controllers rely on — `stableJson` (key-order-free serialization, for hashes and
 * cache keys) and `jsonEqual` (structural equality, for "did anything change?" before a write).
 */

/** A JSON object: a Kubernetes object on the wire and in the store, or any part of one. */
export type JsonObject = Record<string, unknown>

/** Whether `v` is a JSON object (not null, not an array). */
export const isJsonObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v)

/** `v` when it is a JSON object, else a new empty one: reads of absent parts yield nothing. */
export const asObject = (v: unknown): JsonObject => (isJsonObject(v) ? v : {})

/** `v` when it is an array, else an empty one. */
export const asArray = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

/** `v` when it is a string, else "". */
export const asString = (v: unknown): string => (typeof v === "string" ? v : "")

/** `v` when it is a finite number, else undefined. */
export const asFiniteNumber = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined)

/** The strings of `v` when it is an array (other elements dropped), else []. */
export const asStrings = (v: unknown): ReadonlyArray<string> => asArray(v).filter((s): s is string => typeof s === "string")

/** A string-valued map (labels, annotations, selectors), keeping only its string entries' keys. */
export const asStringMap = (v: unknown): Readonly<Record<string, string>> => asObject(v) as Readonly<Record<string, string>> // values were schema-checked as strings when written

/** JSON with object keys sorted, so equal values always serialize (and hash) the same. */
export const stableJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`
  if (isJsonObject(value)) {
    return `{${Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson(value[k])}`)
      .join(",")}}`
  }
  return JSON.stringify(value)
}

/** Structural equality of JSON values (key order ignored, `undefined` members absent). */
export const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const bb = b as ReadonlyArray<unknown>
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]))
  }
  const ao = a as JsonObject
  const bo = b as JsonObject
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined)
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined)
  return ak.length === bk.length && ak.every((k) => jsonEqual(ao[k], bo[k]))
}
