/**
 * API discovery as kube-apiserver serves it: `/version`, `/api`, `/apis`, `/apis/{group}`,
 * `/api/v1` and `/apis/{group}/{version}` (APIResourceList), and the aggregated form
 * (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) newer kubectl asks for on `/api` and `/apis`.
 * Every document is a pure function of the registry, memoized until the registry changes (CRDs).
 */
import { Either } from "effect"
import type * as Status from "../model/Status.js"
import * as ApiError from "./ApiError.js"
import type { Registry, Resource } from "./Registry.js"
import { verbs as resourceVerbs } from "./Registry.js"

// ---- Documents -----------------------------------------------------------------------------

/** The `/version` body (`version.Info`). */
export interface VersionInfo {
  readonly major: string
  readonly minor: string
  readonly gitVersion: string
  readonly gitCommit: string
  readonly gitTreeState: string
  readonly buildDate: string
  readonly goVersion: string
  readonly compiler: string
  readonly platform: string
}

/** What the build knows about itself; everything but the Fleet version is optional. */
export interface BuildInfo {
  /** Fleet's own version, e.g. `0.1.0`. */
  readonly fleetVersion: string
  readonly gitCommit?: string
  readonly gitTreeState?: "clean" | "dirty"
  /** RFC 3339, e.g. `2025-01-02T03:04:05Z`. */
  readonly buildDate?: string
  /** `os/arch`, e.g. `linux/amd64` (core cannot ask the host; the daemon passes it). */
  readonly platform?: string
}

/** `/api`: the legacy group's versions. */
export interface APIVersions {
  readonly kind: "APIVersions"
  readonly versions: ReadonlyArray<string>
  readonly serverAddressByClientCIDRs: ReadonlyArray<{ readonly clientCIDR: string; readonly serverAddress: string }>
}

/** One version of a group. */
export interface GroupVersionForDiscovery {
  readonly groupVersion: string
  readonly version: string
}

/** `/apis/{group}`. */
export interface APIGroup {
  readonly kind: "APIGroup"
  readonly apiVersion: "v1"
  readonly name: string
  readonly versions: ReadonlyArray<GroupVersionForDiscovery>
  readonly preferredVersion: GroupVersionForDiscovery
}

/** `/apis`. */
export interface APIGroupList {
  readonly kind: "APIGroupList"
  readonly apiVersion: "v1"
  readonly groups: ReadonlyArray<Omit<APIGroup, "kind" | "apiVersion">>
}

/** One resource or subresource (`pods/status`) of an APIResourceList. */
export interface APIResource {
  readonly name: string
  readonly singularName: string
  readonly namespaced: boolean
  /** Set when the subresource serves another group's kind (`deployments/scale` → autoscaling). */
  readonly group?: string
  readonly version?: string
  readonly kind: string
  readonly verbs: ReadonlyArray<string>
  readonly shortNames?: ReadonlyArray<string>
  readonly categories?: ReadonlyArray<string>
}

/** `/api/v1`, `/apis/{group}/{version}`. */
export interface APIResourceList {
  readonly kind: "APIResourceList"
  readonly apiVersion: "v1"
  readonly groupVersion: string
  readonly resources: ReadonlyArray<APIResource>
}

/** A group, version and kind as aggregated discovery names a response type. */
export interface GroupVersionKind {
  readonly group: string
  readonly version: string
  readonly kind: string
}

/** One subresource in aggregated discovery. */
export interface APISubresourceDiscovery {
  readonly subresource: string
  readonly responseKind: GroupVersionKind
  readonly verbs: ReadonlyArray<string>
}

/** One resource in aggregated discovery. */
export interface APIResourceDiscovery {
  readonly resource: string
  readonly responseKind: GroupVersionKind
  readonly scope: "Namespaced" | "Cluster"
  readonly singularResource: string
  readonly verbs: ReadonlyArray<string>
  readonly shortNames?: ReadonlyArray<string>
  readonly categories?: ReadonlyArray<string>
  readonly subresources?: ReadonlyArray<APISubresourceDiscovery>
}

/** One version of a group in aggregated discovery. */
export interface APIVersionDiscovery {
  readonly version: string
  readonly resources: ReadonlyArray<APIResourceDiscovery>
  readonly freshness: "Current"
}

/** One group in aggregated discovery (the core group has no name). */
export interface APIGroupDiscovery {
  readonly metadata: { readonly name?: string }
  readonly versions: ReadonlyArray<APIVersionDiscovery>
}
/** The aggregated discovery document for `/api` or `/apis`. */
export interface APIGroupDiscoveryList {
  readonly kind: "APIGroupDiscoveryList"
  readonly apiVersion: "apidiscovery.k8s.io/v2" | "apidiscovery.k8s.io/v2beta1"
  readonly metadata: Record<string, never>
  readonly items: ReadonlyArray<APIGroupDiscovery>
}

