/**
 * The HTTPS front of the API server: `node:https` (HTTP/1.1) adapted to core's request handler.
 * It owns what only the wire knows: body size, per-client in-flight limits, the request timeout,
 * backpressure on watch streams, client disconnects, and a graceful shutdown.
 *
 *   socket ─▶ limits (429) ─▶ read body ≤ 3 MiB (413) ─▶ handle ─(60 s, 504)─▶ JSON | stream
 *   accept ─▶ ConnectionGuard (per-address cap; TLS + first request's headers within 10 s)
 *   watch  ─▶ per-user count and WatchBudget (429) ─▶ WatchWriter (paced; stalled ones closed)
 *   shutdown: stop accepting ─▶ end watches ─▶ drain requests (bounded) ─▶ close sockets
 *
 * A client is known here only by its bearer token (a hash prefix, never the token) or its remote
 * address: authentication happens inside the handler, after the limits.
 *
 * This file is the bridge from a request to core's handler; its parts are in internal/:
 * ApiListener (TLS, timeouts), ClientSlots and UserWatches (limits), RequestBody, JsonResponse
 * and StreamResponse (the wire), ServerDrain (shutdown).
 */
import { type Http, Impersonation, Status, WatchBudget } from "@koder/fleet-core"
import { Cause, Deferred, Duration, Effect, Fiber, Runtime, type Scope } from "effect"
import { createHash } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { TLSSocket } from "node:tls"
import type { ListenError } from "./DaemonError.js"
import * as ApiListener from "./internal/ApiListener.js"
import * as ClientSlots from "./internal/ClientSlots.js"
import * as ConnectionGuard from "./internal/ConnectionGuard.js"
import * as JsonResponse from "./internal/JsonResponse.js"
import * as RequestBody from "./internal/RequestBody.js"
import * as ServerDrain from "./internal/ServerDrain.js"
import * as StreamResponse from "./internal/StreamResponse.js"
import * as UserWatches from "./internal/UserWatches.js"
import * as WatchWriter from "./internal/WatchWriter.js"
import * as WebSocketUpgrade from "./internal/WebSocketUpgrade.js"
import type { Duplex } from "node:stream"

/** A request as the core handler takes it (authentication fills in the user). */
export type Request = Omit<Http.ApiRequest, "user">

/** Core's API handler: never fails, every error is already a Status response. */
export type Handle = (request: Request) => Effect.Effect<Http.ApiResponse>

/** Bounds on what one client may ask of the server. */
export interface Limits {
  /** Largest request body accepted (default 3 MiB); larger ones get 413. */
  readonly maxBodyBytes: number
  /** Concurrent non-watch requests per client (default 100); more get 429. */
  readonly maxInFlight: number
  /**
   * Concurrent watches per client and per user (default 250); more get 429. A client is its
   * bearer token or address (counted before authentication), a user who it authenticates as
   * (counted after, so many tokens of one ServiceAccount share one count).
   */
  readonly maxWatches: number
  /** Bytes one user's watches may owe their clients (WatchBudget; default 64 MiB, 0: no limit); past it, 429 or closed. */
  readonly watchBudgetPerUser: number
  /** How long a watch may wait for its client to read before it is closed (default 60 s). */
  readonly watchStallTimeout: Duration.DurationInput
  /** From accept to the first request's headers, TLS handshake included (default 10 s); then closed. */
  readonly firstRequestTimeout: Duration.DurationInput
  /** How long a kept-alive connection may sit idle between requests (default 5 s, Node's). */
  readonly keepAliveTimeout: Duration.DurationInput
  /** Connections one remote address may hold at once (default 4,096; 0: no limit). */
  readonly maxConnectionsPerAddress: number
  /** Time to read the body and produce a non-watch response (default 60 s); then 504. */
  readonly requestTimeout: Duration.DurationInput
  /** How long shutdown waits for in-flight requests before cutting them off (default 10 s). */
  readonly shutdownGrace: Duration.DurationInput
}

