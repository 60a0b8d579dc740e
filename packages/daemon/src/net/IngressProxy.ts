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
 *
 * This file sets up the listeners and composes the parts: IngressTable (the route table from
 * informers), IngressCertificates (TLS by SNI), IngressUpstreams (endpoint order, retries),
 * IngressRequest (target, headers), IngressForward (one plain request), IngressTunnel (upgrades).
 */
import { ApiClient, type Client, Controller, Informer, type IngressRoutes } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { createServer as createHttpServer, type Server } from "node:http"
import { createServer as createHttpsServer } from "node:https"
import { Agent } from "undici"
import * as HostFacts from "../agent/HostFacts.js"
import { describe, ListenError } from "../DaemonError.js"
import * as IngressCertificates from "./IngressCertificates.js"
import * as IngressForward from "./IngressForward.js"
import * as IngressStatus from "./IngressStatus.js"
import * as IngressTable from "./IngressTable.js"
import * as IngressTunnel from "./IngressTunnel.js"
import * as IngressUpstreams from "./IngressUpstreams.js"

/** An address to listen on; `explicit`: given by a flag (failing to bind it fails startup). */
export interface Listen {
  readonly host: string
  readonly port: number
  readonly explicit: boolean
}

/** Upstream time limits. */
export type Timeouts = IngressUpstreams.Timeouts

/** The defaults: 5 s to connect, 60 s to answer (nginx's proxy_read_timeout), 60 s idle. */
export const defaultTimeouts: Timeouts = IngressUpstreams.defaultTimeouts

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

/** The address Ingress status shows for a listen host. */
export const advertisedAddress = (host: string): string => (host === "0.0.0.0" || host === "::" ? HostFacts.defaultInternalIP() : host)

/** Bind `server` to `listen`: its address, or undefined when a default address is taken (logged). */
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

/** The proxy's listeners (those bound), closed with their connections and tunnels on shutdown. */
interface Listeners {
  readonly forwarding: IngressForward.Forwarding
  readonly tunnels: IngressTunnel.Tunnels
  readonly log: (line: string) => void
  readonly servers: Array<Server>
}

/** Serve the proxy on `server` at `listen` (undefined: off); the bound address. */
const listenOn = (l: Listeners, server: Server, listen: Listen | undefined, flag: string, secure: boolean) =>
  Effect.gen(function* () {
    if (listen === undefined) return undefined
    server.on("request", IngressForward.handler(l.forwarding, secure))
    server.on("upgrade", IngressTunnel.handler(l.tunnels, secure))
    server.keepAliveTimeout = 30_000
    const bound = yield* bind(server, listen, flag, l.log)
    if (bound !== undefined) l.servers.push(server)
    return bound
  })

/** Start the proxy in the current scope; it stops (listeners, tunnels, pools) with the scope. */
export const make = (options: Options): Effect.Effect<IngressProxy, ListenError, Scope.Scope> =>
  Effect.gen(function* () {
    const log = options.log ?? ((line: string) => console.error(`koder-fleet ingress: ${line}`))
    const limits: Timeouts = { ...defaultTimeouts, ...options.timeouts }
    const { client } = options

    yield* IngressStatus.ensureClass(client).pipe(Effect.catchAll((e) => Effect.sync(() => log(`cannot create IngressClass fleet: ${e.status.message ?? e.status.reason}`))))

    const informers = yield* Informer.makeShared(client)
    const secrets = yield* IngressCertificates.secrets(client)
    const routes = yield* IngressTable.make(client, informers, log)
    yield* Effect.all([routes.synced, secrets.synced], { discard: true })
    const { table } = routes

    const upstreams = IngressUpstreams.make(Math.max(1, options.maxAttempts ?? 3))
    const agent = new Agent({ connect: { timeout: limits.connectMs }, keepAliveTimeout: 4000, keepAliveMaxTimeout: 60_000 })
    yield* Effect.addFinalizer(() => Effect.promise(() => agent.destroy().catch(() => undefined)))
    const listeners: Listeners = {
      forwarding: { agent, upstreams, timeouts: limits, table, log },
      tunnels: { upstreams, connectMs: limits.connectMs, table, log, open: new Set() },
      log,
      servers: []
    }
    const certs = yield* IngressCertificates.make(secrets, table, log)

    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const s of listeners.servers) {
          s.close()
          s.closeAllConnections()
        }
        IngressTunnel.closeAll(listeners.tunnels)
      })
    )
    const http = yield* listenOn(listeners, createHttpServer(), options.http, "--ingress-listen", false)
    const https = yield* listenOn(
      listeners,
      createHttpsServer({ ...certs.fallbackPem, ALPNProtocols: ["http/1.1"], SNICallback: IngressCertificates.sni(certs) }),
      options.https,
      "--ingress-tls-listen",
      true
    )

    const bound = [http, https].filter((b) => b !== undefined)
    if (bound.length > 0) {
      const address = { ip: options.advertise ?? advertisedAddress(bound[0]!.host), ports: bound.map((b) => b.port) }
      yield* Controller.start({ informers, reconcilers: [IngressStatus.reconciler(address, routes.hostPolicy)], component: "fleet-ingress" }).pipe(
        Effect.provideService(ApiClient.ApiClient, client)
      )
    }
    return { http, https, table }
  })

/** `scheme://host:port`, or `scheme off`. */
const urlOf = (scheme: string, a: { readonly host: string; readonly port: number } | undefined) =>
  a === undefined ? `${scheme} off` : `${scheme}://${a.host.includes(":") ? `[${a.host}]` : a.host}:${a.port}`

/** The line a role prints at start: `ingress on http://127.0.0.1:8080, https://127.0.0.1:8443` (tests read the ports from it). */
export const describeListeners = (proxy: Pick<IngressProxy, "http" | "https">): string => `ingress on ${urlOf("http", proxy.http)}, ${urlOf("https", proxy.https)}`
