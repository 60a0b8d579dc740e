/**
 * The agent's HTTPS endpoint (default port 9301): what the API server asks of a node for
 * `pods/log`, `pods/exec` and `pods/signal`, answered from the box through `NodeAccess.fromRuntime`.
 *
 * Only the API server may call it: TLS client authentication against the cluster CA the agent
 * trusts since it joined, and the certificate's common name must be the server's node client
 * (`Tls.nodeClientName`). The server has already done RBAC, consent and admission; the agent
 * trusts its word for that, as the kubelet trusts kube-apiserver's proxy.
 *
 *   GET  /v1/pods/{namespace}/{name}/{uid}/{container}/log?follow&previous&timestamps&tailLines&sinceSeconds&limitBytes
 *   POST /v1/pods/{namespace}/{name}/{uid}/{container}/exec     {"command": [...], "stdin": "...", "timeoutSeconds": n}
 *   POST /v1/pods/{namespace}/{name}/{uid}/{container}/signal   {"signal": "SIGHUP"}
 *   GET  /v1/pods/{namespace}/{name}/{uid}/{container}/exec?command=..&stdin&tty      WebSocket (StreamSession frames)
 *   GET  /v1/pods/{namespace}/{name}/{uid}/{container}/attach?stdin&tty               WebSocket (StreamSession frames)
 *   GET  /v1/pods/{namespace}/{name}/{uid}/{container}/portforward?port=&podIP=       WebSocket (the port's bytes)
 *
 *   GET  /metrics   Prometheus text (the agent's series: pod start latency, process)
 *
 * `/metrics` also takes a bearer token instead of the server's certificate (a Prometheus has no
 * client certificate of the cluster CA): the agent asks the API server whether the token's user
 * may `get /metrics` (observability/MetricsServer.ts `remoteGate`), as the kubelet delegates to
 * TokenReview and SubjectAccessReview. Every other path still requires the server's certificate.
 *
 * Errors are Kubernetes `Status` objects, passed through by the server as they are.
 */
import { AgentUsage, type ApiError, Exposition, type Http, NodeAccess, PodLog, type Runtime, Status, type StreamSession } from "@koder/fleet-core"
import { Effect, Either, Exit, Runtime as EffectRuntime, Stream } from "effect"
import { createServer, type Server } from "node:https"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { TLSSocket } from "node:tls"
import type { Duplex } from "node:stream"
import { WebSocketServer } from "ws"
import * as WebSocketUpgrade from "../internal/WebSocketUpgrade.js"
import * as StreamSockets from "../net/StreamSockets.js"
import * as Tls from "../Tls.js"

/** A listening endpoint. */
export interface Endpoint {
  readonly port: number
  readonly close: () => Promise<void>
}

const sendStatus = (res: ServerResponse, status: Status.Status) => {
  if (res.headersSent) return res.destroy()
  res.writeHead(status.code ?? 500, { "content-type": "application/json" })
  res.end(JSON.stringify(status))
}

const readJson = (req: IncomingMessage, limit = 1 << 20): Promise<Record<string, unknown>> =>
  new Promise((resolve, reject) => {
    let size = 0
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => {
      size += c.length
      if (size > limit) req.destroy(new Error("body too large"))
      else chunks.push(c)
    })
    req.on("end", () => {
      try {
        const text = Buffer.concat(chunks).toString("utf8")
        const v = text === "" ? {} : (JSON.parse(text) as unknown)
        resolve(typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
      } catch (e) {
        reject(e)
      }
    })
    req.on("error", reject)
  })

const streamRoute = /^\/v1\/pods\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)\/(exec|attach|portforward)$/
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 16 * 1024 * 1024 })

const route = /^\/v1\/pods\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)\/(log|exec|signal|processes)$/