/** The defaults of `Limits`. */
export const defaults: Limits = {
  maxBodyBytes: 3 * 1024 * 1024,
  maxInFlight: 100,
  maxWatches: 250,
  watchBudgetPerUser: WatchBudget.defaultBytesPerUser,
  watchStallTimeout: WatchWriter.defaults.stallTimeout,
  firstRequestTimeout: ConnectionGuard.defaults.firstRequestTimeout,
  keepAliveTimeout: "5 seconds",
  maxConnectionsPerAddress: ConnectionGuard.defaults.maxPerAddress,
  requestTimeout: "60 seconds",
  shutdownGrace: "10 seconds"
}

/** Where to listen, with what certificate, within which limits. */
export interface Options extends Partial<Limits> {
  readonly host: string
  /** 0 picks a free port. */
  readonly port: number
  readonly tls: { readonly cert: string; readonly key: string }
  /** Ask clients for a certificate and verify it against this CA (the hub: members' certificates). */
  readonly clientCa?: string
}

/** A listening server. */
export interface HttpServer {
  /** The bound address (the real port when 0 was asked for). */
  readonly address: { readonly host: string; readonly port: number }
  /** Start answering with `handle`; until then every request gets 503. */
  readonly serve: (handle: Handle) => void
  /** Whether shutdown has begun (readyz turns false). */
  readonly draining: () => boolean
  /** Graceful shutdown (also run when the scope closes); idempotent. */
  readonly shutdown: Effect.Effect<void>
  /** Requests and watches being served right now. */
  readonly inFlight: () => { readonly requests: number; readonly watches: number }
}

const healthPaths = new Set(["/healthz", "/readyz", "/livez"])
const watchPath = /^\/(api\/[^/]+|apis\/[^/]+\/[^/]+)\/watch\//

/** Is this a watch (served as a long-lived stream, limited separately, never timed out)? */
export const isWatch = (path: string, query: URLSearchParams): boolean => {
  const w = query.get("watch")
  return w === "true" || w === "1" || watchPath.test(path) || followsLog(path, query)
}

// A followed pod log is long-running like a watch: it holds a watch slot and has no request timeout.
const logPath = /^\/api\/v1\/namespaces\/[^/]+\/pods\/[^/]+\/log$/
/** Is this a followed pod log? */
const followsLog = (path: string, query: URLSearchParams): boolean => {
  const f = query.get("follow")
  return (f === "true" || f === "1") && logPath.test(path)
}

/** The identity the in-flight limits count against: a token's hash prefix, else the address. */
export const clientKey = (headers: IncomingMessage["headers"], remoteAddress: string | undefined): string => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? "")
  if (m?.[1] !== undefined) return `token:${createHash("sha256").update(m[1]).digest("hex").slice(0, 16)}`
  return `addr:${remoteAddress ?? "unknown"}`
}

/**
 * The header carrying the verified client certificate's subject to the authenticator. It is set
 * only here, from a TLS handshake Node verified against the client CA; a request that sends one
 * itself has it removed first.
 */
export const clientCertificateHeader = "x-fleet-verified-client-certificate"

/** The verified client certificate of a request, as `clientCertificateHeader` carries it. */
export interface VerifiedCertificate {
  readonly commonName: string
  readonly organizations: ReadonlyArray<string>
  readonly serial: string
}

const verifiedCertificate = (req: IncomingMessage): string | undefined => {
  const socket = req.socket as TLSSocket
  if (socket.authorized !== true || typeof socket.getPeerCertificate !== "function") return undefined
  const peer = socket.getPeerCertificate()
  if (peer === undefined || peer.subject === undefined) return undefined
  const o = peer.subject.O
  const verified: VerifiedCertificate = { commonName: String(peer.subject.CN ?? ""), organizations: Array.isArray(o) ? o.map(String) : o === undefined ? [] : [String(o)], serial: String(peer.serialNumber ?? "").toLowerCase() }
  return JSON.stringify(verified)
}

