/**
 * Upgrades (websockets): a raw TCP connection to the first endpoint that accepts one, the request
 * head re-sent with the forwarding headers, then bytes piped both ways until either side closes.
 */
import { IngressRoutes, ServiceBackends } from "@koder/fleet-core"
import type { IncomingMessage } from "node:http"
import { connect, type Socket } from "node:net"
import type { Duplex } from "node:stream"
import { describe } from "../DaemonError.js"
import * as IngressPages from "./IngressPages.js"
import * as IngressRequest from "./IngressRequest.js"
import * as IngressUpstreams from "./IngressUpstreams.js"

/** What every tunnel of one proxy shares, and the open ones. */
export interface Tunnels {
  readonly upstreams: IngressUpstreams.Upstreams
  /** To open a connection to an endpoint (then the next endpoint is tried). */
  readonly connectMs: number
  readonly table: () => IngressRoutes.RouteTable
  readonly log: (line: string) => void
  /** Both ends of every open tunnel. */
  readonly open: Set<Socket | Duplex>
}

/** Pipe `socket` and `upstream` both ways; either closing closes both. */
const splice = (tunnels: Tunnels, socket: Duplex, upstream: Socket) => {
  tunnels.open.add(socket).add(upstream)
  const close = () => {
    tunnels.open.delete(socket)
    tunnels.open.delete(upstream)
    socket.destroy()
    upstream.destroy()
  }
  for (const s of [socket, upstream]) {
    s.once("close", close)
    s.on("error", close)
  }
  socket.pipe(upstream)
  upstream.pipe(socket)
}

/** The 'upgrade' listener of one listener (`secure`: the TLS one). */
export const handler = (tunnels: Tunnels, secure: boolean) => (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
  socket.on("error", () => socket.destroy())
  const { match, host, path, target } = IngressRequest.route(tunnels.table(), req)
  if (match === undefined) return void socket.end(IngressPages.raw(IngressPages.notFound(host, path)))
  if (match.backend.problem !== undefined) return void socket.end(IngressPages.raw(IngressPages.unavailable(match.backend, IngressRoutes.describeBackend)))
  const service = IngressRoutes.describeBackend(match.backend)
  const targets = IngressUpstreams.order(tunnels.upstreams, match.backend)
  const attempt = (i: number, code: string) => {
    const t = targets[i]
    if (t === undefined || socket.destroyed) {
      const page = code === "ETIMEDOUT" ? IngressPages.gatewayTimeout(service, Math.round(tunnels.connectMs / 1000)) : IngressPages.badGateway(service, targets.length)
      return void socket.end(IngressPages.raw(page))
    }
    const upstream = connect({ host: t.address, port: t.port })
    upstream.setTimeout(tunnels.connectMs)
    const fail = (why: string) => {
      upstream.destroy()
      IngressUpstreams.markDown(tunnels.upstreams, t)
      tunnels.log(`${service}: ${ServiceBackends.hostPort(t)}: ${why} (upgrade)`)
      attempt(i + 1, why)
    }
    const onError = (e: Error) => fail(IngressUpstreams.codeOf(e) || describe(e))
    const onTimeout = () => fail("ETIMEDOUT")
    upstream.once("error", onError)
    upstream.once("timeout", onTimeout)
    upstream.once("connect", () => {
      upstream.off("error", onError)
      upstream.off("timeout", onTimeout)
      upstream.setTimeout(0)
      upstream.setNoDelay(true)
      upstream.write(IngressRequest.upgradeHead(req, target, secure))
      if (head.length > 0) upstream.write(head)
      splice(tunnels, socket, upstream)
    })
  }
  attempt(0, "")
}

/** Cut every open tunnel (shutdown). */
export const closeAll = (tunnels: Tunnels): void => {
  for (const t of tunnels.open) t.destroy()
}