// ---- Version -------------------------------------------------------------------------------

/** The Kubernetes API level Fleet emulates; kubectl and client-go judge version skew by it. */
export const kubernetesVersion = { major: 1, minor: 31, patch: 0 } as const

/**
 * The `/version` body. `gitVersion` is `v1.31.0+fleet.<version>`: semver build metadata, the
 * way k3s and other distributions mark themselves, so the version still sorts as 1.31.0.
 */
export const version = (info: BuildInfo = { fleetVersion: "0.1.0" }): VersionInfo => ({
  major: String(kubernetesVersion.major),
  minor: String(kubernetesVersion.minor),
  gitVersion: `v${kubernetesVersion.major}.${kubernetesVersion.minor}.${kubernetesVersion.patch}+fleet.${info.fleetVersion}`,
  gitCommit: info.gitCommit ?? "",
  gitTreeState: info.gitTreeState ?? "",
  buildDate: info.buildDate ?? "1970-01-01T00:00:00Z",
  goVersion: "n/a",
  compiler: "tsc",
  platform: info.platform ?? "unknown/unknown"
})

// ---- 404 -----------------------------------------------------------------------------------

/** kube-apiserver's body for a path it does not serve (unknown group, version or gv). */
export const notFound: Status.Status = {
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message: "the server could not find the requested resource",
  reason: "NotFound",
  details: {},
  code: 404
}

// ---- Ordering ------------------------------------------------------------------------------

// kube-apiserver lists groups by priority; these are its built-in groups in its order.
const groupPriority = [
  "apiregistration.k8s.io",
  "apps",
  "events.k8s.io",
  "authentication.k8s.io",
  "authorization.k8s.io",
  "autoscaling",
  "batch",
  "certificates.k8s.io",
  "networking.k8s.io",
  "policy",
  "rbac.authorization.k8s.io",
  "storage.k8s.io",
  "admissionregistration.k8s.io",
  "apiextensions.k8s.io",
  "scheduling.k8s.io",
  "coordination.k8s.io",
  "node.k8s.io",
  "discovery.k8s.io",
  "flowcontrol.apiserver.k8s.io"
]

const versionRe = /^v(\d+)(?:(alpha|beta)(\d+))?$/

/** Kubernetes' version priority: GA before beta before alpha, higher numbers first, then others by name. */
export const compareVersions = (a: string, b: string): number => {
  const ma = versionRe.exec(a)
  const mb = versionRe.exec(b)
  if (!ma || !mb) return ma ? -1 : mb ? 1 : a < b ? -1 : a > b ? 1 : 0
  const stage = (m: RegExpExecArray) => (m[2] === undefined ? 2 : m[2] === "beta" ? 1 : 0)
  return stage(mb) - stage(ma) || Number(mb[1]) - Number(ma[1]) || Number(mb[3] ?? 0) - Number(ma[3] ?? 0)
}

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

interface GroupEntry {
  readonly name: string
  readonly builtIn: boolean
  /** Versions in preference order, each with its resources sorted by plural. */
  readonly versions: ReadonlyArray<{ readonly version: string; readonly resources: ReadonlyArray<Resource> }>
}

// The core group first, then kube-apiserver's groups in its order, other built-ins, then CRDs.
const groupRank = (g: GroupEntry) => {
  if (g.name === "") return -1
  const i = groupPriority.indexOf(g.name)
  return i >= 0 ? i : g.builtIn ? groupPriority.length : groupPriority.length + 1
}

const groupsOf = (registry: Registry): ReadonlyArray<GroupEntry> => {
  const byGroup = new Map<string, Map<string, Array<Resource>>>()
  const builtIn = new Set<string>()
  for (const r of registry.all()) {
    let versions = byGroup.get(r.group)
    if (!versions) byGroup.set(r.group, (versions = new Map()))
    const list = versions.get(r.version)
    if (list) list.push(r)
    else versions.set(r.version, [r])
    if (r.crd === undefined) builtIn.add(r.group)
  }
  const entries: Array<GroupEntry> = [...byGroup].map(([name, versions]) => ({
    name,
    builtIn: builtIn.has(name),
    versions: [...versions]
      .sort(([a], [b]) => compareVersions(a, b))
      .map(([version, resources]) => ({ version, resources: [...resources].sort((a, b) => byName(a.plural, b.plural)) }))
  }))
  return entries.sort((a, b) => groupRank(a) - groupRank(b) || byName(a.name, b.name))
}

