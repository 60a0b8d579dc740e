/**
 * Scalar field types shared by every kind: Kubernetes' integer widths, ports, `Time` and
 * `MicroTime` timestamps, and base64 data. Each rejects bad values with kube-apiserver's wording.
 */
import { Schema } from "effect"

const int32Min = -2147483648
const int32Max = 2147483647

/** Why `n` is not a Go `int32`, in kube-apiserver's words, or `undefined` when it is one. */
export const int32Problem = (n: number): string | undefined => {
  if (!Number.isInteger(n)) return "must be an integer"
  if (n < int32Min || n > int32Max) return `must be between ${int32Min} and ${int32Max}, inclusive`
  return undefined
}

/** Why `n` is not an `int64` JavaScript holds exactly (|n| < 2^53), or `undefined` when it is one. */
export const int64Problem = (n: number): string | undefined => {
  if (!Number.isInteger(n)) return "must be an integer"
  if (!Number.isSafeInteger(n)) return `must be between ${Number.MIN_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}, inclusive`
  return undefined
}

/**
 * A 32-bit signed integer (Go `int32`), the type of most counts and seconds in the API; its
 * OpenAPI schema says `type: integer, format: int32`, as Kubernetes' does.
 */
export const Int32 = Schema.Number.pipe(
  Schema.filter((n) => int32Problem(n), { jsonSchema: { type: "integer", format: "int32" } })
)

/**
 * A 64-bit integer (Go `int64`), limited to JavaScript's exactly representable range: a larger
 * one would be stored rounded (1e300 is an "integer" to `Number.isInteger`).
 */
export const Int64 = Schema.Number.pipe(
  Schema.filter((n) => int64Problem(n), { jsonSchema: { type: "integer", format: "int64" } })
)

/** A non-negative `int32` (replicas, seconds, counts). */
export const NonNegativeInt32 = Int32.pipe(Schema.filter((n) => n >= 0 || "must be greater than or equal to 0"))

/** A non-negative `int64` (e.g. grace periods, byte sizes). */
export const NonNegativeInt64 = Int64.pipe(Schema.filter((n) => n >= 0 || "must be greater than or equal to 0"))

/** A TCP/UDP/SCTP port number, 1..65535. */
export const PortNumber = Schema.Number.pipe(
  Schema.filter((n) => (Number.isInteger(n) && n >= 1 && n <= 65535) || "must be between 1 and 65535, inclusive", {
    jsonSchema: { type: "integer", format: "int32" }
  })
)

const rfc3339Re = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

const isRfc3339 = (s: string): boolean => rfc3339Re.test(s) && !Number.isNaN(Date.parse(s))

/** An RFC 3339 timestamp (`metav1.Time`), e.g. `2024-01-02T03:04:05Z`; kept as the string sent. */
export const Time = Schema.String.pipe(
  Schema.filter((s) => isRfc3339(s) || "must be an RFC3339 timestamp (e.g. '2006-01-02T15:04:05Z')")
)

/**
 * An RFC 3339 timestamp with microseconds (`metav1.MicroTime`), e.g.
 * `2024-01-02T03:04:05.123456Z`. Decoding accepts any fraction length, as Go's parser does.
 */
export const MicroTime = Schema.String.pipe(
  Schema.filter((s) => isRfc3339(s) || "must be an RFC3339 timestamp (e.g. '2006-01-02T15:04:05.000000Z')")
)

/** Formats a date as `metav1.Time` serialises: UTC, whole seconds. */
export const formatTime = (date: Date): string => `${date.toISOString().slice(0, 19)}Z`

/** Formats a date as `metav1.MicroTime` serialises: UTC, six fractional digits. */
export const formatMicroTime = (date: Date): string => `${date.toISOString().slice(0, 23)}000Z`

const base64Re = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Whether `s` is padded standard base64, the only form Go's `[]byte` JSON decoding accepts. */
export const isBase64 = (s: string): boolean => base64Re.test(s)

/** A base64 string (Secret `data`, ConfigMap `binaryData`); kept encoded, as the API sends it. */
export const Base64 = Schema.String.pipe(
  Schema.filter((s) => isBase64(s) || "must be valid base64 (standard alphabet, padded)")
)
