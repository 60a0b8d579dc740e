/**
 * The authorization.k8s.io/v1 review kinds: `SelfSubjectAccessReview` ("may I do this?"),
 * `SubjectAccessReview` ("may this user do this?"), and `SelfSubjectRulesReview` ("what may I do
 * in this namespace?"). They are never stored: the API server answers a create with the status
 * filled in (see `api/rbac/Reviews.ts`).
 */
import { Schema } from "effect"
import { optional } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"

/** Their apiVersion. */
export const ApiVersion = "authorization.k8s.io/v1"

const Strings = Schema.Array(Schema.String)

/** A resource request to check (kube's `ResourceAttributes`). */
export const ResourceAttributes = Schema.Struct({
  namespace: optional(Schema.String),
  verb: optional(Schema.String),
  group: optional(Schema.String),
  version: optional(Schema.String),
  resource: optional(Schema.String),
  subresource: optional(Schema.String),
  name: optional(Schema.String),
  fieldSelector: optional(Schema.Unknown),
  labelSelector: optional(Schema.Unknown)
})

/** Resource attributes of a review. */
export type ResourceAttributes = typeof ResourceAttributes.Type

/** A non-resource request to check (a path and an HTTP verb, lower-case). */
export const NonResourceAttributes = Schema.Struct({
  path: optional(Schema.String),
  verb: optional(Schema.String)
})

/** Non-resource attributes of a review. */
export type NonResourceAttributes = typeof NonResourceAttributes.Type

/** The answer of an access review. */
export const SubjectAccessReviewStatus = Schema.Struct({
  allowed: Schema.Boolean,
  denied: optional(Schema.Boolean),
  reason: optional(Schema.String),
  evaluationError: optional(Schema.String)
})

/** The answer of an access review. */
export type SubjectAccessReviewStatus = typeof SubjectAccessReviewStatus.Type

/** What the caller asks about itself. */
export const SelfSubjectAccessReviewSpec = Schema.Struct({
  resourceAttributes: optional(ResourceAttributes),
  nonResourceAttributes: optional(NonResourceAttributes)
})

/** The `SelfSubjectAccessReview` kind. */
export const SelfSubjectAccessReview = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("SelfSubjectAccessReview"),
  metadata: optional(ObjectMeta),
  spec: SelfSubjectAccessReviewSpec,
  status: optional(SubjectAccessReviewStatus)
})

/** A SelfSubjectAccessReview. */
export type SelfSubjectAccessReview = typeof SelfSubjectAccessReview.Type

/** What the caller asks about another user. */
export const SubjectAccessReviewSpec = Schema.Struct({
  resourceAttributes: optional(ResourceAttributes),
  nonResourceAttributes: optional(NonResourceAttributes),
  user: optional(Schema.String),
  groups: optional(Strings),
  extra: optional(Schema.Record({ key: Schema.String, value: Strings })),
  uid: optional(Schema.String)
})

/** The `SubjectAccessReview` kind. */
export const SubjectAccessReview = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("SubjectAccessReview"),
  metadata: optional(ObjectMeta),
  spec: SubjectAccessReviewSpec,
  status: optional(SubjectAccessReviewStatus)
})

/** A SubjectAccessReview. */
export type SubjectAccessReview = typeof SubjectAccessReview.Type

/** A resource rule as a rules review reports it. */
export const ResourceRule = Schema.Struct({
  verbs: Strings,
  apiGroups: optional(Strings),
  resources: optional(Strings),
  resourceNames: optional(Strings)
})

/** A non-resource rule as a rules review reports it. */
export const NonResourceRule = Schema.Struct({
  verbs: Strings,
  nonResourceURLs: optional(Strings)
})

/** The answer of a rules review. */
export const SubjectRulesReviewStatus = Schema.Struct({
  resourceRules: Schema.Array(ResourceRule),
  nonResourceRules: Schema.Array(NonResourceRule),
  incomplete: Schema.Boolean,
  evaluationError: optional(Schema.String)
})

/** The `SelfSubjectRulesReview` kind. */
export const SelfSubjectRulesReview = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("SelfSubjectRulesReview"),
  metadata: optional(ObjectMeta),
  spec: Schema.Struct({ namespace: optional(Schema.String) }),
  status: optional(SubjectRulesReviewStatus)
})

/** A SelfSubjectRulesReview. */
export type SelfSubjectRulesReview = typeof SelfSubjectRulesReview.Type
