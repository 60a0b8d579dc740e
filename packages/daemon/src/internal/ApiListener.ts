/**
 * The API's TLS listener: a plain `node:https` server (a quarter of @effect/platform's HttpServer
 * CPU per request on a trivial handler: docs/performance.md) with the first-request and keep-alive timeouts, the ConnectionGuard, a socket write
 * buffer larger than any response, and bad requests answered 400.
 */
import { Duration, Effect } from "effect"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import { ListenError } from "../DaemonError.js"
import * as ConnectionGuard from "./ConnectionGuard.js"

/** The listener's certificate and connection bounds. */
export interface Options {
  readonly tls: { readonly cert: string; readonly key: string }
  /** Verify client certificates against this CA (asked for, not required: tokens still work). */
  readonly clientCa?: string
  /** From accept to the first request's headers, TLS handshake included. */
  readonly firstRequestTimeout: Duration.DurationInput
  /** How long a kept-alive connection may sit idle between requests. */
  readonly keepAliveTimeout: Duration.DurationInput
  /** Connections one remote address may hold at once (0: no limit). */
  readonly maxConnectionsPerAddress: number
}

/** A server not yet listening, and the guard on its connections. */
export interface ApiListener {
  readonly server: Server
  readonly guard: ConnectionGuard.ConnectionGuard
}

/**
 * Socket write buffer size. Node pauses a keep-alive socket when a new request arrives while the
 * last response still waits for 'drain'; on Node 20 a TLS socket can still emit data after that
 * pause, which the parser rejects ("Parse Error: Paused") and the connection is reset (seen with
 * 16–64 KiB bodies over one connection). With a buffer larger than the responses we send, no
 * response leaves the socket waiting for a drain. Node 20's https server ignores the
 * `highWaterMark` option, so the buffer is set on each connection.
 */
const socketHighWaterMark = 8 * 1024 * 1024

/** Give one connection the large write buffer. */
const enlargeWriteBuffer = (socket: { _writableState?: { highWaterMark: number } }) => {
  if (socket._writableState !== undefined) socket._writableState.highWaterMark = socketHighWaterMark
}

/** The server and its guard, with no request handler yet (add 'request' and 'checkContinue'). */
export const create = (options: Options): ApiListener => {
  const firstRequestMillis = Duration.toMillis(Duration.decode(options.firstRequestTimeout))
  const server: Server = createServer({
    cert: options.tls.cert,
    key: options.tls.key,
    ...(options.clientCa === undefined ? {} : { requestCert: true, rejectUnauthorized: false, ca: options.clientCa }),
    handshakeTimeout: firstRequestMillis,
    // How often Node checks headersTimeout (default 30 s, which would triple a 10 s bound).
    connectionsCheckingInterval: Math.max(100, Math.min(1000, firstRequestMillis / 2))
  })
  // Headers of a later request on a kept-alive connection, and idle time between requests. A
  // request's timeouts stop once its headers are in, so watches are never cut by them.
  server.headersTimeout = firstRequestMillis
  server.keepAliveTimeout = Duration.toMillis(Duration.decode(options.keepAliveTimeout))
  const guard = ConnectionGuard.attach(server, { firstRequestTimeout: options.firstRequestTimeout, maxPerAddress: options.maxConnectionsPerAddress })
  server.on("secureConnection", enlargeWriteBuffer)
  server.on("clientError", (_err, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n")
    else socket.destroy()
  })
  return { server, guard }
}

/** Bind `server` to `host:port` (0: a free port); the bound address. */
export const listen = (server: Server, host: string, port: number): Effect.Effect<AddressInfo, ListenError> =>
  Effect.async<AddressInfo, ListenError>((resume) => {
    const onError = (e: Error) => resume(Effect.fail(new ListenError({ message: `cannot listen on ${host}:${port}: ${e.message}` })))
    server.once("error", onError)
    server.listen(port, host, () => {
      server.off("error", onError)
      resume(Effect.succeed(server.address() as AddressInfo))
    })
  })