// ---- Memo ----------------------------------------------------------------------------------

/**
 * A per-registry cache that empties on every registry change (a CRD added or removed). It keeps
 * one change listener per registry for the registry's life, which is the server's.
 */
export const memoizeByRegistry = <A>(compute: (registry: Registry, key: string) => A) => {
  const caches = new WeakMap<Registry, Map<string, A>>()
  return (registry: Registry, key: string): A => {
    let cache = caches.get(registry)
    if (!cache) {
      const fresh = new Map<string, A>()
      cache = fresh
      caches.set(registry, fresh)
      registry.onChange(() => fresh.clear())
    }
    if (cache.has(key)) return cache.get(key) as A
    const value = compute(registry, key)
    cache.set(key, value)
    return value
  }
}

const groups = memoizeByRegistry((registry) => groupsOf(registry))
const groupsFor = (registry: Registry) => groups(registry, "")

/** Every served group version in discovery order (core first), with its resources sorted by plural. */
export const groupVersions = (
  registry: Registry
): ReadonlyArray<{ readonly group: string; readonly version: string; readonly resources: ReadonlyArray<Resource> }> =>
  groupsFor(registry).flatMap((g) => g.versions.map((v) => ({ group: g.name, version: v.version, resources: v.resources })))

// ---- Legacy discovery ----------------------------------------------------------------------

/** `/api`: the core group's versions; `serverAddress` is the `host:port` clients reached. */
export const apiVersions = (serverAddress: string): APIVersions => ({
  kind: "APIVersions",
  versions: ["v1"],
  serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }]
})

const gv = (group: string, version: string): GroupVersionForDiscovery => ({
  groupVersion: group === "" ? version : `${group}/${version}`,
  version
})

const groupBody = (g: GroupEntry) => {
  const versions = g.versions.map((v) => gv(g.name, v.version))
  return { name: g.name, versions, preferredVersion: versions[0] ?? gv(g.name, "v1") }
}

const groupListMemo = memoizeByRegistry(
  (registry): APIGroupList => ({
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: groupsFor(registry).filter((g) => g.name !== "").map(groupBody)
  })
)

/** `/apis`: every named group, built-in groups first in kube-apiserver's order, then CRD groups by name. */
export const apiGroupList = (registry: Registry): APIGroupList => groupListMemo(registry, "")

/** `/apis/{group}`; an unknown (or the unnamed core) group is kube-apiserver's 404. */
export const apiGroup = (registry: Registry, name: string): Either.Either<APIGroup, ApiError.ApiError> => {
  const g = name === "" ? undefined : groupsFor(registry).find((e) => e.name === name)
  return g ? Either.right({ kind: "APIGroup", apiVersion: "v1", ...groupBody(g) }) : Either.left(ApiError.of(notFound))
}

const subresourceVerbs = ["get", "patch", "update"] as const

const scaleKind: GroupVersionKind = { group: "autoscaling", version: "v1", kind: "Scale" }

const apiResources = (r: Resource): ReadonlyArray<APIResource> => {
  const out: Array<APIResource> = [
    {
      name: r.plural,
      singularName: r.singular,
      namespaced: r.namespaced,
      kind: r.kind,
      verbs: r.verbs ?? resourceVerbs,
      ...(r.shortNames.length > 0 ? { shortNames: r.shortNames } : {}),
      ...(r.categories.length > 0 ? { categories: r.categories } : {})
    }
  ]
  // kube-apiserver lists subresources with an empty singularName, sorted by path.
  if (r.subresources.scale) {
    out.push({ name: `${r.plural}/scale`, singularName: "", namespaced: r.namespaced, ...scaleKind, verbs: subresourceVerbs })
  }
  if (r.subresources.status) {
    out.push({ name: `${r.plural}/status`, singularName: "", namespaced: r.namespaced, kind: r.kind, verbs: subresourceVerbs })
  }
  return out
}

// All lists at once, so unknown group versions asked for never grow the cache.
const resourceLists = memoizeByRegistry((registry): ReadonlyMap<string, APIResourceList> => {
  const lists = new Map<string, APIResourceList>()
  for (const g of groupsFor(registry)) {
    for (const v of g.versions) {
      const groupVersion = gv(g.name, v.version).groupVersion
      lists.set(groupVersion, { kind: "APIResourceList", apiVersion: "v1", groupVersion, resources: v.resources.flatMap(apiResources) })
    }
  }
  return lists
})

