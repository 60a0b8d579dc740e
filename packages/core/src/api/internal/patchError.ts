/**
 * The constructors of `PatchError`, one per Status it becomes (400, 422, 415, 413). The class
 * itself is in the API layer's error module (`api/ApiError.ts`) and re-exported from here.
 */
import { PatchError } from "../ApiError.js"

export { PatchError, type PatchErrorReason } from "../ApiError.js"

/** 400: the body is not a valid patch document of its type. */
export const malformed = (detail: string): PatchError => new PatchError({ reason: "BadRequest", detail })

/** 422: a valid patch that does not apply to this object. */
export const notApplicable = (detail: string): PatchError => new PatchError({ reason: "Invalid", detail })

/** 415: the body's media type is not one we can apply; `accepted` lists those we can. */
export const unsupported = (detail: string, accepted: ReadonlyArray<string>): PatchError =>
  new PatchError({ reason: "UnsupportedMediaType", detail, accepted })

/** 413: the patch is larger than the server processes. */
export const tooLarge = (detail: string): PatchError => new PatchError({ reason: "RequestEntityTooLarge", detail })
