/**
 * The HTTP(S) ingress (issue 9 item 3): Fleet's implementation of IngressClass `fleet`, run by
 * the server (and `koder-fleet dev`) on 8080 and 8443. It keeps informers of Ingresses,
 * IngressClasses, Services, EndpointSlices and `kubernetes.io/tls` Secrets, rebuilds core's
 * `IngressRoutes` table when one of them changes, and forwards each request to a ready endpoint
 * of the Service its rule names.
 *
 *   client ─▶ :8080 / :8443 (certificate by SNI from the Ingress's Secret)
 *          ─▶ IngressRoutes.lookup(host, path) ─▶ 404 page | 503 page (Service named)
 *             (a host belongs to one namespace: IngressHosts, with the admin's policy ConfigMap)
 *          ─▶ endpoints in round-robin order, dead ones last ─▶ undici Agent (keep-alive pools)
 *          ─▶ response streamed back | next endpoint (connection refused) | 502 / 504 page
 *   Upgrade (websocket) ─▶ raw TCP to the endpoint, request head re-sent, bytes piped both ways
 *
 * Retries: a request moves to the next endpoint only when the failed attempt put no byte of it on
 * the wire (the connection was refused, unreachable or timed out before connecting, and the body
 * was never read), or, for a body-less idempotent request (GET, HEAD, OPTIONS, PUT, DELETE,
 * TRACE), when a reused keep-alive connection was closed under it. A response that timed out is
 * not retried (it may have been processed): 504. An endpoint that refused a connection sorts last
 * for a few seconds, so a dead pod costs one failed connect, not one per request.
 * Headers: `X-Forwarded-For` gets the client's address appended, `X-Forwarded-Proto`, `-Host`,
 * `-Port` and `X-Real-IP` are set by the proxy (never passed from the client); hop-by-hop headers
 * are dropped both ways; `Host` is passed as the client sent it.
 *
 * The per-request path is plain Node streams and promises (it is stream plumbing, and Effect adds
 * nothing there); setup, informers, the status writer and shutdown are Effect, in the caller's scope.
 */
import { type Client, Controller, Informer, IngressHosts, IngressRoutes, ServiceBackends } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { createServer as createHttpsServer } from "node:https"
import { connect, type Socket } from "node:net"
import { type Duplex, pipeline, Readable } from "node:stream"
import { createSecureContext, type SecureContext } from "node:tls"
import { Agent, type Dispatcher } from "undici"
import * as HostFacts from "../agent/HostFacts.js"
import { describe, ListenError } from "../DaemonError.js"
import * as Tls from "../Tls.js"
import * as IngressPages from "./IngressPages.js"
import * as IngressStatus from "./IngressStatus.js"

/** An address to listen on; `explicit`: given by a flag (failing to bind it fails startup). */
export interface Listen {
  readonly host: string
  readonly port: number
  readonly explicit: boolean
}

/** Upstream time limits. */
export interface Timeouts {
  /** To open a connection to an endpoint (then the next endpoint is tried). */
  readonly connectMs: number
  /** From sending the request to the response's headers (then 504). */
  readonly responseMs: number
  /** Between two chunks of a response body (then the response is cut). */
  readonly idleMs: number
}

/** The defaults: 5 s to connect, 60 s to answer (nginx's proxy_read_timeout), 60 s idle. */
export const defaultTimeouts: Timeouts = { connectMs: 5000, responseMs: 60_000, idleMs: 60_000 }

/** How the proxy is set up. */
export interface Options {
  /** Reads the cluster (informers) and writes Ingress status; the server's in-process client. */
  readonly client: Client.Client
  /** Plain HTTP listener (undefined: off). */
  readonly http: Listen | undefined
  /** TLS listener (undefined: off). */
  readonly https: Listen | undefined
  readonly timeouts?: Partial<Timeouts>
  /** The address written into Ingress status (default: the listen address; a wildcard one becomes this host's first external IPv4). */
  readonly advertise?: string
  /** Endpoints tried per request at most (default 3). */
  readonly maxAttempts?: number
  /** Where problems are reported (default stderr). */
  readonly log?: (line: string) => void
}

