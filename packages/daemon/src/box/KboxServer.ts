/**
 * The kbox API (kbox-client's README is the contract) served over a Unix socket for any
 * implementation of core's Runtime port: the process driver in `koder-fleet box`, or the
 * memory runtime in tests of the wire itself.
 *
 *   request ─▶ route ─▶ decode body (Runtime Schemas) ─▶ RuntimeService call ─▶ JSON | NDJSON stream
 *                                        failure ─▶ KboxWire.encodeError ─▶ {"error": {...}} + status
 *   upgrade ─▶ /v1/containers/{id}/exec|attach ─▶ StreamSession ─▶ one WebSocket message per frame
 */
import { Runtime } from "@koder/fleet-core"
import { KboxStreams, KboxWire } from "@koder/fleet-kbox-client"
import { Cause, Effect, Exit, Fiber, Option, ParseResult, Runtime as EffectRuntime, Schema, Stream } from "effect"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, unlinkSync } from "node:fs"
import { isMainThread } from "node:worker_threads"
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http"
import { connect } from "node:net"
import { dirname, join } from "node:path"
import type { Duplex } from "node:stream"
import { WebSocketServer } from "ws"
import * as WebSocketUpgrade from "../internal/WebSocketUpgrade.js"

/** Largest request body accepted (specs and exec requests are small). */
const maxBody = 4 * 1024 * 1024

/** A running kbox server. */
export interface Handle {
  readonly socketPath: string
  readonly server: Server
  /** Stop accepting, end open streams, remove the socket file. */
  readonly close: () => Promise<void>
}

const StopBody = Schema.Struct({ gracePeriodMs: Schema.Number })
const SignalBody = Schema.Struct({ signal: Schema.String })

type Answer =
  | { readonly _tag: "json"; readonly status: number; readonly body: unknown }
  | { readonly _tag: "empty" }
  | { readonly _tag: "stream"; readonly stream: Stream.Stream<Runtime.LogChunk, Runtime.RuntimeError> }

const json = (body: unknown, status = 200): Answer => ({ _tag: "json", status, body })
const empty: Answer = { _tag: "empty" }

const readBody = (req: IncomingMessage): Effect.Effect<unknown, Runtime.Invalid> =>
  Effect.async<unknown, Runtime.Invalid>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (b: Buffer) => {
      size += b.length
      if (size > maxBody) {
        resume(Effect.fail(new Runtime.Invalid({ message: `request body larger than ${maxBody} bytes` })))
        req.destroy()
      } else chunks.push(b)
    })
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      if (text.trim() === "") return resume(Effect.succeed({}))
      try {
        resume(Effect.succeed(JSON.parse(text) as unknown))
      } catch {
        resume(Effect.fail(new Runtime.Invalid({ message: "request body is not JSON" })))
      }
    })
    req.on("error", (e) => resume(Effect.fail(new Runtime.Invalid({ message: e.message }))))
  })

/** Decode a request body with a Runtime Schema; a mismatch is `Invalid` with the field paths. */
const decodeBody = <A, I>(schema: Schema.Schema<A, I>, req: IncomingMessage) =>
  Effect.flatMap(readBody(req), (body) =>
    Schema.decodeUnknown(schema)(body).pipe(
      Effect.mapError((e) => new Runtime.Invalid({ message: ParseResult.TreeFormatter.formatErrorSync(e) }))
    )
  )

const listOf = <A>(items: ReadonlyArray<A>) => json({ items })