/** `/api/v1` (group `""`) and `/apis/{group}/{version}`, resources and subresources by name; unknown → 404. */
export const apiResourceList = (
  registry: Registry,
  group: string,
  version: string
): Either.Either<APIResourceList, ApiError.ApiError> => {
  const list = version.includes("/") ? undefined : resourceLists(registry, "").get(gv(group, version).groupVersion)
  return list ? Either.right(list) : Either.left(ApiError.of(notFound))
}

// ---- Aggregated discovery ------------------------------------------------------------------

/** The media type of aggregated discovery, v2 (Kubernetes 1.30+). */
export const aggregatedMediaType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

/** The media type of aggregated discovery, v2beta1 (what 1.26–1.29 clients ask for). */
export const aggregatedMediaTypeV2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"

const mediaRange = (range: string) => {
  const [type = "", ...params] = range.split(";").map((s) => s.trim())
  const p = new Map<string, string>()
  for (const param of params) {
    const eq = param.indexOf("=")
    if (eq > 0) p.set(param.slice(0, eq).trim().toLowerCase(), param.slice(eq + 1).trim().replace(/^"(.*)"$/, "$1"))
  }
  return { type: type.toLowerCase(), params: p }
}

/**
 * The aggregated discovery media type to answer an `Accept` header with, or `undefined` to serve
 * the legacy documents. The highest q wins, ties going to the client's order (client-go lists v2,
 * then v2beta1, then plain JSON); ranges with `q=0` and other profiles are ignored.
 */
export const wantsAggregated = (accept: string | undefined): string | undefined => {
  if (accept === undefined) return undefined
  let best: { readonly q: number; readonly mediaType: string | undefined } | undefined
  for (const range of accept.split(",")) {
    const { params, type } = mediaRange(range)
    const q = params.has("q") ? Number(params.get("q")) : 1
    if (!(q > 0)) continue
    // null: this range is not one we can answer; undefined: the legacy JSON document.
    let mediaType: string | undefined | null = null
    if (!params.has("g") && (type === "application/json" || type === "application/*" || type === "*/*")) mediaType = undefined
    else if (type === "application/json" && params.get("g") === "apidiscovery.k8s.io" && params.get("as") === "APIGroupDiscoveryList") {
      const v = params.get("v")
      if (v === "v2") mediaType = aggregatedMediaType
      else if (v === "v2beta1") mediaType = aggregatedMediaTypeV2beta1
    }
    if (mediaType !== null && (best === undefined || q > best.q)) best = { q, mediaType }
  }
  return best?.mediaType
}

const responseKind = (r: Resource): GroupVersionKind => ({ group: r.group, version: r.version, kind: r.kind })

const resourceDiscovery = (r: Resource): APIResourceDiscovery => {
  const subresources: Array<APISubresourceDiscovery> = []
  if (r.subresources.scale) subresources.push({ subresource: "scale", responseKind: scaleKind, verbs: subresourceVerbs })
  if (r.subresources.status) subresources.push({ subresource: "status", responseKind: responseKind(r), verbs: subresourceVerbs })
  return {
    resource: r.plural,
    responseKind: responseKind(r),
    scope: r.namespaced ? "Namespaced" : "Cluster",
    singularResource: r.singular,
    verbs: r.verbs ?? resourceVerbs,
    ...(r.shortNames.length > 0 ? { shortNames: r.shortNames } : {}),
    ...(r.categories.length > 0 ? { categories: r.categories } : {}),
    ...(subresources.length > 0 ? { subresources } : {})
  }
}

const aggregatedItems = memoizeByRegistry(
  (registry, root): ReadonlyArray<APIGroupDiscovery> =>
    groupsFor(registry)
      .filter((g) => (root === "api" ? g.name === "" : g.name !== ""))
      .map((g) => ({
        metadata: g.name === "" ? {} : { name: g.name },
        versions: g.versions.map((v) => ({
          version: v.version,
          resources: v.resources.map(resourceDiscovery),
          freshness: "Current" as const
        }))
      }))
)

/**
 * The aggregated discovery document for `/api` (core group) or `/apis` (all named groups), its
 * `apiVersion` matching `mediaType` (what `wantsAggregated` chose; v2 by default).
 */
export const aggregated = (registry: Registry, root: "api" | "apis", mediaType: string = aggregatedMediaType): APIGroupDiscoveryList => ({
  kind: "APIGroupDiscoveryList",
  apiVersion: mediaType === aggregatedMediaTypeV2beta1 ? "apidiscovery.k8s.io/v2beta1" : "apidiscovery.k8s.io/v2",
  metadata: {},
  items: aggregatedItems(registry, root)
})
