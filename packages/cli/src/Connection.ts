/**
 * A connection to one API server: core's typed client over an undici `fetch` that trusts the
 * kubeconfig's CA (and presents its client certificate, if any), plus raw requests for what the
 * typed client does not model (Tables, discovery, logs, exec, OpenAPI). A server that cannot be
 * reached fails within `connectTimeoutMs` with the URL and the socket's own cause
 * (`connect ECONNREFUSED 127.0.0.1:9300`), never a bare "fetch failed".
 */
import { ApiError, Client, Status, Warnings } from "@koder/fleet-core"
import { Effect } from "effect"
import { Agent, fetch as undiciFetch } from "undici"
import type { Target } from "./Kubeconfig.js"

type JsonObject = Client.JsonObject

/** The media type asking the server for a `meta.k8s.io/v1` Table. */
export const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

/** Options of a raw request. */
export interface RawOptions {
  readonly accept?: string
  readonly body?: unknown
  readonly contentType?: string
}

/** The socket-level cause of a failed fetch, as one phrase. */
export const causeOf = (e: unknown): string => {
  let cause: unknown = e
  // undici wraps the socket error: TypeError("fetch failed", { cause: Error("connect ECONNREFUSED ...") }).
  while (cause instanceof Error && cause.cause !== undefined) cause = cause.cause
  if (cause instanceof AggregateError && cause.errors.length > 0) cause = cause.errors[0]
  if (cause instanceof Error) {
    const code = (cause as { code?: string }).code
    if (code === "UND_ERR_CONNECT_TIMEOUT") return "connect timeout"
    return cause.message || code || String(cause)
  }
  return String(cause)
}

/** A connected client. */
export interface Connection {
  readonly target: Target
  readonly client: Client.Client
  readonly fetch: typeof globalThis.fetch
  /** One request; the whole Response (status not checked). */
  readonly send: (method: string, path: string, options?: RawOptions) => Effect.Effect<Response, ApiError.ApiError>
  /** One request answered with JSON; an error Status fails as an ApiError. */
  readonly json: (method: string, path: string, options?: RawOptions) => Effect.Effect<JsonObject, ApiError.ApiError>
  readonly close: () => Promise<void>
}

const unreachable = (server: string, e: unknown) => ApiError.of(Status.serviceUnavailable(`cannot reach ${server}: ${causeOf(e)}`))

/** The ApiError an unsuccessful response stands for (its Status when it sent one). */
export const failureOf = (response: Response): Effect.Effect<never, ApiError.ApiError> =>
  Effect.flatMap(
    Effect.promise(() => response.text()),
    (text) => {
      try {
        const body = JSON.parse(text) as Status.Status
        if (body && body.kind === "Status") return Effect.fail(ApiError.of(body))
      } catch {
        // not a Status
      }
      const message = text.trim().slice(0, 200) || response.statusText || `HTTP ${response.status}`
      return Effect.fail(ApiError.of({ ...Status.internalError(message), code: response.status }))
    }
  )

/** Connection options. */
export interface Options {
  readonly connectTimeoutMs?: number
  /** Each `Warning: 299` text the server answers, typed or raw request alike (see `Client.Config.onWarning`). */
  readonly onWarning?: (text: string) => void
}

/** Connect to `target` (no request is made yet). */
export const make = (target: Target, options: Options = {}): Connection => {
  const dispatcher = new Agent({
    connect: {
      ...(target.caPem === undefined ? {} : { ca: target.caPem }),
      ...(target.certPem === undefined ? {} : { cert: target.certPem }),
      ...(target.keyPem === undefined ? {} : { key: target.keyPem }),
      rejectUnauthorized: !target.insecure
    },
    connectTimeout: options.connectTimeoutMs ?? 3_000,
    // Watches and `logs -f` stay open: only the headers have a deadline.
    bodyTimeout: 0,
    headersTimeout: 60_000
  })
  const server = target.server
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    try {
      return await undiciFetch(input as string, { ...(init as object), dispatcher } as never)
    } catch (e) {
      if (e instanceof Error && e.name === "AbortError") throw e
      throw new Error(causeOf(e))
    }
  }) as unknown as typeof globalThis.fetch
  const onWarning = options.onWarning
  const client = Client.make({ server, fetch, ...(target.token === undefined ? {} : { token: target.token }), ...(onWarning === undefined ? {} : { onWarning }) })
  const send = (method: string, path: string, o: RawOptions = {}) =>
    Effect.tryPromise({
      try: (signal) =>
        fetch(`${server}${path}`, {
          method,
          signal,
          headers: {
            accept: o.accept ?? "application/json",
            ...(target.token === undefined ? {} : { authorization: `Bearer ${target.token}` }),
            ...(o.body === undefined ? {} : { "content-type": o.contentType ?? "application/json" })
          },
          ...(o.body === undefined ? {} : { body: typeof o.body === "string" ? o.body : JSON.stringify(o.body) })
        }),
      catch: (e) => unreachable(server, e)
    }).pipe(
      // Raw requests (apply's create and patch among them) warn as the typed client does.
      Effect.tap((response) => {
        if (onWarning !== undefined) for (const text of Warnings.messages(response.headers.get("warning"))) onWarning(text)
      })
    )
  const json = (method: string, path: string, o: RawOptions = {}) =>
    Effect.flatMap(send(method, path, o), (response) =>
      response.ok ? Effect.promise(() => response.json() as Promise<JsonObject>) : failureOf(response)
    )
  return {
    target,
    client,
    fetch,
    send,
    json,
    close: () => dispatcher.close()
  }
}
