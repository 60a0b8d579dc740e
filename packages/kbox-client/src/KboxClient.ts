/**
 * The Runtime port over the kbox API: JSON over HTTP/1.1 on a Unix socket, with an undici Pool
 * (one keep-alive connection per concurrent request; a followed log holds its own). Every answer
 * is decoded with core's Runtime Schemas, so a misbehaving daemon shows as `Unavailable`, never
 * as a malformed object inside the agent.
 */
import { Runtime, type StreamSession } from "@koder/fleet-core"
import { Effect, Layer, Schema, Stream } from "effect"
import type { Scope } from "effect"
import { Pool } from "undici"
import WebSocket from "ws"
import * as KboxStreams from "./KboxStreams.js"
import * as KboxWire from "./KboxWire.js"

/** Where and how to reach the daemon. */
export interface Options {
  /** The daemon's Unix socket. */
  readonly socketPath: string
  /** Time limit of an ordinary call, in ms (default 30 s); stop and exec add their own duration. */
  readonly requestTimeoutMs?: number
}

const List = <S extends Schema.Schema.Any>(item: S) => Schema.Struct({ items: Schema.Array(item) })
const SandboxList = List(Runtime.Sandbox)
const ContainerList = List(Runtime.Container)
const ProcessList = List(Runtime.Process)
const ImageList = List(Runtime.Image)

type Method = "GET" | "POST" | "DELETE"

/** Build a client; its connections close with the scope. */
export const make = (options: Options): Effect.Effect<Runtime.RuntimeService, never, Scope.Scope> =>
  Effect.gen(function* () {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(
        () =>
          new Pool("http://localhost", {
            socketPath: options.socketPath,
            // Unix-socket connections are cheap; a small cap would let followed logs starve calls.
            connections: null,
            keepAliveTimeout: 10_000
          })
      ),
      (p) => Effect.promise(() => p.close().catch(() => undefined))
    )
    return makeWith(pool, options)
  })

/** The Runtime port backed by a kbox daemon. */
export const layer = (options: Options): Layer.Layer<Runtime.Runtime> => Layer.scoped(Runtime.Runtime, make(options))

const unavailable = (cause: unknown) =>
  new Runtime.Unavailable({
    message: `kbox: ${cause instanceof Error ? `${cause.message}${"code" in cause ? ` (${String(cause.code)})` : ""}` : String(cause)}`
  })

/**
 * A stream (exec, attach) on its own WebSocket over the socket: an error the daemon answers
 * instead of the handshake is the port's error, as a call's would be.
 */
const stream = (socketPath: string, path: string): Effect.Effect<StreamSession.StreamSession, Runtime.RuntimeError> =>
  Effect.async<StreamSession.StreamSession, Runtime.RuntimeError>((resume) => {
    const ws = new WebSocket(`ws+unix://${socketPath}:${KboxWire.prefix}${path}`, [KboxStreams.protocol], { perMessageDeflate: false, handshakeTimeout: 30_000 })
    let settled = false
    const settle = (e: Effect.Effect<StreamSession.StreamSession, Runtime.RuntimeError>) => {
      if (settled) return
      settled = true
      resume(e)
    }
    ws.once("open", () => settle(Effect.succeed(KboxStreams.sessionOn(ws))))
    ws.once("unexpected-response", (_req, res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => settle(Effect.fail(KboxWire.decodeError(res.statusCode ?? 500, text))))
      res.on("error", (e) => settle(Effect.fail(unavailable(e))))
    })
    ws.once("error", (e) => settle(Effect.fail(unavailable(e))))
    return Effect.sync(() => ws.terminate())
  })