/** A running proxy. */
export interface IngressProxy {
  /** The bound plain HTTP address (undefined: off, or the default address was taken). */
  readonly http: { readonly host: string; readonly port: number } | undefined
  /** The bound TLS address. */
  readonly https: { readonly host: string; readonly port: number } | undefined
  /** The current route table. */
  readonly table: () => IngressRoutes.RouteTable
}

const ServiceRef: Client.ResourceRef = { apiVersion: "v1", kind: "Service" }
const EndpointSliceRef: Client.ResourceRef = { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice" }
const SecretRef: Client.ResourceRef = { apiVersion: "v1", kind: "Secret" }
const ConfigMapRef: Client.ResourceRef = { apiVersion: "v1", kind: "ConfigMap" }

/** Hop-by-hop headers (RFC 9110 §7.6.1), plus ones undici sets itself. */
const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "expect", "http2-settings"])
const forwardedNames = new Set(["x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-real-ip"])
const idempotent = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"])
/** The endpoint was never reached: nothing of the request left the proxy. */
const connectFailures = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"])
/** A reused connection closed under the request. */
const staleConnection = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"])
const timeouts = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT"])
/** How long an endpoint that refused a connection sorts last. */
const downMs = 5000
/** The oldest a route table may be once something it is built from changed. */
const rebuildMs = 100

const codeOf = (e: unknown): string => {
  const o = e as { code?: unknown; cause?: { code?: unknown } } | undefined
  return typeof o?.code === "string" ? o.code : typeof o?.cause?.code === "string" ? o.cause.code : ""
}

const clientAddress = (req: IncomingMessage) => (req.socket.remoteAddress ?? "").replace(/^::ffff:/, "")

/** The host, path (no query) and request target of a request (absolute-form targets included). */
const requestTarget = (req: IncomingMessage): { host: string; path: string; target: string } => {
  let host = req.headers.host ?? ""
  let target = req.url ?? "/"
  if (/^https?:\/\//i.test(target)) {
    try {
      const u = new URL(target)
      host = u.host
      target = `${u.pathname}${u.search}`
    } catch {
      // Not a URL after all: route it as a path.
    }
  }
  const q = target.indexOf("?")
  return { host, path: q < 0 ? target : target.slice(0, q), target }
}

const connectionTokens = (value: string | Array<string> | undefined) =>
  new Set(
    (Array.isArray(value) ? value.join(",") : (value ?? ""))
      .split(",")
      .map((t) => t.trim().toLowerCase())
      .filter((t) => t !== "")
  )

/** The forwarding headers the proxy sets. */
const forwarded = (req: IncomingMessage, secure: boolean): Record<string, string> => {
  const prior = req.headers["x-forwarded-for"]
  const remote = clientAddress(req)
  return {
    "x-forwarded-for": prior === undefined || prior === "" ? remote : `${Array.isArray(prior) ? prior.join(", ") : prior}, ${remote}`,
    "x-forwarded-proto": secure ? "https" : "http",
    "x-forwarded-host": req.headers.host ?? "",
    "x-forwarded-port": String(req.socket.localPort ?? ""),
    "x-real-ip": remote
  }
}

/** The headers an endpoint gets for a plain request. */
const upstreamHeaders = (req: IncomingMessage, secure: boolean): Record<string, string | Array<string>> => {
  const listed = connectionTokens(req.headers.connection)
  const out: Record<string, string | Array<string>> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || hopByHop.has(name) || listed.has(name) || forwardedNames.has(name)) continue
    out[name] = value
  }
  return { ...out, ...forwarded(req, secure) }
}

/** The headers the client gets back. */
const downstreamHeaders = (headers: Record<string, string | Array<string> | undefined>): Record<string, string | Array<string>> => {
  const listed = connectionTokens(headers["connection"])
  const out: Record<string, string | Array<string>> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || hopByHop.has(name) || listed.has(name)) continue
    out[name] = value
  }
  return out
}