/** Route one request to the runtime. */
const route = (
  rt: Runtime.RuntimeService,
  req: IncomingMessage,
  url: URL
): Effect.Effect<Answer, Runtime.RuntimeError> => {
  const method = req.method ?? "GET"
  const parts = url.pathname.split("/").filter((p) => p !== "").map(decodeURIComponent)
  if (parts[0] !== "v1") return Effect.fail(notFoundPath(url))
  const [, resource, id, action] = parts
  const q = url.searchParams
  switch (resource) {
    case "info":
      if (method === "GET" && id === undefined) return Effect.map(rt.info, (i) => json(i))
      break
    case "sandboxes":
      if (id === undefined && method === "POST")
        return Effect.flatMap(decodeBody(Runtime.SandboxSpec, req), (spec) =>
          Effect.map(rt.sandboxes.create(spec), (s) => json(s, 201))
        )
      if (id === undefined && method === "GET") {
        const labels = KboxWire.decodeLabels(q)
        const podUid = q.get("podUid")
        return Effect.map(
          rt.sandboxes.list({ ...(podUid === null ? {} : { podUid }), ...(labels === undefined ? {} : { labels }) }),
          listOf
        )
      }
      if (id !== undefined && action === undefined && method === "GET") return Effect.map(rt.sandboxes.get(id), (s) => json(s))
      if (id !== undefined && action === undefined && method === "DELETE") return Effect.as(rt.sandboxes.remove(id), empty)
      break
    case "containers":
      if (id === undefined && method === "POST")
        return Effect.flatMap(decodeBody(Runtime.ContainerSpec, req), (spec) =>
          Effect.flatMap(rt.containers.create(spec), (cid) => Effect.map(rt.containers.inspect(cid), (c) => json(c, 201)))
        )
      if (id === undefined && method === "GET") {
        const labels = KboxWire.decodeLabels(q)
        const state = q.get("state")
        if (state !== null && state !== "created" && state !== "running" && state !== "exited")
          return Effect.fail(new Runtime.Invalid({ message: `state: expected created, running or exited` }))
        const filter: Runtime.ContainerFilter = {
          ...(q.get("sandboxId") === null ? {} : { sandboxId: q.get("sandboxId")! }),
          ...(q.get("name") === null ? {} : { name: q.get("name")! }),
          ...(state === null ? {} : { state }),
          ...(labels === undefined ? {} : { labels })
        }
        return Effect.map(rt.containers.list(filter), listOf)
      }
      if (id === undefined) break
      if (action === undefined && method === "GET") return Effect.map(rt.containers.inspect(id), (c) => json(c))
      if (action === undefined && method === "DELETE") return Effect.as(rt.containers.remove(id), empty)
      if (method === "POST")
        switch (action) {
          case "start":
            return Effect.flatMap(rt.containers.start(id), () => Effect.map(rt.containers.inspect(id), (c) => json(c)))
          case "stop":
            return Effect.flatMap(decodeBody(StopBody, req), ({ gracePeriodMs }) =>
              Effect.flatMap(rt.containers.stop(id, { gracePeriodMs }), () =>
                Effect.map(rt.containers.inspect(id), (c) => json(c))
              )
            )
          case "signal":
            return Effect.flatMap(decodeBody(SignalBody, req), ({ signal }) =>
              Effect.as(rt.containers.signal(id, signal), empty)
            )
          case "exec":
            return Effect.flatMap(decodeBody(Runtime.ExecRequest, req), (r) =>
              Effect.map(rt.containers.exec(id, r), (x) => json(x))
            )
          case "network-policy":
            return Effect.flatMap(decodeBody(Runtime.NetworkPolicyRules, req), (rules) =>
              Effect.map(rt.containers.applyNetworkPolicy(id, rules), (x) => json(x))
            )
        }
      if (method === "GET")
        switch (action) {
          case "logs": {
            const options = KboxWire.decodeLogsQuery(q)
            if (typeof options === "string") return Effect.fail(new Runtime.Invalid({ message: options }))
            // Check existence first: a missing container must answer 404, not an empty 200.
            return Effect.as(rt.containers.inspect(id), { _tag: "stream", stream: rt.containers.logs(id, options) } as Answer)
          }
          case "stats":
            return Effect.map(rt.containers.stats(id), (s) => json(s))
          case "processes":
            return Effect.map(rt.containers.processes(id), listOf)
        }
      break
    case "images":
      if (id === "import" && method === "POST")
        return Effect.flatMap(decodeBody(Runtime.ImportRequest, req), (r) => Effect.map(rt.images.import(r), (i) => json(i)))
      if (id === "pull" && method === "POST")
        return Effect.flatMap(decodeBody(Runtime.PullRequest, req), (r) => Effect.map(rt.images.pull(r), (p) => json(p)))
      if (id === undefined && method === "GET") return Effect.map(rt.images.list, listOf)
      break
  }
  return Effect.fail(notFoundPath(url, method))
}

const notFoundPath = (url: URL, method?: string) =>
  new Runtime.NotFound({
    kind: "container",
    id: "",
    message: `no such endpoint: ${method === undefined ? "" : `${method} `}${url.pathname}`
  })

const send = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

/** Write an NDJSON stream of log chunks, honouring backpressure; ends with the stream. */
const pipeStream = (
  res: ServerResponse,
  stream: Stream.Stream<Runtime.LogChunk, Runtime.RuntimeError>
): Effect.Effect<void> =>
  Effect.gen(function* () {
    res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" })
    // Send the headers now: a follower of a quiet container must learn the stream is open.
    res.flushHeaders()
    yield* Stream.runForEach(stream, (chunk) =>
      Effect.async<void>((resume) => {
        if (res.write(`${JSON.stringify(chunk)}\n`)) resume(Effect.void)
        else res.once("drain", () => resume(Effect.void))
      })
    ).pipe(Effect.catchAll(() => Effect.void))
    res.end()
  })

/**
 * Serve `rt` on `socketPath` (mode 0600). Fails if another live server holds the socket. Requests
 * run on `fibers` (the role's fiber scheduler, `EventLoopScheduler.defaultRuntime`).
 */
