/**
 * The `authentication.k8s.io` `SelfSubjectReview` kind ("who am I?", `kubectl auth whoami`): never
 * stored; the API server answers a create with `status.userInfo` of the caller, the impersonated
 * user when it impersonates (see `api/authn/SelfSubjectReviews.ts`). It is served in v1, v1beta1
 * and v1alpha1, as kubectl tries them in that order. TokenRequest and TokenReview live with the
 * ServiceAccount kind.
 */
import { Schema } from "effect"
import { optional } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"
import { UserInfo } from "./ServiceAccount.js"

/** The group. */
export const Group = "authentication.k8s.io"

/** The versions SelfSubjectReview is served in, preferred first. */
export const SelfSubjectReviewVersions = ["v1", "v1beta1", "v1alpha1"] as const

/** The `SelfSubjectReview` kind in one version. */
export const selfSubjectReview = (version: (typeof SelfSubjectReviewVersions)[number]) =>
  Schema.Struct({
    apiVersion: Schema.Literal(`${Group}/${version}`),
    kind: Schema.Literal("SelfSubjectReview"),
    metadata: optional(ObjectMeta),
    status: optional(Schema.Struct({ userInfo: optional(UserInfo) }))
  })

/** The `SelfSubjectReview` kind (v1). */
export const SelfSubjectReview = selfSubjectReview("v1")

/** A SelfSubjectReview. */
export type SelfSubjectReview = typeof SelfSubjectReview.Type
