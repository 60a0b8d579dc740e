/**
 * The client layer's own failures, as tagged errors. A request the API refused fails with the
 * API's `ApiError` (the Status it answered); these are failures of the client's own work.
 */
import { Data } from "effect"

/** The drain did not finish before its deadline; `remaining` names the pods still there. */
export class DrainTimeout extends Data.TaggedError("DrainTimeout")<{ readonly message: string; readonly remaining: ReadonlyArray<string> }> {}