/** The request's headers by lower-case name, repeated impersonation headers kept apart. */
const lowerCaseHeaders = (req: IncomingMessage): Record<string, string | undefined> => {
  const out: Record<string, string | undefined> = {}
  let impersonating = false
  for (const [name, value] of Object.entries(req.headers)) {
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value
    if (name.startsWith("impersonate-")) impersonating = true
  }
  delete out[clientCertificateHeader]
  const certificate = verifiedCertificate(req)
  if (certificate !== undefined) out[clientCertificateHeader] = certificate
  // Each Impersonate-Group line is one group, and a group name may hold ", ": their values are
  // kept apart with Impersonation.valueSeparator (a newline, which no header value can hold).
  if (impersonating) {
    for (const [name, values] of Object.entries(req.headersDistinct)) if (name.startsWith("impersonate-") && values !== undefined) out[name] = values.join(Impersonation.valueSeparator)
  }
  return out
}

/** Split `req.url` by hand: `new URL` would read a path starting with `//` as a host. */
const splitUrl = (url: string): { path: string; query: URLSearchParams } | undefined => {
  const q = url.indexOf("?")
  const path = q < 0 ? url : url.slice(0, q)
  if (!path.startsWith("/")) return undefined
  try {
    // The router decodes each segment; reject what it could not decode.
    for (const segment of path.split("/")) decodeURIComponent(segment)
  } catch {
    return undefined
  }
  return { path, query: new URLSearchParams(q < 0 ? "" : url.slice(q + 1)) }
}

/** One server's state, shared by its request path and its shutdown. */
interface State {
  readonly limits: Limits
  /** `limits.requestTimeout`, decoded once. */
  readonly timeout: Duration.Duration
  readonly runFork: <A, E>(effect: Effect.Effect<A, E>) => Fiber.RuntimeFiber<A, E>
  readonly guard: ConnectionGuard.ConnectionGuard
  readonly clients: ClientSlots.ClientSlots
  readonly streams: StreamResponse.Streams
  /** Non-watch requests being served. */
  readonly requests: Set<Fiber.RuntimeFiber<void>>
  /** Watches (and followed logs) being served. */
  readonly watches: Set<Fiber.RuntimeFiber<void>>
  /** Sockets handed to a WebSocket session: no longer the HTTP server's to close. */
  readonly upgraded: Set<Duplex>
  /** Core's handler, once `serve` was called. */
  handle: Handle | undefined
  /** Shutdown has begun. */
  draining: boolean
  readonly upgrader: WebSocketUpgrade.Upgrader
}

/** Answer 413 without buffering the rest of the body (which is read and dropped). */
const tooLarge = (state: State, req: IncomingMessage, res: ServerResponse, neverInvited: boolean) => {
  RequestBody.discard(req)
  // A client told not to continue never sends the body the connection still owes: close it.
  JsonResponse.send(res, JsonResponse.ofStatus(Status.requestEntityTooLarge(`limit is ${state.limits.maxBodyBytes} bytes`)), state.draining || neverInvited)
}

/** Write the handler's response: JSON at once, a stream chunk by chunk. */
const respond = (state: State, res: ServerResponse, response: Http.ApiResponse, close: boolean): Effect.Effect<void> => {
  if (response._tag === "Json") return Effect.sync(() => JsonResponse.send(res, response, close || state.draining))
  if (response._tag === "Upgrade") return Effect.sync(() => JsonResponse.send(res, JsonResponse.ofStatus(Status.badRequest("this request must ask for a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)")), true))
  return StreamResponse.serve(state.streams, res, response)
}

