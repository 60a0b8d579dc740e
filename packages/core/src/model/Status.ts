/**
 * The Kubernetes `Status` object returned for every failed request (and some successful
 * deletes), with constructors whose messages match kube-apiserver's `apierrors` package, so
 * kubectl and client libraries recognise them (`pods "x" not found`, `Pod "x" is invalid: ...`).
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { ListMeta } from "./Meta.js"
import { Int32 } from "./Scalars.js"

/** The machine-readable reasons a request failed (Kubernetes `StatusReason`). */
export const StatusReason = Schema.Literal(
  "NotFound",
  "AlreadyExists",
  "Conflict",
  "Invalid",
  "BadRequest",
  "Unauthorized",
  "Forbidden",
  "MethodNotAllowed",
  "Gone",
  "Expired",
  "RequestEntityTooLarge",
  "TooManyRequests",
  "InternalError",
  "ServiceUnavailable",
  "Timeout",
  "UnsupportedMediaType",
  "NotAcceptable"
)

/** A machine-readable failure reason. */
export type StatusReason = typeof StatusReason.Type

/** One cause of a failure, usually a field error (`reason` is the Kubernetes `CauseType`). */
export const StatusCause = Schema.Struct({
  reason: optional(Schema.String),
  message: optional(Schema.String),
  field: optional(Schema.String)
})

/** One cause of a failure. */
export type StatusCause = typeof StatusCause.Type

/** The object a failure concerns, its causes, and when to retry. */
export const StatusDetails = Schema.Struct({
  name: optional(Schema.String),
  group: optional(Schema.String),
  kind: optional(Schema.String),
  uid: optional(Schema.String),
  causes: optional(Schema.Array(StatusCause)),
  retryAfterSeconds: optional(Int32)
})

/** The object a failure concerns. */
export type StatusDetails = typeof StatusDetails.Type

/** The `Status` object (v1). */
export const Status = Schema.Struct({
  kind: Schema.Literal("Status"),
  apiVersion: Schema.Literal("v1"),
  metadata: optional(ListMeta),
  status: optional(Schema.Literal("Success", "Failure")),
  message: optional(Schema.String),
  reason: optional(StatusReason),
  details: optional(StatusDetails),
  code: optional(Int32)
})

/** The `Status` object. */
export type Status = typeof Status.Type

/** A resource as messages name it: `"pods"`, or `{ group: "apps", resource: "deployments" }`. */
export type GroupResource = string | { readonly group: string; readonly resource: string }

/** A kind as messages name it: `"Pod"`, or `{ group: "apps", kind: "Deployment" }`. */
export type GroupKind = string | { readonly group: string; readonly kind: string }

const resourceParts = (r: GroupResource) => (typeof r === "string" ? { group: "", name: r } : { group: r.group, name: r.resource })
const kindParts = (k: GroupKind) => (typeof k === "string" ? { group: "", name: k } : { group: k.group, name: k.kind })

// Kubernetes qualifies names outside the core group: "deployments.apps", "Deployment.apps".
const qualified = (p: { group: string; name: string }) => (p.group === "" ? p.name : `${p.name}.${p.group}`)

const failure = (
  code: number,
  reason: StatusReason,
  message: string,
  details?: StatusDetails
): Status => ({
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message,
  reason,
  ...(details === undefined ? {} : { details }),
  code
})

const detailsFor = (p: { group: string; name: string }, name: string | undefined): StatusDetails => ({
  ...(name === undefined || name === "" ? {} : { name }),
  ...(p.group === "" ? {} : { group: p.group }),
  kind: p.name
})

/** A successful result (e.g. for a delete that returns no object), with optional details. */
export const success = (details?: StatusDetails): Status => ({
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Success",
  ...(details === undefined ? {} : { details })
})

/** 404: `pods "x" not found`. */
export const notFound = (resource: GroupResource, name: string): Status => {
  const r = resourceParts(resource)
  return failure(404, "NotFound", `${qualified(r)} ${JSON.stringify(name)} not found`, detailsFor(r, name))
}

/** 409: `pods "x" already exists`. */
export const alreadyExists = (resource: GroupResource, name: string): Status => {
  const r = resourceParts(resource)
  return failure(409, "AlreadyExists", `${qualified(r)} ${JSON.stringify(name)} already exists`, detailsFor(r, name))
}

/** The detail kube-apiserver gives for a stale `resourceVersion` on update. */
export const OptimisticLockErrorMsg = "the object has been modified; please apply your changes to the latest version and try again"

