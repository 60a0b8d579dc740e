/**
 * Bounds on connections that have not earned their keep (issue 29: 600 idle unauthenticated TLS
 * connections were held forever). A TCP connection must finish its TLS handshake and send the
 * headers of its first request within `firstRequestTimeout`, or it is closed; one remote address
 * holds at most `maxPerAddress` connections at once (more are closed on accept). Later requests
 * on a kept-alive connection are bounded by Node's own `headersTimeout` and `keepAliveTimeout`,
 * set by the HTTP server. Nothing here times a request once its headers are in: watches and
 * followed logs stream for as long as they last.
 *
 *   accept ─▶ per-address count (close past the cap) ─▶ TLS handshake ─▶ first request's headers
 *            └──────────── firstRequestTimeout from accept, else closed ───────────┘
 */
import { Duration } from "effect"
import type { Server } from "node:https"
import type { Socket } from "node:net"

/** The bounds. */
export interface Options {
  /** From accept to the first request's headers (TLS handshake included); default 10 s. */
  readonly firstRequestTimeout: Duration.DurationInput
  /** Connections one remote address may hold at once (0: no limit); default 4,096. */
  readonly maxPerAddress: number
}

/** The defaults of `Options`. */
export const defaults: Options = { firstRequestTimeout: "10 seconds", maxPerAddress: 4096 }

/** The guard on one server. */
export interface ConnectionGuard {
  /** A request's headers arrived on `socket`: it is no longer idle-unauthenticated. */
  readonly requested: (socket: Socket) => void
  /** Connections open per remote address right now (for tests and metrics). */
  readonly open: () => number
  /** Connections closed for never sending a request in time, and for passing the per-address cap. */
  readonly closed: () => { readonly idle: number; readonly overCap: number }
}

/** Watch `server`'s connections (call before it listens). */
export const attach = (server: Server, options: Options): ConnectionGuard => {
  const timeoutMillis = Duration.toMillis(Duration.decode(options.firstRequestTimeout))
  const perAddress = new Map<string, number>()
  const timers = new WeakMap<Socket, ReturnType<typeof setTimeout>>()
  let open = 0
  let idle = 0
  let overCap = 0

  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "unknown"
    const count = (perAddress.get(address) ?? 0) + 1
    if (options.maxPerAddress > 0 && count > options.maxPerAddress) {
      overCap++
      socket.destroy()
      return
    }
    perAddress.set(address, count)
    open++
    const timer = setTimeout(() => {
      idle++
      socket.destroy()
    }, timeoutMillis)
    timers.set(socket, timer)
    socket.once("close", () => {
      clearTimeout(timer)
      open--
      const left = (perAddress.get(address) ?? 1) - 1
      if (left === 0) perAddress.delete(address)
      else perAddress.set(address, left)
    })
  })

  return {
    requested: (socket) => {
      // A request arrives on the TLS socket, which wraps (`_parent`) the accepted TCP socket.
      const accepted = (socket as Socket & { readonly _parent?: Socket })._parent ?? socket
      const timer = timers.get(accepted)
      if (timer === undefined) return
      clearTimeout(timer)
      timers.delete(accepted)
    },
    open: () => open,
    closed: () => ({ idle, overCap })
  }
}
