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