/** Whether a request carries a body (RFC 9112 §6.3). */
const hasBody = (req: IncomingMessage) => req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0

/**
 * The request body as a stream that starts reading the client only when undici first asks for
 * data, i.e. once connected: an attempt that never connected leaves the body untouched for the next.
 */
const lazyBody = (req: IncomingMessage) => {
  let started = false
  const stream: Readable = new Readable({
    read() {
      if (!started) {
        started = true
        req.on("data", (chunk: Buffer) => {
          if (!stream.push(chunk)) req.pause()
        })
        req.once("end", () => stream.push(null))
        req.once("error", (e) => stream.destroy(e))
      }
      req.resume()
    }
  })
  return { stream, started: () => started }
}

/** The address Ingress status shows for a listen host. */
export const advertisedAddress = (host: string): string => (host === "0.0.0.0" || host === "::" ? HostFacts.defaultInternalIP() : host)

const bind = (server: Server, listen: Listen, flag: string, log: (line: string) => void) =>
  Effect.async<{ readonly host: string; readonly port: number } | undefined, ListenError>((resume) => {
    const onError = (e: Error) => {
      server.off("listening", onListening)
      const message = `${flag} ${listen.host}:${listen.port}: ${describe(e)}`
      if (listen.explicit) resume(Effect.fail(new ListenError({ message })))
      else {
        // A default address in use (another dev cluster, a test run): go on without this listener.
        log(`${message}; not serving it (give ${flag} to choose another address, or off)`)
        resume(Effect.succeed(undefined))
      }
    }
    const onListening = () => {
      server.off("error", onError)
      const a = server.address()
      resume(Effect.succeed(typeof a === "object" && a !== null ? { host: a.address, port: a.port } : undefined))
    }
    server.once("error", onError)
    server.once("listening", onListening)
    server.listen(listen.port, listen.host)
  })

