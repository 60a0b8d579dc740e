/**
 * The controllers layer's failures, as tagged errors: a reconcile that must not be retried, and a
 * notification the Notifier port could not deliver. A reconcile's retryable failure is `ApiError`.
 */
import { Data } from "effect"

/** A failure that retrying cannot mend (bad spec); logged, not retried until the next change. */
export class TerminalError extends Data.TaggedError("TerminalError")<{ readonly message: string }> {}

/** A notification was not accepted: unreachable, timed out, or a non-2xx answer. */
export class DeliveryError extends Data.TaggedError("DeliveryError")<{
  /** What went wrong, e.g. `POST http://notify.local/v1/alerts: HTTP 503 Service Unavailable`. */
  readonly reason: string
}> {}
