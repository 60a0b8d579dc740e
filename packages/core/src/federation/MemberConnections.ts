/**
 * How the hub reaches each member's API: through the tunnel a Pull member keeps open to the hub
 * (MemberTunnel), or directly to a Push member's endpoint with the kubeconfig it was given. The
 * proxy and the aggregated reads (MemberProxy) ask this registry, whichever way a member is
 * reached. Requests carry the caller's identity as impersonation headers; the member authorizes
 * them with its own RBAC.
 */
import * as Status from "../model/Status.js"
import * as ApiError from "../api/ApiError.js"

/** One HTTP request for a member's API. */
export interface ProxyRequest {
  readonly method: string
  /** The member's path with its query string, e.g. `/api/v1/pods?labelSelector=app%3Dweb`. */
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body?: Uint8Array
}

/** The member's answer. */
export interface ProxyResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

/** A way to one member's API. */
export interface Connection {
  /** Pull (a tunnel the member opened) or Push (the hub dials). */
  readonly mode: "Pull" | "Push"
  readonly request: (request: ProxyRequest) => Promise<ProxyResponse>
}

/** The hub's connections, by member name. */
export interface Registry {
  /** Make `connection` the member's; the returned function removes it (if still the member's). */
  readonly set: (member: string, connection: Connection) => () => void
  readonly get: (member: string) => Connection | undefined
  readonly members: () => ReadonlyArray<string>
}

/** An empty registry. */
export const make = (): Registry => {
  const connections = new Map<string, Connection>()
  return {
    set: (member, connection) => {
      connections.set(member, connection)
      return () => {
        if (connections.get(member) === connection) connections.delete(member)
      }
    },
    get: (member) => connections.get(member),
    members: () => [...connections.keys()].sort()
  }
}

/** The 503 of a member the hub cannot reach now. */
export const unreachable = (member: string, why: string): ApiError.ApiError =>
  ApiError.of(Status.serviceUnavailable(`member ${member} cannot be reached: ${why}`))
