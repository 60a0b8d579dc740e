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
 */
import { Http, Impersonation, Status, WatchBudget } from "@koder/fleet-core"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Runtime, type Scope, Stream } from "effect"
import { createHash } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import { ListenError } from "./DaemonError.js"
import * as ConnectionGuard from "./internal/ConnectionGuard.js"
import * as WatchWriter from "./internal/WatchWriter.js"

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

// How much of an oversized body is read and dropped before the connection is cut instead.
const discardLimit = 16 * 1024 * 1024

const healthPaths = new Set(["/healthz", "/readyz", "/livez"])
const watchPath = /^\/(api\/[^/]+|apis\/[^/]+\/[^/]+)\/watch\//

/** Is this a watch (served as a long-lived stream, limited separately, never timed out)? */
export const isWatch = (path: string, query: URLSearchParams): boolean => {
  const w = query.get("watch")
  return w === "true" || w === "1" || watchPath.test(path) || followsLog(path, query)
}

// A followed pod log is long-running like a watch: it holds a watch slot and has no request timeout.
const logPath = /^\/api\/v1\/namespaces\/[^/]+\/pods\/[^/]+\/log$/
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

const lowerCaseHeaders = (req: IncomingMessage): Record<string, string | undefined> => {
  const out: Record<string, string | undefined> = {}
  let impersonating = false
  for (const [name, value] of Object.entries(req.headers)) {
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value
    if (name.startsWith("impersonate-")) impersonating = true
  }
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

const sendJson = (res: ServerResponse, response: Http.JsonResponse, close = false) => {
  if (res.headersSent || res.destroyed) return
  const body = typeof response.body === "string" ? response.body : JSON.stringify(response.body)
  const headers: Record<string, string | number> = { ...response.headers, "content-length": Buffer.byteLength(body) }
  if (close) headers["connection"] = "close"
  res.writeHead(response.status, headers)
  res.end(body)
}

const statusResponse = (status: Status.Status, headers: Record<string, string> = {}) => Http.json(status.code ?? 500, status, headers)

class BodyTooLarge {
  readonly _tag = "BodyTooLarge"
  /** Refused on its declared length, before any of it was read. */
  constructor(readonly declared: boolean) {}
}
class ClientGone {
  readonly _tag = "ClientGone"
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

const enlargeWriteBuffer = (socket: { _writableState?: { highWaterMark: number } }) => {
  if (socket._writableState !== undefined) socket._writableState.highWaterMark = socketHighWaterMark
}

/**
 * Read the body, failing fast (without reading on) once it passes `max` bytes. Listening starts
 * at once, inside the 'request' event, so the body flows while the handler's fiber starts.
 */
const readBody = (req: IncomingMessage, res: ServerResponse, max: number, expectsContinue: boolean): Effect.Effect<Uint8Array | undefined, BodyTooLarge | ClientGone> => {
  const declared = Number(req.headers["content-length"] ?? "0")
  if (Number.isFinite(declared) && declared > max) return Effect.fail(new BodyTooLarge(true))
  // `Expect: 100-continue`: invite the body only once its declared size is known to be fine.
  if (expectsContinue) res.writeContinue()
  if (req.readableEnded) return Effect.succeed(undefined)
  const result = new Promise<Uint8Array | undefined | BodyTooLarge | ClientGone>((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const cleanup = () => {
      req.off("data", onData)
      req.off("end", onEnd)
      req.off("error", onGone)
      req.off("aborted", onGone)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > max) {
        cleanup()
        req.pause()
        resolve(new BodyTooLarge(false))
      } else chunks.push(chunk)
    }
    const onEnd = () => {
      cleanup()
      resolve(size === 0 ? undefined : new Uint8Array(Buffer.concat(chunks, size)))
    }
    const onGone = () => {
      cleanup()
      resolve(new ClientGone())
    }
    req.on("data", onData)
    req.once("end", onEnd)
    req.once("error", onGone)
    req.once("aborted", onGone)
  })
  return Effect.flatMap(Effect.promise(() => result), (r) =>
    r instanceof BodyTooLarge || r instanceof ClientGone ? Effect.fail(r) : Effect.succeed(r)
  )
}

/** Write one chunk, waiting for 'drain' when the socket's buffer is full. */
const writeChunk = (res: ServerResponse, chunk: Uint8Array): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (res.destroyed || res.writableEnded) return resume(Effect.interrupt)
    if (res.write(chunk)) return resume(Effect.void)
    const done = () => {
      res.off("drain", done)
      res.off("close", done)
      resume(res.destroyed ? Effect.interrupt : Effect.void)
    }
    res.once("drain", done)
    res.once("close", done)
    return Effect.sync(() => {
      res.off("drain", done)
      res.off("close", done)
    })
  })

