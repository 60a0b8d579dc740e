/**
 * The API layer's failures, as tagged errors. `ApiError` is the one failure that leaves the
 * pipeline: a Kubernetes `Status` ready to send. Every stage (routing, authentication, decoding,
 * registry, store) maps its own errors to one of these at its edge, so the HTTP layer only ever
 * writes `status.code` and the Status body; the stages' own failures that need a type of their
 * own (`PatchError`, which `toApiError` maps; `InvalidKey`, a startup failure) are defined below.
 */
import { Data } from "effect"
import * as Status from "../model/Status.js"
import type { StoreError } from "../store/StoreError.js"

/** A request failed with this Status (its `code` is the HTTP status). */
export class ApiError extends Data.TaggedError("ApiError")<{
  readonly status: Status.Status
  /** Extra response headers, e.g. `Retry-After` for 429. */
  readonly headers?: Readonly<Record<string, string>>
}> {
  override get message() {
    return this.status.message ?? `HTTP ${this.status.code}`
  }
}

/** Wrap a Status. */
export const of = (status: Status.Status, headers?: Readonly<Record<string, string>>): ApiError =>
  headers === undefined ? new ApiError({ status }) : new ApiError({ status, headers })

/** 400 BadRequest. */
export const badRequest = (message: string): ApiError => of(Status.badRequest(message))

/** What the API calls the object a store error is about. */
export interface Subject {
  /** `pods` or `{ group: "apps", resource: "deployments" }`. */
  readonly resource: Status.GroupResource
  readonly name: string
}

/**
 * Map a store failure to the Status kube-apiserver sends for the same situation: 404, 409
 * AlreadyExists, 409 Conflict (stale resourceVersion), 410 Expired / Gone, 503.
 */
export const fromStore = (error: StoreError, subject: Subject): ApiError => {
  switch (error._tag) {
    case "NotFound":
      return of(Status.notFound(subject.resource, subject.name))
    case "AlreadyExists":
      return of(Status.alreadyExists(subject.resource, subject.name))
    case "Conflict":
      return of(Status.conflict(subject.resource, subject.name))
    case "Compacted":
      return of(Status.tooOldResourceVersion(error.requestedRevision, error.compactRevision))
    case "Expired":
      return of(
        Status.expired(
          `The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter. (${error.reason})`
        )
      )
    case "Unavailable":
      return of(Status.serviceUnavailable(`the storage backend is unavailable: ${error.reason}`), { "Retry-After": "1" })
  }
}

/** Which Status a patch failure becomes. */
export type PatchErrorReason = "BadRequest" | "Invalid" | "UnsupportedMediaType" | "RequestEntityTooLarge"

// The message kube-apiserver sends (as a generic 422) for a patch it could not apply.
const invalidMessage = "the server rejected our request due to an error in our request"

/**
 * A PATCH body could not be applied; `detail` says what was wrong. The Status kube-apiserver
 * sends for it: a body that is not a patch document is 400, a well-formed patch that cannot be
 * applied to this object is 422, an unknown or unsupported media type is 415, and too many JSON
 * Patch operations is 413.
 */
export class PatchError extends Data.TaggedError("PatchError")<{
  readonly reason: PatchErrorReason
  /** What was wrong, e.g. `testing value /spec/replicas failed: test failed`. */
  readonly detail: string
  /** For 415: the media types the server would accept instead. */
  readonly accepted?: ReadonlyArray<string>
}> {
  override get message() {
    return this.detail
  }

  /** The `ApiError` (Status) kube-apiserver answers this failure with. */
  toApiError(): ApiError {
    switch (this.reason) {
      case "BadRequest":
        return of(Status.badRequest(this.detail))
      case "Invalid":
        return of(invalidStatus(this.detail))
      case "UnsupportedMediaType":
        return of(Status.unsupportedMediaType(this.accepted ?? []))
      case "RequestEntityTooLarge":
        return of(Status.requestEntityTooLarge(this.detail))
    }
  }
}

// kube-apiserver answers an unappliable patch with NewGenericServerResponse(422, ...), whose message
// is fixed and whose details are empty; we keep that wording and add the detail as a cause so a
// client (or a human reading the body) can still see which operation failed.
const invalidStatus = (detail: string): Status.Status => ({
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message: invalidMessage,
  reason: "Invalid",
  details: { causes: [{ message: detail }] },
  code: 422
})

/** A ServiceAccount token signing key could not be read or made. */
export class InvalidKey extends Data.TaggedError("InvalidKey")<{ readonly message: string }> {}
