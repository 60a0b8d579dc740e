/**
 * The one failure of applying a PATCH body, and the Status kube-apiserver sends for it: a body
 * that is not a patch document is 400, a well-formed patch that cannot be applied to this object
 * is 422, an unknown or unsupported media type is 415, and too many JSON Patch operations is 413.
 */
import { Data } from "effect"
import * as ApiError from "../ApiError.js"
import * as Status from "../../model/Status.js"

/** Which Status a patch failure becomes. */
export type PatchErrorReason = "BadRequest" | "Invalid" | "UnsupportedMediaType" | "RequestEntityTooLarge"

/** The message kube-apiserver sends (as a generic 422) for a patch it could not apply. */
export const invalidMessage = "the server rejected our request due to an error in our request"

/** A PATCH body could not be applied; `detail` says what was wrong. */
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
  toApiError(): ApiError.ApiError {
    switch (this.reason) {
      case "BadRequest":
        return ApiError.of(Status.badRequest(this.detail))
      case "Invalid":
        return ApiError.of(invalidStatus(this.detail))
      case "UnsupportedMediaType":
        return ApiError.of(Status.unsupportedMediaType(this.accepted ?? []))
      case "RequestEntityTooLarge":
        return ApiError.of(Status.requestEntityTooLarge(this.detail))
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

/** 400: the body is not a valid patch document of its type. */
export const malformed = (detail: string): PatchError => new PatchError({ reason: "BadRequest", detail })

/** 422: a valid patch that does not apply to this object. */
export const notApplicable = (detail: string): PatchError => new PatchError({ reason: "Invalid", detail })

/** 415: the body's media type is not one we can apply; `accepted` lists those we can. */
export const unsupported = (detail: string, accepted: ReadonlyArray<string>): PatchError =>
  new PatchError({ reason: "UnsupportedMediaType", detail, accepted })

/** 413: the patch is larger than the server processes. */
export const tooLarge = (detail: string): PatchError => new PatchError({ reason: "RequestEntityTooLarge", detail })
