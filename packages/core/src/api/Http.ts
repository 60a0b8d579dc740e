/**
 * The API server's view of HTTP: a request already read off the wire (method, path, query,
 * lower-cased headers, body bytes, the authenticated user) and a response that is either one JSON
 * document or a stream of bytes (watches). The daemon adapts `node:http` to this; core stays
 * free of any HTTP library, and tests can call the handler directly.
 */
import type { Effect, Stream } from "effect"
import type { ApiError } from "./ApiError.js"

/** Who is making the request, as authentication established it. */
export interface UserInfo {
  readonly name: string
  readonly uid: string
  readonly groups: ReadonlyArray<string>
  /** Extra attributes (OIDC claims, `Impersonate-Extra-*`), by key. */
  readonly extra?: Readonly<Record<string, ReadonlyArray<string>>>
}

/** One HTTP request. */
export interface ApiRequest {
  readonly method: string
  /** The decoded path, without the query string, e.g. `/api/v1/namespaces/default/pods`. */
  readonly path: string
  readonly query: URLSearchParams
  /**
   * Header names in lower case; repeated headers joined with ", " (the `impersonate-*` ones with
   * "\n", `Impersonation.valueSeparator`: one group name may hold ", ").
   */
  readonly headers: Readonly<Record<string, string | undefined>>
  /** The body, already bounded in size by the HTTP layer; `undefined` when there is none. */
  readonly body: Uint8Array | undefined
  readonly user: UserInfo
  /** A stable identity of the client for in-flight limits (user name, or remote address). */
  readonly client: string
}

/** A complete JSON response. */
export interface JsonResponse {
  readonly _tag: "Json"
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
}

/** A streamed response (watches); the stream ends when the watch ends. */
export interface StreamResponse {
  readonly _tag: "Stream"
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Stream.Stream<Uint8Array, never>
  /**
   * Watches: the user whose watch budget (`WatchBudget`) the stream's unsent bytes count against,
   * and how many bytes its initial state owes. The HTTP layer, which sees what the socket has not
   * yet taken, does the accounting; each element of `body` is then one whole event.
   */
  readonly watch?: { readonly user: string; readonly initialBytes: number }
}

/**
 * A WebSocket the HTTP layer upgraded for a handler: binary messages both ways. `send` resolves
 * once the message is handed to the socket; `buffered` is what the socket has yet to write.
 */
export interface MessageSocket {
  readonly send: (message: Uint8Array) => Promise<void>
  readonly buffered: () => number
  /** The client's messages; the iteration ends when the socket closes. */
  readonly messages: AsyncIterable<Uint8Array>
  /** Close (1000 unless told), idempotent. */
  readonly close: (code?: number, reason?: string) => void
}

/**
 * A streaming upgrade (`pods/exec`, `attach`, `portforward` over WebSocket): the HTTP layer
 * completes the handshake with `protocol`, then runs `serve` on the socket until it ends. Errors
 * before the upgrade are ordinary Status responses.
 */
export interface UpgradeResponse {
  readonly _tag: "Upgrade"
  readonly status: 101
  readonly headers: Readonly<Record<string, string>>
  /** An upgrade has no HTTP body. */
  readonly body?: undefined
  /** The subprotocol chosen among the client's offer. */
  readonly protocol: string
  readonly serve: (socket: MessageSocket) => Effect.Effect<void>
}

/** A byte connection (a forwarded port): bytes both ways, half-close, close. */
export interface ByteConnection {
  readonly write: (bytes: Uint8Array) => Promise<void>
  /** Bytes from the far end; the iteration ends at its end of stream (or a reset). */
  readonly data: AsyncIterable<Uint8Array>
  /** No more bytes from this side (TCP half-close). */
  readonly end: () => void
  /** Tear it down (both ways), idempotent. */
  readonly close: () => void
}

/** What a handler answers. */
export type ApiResponse = JsonResponse | StreamResponse | UpgradeResponse

/** Is this request asking for a WebSocket upgrade? */
export const isWebSocket = (request: Pick<ApiRequest, "headers">): boolean => (request.headers["upgrade"] ?? "").toLowerCase() === "websocket"

/** The subprotocols a WebSocket request offers, in its order. */
export const offeredProtocols = (request: Pick<ApiRequest, "headers">): ReadonlyArray<string> =>
  (request.headers["sec-websocket-protocol"] ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")

/** A request handler: every failure is an `ApiError` (a Status). */
export type Handler = (request: ApiRequest) => Effect.Effect<ApiResponse, ApiError>

/** A JSON response. */
export const json = (status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): JsonResponse => ({
  _tag: "Json",
  status,
  headers: { "content-type": "application/json", ...headers },
  body
})