/** Serve one request: limits, body, core's handler under the request timeout, the response; its fiber is tracked for shutdown. */
const onRequest = (state: State, req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => {
  state.guard.requested(req.socket)
  const url = splitUrl(req.url ?? "/")
  if (url === undefined) return JsonResponse.send(res, JsonResponse.ofStatus(Status.badRequest(`malformed request path ${JSON.stringify(req.url)}`)))
  if (state.handle === undefined || (state.draining && !healthPaths.has(url.path))) {
    return JsonResponse.send(res, JsonResponse.ofStatus(Status.serviceUnavailable("the server is not serving requests"), { "retry-after": "1" }), true)
  }
  const serve = state.handle
  const watch = isWatch(url.path, url.query)
  const client = clientKey(req.headers, req.socket.remoteAddress)
  // Health probes are never refused for load: they are how orchestrators judge liveness.
  const release = healthPaths.has(url.path) ? () => {} : ClientSlots.admit(state.clients, client, watch)
  if (release === undefined) {
    const what = watch ? `${state.limits.maxWatches} concurrent watches` : `${state.limits.maxInFlight} concurrent requests`
    return JsonResponse.send(res, JsonResponse.ofStatus(Status.tooManyRequests(`Too many requests: this client already has ${what}, please try again later.`, 1), { "retry-after": "1" }))
  }
  // The slot frees once the response is handed to the socket ('finish'), not when the socket
  // write completes ('close'), which lags under load and over-counts busy clients.
  res.once("finish", release)
  res.once("close", release)

  const bodyRead = RequestBody.read(req, res, state.limits.maxBodyBytes, expectsContinue)
  const request = Effect.gen(function* () {
    const body = yield* bodyRead
    return yield* serve({ method: req.method ?? "GET", path: url.path, query: url.query, headers: lowerCaseHeaders(req), body, client })
  })
  let timedOut = false
  const { timeout } = state
  const answered: Effect.Effect<Http.ApiResponse | RequestBody.BodyTooLarge | RequestBody.ClientGone> = (
    watch
      ? request
      : Effect.timeoutTo(request, {
          duration: timeout,
          onTimeout: () => {
            timedOut = true
            return JsonResponse.ofStatus(Status.timeout(`request did not complete within ${Duration.format(timeout)}`, 1), { "retry-after": "1" })
          },
          onSuccess: (r) => r
        })
  ).pipe(Effect.catchAll((e) => Effect.succeed(e)))
  const program = Effect.flatMap(answered, (r) => {
    if (r instanceof RequestBody.BodyTooLarge) return Effect.sync(() => tooLarge(state, req, res, expectsContinue && r.declared))
    if (r instanceof RequestBody.ClientGone) return Effect.void
    // A timed-out request may still owe part of its body: do not reuse its connection.
    return respond(state, res, r, timedOut)
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        if (res.headersSent) res.destroy()
        else JsonResponse.send(res, JsonResponse.ofStatus(Status.internalError(String(Cause.squash(cause)))))
      })
    )
  )

  const fiber = state.runFork(program)
  const set = watch ? state.watches : state.requests
  set.add(fiber)
  fiber.addObserver(() => set.delete(fiber))
  // A client that goes away interrupts its request (and so its watch's store subscription).
  res.once("close", () => {
    if (!res.writableFinished) state.runFork(Fiber.interrupt(fiber))
  })
}

/**
 * Serve one upgrade request (`kubectl exec`, `attach`, `port-forward`): core's handler decides
 * (authentication, RBAC, consent, admission) within the request timeout, then the socket is
 * upgraded and the session runs as a tracked long-lived fiber, like a watch.
 */