/** Serve `runtime` for node `node` on `host:port` (port 0: any), trusting clients signed by `caPem`. */
export const start = async (options: {
  readonly runtime: Runtime.RuntimeService
  readonly node: string
  readonly caPem: string
  readonly host?: string
  readonly port: number
  readonly sans: ReadonlyArray<string>
  /** Serve `/metrics`: what to render, and who besides the server may read it (a bearer token's check). */
  readonly metrics?: { readonly render: () => string; readonly authorize: (authorization: string | undefined) => Promise<Status.Status | undefined> }
  /** What a request's effects run on (`EventLoopScheduler.defaultRuntime`: the role's fiber scheduler); default Effect's own. */
  readonly fibers?: EffectRuntime.Runtime<never>
}): Promise<Endpoint> => {
  const access = NodeAccess.fromRuntime(options.runtime, options.node, StreamSockets.dial)
  const fibers = options.fibers ?? EffectRuntime.defaultRuntime
  const serving = await Tls.selfSigned(`${options.node}@fleet-agent`, options.sans)
  const metrics = options.metrics
  // Without /metrics every client must present the server's certificate at the handshake; with
  // it, certificate-less clients get in and only /metrics answers them (checked per request).
  const server: Server = createServer({ cert: serving.cert, key: serving.key, ca: options.caPem, requestCert: true, rejectUnauthorized: metrics === undefined }, (req, res) => {
    const socket = req.socket as TLSSocket
    const peer = socket.getPeerCertificate()
    const fromServer = socket.authorized && peer?.subject?.CN === Tls.nodeClientName
    if (metrics !== undefined && (req.url ?? "").split("?")[0] === "/metrics") {
      if (req.method !== "GET") return sendStatus(res, Status.methodNotSupported({ group: "", resource: "nodes/metrics" }, String(req.method).toLowerCase()))
      const allowed = fromServer ? Promise.resolve(undefined) : metrics.authorize(req.headers.authorization)
      void allowed.then(
        (refused) => {
          if (refused !== undefined) return sendStatus(res, refused)
          const body = metrics.render()
          res.writeHead(200, { "content-type": Exposition.contentType, "content-length": Buffer.byteLength(body) })
          res.end(body)
        },
        (e: unknown) => sendStatus(res, Status.internalError(`checking the scraper's token: ${e instanceof Error ? e.message : String(e)}`))
      )
      return
    }
    if (!fromServer) return sendStatus(res, Status.forbidden({ group: "", resource: "nodes/proxy" }, options.node, "only the API server may call a node's endpoint"))
    const url = new URL(req.url ?? "/", "https://agent")
    if (url.pathname === "/v1/usage") {
      // What metrics-server scrapes from a kubelet: the node's and its pods' use, sampled now.
      if (req.method !== "GET") return sendStatus(res, Status.methodNotSupported({ group: "", resource: "nodes/stats" }, String(req.method).toLowerCase()))
      const windowMs = Math.min(Math.max(Number(url.searchParams.get("windowMs") ?? 15_000) || 15_000, 1_000), 600_000)
      void EffectRuntime.runPromiseExit(fibers)(AgentUsage.report(options.runtime, windowMs)).then((exit) => {
        if (Exit.isFailure(exit)) return sendStatus(res, Status.serviceUnavailable(`the box cannot be sampled: ${exit.cause._tag === "Fail" ? exit.cause.error.message : "failed"}`))
        const body = JSON.stringify(exit.value)
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
        res.end(body)
      })
      return
    }
    const m = route.exec(url.pathname)
    if (m === null) return sendStatus(res, Status.notFound({ group: "", resource: "paths" }, url.pathname))
    const [, namespace, pod, uid, container, verb] = m.map((s) => decodeURIComponent(s ?? "")) as [string, string, string, string, string, string]
    const target: NodeAccess.Target = { node: options.node, namespace, pod, uid, container }
    const fail = (e: unknown) => sendStatus(res, typeof e === "object" && e !== null && "status" in e ? (e as { status: Status.Status }).status : Status.internalError(String(e)))
    if (verb === "processes") {
      if (req.method !== "GET") return sendStatus(res, Status.methodNotSupported({ group: "", resource: "pods/processmetrics" }, String(req.method).toLowerCase()))
      void EffectRuntime.runPromiseExit(fibers)(access.processes(target)).then((exit) => {
        if (Exit.isFailure(exit)) return fail(exit.cause._tag === "Fail" ? exit.cause.error : exit.cause)
        const body = JSON.stringify(exit.value)
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
        res.end(body)
      })
      return
    }
    if (verb === "log") {
      if (req.method !== "GET") return sendStatus(res, Status.methodNotSupported({ group: "", resource: "pods/log" }, String(req.method).toLowerCase()))
      const parsed = PodLog.parseOptions(url.searchParams)
      if (Either.isLeft(parsed)) return fail(parsed.left)
      void EffectRuntime.runPromiseExit(fibers)(access.logs(target, parsed.right)).then((exit) => {
        if (Exit.isFailure(exit)) return fail(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit.cause)
        res.writeHead(200, { "content-type": "text/plain; charset=utf-8" })
        res.flushHeaders()
        const abort = new AbortController()
        res.once("close", () => abort.abort())
        void EffectRuntime.runPromise(fibers)(Stream.runForEach(exit.value, (bytes) => Effect.promise(() => new Promise<void>((done) => (res.write(bytes) ? done() : res.once("drain", done))))), { signal: abort.signal })
          .catch(() => undefined)
          .finally(() => res.end())
      })
      return
    }
    if (req.method !== "POST") return sendStatus(res, Status.methodNotSupported({ group: "", resource: `pods/${verb}` }, String(req.method).toLowerCase()))
    void readJson(req).then(
      (body) => {
        const effect =
          verb === "exec"
            ? Effect.map(
                access.exec(target, {
                  command: Array.isArray(body["command"]) ? body["command"].map(String) : [],
                  ...(typeof body["stdin"] === "string" ? { stdin: body["stdin"] } : {}),
                  ...(typeof body["timeoutSeconds"] === "number" ? { timeoutSeconds: body["timeoutSeconds"] } : {})
                }),
                (result) => JSON.stringify(result)
              )
            : Effect.as(access.signal(target, String(body["signal"] ?? "")), JSON.stringify({}))
        void EffectRuntime.runPromiseExit(fibers)(effect).then((exit) => {
          if (Exit.isFailure(exit)) return fail(exit.cause._tag === "Fail" ? exit.cause.error : exit.cause)
          res.writeHead(200, { "content-type": "application/json" })
          res.end(exit.value)
        })
      },
      () => sendStatus(res, Status.badRequest("the body is not a JSON object"))
    )
  })
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy())
    const tls = req.socket as TLSSocket
    if (!(tls.authorized && tls.getPeerCertificate()?.subject?.CN === Tls.nodeClientName)) {
      return WebSocketUpgrade.refuse(socket, 403, Status.forbidden({ group: "", resource: "nodes/proxy" }, options.node, "only the API server may call a node's endpoint"))
    }
    const url = new URL(req.url ?? "/", "https://agent")
    const m = streamRoute.exec(url.pathname)
    if (m === null) return WebSocketUpgrade.refuse(socket, 404, Status.notFound({ group: "", resource: "paths" }, url.pathname))
    const [, namespace, pod, uid, container, verb] = m.map((s) => decodeURIComponent(s ?? "")) as [string, string, string, string, string, string]
    const q = url.searchParams
    const target: NodeAccess.Target = { node: options.node, namespace, pod, uid, container, podIP: q.get("podIP") ?? undefined }
    const flag = (name: string) => q.get(name) === "true"
    type Opened = { readonly _tag: "conn"; readonly conn: Http.ByteConnection } | { readonly _tag: "session"; readonly session: StreamSession.StreamSession }
    const opened: Effect.Effect<Opened, ApiError.ApiError> =
      verb === "portforward"
        ? Effect.map(access.portForward(target, Number(q.get("port"))), (conn) => ({ _tag: "conn" as const, conn }))
        : Effect.map(verb === "exec" ? access.execStream(target, { command: q.getAll("command"), stdin: flag("stdin"), tty: flag("tty") }) : access.attach(target, { stdin: flag("stdin"), tty: flag("tty") }), (session) => ({
            _tag: "session" as const,
            session
          }))
    void EffectRuntime.runPromiseExit(fibers)(opened).then((exit) => {
      if (Exit.isFailure(exit)) {
        const status = exit.cause._tag === "Fail" ? exit.cause.error.status : Status.internalError("the stream could not be opened")
        return WebSocketUpgrade.refuse(socket, status.code ?? 500, status)
      }
      const opened = exit.value
      if (socket.destroyed) return opened._tag === "conn" ? opened.conn.close() : opened.session.close()
      wss.handleUpgrade(req, socket, head, (ws) => void (opened._tag === "conn" ? StreamSockets.serveConnection(ws, opened.conn) : StreamSockets.serveSession(ws, opened.session)))
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port, options.host ?? "0.0.0.0", () => resolve())
  })
  const address = server.address()
  return {
    port: typeof address === "object" && address !== null ? address.port : options.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
