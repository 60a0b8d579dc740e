/**
 * The server's metrics endpoint (DESIGN §1: port 9302): plain HTTP, `GET /metrics` in Prometheus'
 * text format, rendered from core's metric registry plus the process's own series.
 *
 * Plain HTTP, but not open: every endpoint except health checks needs authentication, so a scrape
 * carries a bearer token the API server accepts, and RBAC must allow `get` on the non-resource URL
 * `/metrics` (the built-in `system:monitoring` ClusterRole, bound to the group of the same name,
 * as in Kubernetes). `/healthz` answers without credentials.
 *
 *   GET /metrics ─▶ authenticate (bearer) ─401─▶ authorize (RBAC: get /metrics) ─403─▶ render
 *
 * `--metrics-listen ADDR:PORT` (default 127.0.0.1:9302; `off` disables it). When the default
 * address is taken (several servers on one host, as in tests), the server warns and runs without
 * it; an address given explicitly must be free.
 */
import { type ApiError, Authz, Exposition, type Http, Impersonation, InstrumentedStore, MetricRegistry, Status, type Store } from "@koder/fleet-core"
import { Effect, Either, Exit, Runtime, type Scope } from "effect"
import { createHash } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { ConfigError, ListenError } from "../DaemonError.js"
import * as ProcessMetrics from "./ProcessMetrics.js"
import * as ListenAddress from "../internal/listenAddress.js"
import * as EventLoopScheduler from "../v8/EventLoopScheduler.js"

/** Where to listen (`undefined`: off); `explicit` when the operator chose the address. */
export type Listen = { readonly host: string; readonly port: number; readonly explicit: boolean } | undefined

/** The default address: loopback, so nothing is exposed unless asked. */
export const defaultListen = { host: "127.0.0.1", port: 9302 } as const

/** The flag's help line. */
export const usage = `
  --metrics-listen ADDR:PORT   Prometheus /metrics over HTTP, bearer token + RBAC get /metrics
                               (default 127.0.0.1:9302; port 0 picks a free one; off disables it)`

/** Parse `--metrics-listen` (absent: the default). */
export const parseListen = (text: string | undefined): Either.Either<Listen, ConfigError> => {
  if (text === undefined) return Either.right({ ...defaultListen, explicit: false })
  if (text === "off") return Either.right(undefined)
  const address = ListenAddress.parse(text)
  if (address === undefined) return Either.left(new ConfigError({ message: `--metrics-listen ${JSON.stringify(text)}: expected ADDR:PORT or off` }))
  return Either.right({ ...address, explicit: true })
}

/** Decides whether a scrape may proceed: `undefined` to allow, else the Status to answer. */
export type Gate = (headers: Readonly<Record<string, string | undefined>>) => Effect.Effect<ApiError.ApiError | undefined>

/** The gate of the API: its authenticator, impersonation as on the API's port, then RBAC on `get /metrics`. */
export const gate =
  (authenticate: (headers: Readonly<Record<string, string | undefined>>) => Effect.Effect<Http.UserInfo, ApiError.ApiError>, authorize: Authz.Authorizer): Gate =>
  (headers) =>
    Effect.gen(function* () {
      const user = yield* Impersonation.impersonate(headers, yield* authenticate(headers), authorize)
      const attributes: Authz.Attributes = { user, verb: "get", resourceRequest: false, apiGroup: "", apiVersion: "", resource: "", subresource: "", namespace: "", name: "", path: "/metrics" }
      const decision = yield* authorize(attributes)
      return decision.allowed ? undefined : yield* Effect.fail(Authz.forbidden(attributes, decision.reason))
    }).pipe(Effect.catchAll((e) => Effect.succeed(e)))

/** A listening metrics endpoint. */
export interface MetricsServer {
  readonly address: { readonly host: string; readonly port: number }
}

const lowerCase = (headers: IncomingMessage["headers"]): Record<string, string | undefined> => {
  const out: Record<string, string | undefined> = {}
  for (const [k, v] of Object.entries(headers)) out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v
  return out
}

/** Render everything `registry` holds, with the process series. */
export const render = (registry: MetricRegistry.Registry): string => Exposition.render(registry.snapshot())

/**
 * Serve `/metrics` on `listen` until the scope closes; `undefined` when off, or when the default
 * address is taken (after `warn`).
 */