const onUpgrade = (state: State, req: IncomingMessage, socket: Duplex, head: Buffer) => {
  state.guard.requested(req.socket)
  socket.on("error", () => socket.destroy())
  const url = splitUrl(req.url ?? "/")
  if (url === undefined) return WebSocketUpgrade.refuse(socket, 400, Status.badRequest(`malformed request path ${JSON.stringify(req.url)}`))
  if (state.handle === undefined || state.draining) return WebSocketUpgrade.refuse(socket, 503, Status.serviceUnavailable("the server is not serving requests"), { "retry-after": "1" })
  const serve = state.handle
  const client = clientKey(req.headers, req.socket.remoteAddress)
  const release = ClientSlots.admit(state.clients, client, true)
  if (release === undefined) {
    return WebSocketUpgrade.refuse(socket, 429, Status.tooManyRequests(`Too many requests: this client already has ${state.limits.maxWatches} concurrent watches and streams, please try again later.`, 1), { "retry-after": "1" })
  }
  socket.once("close", release)
  state.upgraded.add(socket)
  socket.once("close", () => state.upgraded.delete(socket))
  const program = Effect.gen(function* () {
    const response = yield* Effect.timeoutTo(serve({ method: req.method ?? "GET", path: url.path, query: url.query, headers: lowerCaseHeaders(req), body: undefined, client }), {
      duration: state.timeout,
      onTimeout: () => JsonResponse.ofStatus(Status.timeout(`request did not complete within ${Duration.format(state.timeout)}`, 1)),
      onSuccess: (r): Http.ApiResponse => r
    })
    if (response._tag !== "Upgrade") {
      const status = response._tag === "Json" ? response.status : 400
      const body = response._tag === "Json" ? response.body : Status.badRequest("this resource does not stream")
      return WebSocketUpgrade.refuse(socket, status, body, response.headers)
    }
    if (socket.destroyed) return
    const ws = yield* Effect.promise(() => state.upgrader.accept(req, socket, head, response.protocol))
    const messages = WebSocketUpgrade.messageSocket(ws)
    // A shutdown ends sessions as it ends watches: at once, not after the drain's wait.
    yield* response.serve(messages).pipe(
      Effect.raceFirst(Deferred.await(state.streams.stopping)),
      Effect.ensuring(Effect.sync(() => messages.close(1000)))
    )
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        if (!socket.destroyed) WebSocketUpgrade.refuse(socket, 500, Status.internalError(String(Cause.squash(cause))))
      })
    )
  )
  const fiber = state.runFork(program)
  state.watches.add(fiber)
  fiber.addObserver(() => state.watches.delete(fiber))
}

/** Listen on `options.host:port`; the server shuts down gracefully when the scope closes. */
export const make = (options: Options): Effect.Effect<HttpServer, ListenError, Scope.Scope> =>
  Effect.gen(function* () {
    const limits: Limits = { ...defaults, ...options }
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const { server, guard } = ApiListener.create({
      tls: options.tls,
      ...(options.clientCa === undefined ? {} : { clientCa: options.clientCa }),
      firstRequestTimeout: limits.firstRequestTimeout,
      keepAliveTimeout: limits.keepAliveTimeout,
      maxConnectionsPerAddress: limits.maxConnectionsPerAddress
    })
    const state: State = {
      limits,
      timeout: Duration.decode(limits.requestTimeout),
      runFork,
      guard,
      clients: ClientSlots.make(limits.maxInFlight, limits.maxWatches),
      streams: {
        stopping: yield* Deferred.make<void>(),
        // Watches per authenticated user, and the bytes they owe their clients (issue 29).
        users: UserWatches.make(limits.maxWatches, limits.watchBudgetPerUser),
        pacing: { window: WatchWriter.defaults.window, stallTimeout: limits.watchStallTimeout },
        runFork
      },
      requests: new Set(),
      watches: new Set(),
      upgraded: new Set(),
      handle: undefined,
      draining: false,
      upgrader: WebSocketUpgrade.make()
    }
    server.on("request", (req, res) => onRequest(state, req, res, false))
    server.on("checkContinue", (req, res) => onRequest(state, req, res, true))
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => onUpgrade(state, req, socket, head))
    const address = yield* ApiListener.listen(server, options.host, options.port)

    const finished = yield* Deferred.make<void>()
    const shutdown = Effect.suspend(() => {
      if (state.draining) return Deferred.await(finished)
      state.draining = true
      const { requests, watches } = state
      return ServerDrain.drain({ server, stopping: state.streams.stopping, watches, requests, upgraded: state.upgraded, shutdownGrace: limits.shutdownGrace }).pipe(
        Effect.ensuring(Deferred.succeed(finished, undefined))
      )
    })
    yield* Effect.addFinalizer(() => shutdown)

    return {
      address: { host: address.address, port: address.port },
      serve: (h) => {
        state.handle = h
      },
      draining: () => state.draining,
      shutdown,
      inFlight: () => ({ requests: state.requests.size, watches: state.watches.size })
    }
  })
