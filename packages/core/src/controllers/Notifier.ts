/**
 * The port alerts leave the cluster through: deliver one JSON notification to a webhook. The
 * AlertRule controller decides what to send and when; a Notifier only carries it, so tests and
 * embedders can swap the transport (`layerMemory` records instead of sending).
 *
 * `make(fetch)` is the HTTP implementation over a WHATWG `fetch` (the global one by default: Node's,
 * Deno's, a browser's), so core needs no HTTP library. It POSTs the body as JSON, refuses
 * redirects (a redirect could carry the rule's secret headers to another host), gives up after
 * the notification's timeout, and treats any non-2xx answer as a failure. Failure reasons name the
 * URL without its query string and never contain header values or the response body (a rule's
 * author must not read internal services through the controller's network position).
 */
import { Context, Effect, Layer } from "effect"
import { DeliveryError } from "./ControllerError.js"

/** One notification, ready to send. */
export interface Notification {
  readonly url: string
  /** Request headers, secret values resolved (never logged). */
  readonly headers: Readonly<Record<string, string>>
  /** The JSON body. */
  readonly body: unknown
  readonly timeoutMs: number
}

// Defined in the controllers layer's error module; re-exported so `Notifier.DeliveryError` stays.
export { DeliveryError }

/** Delivers notifications. */
export interface NotifierService {
  readonly deliver: (notification: Notification) => Effect.Effect<void, DeliveryError>
}

/** The Notifier port. */
export class Notifier extends Context.Tag("@koder/fleet-core/Notifier")<Notifier, NotifierService>() {}

/** The URL as it may appear in messages: scheme, host and path (no credentials, no query). */
export const redactUrl = (url: string): string => {
  try {
    const u = new URL(url)
    return `${u.protocol}//${u.host}${u.pathname}`
  } catch {
    return "<invalid url>"
  }
}

const causeOf = (e: unknown): string => {
  if (!(e instanceof Error)) return String(e)
  // undici's "fetch failed" hides the useful part (ECONNREFUSED, a TLS error) in `cause`.
  const cause = (e as { cause?: unknown }).cause
  const inner = cause instanceof Error ? ((cause as { code?: string }).code ?? cause.message) : undefined
  return inner === undefined ? e.message : `${e.message}: ${inner}`
}

// An HTTP field value: visible Latin-1 and tabs. fetch rejects anything else with an error that
// quotes the value — which may be a secret — so values are checked here first.
const fieldValueRe = /^[\t\x20-\x7e\x80-\xff]*$/

/** A Notifier over `fetch` (default: the global one). */
export const make = (fetchImpl: typeof globalThis.fetch = (input, init) => globalThis.fetch(input, init)): NotifierService => ({
  deliver: (n) => {
    const where = `POST ${redactUrl(n.url)}`
    const invalid = Object.entries(n.headers).find(([, value]) => !fieldValueRe.test(value))
    if (invalid !== undefined) return Effect.fail(new DeliveryError({ reason: `${where}: header ${invalid[0]}: the value has characters HTTP headers cannot carry (line breaks, control or non-Latin-1 characters)` }))
    return Effect.tryPromise({
      try: async (signal) => {
        const response = await fetchImpl(n.url, {
          method: "POST",
          headers: { "user-agent": "koder-fleet-alerts", ...n.headers, "content-type": "application/json" },
          body: JSON.stringify(n.body),
          redirect: "manual",
          signal
        })
        // Free the connection; the body is never read (see the module comment).
        await response.body?.cancel().catch(() => undefined)
        return response
      },
      catch: (e) => new DeliveryError({ reason: `${where}: ${causeOf(e)}` })
    }).pipe(
      Effect.timeoutFail({ duration: n.timeoutMs, onTimeout: () => new DeliveryError({ reason: `${where}: no answer within ${n.timeoutMs} ms` }) }),
      Effect.flatMap((response) =>
        response.status >= 200 && response.status < 300
          ? Effect.void
          : Effect.fail(
              new DeliveryError({
                reason:
                  response.status >= 300 && response.status < 400
                    ? `${where}: HTTP ${response.status} redirect refused`
                    : `${where}: HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""}`
              })
            )
      )
    )
  }
})

/** The fetch-based Notifier as a Layer. */
export const layer = (fetchImpl?: typeof globalThis.fetch): Layer.Layer<Notifier> => Layer.succeed(Notifier, make(fetchImpl))

/** A Notifier that records what it is given (and fails while `failing` says so). */
export interface MemoryNotifier extends NotifierService {
  readonly sent: ReadonlyArray<Notification>
  /** Make every delivery fail with this reason (undefined: succeed again). */
  readonly fail: (reason: string | undefined) => void
}

/** A recording Notifier for tests. */
export const makeMemory = (): MemoryNotifier => {
  const sent: Array<Notification> = []
  let failing: string | undefined
  return {
    sent,
    fail: (reason) => {
      failing = reason
    },
    deliver: (n) =>
      Effect.suspend(() => {
        if (failing !== undefined) return Effect.fail(new DeliveryError({ reason: failing }))
        sent.push(n)
        return Effect.void
      })
  }
}

/** The recording Notifier as a Layer. */
export const layerMemory = (notifier: MemoryNotifier = makeMemory()): Layer.Layer<Notifier> => Layer.succeed(Notifier, notifier)
