/**
 * Configuration kinds (v1): `ConfigMap` (plain data) and `Secret` (base64 data). Both can be
 * mounted as files, so their keys must be safe file names.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional, StringMap, stringMap } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"
import { Base64 } from "./Scalars.js"
import * as Validation from "./Validation.js"

// Reports each bad key at `<map>[key]`, as Kubernetes does.
const keyIssues = (data: Readonly<Record<string, unknown>>) =>
  Object.keys(data).flatMap((key) =>
    Validation.isConfigMapKey(key).map((d) => ({ path: [key], message: FieldError.invalid("", key, d).message }))
  )

/** A ConfigMap/Secret data map with plain string values and valid keys. */
export const StringData = StringMap.pipe(Schema.filter(keyIssues))

/** A data map with base64 values and valid keys. */
export const BinaryData = stringMap(Base64).pipe(Schema.filter(keyIssues))

/** The `ConfigMap` kind: non-secret configuration as key-value pairs. */
export const ConfigMap = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("ConfigMap"),
  metadata: ObjectMeta,
  data: optional(StringData),
  binaryData: optional(BinaryData),
  immutable: optional(Schema.Boolean)
}).pipe(
  Schema.filter((cm) =>
    // A key may live in data or binaryData, not both: mounted, they would be the same file.
    Object.keys(cm.binaryData ?? {})
      .filter((key) => cm.data !== undefined && Object.prototype.hasOwnProperty.call(cm.data, key))
      .map((key) => ({
        path: ["binaryData", key],
        message: FieldError.invalid("", key, "duplicate of key present in data").message
      }))
  )
)

/** A ConfigMap object. */
export type ConfigMap = typeof ConfigMap.Type

/** Well-known Secret types; any other string is allowed too. */
export const SecretTypes = {
  Opaque: "Opaque",
  ServiceAccountToken: "kubernetes.io/service-account-token",
  DockerConfigJson: "kubernetes.io/dockerconfigjson",
  BasicAuth: "kubernetes.io/basic-auth",
  SSHAuth: "kubernetes.io/ssh-auth",
  TLS: "kubernetes.io/tls",
  BootstrapToken: "bootstrap.kubernetes.io/token"
} as const

/**
 * The `Secret` kind. `data` values are base64 (validated, kept encoded); `stringData` is a
 * write-only convenience that the registry merges into `data` (not done by decoding).
 */
export const Secret = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("Secret"),
  metadata: ObjectMeta,
  data: optional(BinaryData),
  stringData: optional(StringData),
  type: optional(Schema.String),
  immutable: optional(Schema.Boolean)
})

/** A Secret object. */
export type Secret = typeof Secret.Type

/** The most bytes of data one ConfigMap or Secret may hold (Kubernetes' `MaxSecretSize`, 1 MiB). */
export const maxDataBytes = 1024 * 1024

// UTF-8 length without encoding: a data value can be a megabyte, and this runs on every write.
const utf8Length = (s: string): number => {
  let bytes = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      // A surrogate pair: one four-byte character.
      bytes += 4
      i++
    } else bytes += 3
  }
  return bytes
}

// The length of what a padded base64 string decodes to.
const base64Length = (s: string): number => Math.max(0, Math.floor((s.length * 3) / 4) - (s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0))

const sumOf = (map: unknown, size: (value: string) => number): number => {
  if (typeof map !== "object" || map === null) return 0
  let total = 0
  for (const value of Object.values(map)) if (typeof value === "string") total += size(value)
  return total
}

/**
 * A ConfigMap's `data` and `binaryData` together hold at most `maxDataBytes` (values counted in
 * bytes, binary ones decoded), as kube-apiserver's ValidateConfigMap checks; reported at `data`
 * (or at `binaryData` when there is no `data`).
 */
export const validateConfigMapSize = (configMap: { readonly data?: unknown; readonly binaryData?: unknown }): ReadonlyArray<FieldError.FieldError> => {
  const total = sumOf(configMap.data, utf8Length) + sumOf(configMap.binaryData, base64Length)
  if (total <= maxDataBytes) return []
  return [FieldError.tooLong(configMap.data === undefined ? "binaryData" : "data", maxDataBytes)]
}

/** A Secret's `data` (after `stringData` is folded in) holds at most `maxDataBytes`, decoded. */
export const validateSecretSize = (secret: { readonly data?: unknown }): ReadonlyArray<FieldError.FieldError> =>
  sumOf(secret.data, base64Length) > maxDataBytes ? [FieldError.tooLong("data", maxDataBytes)] : []