export const start = (options: {
  readonly listen: Listen
  readonly gate: Gate
  readonly registry?: MetricRegistry.Registry
  readonly warn: (message: string) => void
}): Effect.Effect<MetricsServer | undefined, ListenError, Scope.Scope> =>
  Effect.gen(function* () {
    const listen = options.listen
    if (listen === undefined) return undefined
    const registry = options.registry ?? (yield* MetricRegistry.MetricRegistry)
    const stopProcess = ProcessMetrics.register(registry)
    yield* Effect.addFinalizer(() => Effect.sync(stopProcess))
    // A scrape's check runs on the role's fiber scheduler, as its other requests do.
    const fibers = yield* EventLoopScheduler.defaultRuntime

    const send = (res: ServerResponse, status: number, body: string, type = "application/json") => {
      res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) })
      res.end(body)
    }
    const onRequest = (req: IncomingMessage, res: ServerResponse) => {
      const path = (req.url ?? "/").split("?")[0]
      if (path === "/healthz" || path === "/livez" || path === "/readyz") return send(res, 200, "ok", "text/plain")
      if (path !== "/metrics") return send(res, 404, JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", message: "not found", reason: "NotFound", code: 404 }))
      if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", message: "only GET", reason: "MethodNotAllowed", code: 405 }))
      void Runtime.runPromise(fibers)(options.gate(lowerCase(req.headers))).then((refused) => {
        if (refused !== undefined) return send(res, refused.status.code ?? 403, JSON.stringify(refused.status))
        send(res, 200, render(registry), Exposition.contentType)
      })
    }
    const server = createServer(onRequest)
    const bound = yield* Effect.async<AddressInfo | "in use", ListenError>((resume) => {
      const onError = (e: NodeJS.ErrnoException) => {
        if (e.code === "EADDRINUSE" && !listen.explicit) return resume(Effect.succeed("in use"))
        resume(Effect.fail(new ListenError({ message: `cannot listen on ${listen.host}:${listen.port} for metrics: ${e.message}` })))
      }
      server.once("error", onError)
      server.listen(listen.port, listen.host, () => {
        server.off("error", onError)
        resume(Effect.succeed(server.address() as AddressInfo))
      })
    })
    if (bound === "in use") {
      options.warn(`metrics: ${listen.host}:${listen.port} is in use; serving no /metrics (choose another with --metrics-listen)`)
      return undefined
    }
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Exit.void))
      })
    )
    return { address: { host: bound.address, port: bound.port } }
  })

/** `store`, with its operations timed into the process's registry (what `/metrics` serves). */
export const instrument = (store: Store.StoreService): Effect.Effect<Store.StoreService> =>
  Effect.map(MetricRegistry.MetricRegistry, (registry) => InstrumentedStore.make(store, registry))

/**
 * A gate for scrapes of an agent's `/metrics`, delegated to the API server: it asks, with the
 * scraper's own token, a SelfSubjectAccessReview of `get /metrics` (401 from the server: a bad
 * token; allowed false: 403). Answers are cached for a minute per token (never the token itself:
 * its hash), as the kubelet caches its webhook authorizer's answers.
 */
export const remoteGate = (server: string, fetch: typeof globalThis.fetch): ((authorization: string | undefined) => Promise<Status.Status | undefined>) => {
  const cache = new Map<string, { readonly at: number; readonly answer: Status.Status | undefined }>()
  const unauthorized = Status.unauthorized("a bearer token the API server accepts is required for /metrics")
  return async (authorization) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")
    if (m === null) return unauthorized
    const key = createHash("sha256").update(m[1]!).digest("hex")
    const hit = cache.get(key)
    if (hit !== undefined && Date.now() - hit.at < 60_000) return hit.answer
    const r = await fetch(`${server}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, {
      method: "POST",
      headers: { authorization: `Bearer ${m[1]}`, "content-type": "application/json" },
      body: JSON.stringify({ apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", spec: { nonResourceAttributes: { path: "/metrics", verb: "get" } } })
    })
    const body = (await r.json().catch(() => ({}))) as { status?: { allowed?: boolean; reason?: string } }
    const answer =
      r.status === 401
        ? unauthorized
        : r.ok && body.status?.allowed === true
          ? undefined
          : Status.forbidden({ group: "", resource: "nodes/metrics" }, "", `access to /metrics denied${body.status?.reason ? `: ${body.status.reason}` : ""}`)
    if (r.status < 500) {
      if (cache.size > 1000) cache.clear()
      cache.set(key, { at: Date.now(), answer })
    }
    return answer
  }
}

/** What an agent's endpoint serves as `/metrics`: the process registry, scrapes checked by `server`. */
export const forAgent = (server: string, fetch: typeof globalThis.fetch) => {
  ProcessMetrics.register(MetricRegistry.global)
  return { render: () => render(MetricRegistry.global), authorize: remoteGate(server, fetch) }
}