/** 409: `Operation cannot be fulfilled on pods "x": <detail>` (defaults to the optimistic-lock text). */
export const conflict = (resource: GroupResource, name: string, detail: string = OptimisticLockErrorMsg): Status => {
  const r = resourceParts(resource)
  return failure(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualified(r)} ${JSON.stringify(name)}: ${detail}`,
    detailsFor(r, name)
  )
}

/** The most field errors an `Invalid` Status lists; the rest are counted in one more cause. */
export const maxInvalidCauses = 100

/** 422: `Pod "x" is invalid: spec.containers[0].image: Required value`, one cause per field error. */
export const invalid = (kind: GroupKind, name: string, all: ReadonlyArray<FieldError.FieldError>): Status => {
  // A body of a million wrongly typed list items has a million errors: the answer names the
  // first `maxInvalidCauses` and counts the rest, so it stays small whatever was sent.
  const errors =
    all.length <= maxInvalidCauses
      ? all
      : [...all.slice(0, maxInvalidCauses), { path: "", message: `and ${all.length - maxInvalidCauses} more errors` }]
  const k = kindParts(kind)
  const prefix = `${qualified(k)} ${JSON.stringify(name)} is invalid`
  const causes = errors.map((e) => ({ reason: FieldError.causeType(e.message), message: e.message, field: e.path }))
  return failure(422, "Invalid", errors.length === 0 ? prefix : `${prefix}: ${FieldError.formatAll(errors)}`, {
    ...detailsFor(k, name),
    causes
  })
}

/** 400 with the given message. */
export const badRequest = (message: string): Status => failure(400, "BadRequest", message)

/**
 * 409 of a server-side apply: each field another manager owns with another value, one cause
 * each (`FieldManagerConflict`, the field, the manager), as kube-apiserver answers.
 */
export const applyConflict = (
  resource: GroupResource,
  name: string,
  message: string,
  conflicts: ReadonlyArray<{ readonly manager: string; readonly apiVersion: string; readonly field: string }>
): Status =>
  failure(409, "Conflict", message, {
    ...detailsFor(resourceParts(resource), name),
    causes: conflicts.map((c) => ({ reason: "FieldManagerConflict", message: `conflict with "${c.manager}"${c.apiVersion === "" ? "" : ` using ${c.apiVersion}`}`, field: c.field }))
  })

/** 401; kube-apiserver's default message is `Unauthorized`. */
export const unauthorized = (message = "Unauthorized"): Status => failure(401, "Unauthorized", message)

/**
 * 403: `pods "x" is forbidden: <detail>` (or `pods is forbidden: ...` for collection requests),
 * e.g. detail `User "bob" cannot get resource "pods" in API group "" in the namespace "default"`.
 */
export const forbidden = (resource: GroupResource, name: string, detail: string): Status => {
  const r = resourceParts(resource)
  const subject = name === "" ? qualified(r) : `${qualified(r)} ${JSON.stringify(name)}`
  return failure(403, "Forbidden", `${subject} is forbidden: ${detail}`, detailsFor(r, name))
}

/** 405: `<verb> is not supported on resources of kind "pods"`. */
export const methodNotSupported = (resource: GroupResource, verb: string): Status => {
  const r = resourceParts(resource)
  return failure(
    405,
    "MethodNotAllowed",
    `${verb} is not supported on resources of kind ${JSON.stringify(qualified(r))}`,
    detailsFor(r, undefined)
  )
}

/** 410 Gone with the given message. */
export const gone = (message: string): Status => failure(410, "Gone", message)

/** 410 Expired: a watch or list from a compacted revision, e.g. `too old resource version: 5 (90)`. */
export const expired = (message: string): Status => failure(410, "Expired", message)

/** 410 Expired with kube-apiserver's message for a compacted `resourceVersion`. */
export const tooOldResourceVersion = (requested: string | number, oldest: string | number): Status =>
  expired(`too old resource version: ${requested} (${oldest})`)

/** 413: `Request entity too large: <detail>`. */
export const requestEntityTooLarge = (detail: string): Status =>
  failure(413, "RequestEntityTooLarge", `Request entity too large: ${detail}`)

/** 429 with the given message and a retry hint. */
export const tooManyRequests = (message: string, retryAfterSeconds: number): Status =>
  failure(429, "TooManyRequests", message, retryAfterSeconds > 0 ? { retryAfterSeconds } : {})

/** 500: `Internal error occurred: <detail>`. */
export const internalError = (detail: string): Status =>
  failure(500, "InternalError", `Internal error occurred: ${detail}`, { causes: [{ message: detail }] })

/** 503 with the given message. */
export const serviceUnavailable = (message: string): Status => failure(503, "ServiceUnavailable", message)

/** 504: `Timeout: <detail>`, with a retry hint. */
export const timeout = (detail: string, retryAfterSeconds: number): Status =>
  failure(504, "Timeout", `Timeout: ${detail}`, { retryAfterSeconds })

/** 415: the request body's media type is not one the server decodes. */
export const unsupportedMediaType = (accepted: ReadonlyArray<string>): Status =>
  failure(
    415,
    "UnsupportedMediaType",
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`
  )

/** 406: none of the `Accept`ed media types can be produced. */
export const notAcceptable = (accepted: ReadonlyArray<string>): Status =>
  failure(406, "NotAcceptable", `only the following media types are accepted: ${accepted.join(", ")}`)

/** The HTTP status code Kubernetes uses for each reason. */
export const codeFor: Readonly<Record<StatusReason, number>> = {
  NotFound: 404,
  AlreadyExists: 409,
  Conflict: 409,
  Invalid: 422,
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  MethodNotAllowed: 405,
  Gone: 410,
  Expired: 410,
  RequestEntityTooLarge: 413,
  TooManyRequests: 429,
  InternalError: 500,
  ServiceUnavailable: 503,
  Timeout: 504,
  UnsupportedMediaType: 415,
  NotAcceptable: 406
}