/** Start the proxy in the current scope; it stops (listeners, tunnels, pools) with the scope. */
export const make = (options: Options): Effect.Effect<IngressProxy, ListenError, Scope.Scope> =>
  Effect.gen(function* () {
    const log = options.log ?? ((line: string) => console.error(`koder-fleet ingress: ${line}`))
    const limits: Timeouts = { ...defaultTimeouts, ...options.timeouts }
    const maxAttempts = Math.max(1, options.maxAttempts ?? 3)
    const { client } = options

    yield* IngressStatus.ensureClass(client).pipe(Effect.catchAll((e) => Effect.sync(() => log(`cannot create IngressClass fleet: ${e.status.message ?? e.status.reason}`))))

    const informers = yield* Informer.makeShared(client)
    const secrets = yield* Informer.make(client, SecretRef, { fieldSelector: "type=kubernetes.io/tls" })
    // The admin's host → namespace policy: one ConfigMap in kube-system, which only admins write.
    const { namespace: policyNamespace, name: policyName } = IngressHosts.PolicyConfigMap
    const policySource = yield* Informer.make(client, ConfigMapRef, { fieldSelector: `metadata.namespace=${policyNamespace},metadata.name=${policyName}` })
    let policyText = ""
    let policy: IngressHosts.Policy = []
    const hostPolicy = (): IngressHosts.Policy => {
      const data = (policySource.get(policyNamespace, policyName)?.["data"] ?? {}) as Record<string, unknown>
      const text = JSON.stringify(data)
      if (text !== policyText) {
        policyText = text
        const parsed = IngressHosts.parsePolicy(data)
        for (const problem of parsed.problems) log(`ConfigMap ${policyNamespace}/${policyName}: ${problem} (ignored)`)
        policy = parsed.policy
      }
      return policy
    }
    const refs = [IngressStatus.IngressRef, IngressStatus.IngressClassRef, ServiceRef, EndpointSliceRef]
    let dirty = true
    let current: IngressRoutes.RouteTable | undefined
    for (const ref of refs) informers.for(ref).subscribe(() => (dirty = true))
    policySource.subscribe(() => (dirty = true))
    yield* Effect.all([...refs.map((r) => informers.for(r).synced), secrets.synced, policySource.synced], { discard: true })
    // Rebuilt lazily, by the first request after a change, and at most every `rebuildMs`: a burst
    // of EndpointSlice writes (a rollout) costs one build, not one per write.
    let builtAt = 0
    const table = (): IngressRoutes.RouteTable => {
      const now = Date.now()
      if (current === undefined || (dirty && now - builtAt >= rebuildMs)) {
        dirty = false
        builtAt = now
        current = IngressRoutes.build({
          ingresses: informers.for(IngressStatus.IngressRef).list(),
          ingressClasses: informers.for(IngressStatus.IngressClassRef).list(),
          services: informers.for(ServiceRef).list(),
          endpointSlices: informers.for(EndpointSliceRef).list(),
          hostPolicy: hostPolicy()
        })
      }
      return current
    }

    // ---- upstream selection ---------------------------------------------------------------
    const turns = new Map<string, number>()
    const downUntil = new Map<string, number>()
    const order = (backend: IngressRoutes.Backend): ReadonlyArray<IngressRoutes.Target> => {
      const targets = backend.targets
      const key = IngressRoutes.describeBackend(backend)
      const turn = turns.get(key) ?? 0
      turns.set(key, turn + 1)
      const start = turn % targets.length
      const rotated = [...targets.slice(start), ...targets.slice(0, start)]
      const now = Date.now()
      const up = (t: IngressRoutes.Target) => (downUntil.get(ServiceBackends.hostPort(t)) ?? 0) <= now
      return [...rotated.filter(up), ...rotated.filter((t) => !up(t))].slice(0, maxAttempts)
    }
    const markDown = (t: IngressRoutes.Target) => {
      const now = Date.now()
      // Pod addresses come and go: forget expired marks before they pile up.
      if (downUntil.size >= 1024) for (const [k, until] of downUntil) if (until <= now) downUntil.delete(k)
      downUntil.set(ServiceBackends.hostPort(t), now + downMs)
    }

    const agent = new Agent({ connect: { timeout: limits.connectMs }, keepAliveTimeout: 4000, keepAliveMaxTimeout: 60_000 })
    yield* Effect.addFinalizer(() => Effect.promise(() => agent.destroy().catch(() => undefined)))

    const answer = (res: ServerResponse, req: IncomingMessage, page: IngressPages.Page, close = false) => {
      if (res.headersSent) return void res.destroy()
      const { contentType, body } = IngressPages.render(page, req.headers.accept)
      res.writeHead(page.status, { "content-type": contentType, "content-length": Buffer.byteLength(body), "cache-control": "no-store", ...(close ? { connection: "close" } : {}) })
      res.end(req.method === "HEAD" ? undefined : body)
    }

    const forward = async (req: IncomingMessage, res: ServerResponse, backend: IngressRoutes.Backend, target: string, secure: boolean) => {
      const service = IngressRoutes.describeBackend(backend)
      const targets = order(backend)
      const withBody = hasBody(req)
      const headers = upstreamHeaders(req, secure)
      const abort = new AbortController()
      res.once("close", () => {
        if (!res.writableFinished) abort.abort()
      })
      let code = ""
      for (let i = 0; i < targets.length; i++) {
        const t = targets[i]!
        const body = withBody ? lazyBody(req) : undefined
        let upstream: Dispatcher.ResponseData
        try {
          upstream = await agent.request({
            origin: `http://${ServiceBackends.hostPort(t)}`,
            path: target,
            method: req.method as Dispatcher.HttpMethod,
            headers,
            body: body?.stream ?? null,
            signal: abort.signal,
            headersTimeout: limits.responseMs,
            bodyTimeout: limits.idleMs
          })
        } catch (e) {
          if (abort.signal.aborted) return
          code = codeOf(e)
          if (connectFailures.has(code)) markDown(t)
          const untouched = body === undefined || !body.started()
          const again = (connectFailures.has(code) && untouched) || (!withBody && idempotent.has(req.method ?? "") && staleConnection.has(code))
          log(`${service}: ${ServiceBackends.hostPort(t)}: ${code || describe(e)}${again && i + 1 < targets.length ? ", trying the next endpoint" : ""}`)
          if (!again) break
          continue
        }
        res.writeHead(upstream.statusCode, downstreamHeaders(upstream.headers))
        pipeline(upstream.body, res, (err) => {
          if (err !== undefined && err !== null) res.destroy()
        })
        return
      }
      answer(res, req, timeouts.has(code) ? IngressPages.gatewayTimeout(service, Math.round((code === "UND_ERR_CONNECT_TIMEOUT" ? limits.connectMs : limits.responseMs) / 1000)) : IngressPages.badGateway(service, targets.length), withBody)
    }

    const route = (req: IncomingMessage) => {
      const { host, path, target } = requestTarget(req)
      return { match: IngressRoutes.lookup(table(), host, path), host, path, target }
    }

    const onRequest = (secure: boolean) => (req: IncomingMessage, res: ServerResponse) => {
      const { match, host, path, target } = route(req)
      if (match === undefined) return answer(res, req, IngressPages.notFound(host, path))
      if (match.backend.problem !== undefined) return answer(res, req, IngressPages.unavailable(match.backend, IngressRoutes.describeBackend))
      forward(req, res, match.backend, target, secure).catch((e: unknown) => {
        log(`${IngressRoutes.describeBackend(match.backend)}: ${describe(e)}`)
        answer(res, req, IngressPages.badGateway(IngressRoutes.describeBackend(match.backend), 0))
      })
    }

    // ---- upgrades (websockets): a byte tunnel once the endpoint accepts the connection --------
    const tunnels = new Set<Socket | Duplex>()
    const requestHead = (req: IncomingMessage, target: string, secure: boolean): string => {
      let head = `${req.method} ${target} HTTP/1.1\r\n`
      for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
        if (forwardedNames.has(req.rawHeaders[i]!.toLowerCase())) continue
        head += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`
      }
      for (const [name, value] of Object.entries(forwarded(req, secure))) head += `${name}: ${value}\r\n`
      return `${head}\r\n`
    }
    const onUpgrade = (secure: boolean) => (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on("error", () => socket.destroy())
      const { match, host, path, target } = route(req)
      if (match === undefined) return void socket.end(IngressPages.raw(IngressPages.notFound(host, path)))
      if (match.backend.problem !== undefined) return void socket.end(IngressPages.raw(IngressPages.unavailable(match.backend, IngressRoutes.describeBackend)))
      const service = IngressRoutes.describeBackend(match.backend)
      const targets = order(match.backend)
      const attempt = (i: number, code: string) => {
        const t = targets[i]
        if (t === undefined || socket.destroyed) {
          const page = code === "ETIMEDOUT" ? IngressPages.gatewayTimeout(service, Math.round(limits.connectMs / 1000)) : IngressPages.badGateway(service, targets.length)
          return void socket.end(IngressPages.raw(page))
        }
        const upstream = connect({ host: t.address, port: t.port })
        upstream.setTimeout(limits.connectMs)
        const fail = (why: string) => {
          upstream.destroy()
          markDown(t)
          log(`${service}: ${ServiceBackends.hostPort(t)}: ${why} (upgrade)`)
          attempt(i + 1, why)
        }
        const onError = (e: Error) => fail(codeOf(e) || describe(e))
        const onTimeout = () => fail("ETIMEDOUT")
        upstream.once("error", onError)
        upstream.once("timeout", onTimeout)
        upstream.once("connect", () => {
          upstream.off("error", onError)
          upstream.off("timeout", onTimeout)
          upstream.setTimeout(0)
          upstream.setNoDelay(true)
          upstream.write(requestHead(req, target, secure))
          if (head.length > 0) upstream.write(head)
          tunnels.add(socket).add(upstream)
          const close = () => {
            tunnels.delete(socket)
            tunnels.delete(upstream)
            socket.destroy()
            upstream.destroy()
          }
          for (const s of [socket, upstream]) {
            s.once("close", close)
            s.on("error", close)
          }
          socket.pipe(upstream)
          upstream.pipe(socket)
        })
      }
      attempt(0, "")
    }

    // ---- TLS: a context per Secret, cached by its resourceVersion ----------------------------
    const fallbackPem = yield* Effect.promise(() => Tls.selfSigned("Koder Fleet ingress default certificate", ["ingress.fleet.invalid"]))
    const fallback = createSecureContext(fallbackPem)
    const contexts = new Map<string, { readonly version: string; readonly context: SecureContext | undefined }>()
    const contextOf = (source: IngressRoutes.TlsSource): SecureContext | undefined => {
      const secret = secrets.get(source.namespace, source.secretName)
      const version = secret === undefined ? "" : String((secret["metadata"] as Record<string, unknown>)["resourceVersion"])
      const key = `${source.namespace}/${source.secretName}`
      const cached = contexts.get(key)
      if (cached !== undefined && cached.version === version) return cached.context
      let context: SecureContext | undefined
      const data = (secret?.["data"] ?? {}) as Record<string, string | undefined>
      if (secret === undefined) log(`Ingress ${source.ingress}: TLS Secret ${key} (type kubernetes.io/tls) not found; serving the default certificate`)
      else {
        try {
          context = createSecureContext({ cert: Buffer.from(data["tls.crt"] ?? "", "base64"), key: Buffer.from(data["tls.key"] ?? "", "base64") })
        } catch (e) {
          log(`Ingress ${source.ingress}: TLS Secret ${key}: ${describe(e)}; serving the default certificate`)
        }
      }
      contexts.set(key, { version, context })
      return context
    }

    // ---- listeners --------------------------------------------------------------------------
    const servers: Array<Server> = []
    const listen = (server: Server, listen: Listen | undefined, flag: string, secure: boolean) =>
      Effect.gen(function* () {
        if (listen === undefined) return undefined
        server.on("request", onRequest(secure))
        server.on("upgrade", onUpgrade(secure))
        server.keepAliveTimeout = 30_000
        const bound = yield* bind(server, listen, flag, log)
        if (bound !== undefined) servers.push(server)
        return bound
      })
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const s of servers) {
          s.close()
          s.closeAllConnections()
        }
        for (const t of tunnels) t.destroy()
      })
    )
    const http = yield* listen(createHttpServer(), options.http, "--ingress-listen", false)
    const https = yield* listen(
      createHttpsServer({
        ...fallbackPem,
        ALPNProtocols: ["http/1.1"],
        SNICallback: (name, done) => {
          const source = IngressRoutes.tlsFor(table(), name)
          done(null, (source === undefined ? undefined : contextOf(source)) ?? fallback)
        }
      }),
      options.https,
      "--ingress-tls-listen",
      true
    )

    const bound = [http, https].filter((b) => b !== undefined)
    if (bound.length > 0) {
      const address = { ip: options.advertise ?? advertisedAddress(bound[0]!.host), ports: bound.map((b) => b.port) }
      yield* Controller.start({ client, informers, reconcilers: [IngressStatus.reconciler(address, hostPolicy)], component: "fleet-ingress" })
    }
    return { http, https, table }
  })

const urlOf = (scheme: string, a: { readonly host: string; readonly port: number } | undefined) =>
  a === undefined ? `${scheme} off` : `${scheme}://${a.host.includes(":") ? `[${a.host}]` : a.host}:${a.port}`

/** The line a role prints at start: `ingress on http://127.0.0.1:8080, https://127.0.0.1:8443` (tests read the ports from it). */
export const describeListeners = (proxy: Pick<IngressProxy, "http" | "https">): string => `ingress on ${urlOf("http", proxy.http)}, ${urlOf("https", proxy.https)}`
