/**
 * Which endpoints of a backend a request tries, in what order, and when a failed attempt may
 * move on: round-robin per backend, an endpoint that refused a connection sorted last for
 * `downMs` (a dead pod costs one failed connect, not one per request).
 */
import { IngressRoutes, ServiceBackends } from "@koder/fleet-core"

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

const idempotent = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"])
/** The endpoint was never reached: nothing of the request left the proxy. */
export const connectFailures: ReadonlySet<string> = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"])
/** A reused connection closed under the request. */
const staleConnection = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"])
/** The failures answered 504 rather than 502. */
export const timeouts: ReadonlySet<string> = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT"])
/** How long an endpoint that refused a connection sorts last. */
const downMs = 5000

/** Each backend's next turn, and the endpoints sorted last until a time. */
export interface Upstreams {
  /** Endpoints tried per request at most. */
  readonly maxAttempts: number
  /** Requests routed so far, by backend. */
  readonly turns: Map<string, number>
  /** Until when an endpoint (`host:port`) sorts last. */
  readonly downUntil: Map<string, number>
}

/** No turns taken, no endpoint down. */
export const make = (maxAttempts: number): Upstreams => ({ maxAttempts, turns: new Map(), downUntil: new Map() })

/** The error code of a failed attempt (undici puts it on the cause), or "". */
export const codeOf = (e: unknown): string => {
  const o = e as { code?: unknown; cause?: { code?: unknown } } | undefined
  return typeof o?.code === "string" ? o.code : typeof o?.cause?.code === "string" ? o.cause.code : ""
}

/** The endpoints one request tries: this backend's next rotation, the ones up first, at most `maxAttempts`. */
export const order = (u: Upstreams, backend: IngressRoutes.Backend): ReadonlyArray<IngressRoutes.Target> => {
  const targets = backend.targets
  const key = IngressRoutes.describeBackend(backend)
  const turn = u.turns.get(key) ?? 0
  u.turns.set(key, turn + 1)
  const start = turn % targets.length
  const rotated = [...targets.slice(start), ...targets.slice(0, start)]
  const now = Date.now()
  const up = (t: IngressRoutes.Target) => (u.downUntil.get(ServiceBackends.hostPort(t)) ?? 0) <= now
  return [...rotated.filter(up), ...rotated.filter((t) => !up(t))].slice(0, u.maxAttempts)
}

/** `t` refused or failed a connection: sort it last for `downMs`. */
export const markDown = (u: Upstreams, t: IngressRoutes.Target): void => {
  const { downUntil } = u
  const now = Date.now()
  // Pod addresses come and go: forget expired marks before they pile up.
  if (downUntil.size >= 1024) for (const [k, until] of downUntil) if (until <= now) downUntil.delete(k)
  downUntil.set(ServiceBackends.hostPort(t), now + downMs)
}

/**
 * Whether a failed attempt may move to the next endpoint: nothing of the request was put on the
 * wire (`untouched`: the body was never read), or a body-less idempotent request lost a reused
 * keep-alive connection.
 */
export const retryable = (code: string, untouched: boolean, withBody: boolean, method: string | undefined): boolean =>
  (connectFailures.has(code) && untouched) || (!withBody && idempotent.has(method ?? "") && staleConnection.has(code))
