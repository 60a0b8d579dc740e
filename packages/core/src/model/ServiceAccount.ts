/**
 * The `ServiceAccount` kind (v1): an identity for processes in a namespace, and the
 * `authentication.k8s.io/v1` request shapes around it: `TokenRequest` (ask for a signed token of
 * a ServiceAccount) and `TokenReview` (ask who a token belongs to).
 */
import { Schema } from "effect"
import { optional } from "./internal/fields.js"
import { LocalObjectReference, ObjectMeta, ObjectReference } from "./Meta.js"
import { Int64, Time } from "./Scalars.js"

/** The `ServiceAccount` kind. */
export const ServiceAccount = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("ServiceAccount"),
  metadata: ObjectMeta,
  secrets: optional(Schema.Array(ObjectReference)),
  imagePullSecrets: optional(Schema.Array(LocalObjectReference)),
  automountServiceAccountToken: optional(Schema.Boolean)
})

/** A ServiceAccount object. */
export type ServiceAccount = typeof ServiceAccount.Type

/** The object a token is bound to (accepted for compatibility; Fleet binds to the ServiceAccount). */
export const BoundObjectReference = Schema.Struct({
  kind: optional(Schema.String),
  apiVersion: optional(Schema.String),
  name: optional(Schema.String),
  uid: optional(Schema.String)
})

/** What a TokenRequest asks for: audiences and a lifetime in seconds. */
export const TokenRequestSpec = Schema.Struct({
  audiences: optional(Schema.Array(Schema.String)),
  expirationSeconds: optional(Int64),
  boundObjectRef: optional(BoundObjectReference)
})

/** A TokenRequest spec. */
export type TokenRequestSpec = typeof TokenRequestSpec.Type

/** The issued token and when it expires. */
export const TokenRequestStatus = Schema.Struct({
  token: Schema.String,
  expirationTimestamp: Time
})

/** The `authentication.k8s.io/v1` `TokenRequest` kind (the `serviceaccounts/token` subresource). */
export const TokenRequest = Schema.Struct({
  apiVersion: optional(Schema.Literal("authentication.k8s.io/v1")),
  kind: optional(Schema.Literal("TokenRequest")),
  metadata: optional(ObjectMeta),
  spec: optional(TokenRequestSpec),
  status: optional(TokenRequestStatus)
})

/** A TokenRequest object. */
export type TokenRequest = typeof TokenRequest.Type

/** The user a token authenticates as. */
export const UserInfo = Schema.Struct({
  username: optional(Schema.String),
  uid: optional(Schema.String),
  groups: optional(Schema.Array(Schema.String)),
  extra: optional(Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) }))
})

/** The `authentication.k8s.io/v1` `TokenReview` kind: whether a token is valid and whose it is. */
export const TokenReview = Schema.Struct({
  apiVersion: optional(Schema.Literal("authentication.k8s.io/v1")),
  kind: optional(Schema.Literal("TokenReview")),
  metadata: optional(ObjectMeta),
  spec: Schema.Struct({ token: optional(Schema.String), audiences: optional(Schema.Array(Schema.String)) }),
  status: optional(
    Schema.Struct({
      authenticated: optional(Schema.Boolean),
      user: optional(UserInfo),
      audiences: optional(Schema.Array(Schema.String)),
      error: optional(Schema.String)
    })
  )
})

/** A TokenReview object. */
export type TokenReview = typeof TokenReview.Type