export const serve = async (rt: Runtime.RuntimeService, socketPath: string, fibers: EffectRuntime.Runtime<never> = EffectRuntime.defaultRuntime): Promise<Handle> => {
  await clearStaleSocket(socketPath)
  mkdirSync(dirname(socketPath), { recursive: true, mode: 0o700 })
  const streams = new Set<Fiber.RuntimeFiber<void>>()
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost")
    void EffectRuntime.runPromiseExit(fibers)(route(rt, req, url)).then((exit) => {
      if (Exit.isFailure(exit)) {
        const failure = Cause.failureOption(exit.cause)
        const error = Option.isSome(failure)
          ? failure.value
          : new Runtime.Unavailable({ message: `internal error: ${Cause.pretty(exit.cause).split("\n")[0]}` })
        const { status, body } = KboxWire.encodeError(error)
        return send(res, status, body)
      }
      const answer = exit.value
      if (answer._tag === "json") return send(res, answer.status, answer.body)
      if (answer._tag === "empty") {
        res.writeHead(204)
        return res.end()
      }
      const fiber = EffectRuntime.runFork(fibers)(pipeStream(res, answer.stream))
      streams.add(fiber)
      fiber.addObserver(() => streams.delete(fiber))
      // The client went away: stop following (unsubscribes from the container's output).
      res.on("close", () => EffectRuntime.runFork(fibers)(Fiber.interrupt(fiber)))
    })
  })
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 16 * 1024 * 1024 })
  const sessions = new Set<{ close: () => void }>()
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy())
    const url = new URL(req.url ?? "/", "http://localhost")
    const m = streamRoute.exec(url.pathname)
    if (m === null) return refuseWith(socket, notFoundPath(url))
    const id = decodeURIComponent(m[1]!)
    const opened =
      m[2] === "exec"
        ? rt.containers.execStream(id, KboxStreams.decodeExecQuery(url.searchParams))
        : rt.containers.attach(id, KboxStreams.decodeAttachQuery(url.searchParams))
    void EffectRuntime.runPromiseExit(fibers)(opened).then((exit) => {
      if (Exit.isFailure(exit)) {
        const failure = Cause.failureOption(exit.cause)
        return refuseWith(socket, Option.isSome(failure) ? failure.value : new Runtime.Unavailable({ message: "the stream could not be opened" }))
      }
      const session = exit.value
      if (socket.destroyed) return session.close()
      sessions.add(session)
      wss.handleUpgrade(req, socket, head, (ws) => void KboxStreams.serveSession(ws, session).finally(() => sessions.delete(session)))
    })
  })
  // Followed logs stay open for as long as the container runs.
  server.requestTimeout = 0
  server.headersTimeout = 60_000
  server.keepAliveTimeout = 30_000
  // Created with no permission for others from the first moment, then made exactly 0600: under a
  // umask of 0177, or, in a worker thread (dev mode's node), where the umask cannot be set, in a
  // private directory beside it and then renamed into place (the socket stays bound).
  const bindAt = isMainThread ? socketPath : join(mkdtempSync(join(dirname(socketPath), ".bind-")), "box.sock")
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      const umask = isMainThread ? process.umask(0o177) : undefined
      server.listen(bindAt, () => {
        if (umask !== undefined) process.umask(umask)
        server.off("error", reject)
        resolve()
      })
    })
    chmodSync(bindAt, 0o600)
    if (bindAt !== socketPath) renameSync(bindAt, socketPath)
  } finally {
    // The private directory goes whether the bind worked or not.
    if (bindAt !== socketPath) rmSync(dirname(bindAt), { recursive: true, force: true })
  }
  return {
    socketPath,
    server,
    close: async () => {
      await Promise.all([...streams].map((f) => EffectRuntime.runPromise(fibers)(Fiber.interrupt(f))))
      for (const session of sessions) session.close()
      await new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
      try {
        unlinkSync(socketPath)
      } catch {
        // already gone
      }
    }
  }
}

const streamRoute = /^\/v1\/containers\/([^/]+)\/(exec|attach)$/

/** Answer a stream's upgrade request with the kbox error instead. */
const refuseWith = (socket: Duplex, error: Runtime.RuntimeError) => {
  const { status, body } = KboxWire.encodeError(error)
  WebSocketUpgrade.refuse(socket, status, body)
}

/** A socket file nobody answers on is a leftover of a crash; a live one is another server. */
const clearStaleSocket = async (socketPath: string) => {
  if (!existsSync(socketPath)) return
  const live = await new Promise<boolean>((resolve) => {
    const s = connect(socketPath)
    s.once("connect", () => {
      s.destroy()
      resolve(true)
    })
    s.once("error", () => resolve(false))
  })
  if (live) throw new Error(`${socketPath} is in use by a running server`)
  unlinkSync(socketPath)
}