/** A client over an existing undici dispatcher (the caller owns its lifetime). */
export const makeWith = (pool: Pool, options: Options): Runtime.RuntimeService => {
  const baseTimeout = options.requestTimeoutMs ?? 30_000

  /** One call: JSON in, text out; non-2xx answers become the port's errors. */
  const call = (method: Method, path: string, body?: unknown, extraMs = 0) =>
    Effect.tryPromise({
      try: async (signal) => {
        const res = await pool.request({
          method,
          path: `${KboxWire.prefix}${path}`,
          signal,
          headersTimeout: baseTimeout + extraMs,
          bodyTimeout: baseTimeout + extraMs,
          ...(body === undefined
            ? {}
            : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
        })
        return { status: res.statusCode, text: await res.body.text() }
      },
      catch: unavailable
    }).pipe(
      Effect.flatMap(({ status, text }) =>
        status >= 200 && status < 300 ? Effect.succeed(text) : Effect.fail(KboxWire.decodeError(status, text))
      )
    )

  /** A call whose answer is decoded with `schema`. */
  const decoded = <A, I>(schema: Schema.Schema<A, I>, method: Method, path: string, body?: unknown, extraMs = 0) =>
    Effect.flatMap(call(method, path, body, extraMs), (text) =>
      Effect.try({ try: () => JSON.parse(text) as unknown, catch: unavailable }).pipe(
        Effect.flatMap(Schema.decodeUnknown(schema)),
        Effect.mapError((e) => (e._tag === "ParseError" ? unavailable(new Error(`bad answer to ${method} ${path}: ${e.message}`)) : e))
      )
    )

  const enc = encodeURIComponent

  const sandboxes: Runtime.Sandboxes = {
    create: (spec) =>
      decoded(Runtime.Sandbox, "POST", "/sandboxes", spec) as Effect.Effect<
        Runtime.Sandbox,
        Runtime.AlreadyExists | Runtime.Invalid | Runtime.Unavailable
      >,
    get: (id) =>
      decoded(Runtime.Sandbox, "GET", `/sandboxes/${enc(id)}`) as Effect.Effect<
        Runtime.Sandbox,
        Runtime.NotFound | Runtime.Unavailable
      >,
    list: (filter) =>
      decoded(SandboxList, "GET", `/sandboxes${KboxWire.sandboxQuery(filter)}`).pipe(
        Effect.map((l) => l.items),
        onlyUnavailable
      ),
    remove: (id) => call("DELETE", `/sandboxes/${enc(id)}`, undefined, 60_000).pipe(Effect.asVoid, onlyUnavailable)
  }

  const containers: Runtime.Containers = {
    create: (spec) =>
      decoded(Runtime.Container, "POST", "/containers", spec).pipe(Effect.map((c) => c.id)) as Effect.Effect<
        string,
        Runtime.NotFound | Runtime.AlreadyExists | Runtime.Invalid | Runtime.Unavailable
      >,
    start: (id) =>
      call("POST", `/containers/${enc(id)}/start`, {}).pipe(Effect.asVoid) as Effect.Effect<
        void,
        Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable
      >,
    stop: (id, { gracePeriodMs }) =>
      decoded(Runtime.Container, "POST", `/containers/${enc(id)}/stop`, { gracePeriodMs }, gracePeriodMs).pipe(
        Effect.map((c) => c.status)
      ) as Effect.Effect<Runtime.ContainerStatus, Runtime.NotFound | Runtime.Unavailable>,
    signal: (id, signal) =>
      call("POST", `/containers/${enc(id)}/signal`, { signal }).pipe(Effect.asVoid) as Effect.Effect<
        void,
        Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable
      >,
    exec: (id, request) =>
      decoded(Runtime.ExecResult, "POST", `/containers/${enc(id)}/exec`, request, request.timeoutMs ?? 0) as Effect.Effect<
        Runtime.ExecResult,
        Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable
      >,
    remove: (id) => call("DELETE", `/containers/${enc(id)}`, undefined, 30_000).pipe(Effect.asVoid, onlyUnavailable),
    list: (filter) =>
      decoded(ContainerList, "GET", `/containers${KboxWire.containerQuery(filter)}`).pipe(
        Effect.map((l) => l.items),
        onlyUnavailable
      ),
    inspect: (id) =>
      decoded(Runtime.Container, "GET", `/containers/${enc(id)}`) as Effect.Effect<
        Runtime.Container,
        Runtime.NotFound | Runtime.Unavailable
      >,
    logs: (id, opts) => logs(pool, `${KboxWire.prefix}/containers/${enc(id)}/logs${KboxWire.logsQuery(opts)}`, baseTimeout),
    stats: (id) =>
      decoded(Runtime.Stats, "GET", `/containers/${enc(id)}/stats`) as Effect.Effect<
        Runtime.Stats,
        Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable
      >,
    processes: (id) =>
      decoded(ProcessList, "GET", `/containers/${enc(id)}/processes`).pipe(Effect.map((l) => l.items)) as Effect.Effect<
        ReadonlyArray<Runtime.Process>,
        Runtime.NotFound | Runtime.Unavailable
      >,
    execStream: (id, request) =>
      stream(options.socketPath, `/containers/${enc(id)}/exec${KboxStreams.execQuery(request)}`) as Effect.Effect<
        StreamSession.StreamSession,
        Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable | Runtime.Unsupported
      >,
    attach: (id, request) =>
      stream(options.socketPath, `/containers/${enc(id)}/attach${KboxStreams.attachQuery(request)}`) as Effect.Effect<
        StreamSession.StreamSession,
        Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable | Runtime.Unsupported
      >,
    applyNetworkPolicy: (id, rules) =>
      decoded(Runtime.NetworkPolicyApplied, "POST", `/containers/${enc(id)}/network-policy`, rules) as Effect.Effect<
        Runtime.NetworkPolicyApplied,
        Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable | Runtime.Unsupported
      >
  }

  const images: Runtime.Images = {
    import: (request) =>
      decoded(Runtime.Image, "POST", "/images/import", request, 300_000) as Effect.Effect<
        Runtime.Image,
        Runtime.Invalid | Runtime.Unavailable
      >,
    list: decoded(ImageList, "GET", "/images").pipe(
      Effect.map((l) => l.items),
      onlyUnavailable
    ),
    // A pull of a large image over a slow link takes minutes; the box bounds each blob itself.
    pull: (request) =>
      decoded(Runtime.PullResult, "POST", "/images/pull", request, pullTimeoutMs) as Effect.Effect<
        Runtime.PullResult,
        Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable | Runtime.Unsupported
      >
  }

  return {
    info: decoded(Runtime.Info, "GET", "/info").pipe(onlyUnavailable),
    sandboxes,
    containers,
    images
  }
}

/** How long a pull may take before the client gives up on the box's answer. */
export const pullTimeoutMs = 30 * 60_000

/**
 * Calls whose contract only fails with `Unavailable`: any other error the daemon sends (it
 * should not) is reported as the daemon misbehaving.
 */
const onlyUnavailable = <A, R>(
  effect: Effect.Effect<A, Runtime.RuntimeError, R>
): Effect.Effect<A, Runtime.Unavailable, R> =>
  Effect.mapError(effect, (e) =>
    e._tag === "RuntimeUnavailable" ? e : new Runtime.Unavailable({ message: `kbox: unexpected ${e._tag}: ${e.message}` })
  )

const decodeChunk = Schema.decodeUnknown(Schema.parseJson(Runtime.LogChunk))

/**
 * A log request as a Stream: the daemon answers NDJSON (one `LogChunk` per line), chunked, and
 * keeps the answer open while following. Interrupting the stream aborts the request.
 */
const logs = (
  pool: Pool,
  path: string,
  headersTimeout: number
): Stream.Stream<Runtime.LogChunk, Runtime.NotFound | Runtime.Unavailable> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const controller = yield* Effect.acquireRelease(
        Effect.sync(() => new AbortController()),
        (c) => Effect.sync(() => c.abort())
      )
      const res = yield* Effect.tryPromise({
        // No body timeout: a followed log of a quiet container may send nothing for hours.
        try: () => pool.request({ method: "GET", path, signal: controller.signal, headersTimeout, bodyTimeout: 0 }),
        catch: unavailable
      })
      if (res.statusCode < 200 || res.statusCode >= 300) {
        const text = yield* Effect.promise(() => res.body.text().catch(() => ""))
        const error = KboxWire.decodeError(res.statusCode, text)
        return yield* Effect.fail(
          error._tag === "RuntimeNotFound" || error._tag === "RuntimeUnavailable"
            ? error
            : new Runtime.Unavailable({ message: error.message })
        )
      }
      return Stream.fromAsyncIterable(res.body as AsyncIterable<Uint8Array>, unavailable).pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.filter((line) => line.length > 0),
        Stream.mapEffect((line) =>
          decodeChunk(line).pipe(Effect.mapError((e) => unavailable(new Error(`bad log line: ${e.message}`))))
        )
      )
    })
  )
