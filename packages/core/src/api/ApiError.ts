/**
 * The one failure of the API pipeline: a Kubernetes `Status` ready to send. Every stage (routing,
 * authentication, decoding, registry, store) maps its own errors to one of these at its edge, so
 * the HTTP layer only ever writes `status.code` and the Status body.
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
