/**
 * The REST client under the typed `Client` (client-go's `rest.RESTClient`): what one server
 * connection needs (base URL, token, fetch or in-process transport, warning sink), URL building
 * (`path`, `query`), and `request`, which sends one JSON request and maps every error Status to
 * an `ApiError`. Plain functions over a `Rest` made once per client: nothing here is allocated or
 * layered per request beyond the request itself.
 */
import { Effect, Option } from "effect"
import * as ApiError from "../../api/ApiError.js"
import type { ApiResponse } from "../../api/Http.js"
import * as Kinds from "../../model/Kinds.js"
import * as Status from "../../model/Status.js"
import type { JsonObject } from "../../object/Json.js"
import type { ResourceRef } from "../../object/ResourceRefs.js"
import type { Config, ListOptions, Transport } from "../Client.js"
import * as Warnings from "../Warnings.js"

/** One client's connection to a server, fixed when the client is made. */
export interface Rest {
  readonly server: string
  readonly token: string | undefined
  readonly fetch: typeof globalThis.fetch
  readonly transport: Transport | undefined
  readonly onWarning: ((text: string) => void) | undefined
  readonly encoder: InstanceType<typeof TextEncoder>
}

/** The connection a `Config` describes (the global fetch unless one is given). */
export const make = (config: Config): Rest => ({
  server: config.server,
  token: config.token,
  fetch: config.fetch ?? globalThis.fetch,
  transport: config.transport,
  onWarning: config.onWarning,
  encoder: new TextEncoder()
})

/** The path of a collection or object. */
export const path = (ref: ResourceRef, namespace: string | undefined, name?: string, subresource?: string): string => {
  const info = ref.kind ? Option.getOrUndefined(Kinds.kindFor(ref.apiVersion, ref.kind)) : undefined
  const plural = ref.plural ?? info?.plural ?? `${(ref.kind ?? "").toLowerCase()}s`
  const namespaced = ref.namespaced ?? info?.namespaced ?? true
  const base = ref.apiVersion.includes("/") ? `/apis/${ref.apiVersion}` : `/api/${ref.apiVersion}`
  const ns = namespaced && namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : ""
  const object = name !== undefined ? `/${encodeURIComponent(name)}` : ""
  return `${base}${ns}/${plural}${object}${subresource ? `/${subresource}` : ""}`
}

/** The query string (with its `?`, or "") of a list or watch. */
export const query = (options: ListOptions & { readonly watch?: boolean; readonly allowWatchBookmarks?: boolean }) => {
  const q = new URLSearchParams()
  if (options.labelSelector) q.set("labelSelector", options.labelSelector)
  if (options.fieldSelector) q.set("fieldSelector", options.fieldSelector)
  if (options.limit) q.set("limit", String(options.limit))
  if (options.continue) q.set("continue", options.continue)
  if (options.resourceVersion !== undefined) q.set("resourceVersion", options.resourceVersion)
  if (options.watch) q.set("watch", "true")
  if (options.watch && options.timeoutSeconds) q.set("timeoutSeconds", String(options.timeoutSeconds))
  if (options.allowWatchBookmarks) q.set("allowWatchBookmarks", "true")
  const s = q.toString()
  return s === "" ? "" : `?${s}`
}

/** The message of a thrown value (a fetch's rejection, a stream's error). */
export const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** The headers of every request: JSON, the bearer token, and `extra`. */
export const headers = (rest: Rest, extra: Record<string, string> = {}): Record<string, string> => ({
  accept: "application/json",
  ...(rest.token ? { authorization: `Bearer ${rest.token}` } : {}),
  ...extra
})

/** Hand a response's `Warning` header to `onWarning`, text by text. */
export const warn = (rest: Rest, value: string | null | undefined): void => {
  if (rest.onWarning === undefined || value === null || value === undefined) return
  for (const text of Warnings.messages(value)) rest.onWarning(text)
}

/** A failed fetch response as an `ApiError`: its Status, or an internal error with its code. */
export const failure = (response: Response): Effect.Effect<never, ApiError.ApiError> =>
  Effect.flatMap(
    Effect.promise(() => response.text()),
    (text) => {
      try {
        const body = JSON.parse(text) as Status.Status
        if (body && body.kind === "Status") return Effect.fail(ApiError.of(body))
      } catch {
        // not a Status: fall through
      }
      return Effect.fail(ApiError.of({ ...Status.internalError(text.slice(0, 200)), code: response.status }))
    }
  )

/** `url` (path and query) through the transport; a JSON body comes back as its own copy. */
export const send = (
  via: Transport,
  method: string,
  url: string,
  headers: Record<string, string>,
  body?: Uint8Array
): Effect.Effect<ApiResponse> => {
  const q = url.indexOf("?")
  return via({
    method,
    path: decodeURIComponent(q < 0 ? url : url.slice(0, q)),
    query: new URLSearchParams(q < 0 ? "" : url.slice(q + 1)),
    headers,
    body
  })
}

/** A JSON response's body, parsed anew: the handler's object may be shared with its caches. */
const copy = (body: unknown): unknown => JSON.parse(typeof body === "string" ? body : JSON.stringify(body))

/** A failed transport response as an `ApiError`: its Status, or an internal error with its code. */
export const transportFailure = (response: ApiResponse): Effect.Effect<never, ApiError.ApiError> => {
  const body = response._tag === "Json" ? copy(response.body) : undefined
  const status = body as Status.Status | undefined
  return Effect.fail(
    status?.kind === "Status"
      ? ApiError.of(status)
      : ApiError.of({ ...Status.internalError(`status ${response.status}`), code: response.status })
  )
}

/** One JSON request through the in-process transport. */
const requestByTransport = (
  rest: Rest,
  via: Transport,
  method: string,
  url: string,
  body: unknown,
  contentType: string
): Effect.Effect<JsonObject, ApiError.ApiError> =>
  Effect.flatMap(
    send(
      via,
      method,
      url,
      headers(rest, body === undefined ? {} : { "content-type": contentType }),
      body === undefined ? undefined : rest.encoder.encode(JSON.stringify(body))
    ),
    (response) => {
      warn(rest, response.headers["warning"])
      return response.status >= 400 || response._tag !== "Json"
        ? transportFailure(response)
        : Effect.succeed(copy(response.body) as JsonObject)
    }
  )

/** One JSON request through fetch. */
const requestByFetch = (
  rest: Rest,
  method: string,
  url: string,
  body: unknown,
  contentType: string
): Effect.Effect<JsonObject, ApiError.ApiError> =>
  Effect.gen(function* () {
    const doFetch = rest.fetch
    const response = yield* Effect.tryPromise({
      try: (signal) =>
        doFetch(`${rest.server}${url}`, {
          method,
          headers: headers(rest, body === undefined ? {} : { "content-type": contentType }),
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal
        }),
      catch: (e) => ApiError.of(Status.serviceUnavailable(`cannot reach ${rest.server}: ${messageOf(e)}`))
    })
    warn(rest, response.headers.get("warning"))
    if (!response.ok) return yield* failure(response)
    return (yield* Effect.promise(() => response.json())) as JsonObject
  })

/** One JSON request (`url`: path and query): the response object, or the error Status as an `ApiError`. */
export const request = (
  rest: Rest,
  method: string,
  url: string,
  body?: unknown,
  contentType = "application/json"
): Effect.Effect<JsonObject, ApiError.ApiError> =>
  rest.transport !== undefined
    ? requestByTransport(rest, rest.transport, method, url, body, contentType)
    : requestByFetch(rest, method, url, body, contentType)
