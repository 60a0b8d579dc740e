/**
 * Authorization: may this user do this verb on this resource? The request's attributes are
 * derived once from the route (as kube-apiserver's RequestInfo does) and handed to an Authorizer
 * (RBAC in `policy/RbacEvaluator`; `allowAll` when none is configured). A denial becomes kube-apiserver's 403 Status.
 */
import { Effect } from "effect"
import * as Status from "../model/Status.js"
import * as ApiError from "./ApiError.js"
import type { ApiRequest, UserInfo } from "./Http.js"
import type { Route } from "./Router.js"

/** What is being asked, in Kubernetes' authorization vocabulary. */
export interface Attributes {
  readonly user: UserInfo
  /** get, list, watch, create, update, patch, delete, deletecollection (resource requests), or the HTTP verb lower-cased. */
  readonly verb: string
  readonly resourceRequest: boolean
  readonly apiGroup: string
  readonly apiVersion: string
  readonly resource: string
  readonly subresource: string
  readonly namespace: string
  readonly name: string
  /** The request path (non-resource requests are authorized by path). */
  readonly path: string
}

/** An authorization decision. */
export interface Decision {
  readonly allowed: boolean
  /** Why, for the 403 message and the audit log. */
  readonly reason: string
}

/** Decides whether a request may proceed. */
export type Authorizer = (attributes: Attributes) => Effect.Effect<Decision>

/** Allow everything (a cluster with authentication only). */
export const allowAll: Authorizer = () => Effect.succeed({ allowed: true, reason: "" })

const watching = (q: URLSearchParams) => q.get("watch") === "true" || q.get("watch") === "1"

/** The attributes of a request, from its route and method. */
// Fleet's own verbs for reaching into a pod's processes: granting `create` on pods must never
// grant a shell, so POST pods/exec and pods/signal are authorized as `exec` and `signal`.
// A WebSocket exec or attach is a GET, and still a shell: it is `exec` too (kube authorizes
// these upgrades as `create`, KEP-4006). pods/attach reaches the main process's console: `exec`.
const processVerb = (route: Extract<Route, { _tag: "Resource" }>): string | undefined => {
  if (route.group !== "" || route.plural !== "pods" || route.name === undefined) return undefined
  if (route.subresource === "exec" || route.subresource === "signal") return route.subresource
  if (route.subresource === "attach") return "exec"
  return undefined
}
const streamVerb = (route: Extract<Route, { _tag: "Resource" }>): string | undefined =>
  route.group === "" && route.plural === "pods" && route.name !== undefined && route.subresource === "portforward" ? "create" : processVerb(route)

export const attributes = (route: Route, request: ApiRequest): Attributes => {
  const method = request.method.toUpperCase()
  const base = { user: request.user, path: request.path, apiGroup: "", apiVersion: "", resource: "", subresource: "", namespace: "", name: "" }
  if (route._tag !== "Resource") return { ...base, verb: method.toLowerCase(), resourceRequest: false }
  const collection = route.name === undefined
  const verb =
    (method === "GET" || method === "POST") && streamVerb(route) !== undefined
      ? streamVerb(route)!
      : method === "GET" || method === "HEAD"
      ? route.watchPath || watching(request.query)
        ? "watch"
        : collection
          ? "list"
          : "get"
      : method === "POST"
        ? processVerb(route) ?? "create"
        : method === "PUT"
          ? "update"
          : method === "PATCH"
            ? "patch"
            : method === "DELETE"
              ? collection
                ? "deletecollection"
                : "delete"
              : method.toLowerCase()
  // A namespace object is its own namespace, as in Kubernetes' RequestInfo.
  const namespace = route.namespace ?? (route.group === "" && route.plural === "namespaces" && route.name !== undefined ? route.name : "")
  return {
    ...base,
    verb,
    resourceRequest: true,
    apiGroup: route.group,
    apiVersion: route.version,
    resource: route.plural,
    subresource: route.subresource ?? "",
    namespace,
    name: route.name ?? ""
  }
}

/** kube-apiserver's 403 for a denied request. */
export const forbidden = (a: Attributes, reason: string): ApiError.ApiError => {
  const who = `User ${JSON.stringify(a.user.name)}`
  if (!a.resourceRequest) {
    const status = Status.forbidden("", "", "")
    return ApiError.of({ ...status, message: `forbidden: ${who} cannot ${a.verb} path ${JSON.stringify(a.path)}${reason ? `: ${reason}` : ""}`, details: {} })
  }
  const resource = a.subresource === "" ? a.resource : `${a.resource}/${a.subresource}`
  const scope = a.namespace === "" ? "at the cluster scope" : `in the namespace ${JSON.stringify(a.namespace)}`
  return ApiError.of(
    Status.forbidden(
      { group: a.apiGroup, resource },
      a.name,
      `${who} cannot ${a.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(a.apiGroup)} ${scope}${reason ? `: ${reason}` : ""}`
    )
  )
}
