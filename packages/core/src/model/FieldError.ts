/**
 * A validation failure at one field of an object, shaped like Kubernetes' `field.Error`.
 * Decoding, validation and admission all report these, and the API server turns a list of
 * them into an `Invalid` Status, so the wording follows kube-apiserver exactly.
 */

/** One field-level error: `path` like `spec.containers[0].image`, `message` like `Required value`. */
export interface FieldError {
  readonly path: string
  readonly message: string
}

/** Renders a bad value the way `field.Error` does: strings quoted, scalars bare, the rest as JSON. */
export const formatValue = (value: unknown): string => {
  if (value === undefined || value === null) return '"null"'
  if (typeof value === "string") return JSON.stringify(value)
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value)
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    // Cyclic or otherwise unserialisable input: still produce a message rather than fail.
    return String(value)
  }
}

const withDetail = (body: string, detail: string | undefined): string =>
  detail === undefined || detail === "" ? body : `${body}: ${detail}`

/** The field is absent but must be set. */
export const required = (path: string, detail?: string): FieldError => ({
  path,
  message: withDetail("Required value", detail)
})

/** The field has a value that fails validation. */
export const invalid = (path: string, value: unknown, detail?: string): FieldError => ({
  path,
  message: withDetail(`Invalid value: ${formatValue(value)}`, detail)
})

/** The field holds a value outside a closed set. */
export const notSupported = (path: string, value: unknown, supported: ReadonlyArray<string>): FieldError => ({
  path,
  message: withDetail(
    `Unsupported value: ${formatValue(value)}`,
    supported.length === 0 ? undefined : `supported values: ${supported.map((s) => JSON.stringify(s)).join(", ")}`
  )
})

/** The field repeats a value that must be unique. */
export const duplicate = (path: string, value: unknown): FieldError => ({
  path,
  message: `Duplicate value: ${formatValue(value)}`
})

/** The field may not be set (in this context). */
export const forbidden = (path: string, detail?: string): FieldError => ({
  path,
  message: withDetail("Forbidden", detail)
})

/** The field is longer than allowed (`unit` is "bytes" or "characters"). */
export const tooLong = (path: string, max: number, unit: "bytes" | "characters" = "bytes"): FieldError => ({
  path,
  message: `Too long: must have at most ${max} ${unit}`
})

/** The field is not part of the schema (reported only by strict decoding). */
export const unknownField = (path: string): FieldError => ({ path, message: "Unknown field" })

/** `path: message`, the line kube-apiserver prints for one error. */
export const format = (error: FieldError): string => (error.path === "" ? error.message : `${error.path}: ${error.message}`)

/** Joins errors the way Kubernetes' aggregate error does: one bare, several in `[a, b]`. */
export const formatAll = (errors: ReadonlyArray<FieldError>): string => {
  // The aggregate de-duplicates identical messages before joining.
  const lines = [...new Set(errors.map(format))]
  return lines.length === 1 ? (lines[0] ?? "") : `[${lines.join(", ")}]`
}

/** Prefixes every error's path, for validators of nested structures. */
export const prefix = (parent: string, errors: ReadonlyArray<FieldError>): ReadonlyArray<FieldError> =>
  parent === "" ? errors : errors.map((e) => ({ path: e.path === "" ? parent : joinPath(parent, e.path), message: e.message }))

/** Joins a parent path and a child (`a` + `b` → `a.b`, `a` + `[0]` → `a[0]`). */
export const joinPath = (parent: string, child: string): string =>
  parent === "" ? child : child.startsWith("[") ? `${parent}${child}` : `${parent}.${child}`

/** The Status cause `reason` (Kubernetes `CauseType`) implied by a message's error kind. */
export const causeType = (message: string): string => {
  for (const [prefix, type] of causeTypes) if (message.startsWith(prefix)) return type
  return "FieldValueInvalid"
}

const causeTypes: ReadonlyArray<readonly [string, string]> = [
  ["Required value", "FieldValueRequired"],
  ["Invalid value", "FieldValueInvalid"],
  ["Unsupported value", "FieldValueNotSupported"],
  ["Duplicate value", "FieldValueDuplicate"],
  ["Forbidden", "FieldValueForbidden"],
  ["Too long", "FieldValueTooLong"],
  ["Too many", "FieldValueTooMany"],
  ["Not found", "FieldValueNotFound"],
  ["Internal error", "InternalError"]
]

/** Whether a message already starts with a Kubernetes error kind, so it can be shown as-is. */
export const isKubeMessage = (message: string): boolean =>
  message === "Unknown field" || causeTypes.some(([prefix]) => message.startsWith(prefix))
