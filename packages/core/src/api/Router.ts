/**
 * Kubernetes API paths to routes, purely. The resource part is parsed by shape only
 * (`/api/v1/namespaces/{ns}/{resource}/{name}/{subresource}`); whether the resource exists is the
 * registry's question, asked by the server after routing.
 */

/** Where a request goes. */
export type Route =
  | { readonly _tag: "Version" }
  | { readonly _tag: "Health"; readonly check: "healthz" | "readyz" | "livez" }
  | { readonly _tag: "CoreVersions" }
  | { readonly _tag: "GroupList" }
  | { readonly _tag: "Group"; readonly group: string }
  | { readonly _tag: "ResourceList"; readonly group: string; readonly version: string }
  | { readonly _tag: "OpenApiV2" }
  | { readonly _tag: "OpenApiV3"; readonly groupVersion: string | undefined }
  | ResourceRoute
  | { readonly _tag: "Unknown" }

/** A request for a resource, a collection of it, or one of its subresources. */
export interface ResourceRoute {
  readonly _tag: "Resource"
  readonly group: string
  readonly version: string
  readonly plural: string
  /** The namespace from the path; undefined for cluster-scoped paths and all-namespace lists. */
  readonly namespace: string | undefined
  readonly name: string | undefined
  readonly subresource: string | undefined
  /**
   * What follows a `proxy` subresource (`…/memberclusters/{name}/proxy/api/v1/pods` → `api/v1/pods`),
   * or an `aggregate` collection (`…/aggregate/core/v1/pods` → `core/v1/pods`); "" when nothing does.
   */
  readonly subpath?: string
  /** The legacy `/watch/` path prefix was used. */
  readonly watchPath: boolean
}

const namespaceSubresources = new Set(["status", "finalize"])

const resource = (group: string, version: string, rest: ReadonlyArray<string>): Route => {
  let parts = rest
  let watchPath = false
  if (parts[0] === "watch") {
    watchPath = true
    parts = parts.slice(1)
  }
  const make = (plural: string | undefined, namespace: string | undefined, name: string | undefined, subresource: string | undefined): Route =>
    plural === undefined || plural === "" || (name !== undefined && name === "")
      ? { _tag: "Unknown" }
      : { _tag: "Resource", group, version, plural, namespace, name, subresource, watchPath }
  // Proxies and aggregated reads carry a path of their own after the resource's.
  if (parts[0] === "aggregate" && parts.length > 1 && !watchPath) return { ...(make("aggregate", undefined, undefined, undefined) as ResourceRoute), subpath: parts.slice(1).join("/") }
  const proxyAt = parts[0] === "namespaces" ? 4 : 2
  if (parts[proxyAt] === "proxy" && parts.length > proxyAt && !watchPath) {
    const at = make(parts[proxyAt - 2], parts[0] === "namespaces" ? parts[1] : undefined, parts[proxyAt - 1], "proxy")
    return at._tag === "Resource" ? { ...at, subpath: parts.slice(proxyAt + 1).join("/") } : at
  }
  if (parts.length > 5) return { _tag: "Unknown" }
  if (parts[0] === "namespaces" && parts.length >= 3 && !namespaceSubresources.has(parts[2]!)) {
    if (parts[1] === "") return { _tag: "Unknown" }
    return make(parts[2], parts[1], parts[3], parts[4])
  }
  if (parts.length > 3) return { _tag: "Unknown" }
  return make(parts[0], undefined, parts[1], parts[2])
}

/** Route a path (without query string). */
export const route = (path: string): Route => {
  const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path
  let s: Array<string>
  try {
    s = trimmed.split("/").slice(1).map(decodeURIComponent)
  } catch {
    // A malformed percent-escape names no resource.
    return { _tag: "Unknown" }
  }
  switch (s[0]) {
    case "version":
      return s.length === 1 ? { _tag: "Version" } : { _tag: "Unknown" }
    case "healthz":
    case "readyz":
    case "livez":
      return { _tag: "Health", check: s[0] }
    case "openapi":
      if (s[1] === "v2" && s.length === 2) return { _tag: "OpenApiV2" }
      if (s[1] === "v3") return { _tag: "OpenApiV3", groupVersion: s.length > 2 ? s.slice(2).join("/") : undefined }
      return { _tag: "Unknown" }
    case "api":
      if (s.length === 1) return { _tag: "CoreVersions" }
      if (s.length === 2) return { _tag: "ResourceList", group: "", version: s[1]! }
      return resource("", s[1]!, s.slice(2))
    case "apis":
      if (s.length === 1) return { _tag: "GroupList" }
      if (s.length === 2) return { _tag: "Group", group: s[1]! }
      if (s.length === 3) return { _tag: "ResourceList", group: s[1]!, version: s[2]! }
      return resource(s[1]!, s[2]!, s.slice(3))
    default:
      return { _tag: "Unknown" }
  }
}
