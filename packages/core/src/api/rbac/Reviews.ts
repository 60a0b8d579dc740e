/**
 * The authorization.k8s.io/v1 reviews as virtual resources (nothing stored; a create answers with
 * `status` filled): `selfsubjectaccessreviews` and `subjectaccessreviews` (is this request
 * allowed?) and `selfsubjectrulesreviews` (what may I do in this namespace?), as kube-apiserver
 * serves them for `kubectl auth can-i`.
 */
import { Effect, Either } from "effect"
import * as Authorization from "../../model/Authorization.js"
import * as FieldError from "../../model/FieldError.js"
import * as Status from "../../model/Status.js"
import type { Rule } from "../../policy/Rbac.js"
import * as ApiError from "../ApiError.js"
import type * as Authz from "../Authz.js"
import * as Body from "../Body.js"
import { json, type ApiRequest, type ApiResponse, type UserInfo } from "../Http.js"
import { checkType } from "../Objects.js"
import type { JsonObject, Resource } from "../Registry.js"
import type { ResourceRoute } from "../Router.js"
import type { Evaluator } from "./Evaluator.js"
import { virtual } from "./Virtual.js"

type Json = Record<string, unknown>
const rec = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {})
const str = (v: unknown): string => (typeof v === "string" ? v : "")

/** 405 unless the request is a create on the collection. */
export const createOnly = (resource: () => Resource, request: ApiRequest, route: ResourceRoute): Effect.Effect<void, ApiError.ApiError> =>
  request.method.toUpperCase() === "POST" && route.name === undefined && route.subresource === undefined
    ? Effect.void
    : Effect.fail(ApiError.of(Status.methodNotSupported({ group: resource().group, resource: resource().plural }, request.method.toLowerCase())))

/**
 * Read, type-check and decode a review body. Its `status` is the server's answer, so what the
 * client sent there is dropped unread, as kube-apiserver does: Go clients (`kubectl auth can-i
 * --list`) send `"resourceRules": null`, which the schema's lists would refuse with a 422.
 */
export const readBody = (resource: Resource, request: ApiRequest): Effect.Effect<JsonObject, ApiError.ApiError> =>
  Effect.gen(function* () {
    const { status: _output, ...body } = yield* Either.flatMap(Body.parse(request.body, request.headers["content-type"]), Body.asObject)
    const typed = yield* checkType(resource, body)
    return yield* Either.mapLeft(resource.decode(typed, false), (errors) => ApiError.of(Status.invalid({ group: resource.group, kind: resource.kind }, "", errors)))
  })

const invalid = (resource: Resource, errors: ReadonlyArray<FieldError.FieldError>) =>
  Effect.fail(ApiError.of(Status.invalid({ group: resource.group, kind: resource.kind }, "", errors)))

/** The request attributes a review spec describes, for `user`. */
export const specAttributes = (spec: Json, user: UserInfo): Either.Either<Authz.Attributes, ReadonlyArray<FieldError.FieldError>> => {
  const ra = spec["resourceAttributes"] === undefined ? undefined : rec(spec["resourceAttributes"])
  const na = spec["nonResourceAttributes"] === undefined ? undefined : rec(spec["nonResourceAttributes"])
  if ((ra === undefined) === (na === undefined)) {
    return Either.left([FieldError.invalid("spec", "", "exactly one of nonResourceAttributes or resourceAttributes must be specified")])
  }
  if (ra !== undefined) {
    return Either.right({
      user,
      verb: str(ra["verb"]),
      resourceRequest: true,
      apiGroup: str(ra["group"]),
      apiVersion: str(ra["version"]),
      resource: str(ra["resource"]),
      subresource: str(ra["subresource"]),
      namespace: str(ra["namespace"]),
      name: str(ra["name"]),
      path: ""
    })
  }
  return Either.right({ user, verb: str(na!["verb"]), resourceRequest: false, apiGroup: "", apiVersion: "", resource: "", subresource: "", namespace: "", name: "", path: str(na!["path"]) })
}

const answer = (review: JsonObject, status: Json): ApiResponse =>
  json(201, { ...review, metadata: { ...rec(review["metadata"]), creationTimestamp: null }, status })

const accessStatus = (decision: Authz.Decision): Json => (decision.reason === "" ? { allowed: decision.allowed } : { allowed: decision.allowed, reason: decision.reason })

/** `SelfSubjectAccessReview`: may the caller do this? */
export const selfSubjectAccessReviews = (evaluator: Evaluator): Resource => {
  const resource: Resource = virtual({ group: "authorization.k8s.io", version: "v1", kind: "SelfSubjectAccessReview", plural: "selfsubjectaccessreviews", schema: Authorization.SelfSubjectAccessReview, handle: (request, route) =>
    Effect.gen(function* () {
      yield* createOnly(() => resource, request, route)
      const review = yield* readBody(resource, request)
      const attributes = specAttributes(rec(review["spec"]), request.user)
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
      const spec = rec(review["spec"])
      const groups = Array.isArray(spec["groups"]) ? spec["groups"].filter((g): g is string => typeof g === "string") : []
      if (str(spec["user"]) === "" && groups.length === 0) return yield* invalid(resource, [FieldError.invalid("spec.user", "", "at least one of user or group must be specified")])
      const attributes = specAttributes(spec, { name: str(spec["user"]), uid: str(spec["uid"]), groups })
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
      const set = evaluator.rules(request.user, str(rec(review["spec"])["namespace"]))
      return answer(review, rulesStatus(set.rules, set.missing))
    }) })
  return resource
}
