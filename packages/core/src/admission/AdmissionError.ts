/**
 * The admission layer's failures, as tagged errors. A plugin's denial is an `ApiError` (the Status
 * the request fails with); these are failures of the plugins' own transports, which each plugin
 * maps to a Status (or skips) by its failure policy.
 */
import { Data } from "effect"

/** A webhook could not be called: unreachable, TLS failure, non-2xx answer. */
export class WebhookCallError extends Data.TaggedError("WebhookCallError")<{
  /** What went wrong, e.g. `Post "https://…": connect ECONNREFUSED 127.0.0.1:9`. */
  readonly reason: string
}> {}
