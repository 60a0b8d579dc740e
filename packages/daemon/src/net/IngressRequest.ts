/**
 * A client's request as the ingress reads and rewrites it: where it goes (host, path, target,
 * absolute-form included), the forwarding headers the proxy sets (never passed from the client),
 * and the hop-by-hop headers dropped both ways. `Host` is passed as the client sent it.
 */
import { IngressRoutes } from "@koder/fleet-core"
import type { IncomingMessage } from "node:http"

/** Hop-by-hop headers (RFC 9110 §7.6.1), plus ones undici sets itself. */
const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "expect", "http2-settings"])
const forwardedNames = new Set(["x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-real-ip"])

/** Where a request goes: its route (undefined: none), and the host, path and target it was matched by. */
export interface Routed {
  readonly match: IngressRoutes.Match | undefined
  readonly host: string
  readonly path: string
  readonly target: string
}

/** The client's address, IPv4-mapped addresses as plain IPv4. */
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

/** Look the request up in `table`. */
export const route = (table: IngressRoutes.RouteTable, req: IncomingMessage): Routed => {
  const { host, path, target } = requestTarget(req)
  return { match: IngressRoutes.lookup(table, host, path), host, path, target }
}

/** The header names a `Connection` header lists (they are hop-by-hop too). */
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
export const upstreamHeaders = (req: IncomingMessage, secure: boolean): Record<string, string | Array<string>> => {
  const listed = connectionTokens(req.headers.connection)
  const out: Record<string, string | Array<string>> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || hopByHop.has(name) || listed.has(name) || forwardedNames.has(name)) continue
    out[name] = value
  }
  return { ...out, ...forwarded(req, secure) }
}

/** The headers the client gets back. */
export const downstreamHeaders = (headers: Record<string, string | Array<string> | undefined>): Record<string, string | Array<string>> => {
  const listed = connectionTokens(headers["connection"])
  const out: Record<string, string | Array<string>> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || hopByHop.has(name) || listed.has(name)) continue
    out[name] = value
  }
  return out
}

/** The request head an endpoint gets for an upgrade: the client's headers as sent (forwarding ones replaced). */
export const upgradeHead = (req: IncomingMessage, target: string, secure: boolean): string => {
  let head = `${req.method} ${target} HTTP/1.1\r\n`
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (forwardedNames.has(req.rawHeaders[i]!.toLowerCase())) continue
    head += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`
  }
  for (const [name, value] of Object.entries(forwarded(req, secure))) head += `${name}: ${value}\r\n`
  return `${head}\r\n`
}

/** Whether a request carries a body (RFC 9112 §6.3). */
export const hasBody = (req: IncomingMessage): boolean => req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0
