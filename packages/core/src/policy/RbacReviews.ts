/**
 * The authorization.k8s.io/v1 reviews as virtual resources (nothing stored; a create answers with
 * `status` filled): `selfsubjectaccessreviews` and `subjectaccessreviews` (is this request
 * allowed?) and `selfsubjectrulesreviews` (what may I do in this namespace?), as kube-apiserver
 * serves them for `kubectl auth can-i`.
 */
import { Effect, Either } from "effect"
import * as Authorization from "../model/Authorization.js"
import * as FieldError from "../model/FieldError.js"
import * as Status from "../model/Status.js"
import type { Rule } from "./RbacRules.js"
import * as ApiError from "../api/ApiError.js"
import type * as Authz from "../api/Authz.js"
import { json, type ApiResponse, type UserInfo } from "../api/Http.js"
import type { JsonObject, Resource } from "../api/Registry.js"
import type { Evaluator } from "./RbacEvaluator.js"
import { createOnly, readBody, virtual } from "../api/VirtualResource.js"
import { asObject, asString } from "../object/Json.js"

type Json = Record<string, unknown>

const invalid = (resource: Resource, errors: ReadonlyArray<FieldError.FieldError>) =>
  Effect.fail(ApiError.of(Status.invalid({ group: resource.group, kind: resource.kind }, "", errors)))

/** The request attributes a review spec describes, for `user`. */
export const specAttributes = (spec: Json, user: UserInfo): Either.Either<Authz.Attributes, ReadonlyArray<FieldError.FieldError>> => {
  const ra = spec["resourceAttributes"] === undefined ? undefined : asObject(spec["resourceAttributes"])
  const na = spec["nonResourceAttributes"] === undefined ? undefined : asObject(spec["nonResourceAttributes"])
  if ((ra === undefined) === (na === undefined)) {
    return Either.left([FieldError.invalid("spec", "", "exactly one of nonResourceAttributes or resourceAttributes must be specified")])
  }
  if (ra !== undefined) {
    return Either.right({
      user,
      verb: asString(ra["verb"]),
      resourceRequest: true,
      apiGroup: asString(ra["group"]),
      apiVersion: asString(ra["version"]),
      resource: asString(ra["resource"]),
      subresource: asString(ra["subresource"]),
      namespace: asString(ra["namespace"]),
      name: asString(ra["name"]),
      path: ""
    })
  }
  return Either.right({ user, verb: asString(na!["verb"]), resourceRequest: false, apiGroup: "", apiVersion: "", resource: "", subresource: "", namespace: "", name: "", path: asString(na!["path"]) })
}

const answer = (review: JsonObject, status: Json): ApiResponse =>
  json(201, { ...review, metadata: { ...asObject(review["metadata"]), creationTimestamp: null }, status })

const accessStatus = (decision: Authz.Decision): Json => (decision.reason === "" ? { allowed: decision.allowed } : { allowed: decision.allowed, reason: decision.reason })

/** `SelfSubjectAccessReview`: may the caller do this? */
export const selfSubjectAccessReviews = (evaluator: Evaluator): Resource => {
  const resource: Resource = virtual({ group: "authorization.k8s.io", version: "v1", kind: "SelfSubjectAccessReview", plural: "selfsubjectaccessreviews", schema: Authorization.SelfSubjectAccessReview, handle: (request, route) =>
    Effect.gen(function* () {
      yield* createOnly(() => resource, request, route)
      const review = yield* readBody(resource, request)
      const attributes = specAttributes(asObject(review["spec"]), request.user)
      if (Either.isLeft(attributes)) return yield* invalid(resource, attributes.left)
      return answer(review, accessStatus(yield* evaluator.authorize(attributes.right)))
    }) })
  return resource
}

/** `SubjectAccessReview`: may this user (and groups) do this? */
export const subjectAccessReviews = (evaluator: Evaluator): Resource => {
  const resource: Resource = virtual({ group: "authorization.k8s.io", version: "v1", kind: "SubjectAccessReview", plural: "subjectaccessreviews", schema: Authorization.SubjectAccessReview, handle: (request, route) =>
    Effect.gen(function* () {
      yield* createOnly(() => resource, request, route)
      const review = yield* readBody(resource, request)
      const spec = asObject(review["spec"])
      const groups = Array.isArray(spec["groups"]) ? spec["groups"].filter((g): g is string => typeof g === "string") : []
      if (asString(spec["user"]) === "" && groups.length === 0) return yield* invalid(resource, [FieldError.invalid("spec.user", "", "at least one of user or group must be specified")])
      const attributes = specAttributes(spec, { name: asString(spec["user"]), uid: asString(spec["uid"]), groups })
      if (Either.isLeft(attributes)) return yield* invalid(resource, attributes.left)
      return answer(review, accessStatus(yield* evaluator.authorize(attributes.right)))
    }) })
  return resource
}

/** Rules in the shape of a rules review: resource rules and non-resource rules apart. */
export const rulesStatus = (rules: ReadonlyArray<Rule>, missing: ReadonlyArray<string>): Json => {
  const resourceRules: Array<Json> = []
  const nonResourceRules: Array<Json> = []
  for (const r of rules) {
    if ((r.resources ?? []).length > 0) {
      resourceRules.push({
        verbs: r.verbs,
        apiGroups: r.apiGroups ?? [],
        resources: r.resources,
        ...((r.resourceNames ?? []).length > 0 ? { resourceNames: r.resourceNames } : {})
      })
    }
    if ((r.nonResourceURLs ?? []).length > 0) nonResourceRules.push({ verbs: r.verbs, nonResourceURLs: r.nonResourceURLs })
  }
  return {
    resourceRules,
    nonResourceRules,
    incomplete: false,
    ...(missing.length === 0 ? {} : { evaluationError: missing.map((k) => `RBAC: ${k} not found`).join(", ") })
  }
}

/** `SelfSubjectRulesReview`: what may the caller do in `spec.namespace`? */
export const selfSubjectRulesReviews = (evaluator: Evaluator): Resource => {
  const resource: Resource = virtual({ group: "authorization.k8s.io", version: "v1", kind: "SelfSubjectRulesReview", plural: "selfsubjectrulesreviews", schema: Authorization.SelfSubjectRulesReview, handle: (request, route) =>
    Effect.gen(function* () {
      yield* createOnly(() => resource, request, route)
      const review = yield* readBody(resource, request)
      const set = evaluator.rules(request.user, asString(asObject(review["spec"])["namespace"]))
      return answer(review, rulesStatus(set.rules, set.missing))
    }) })
  return resource
}