/** Listen on `options.host:port`; the server shuts down gracefully when the scope closes. */
export const make = (options: Options): Effect.Effect<HttpServer, ListenError, Scope.Scope> =>
  Effect.gen(function* () {
    const limits: Limits = { ...defaults, ...options }
    const timeout = Duration.decode(limits.requestTimeout)
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const stopping = yield* Deferred.make<void>()

    let handle: Handle | undefined
    let draining = false
    const requests = new Set<Fiber.RuntimeFiber<void>>()
    const watches = new Set<Fiber.RuntimeFiber<void>>()
    const perClient = new Map<string, { requests: number; watches: number }>()
    // Watches per authenticated user, and the bytes they owe their clients (issue 29).
    const perUser = new Map<string, number>()
    const budget = WatchBudget.make(limits.watchBudgetPerUser)
    const pacing: WatchWriter.Options = { window: WatchWriter.defaults.window, stallTimeout: limits.watchStallTimeout }

    const admit = (client: string, watch: boolean): (() => void) | undefined => {
      const count = perClient.get(client) ?? { requests: 0, watches: 0 }
      if (watch ? count.watches >= limits.maxWatches : count.requests >= limits.maxInFlight) return undefined
      if (watch) count.watches++
      else count.requests++
      perClient.set(client, count)
      let released = false
      return () => {
        if (released) return
        released = true
        if (watch) count.watches--
        else count.requests--
        if (count.requests === 0 && count.watches === 0) perClient.delete(client)
      }
    }

    /**
     * Answer 413 without buffering the rest of the body. The rest is read and dropped (up to
     * `discardLimit` bytes, then the connection is cut): closing a socket with unread input makes
     * the kernel send a reset, which would often destroy the 413 before the client reads it.
     */
    const tooLarge = (req: IncomingMessage, res: ServerResponse, neverInvited: boolean) => {
      let discarded = 0
      req.on("data", (chunk: Buffer) => {
        discarded += chunk.length
        if (discarded > discardLimit) req.socket.destroy()
      })
      req.resume()
      // A client told not to continue never sends the body the connection still owes: close it.
      sendJson(res, statusResponse(Status.requestEntityTooLarge(`limit is ${limits.maxBodyBytes} bytes`)), draining || neverInvited)
    }

    const respond = (res: ServerResponse, response: Http.ApiResponse, close: boolean): Effect.Effect<void> => {
      if (response._tag === "Json") return Effect.sync(() => sendJson(res, response, close || draining))
      return Effect.gen(function* () {
        if (res.destroyed) return
        const backlog = response.watch === undefined ? undefined : admitWatch(res, response.watch)
        if (backlog === false) return
        res.writeHead(response.status, response.headers)
        res.flushHeaders() // a watcher learns at once that its watch is established
        const written =
          backlog === undefined
            ? Stream.runForEach(response.body, (chunk) => writeChunk(res, chunk))
            : WatchWriter.write(res, response.body, backlog, pacing, (why) =>
                runFork(Effect.logInfo(`watch of user ${JSON.stringify(backlog.user)} closed: ${why === "stalled" ? `its client read nothing for ${Duration.format(limits.watchStallTimeout)}` : "its user's watch budget is spent"}`))
              )
        // On shutdown the stream ends as if the watch were over, so the client sees a clean end.
        // The race is set up once per watch: per-chunk combinators would fork per chunk.
        yield* Effect.raceFirst(written, Deferred.await(stopping))
        if (!res.destroyed) res.end()
      })
    }

    /**
     * A watch's user may open it: under the per-user count and within its WatchBudget. Answers
     * 429 and gives `false` when not; the count and the budget are returned when the response ends.
     */
    const admitWatch = (res: ServerResponse, watch: NonNullable<Http.StreamResponse["watch"]>): WatchBudget.Backlog | false => {
      const count = perUser.get(watch.user) ?? 0
      const refuse = (message: string, retryAfter: number) => {
        sendJson(res, statusResponse(Status.tooManyRequests(message, retryAfter), { "retry-after": String(retryAfter) }))
        return false as const
      }
      if (count >= limits.maxWatches) return refuse(`Too many requests: user ${JSON.stringify(watch.user)} already has ${limits.maxWatches} concurrent watches, please try again later.`, 1)
      const backlog = budget.admit(watch.user, watch.initialBytes)
      if (backlog === undefined) {
        return refuse(
          `Too many requests: the watches of user ${JSON.stringify(watch.user)} owe their clients ${budget.used(watch.user)} bytes not yet read (the budget is ${budget.bytesPerUser}), please try again later.`,
          5
        )
      }
      perUser.set(watch.user, count + 1)
      let released = false
      const release = () => {
        if (released) return
        released = true
        backlog.release()
        const left = (perUser.get(watch.user) ?? 1) - 1
        if (left === 0) perUser.delete(watch.user)
        else perUser.set(watch.user, left)
      }
      res.once("finish", release)
      res.once("close", release)
      return backlog
    }

    const onRequest = (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => {
      guard.requested(req.socket)
      const url = splitUrl(req.url ?? "/")
      if (url === undefined) return sendJson(res, statusResponse(Status.badRequest(`malformed request path ${JSON.stringify(req.url)}`)))
      if (handle === undefined || (draining && !healthPaths.has(url.path))) {
        return sendJson(res, statusResponse(Status.serviceUnavailable("the server is not serving requests"), { "retry-after": "1" }), true)
      }
      const serve = handle
      const watch = isWatch(url.path, url.query)
      const client = clientKey(req.headers, req.socket.remoteAddress)
      // Health probes are never refused for load: they are how orchestrators judge liveness.
      const release = healthPaths.has(url.path) ? () => {} : admit(client, watch)
      if (release === undefined) {
        const what = watch ? `${limits.maxWatches} concurrent watches` : `${limits.maxInFlight} concurrent requests`
        return sendJson(res, statusResponse(Status.tooManyRequests(`Too many requests: this client already has ${what}, please try again later.`, 1), { "retry-after": "1" }))
      }
      // The slot frees once the response is handed to the socket ('finish'), not when the socket
      // write completes ('close'), which lags under load and over-counts busy clients.
      res.once("finish", release)
      res.once("close", release)

      const bodyRead = readBody(req, res, limits.maxBodyBytes, expectsContinue)
      const request = Effect.gen(function* () {
        const body = yield* bodyRead
        return yield* serve({ method: req.method ?? "GET", path: url.path, query: url.query, headers: lowerCaseHeaders(req), body, client })
      })
      let timedOut = false
      const answered: Effect.Effect<Http.ApiResponse | BodyTooLarge | ClientGone> = (
        watch
          ? request
          : Effect.timeoutTo(request, {
              duration: timeout,
              onTimeout: () => {
                timedOut = true
                return statusResponse(Status.timeout(`request did not complete within ${Duration.format(timeout)}`, 1), { "retry-after": "1" })
              },
              onSuccess: (r) => r
            })
      ).pipe(Effect.catchAll((e) => Effect.succeed(e)))
      const program = Effect.flatMap(answered, (r) => {
        if (r instanceof BodyTooLarge) return Effect.sync(() => tooLarge(req, res, expectsContinue && r.declared))
        if (r instanceof ClientGone) return Effect.void
        // A timed-out request may still owe part of its body: do not reuse its connection.
        return respond(res, r, timedOut)
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.sync(() => {
            if (res.headersSent) res.destroy()
            else sendJson(res, statusResponse(Status.internalError(String(Cause.squash(cause)))))
          })
        )
      )

      const fiber = runFork(program)
      const set = watch ? watches : requests
      set.add(fiber)
      fiber.addObserver(() => set.delete(fiber))
      // A client that goes away interrupts its request (and so its watch's store subscription).
      res.once("close", () => {
        if (!res.writableFinished) runFork(Fiber.interrupt(fiber))
      })
    }

    const firstRequestMillis = Duration.toMillis(Duration.decode(limits.firstRequestTimeout))
    const server: Server = createServer({
      cert: options.tls.cert,
      key: options.tls.key,
      handshakeTimeout: firstRequestMillis,
      // How often Node checks headersTimeout (default 30 s, which would triple a 10 s bound).
      connectionsCheckingInterval: Math.max(100, Math.min(1000, firstRequestMillis / 2))
    })
    // Headers of a later request on a kept-alive connection, and idle time between requests. A
    // request's timeouts stop once its headers are in, so watches are never cut by them.
    server.headersTimeout = firstRequestMillis
    server.keepAliveTimeout = Duration.toMillis(Duration.decode(limits.keepAliveTimeout))
    const guard = ConnectionGuard.attach(server, { firstRequestTimeout: limits.firstRequestTimeout, maxPerAddress: limits.maxConnectionsPerAddress })
    server.on("request", (req, res) => onRequest(req, res, false))
    server.on("checkContinue", (req, res) => onRequest(req, res, true))
    server.on("secureConnection", enlargeWriteBuffer)
    server.on("clientError", (_err, socket) => {
      if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n")
      else socket.destroy()
    })

    const address = yield* Effect.async<AddressInfo, ListenError>((resume) => {
      const onError = (e: Error) => resume(Effect.fail(new ListenError({ message: `cannot listen on ${options.host}:${options.port}: ${e.message}` })))
      server.once("error", onError)
      server.listen(options.port, options.host, () => {
        server.off("error", onError)
        resume(Effect.succeed(server.address() as AddressInfo))
      })
    })

    const awaitAll = (fibers: Set<Fiber.RuntimeFiber<void>>, within: Duration.DurationInput) =>
      Fiber.awaitAll([...fibers]).pipe(
        Effect.timeout(within),
        Effect.catchAll(() => Fiber.interruptAll([...fibers]))
      )

    const finished = yield* Deferred.make<void>()
    const shutdown = Effect.suspend(() => {
      if (draining) return Deferred.await(finished)
      draining = true
      return Effect.gen(function* () {
        let closed = false
        const allClosed = yield* Deferred.make<void>()
        // Stop accepting; the callback runs once every connection is gone.
        server.close(() => {
          closed = true
          Deferred.unsafeDone(allClosed, Exit.void)
        })
        server.closeIdleConnections()
        yield* Deferred.succeed(stopping, undefined)
        yield* awaitAll(watches, "5 seconds")
        yield* awaitAll(requests, limits.shutdownGrace)
        // Responses sent while draining carry `connection: close`; a connection that served a
        // watch goes idle when the watch ends. Close idle ones as they appear, for a moment,
        // then cut whatever is left (a client that sent headers and nothing else).
        const deadline = Date.now() + 1000
        while (!closed && Date.now() < deadline) {
          server.closeIdleConnections()
          yield* Effect.sleep("20 millis")
        }
        server.closeAllConnections()
        yield* Deferred.await(allClosed)
      }).pipe(Effect.ensuring(Deferred.succeed(finished, undefined)))
    })
    yield* Effect.addFinalizer(() => shutdown)

    return {
      address: { host: address.address, port: address.port },
      serve: (h) => {
        handle = h
      },
      draining: () => draining,
      shutdown,
      inFlight: () => ({ requests: requests.size, watches: watches.size })
    }
  })
