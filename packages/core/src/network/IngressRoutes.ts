/**
 * The ingress route table: which Service (and which of its ready endpoints) an HTTP request for
 * `host` + `path` goes to, and which Secret holds the certificate for a TLS server name. Pure: it
 * is built from the Ingresses, IngressClasses, Services and EndpointSlices the proxy's informers
 * hold, and rebuilt whenever one of them changes; the proxy (daemon `net/IngressProxy.ts`) only
 * looks things up in it.
 *
 * Matching follows the Kubernetes Ingress specification:
 *   - an Ingress is served when its class (`spec.ingressClassName`, or the legacy
 *     `kubernetes.io/ingress.class` annotation) names an IngressClass of Fleet's controller, or
 *     when it names none and such a class is the cluster's default;
 *   - hosts: an exact host first, then a wildcard `*.example.com` (exactly one more DNS label:
 *     `a.example.com`, not `example.com` nor `a.b.example.com`), then rules without a host, which
 *     apply to every request; the first of those tiers with a matching path wins;
 *   - paths: `Exact` is string equality; `Prefix` (and `ImplementationSpecific`) matches
 *     `/`-separated elements, a trailing `/` ignored (`/foo` matches `/foo`, `/foo/` and
 *     `/foo/bar`, not `/foobar`); the longest path wins, `Exact` over `Prefix` on a tie;
 *   - a request no rule matches goes to the `defaultBackend` of an Ingress naming its host, else
 *     to the oldest served Ingress's `defaultBackend`, else nowhere (the proxy answers 404);
 *   - the same host and path in two Ingresses of one namespace: the older one (creationTimestamp,
 *     then namespace/name) wins, as ingress-nginx resolves it;
 *   - across namespaces, a host belongs to one namespace (`IngressHosts`): the rules and TLS hosts
 *     an Ingress lost to another namespace are not in the table, and a request for an owned host
 *     falls through to rules without a host (or the global default backend) only when they are
 *     the same namespace's; the certificate for an owned host is only ever the owner's.
 * Backends are the usable endpoints (`ServiceBackends`: ready, else serving while terminating) of
 * the Service's EndpointSlices for the chosen Service port (host IP and host port in host-network
 * mode, pod IPs in isolated mode); an ExternalName Service is its DNS name and the port asked for.
 */
import * as Ingress from "../model/Ingress.js"
import * as IngressHosts from "./IngressHosts.js"
import * as ServiceBackends from "./ServiceBackends.js"
import { asArray, asObject, asString } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"

/** A JSON object from the API. */
export type JsonObject = Record<string, unknown>

/** The annotation marking an IngressClass as the cluster's default. */
export const DefaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"

/** An address the proxy dials: an IP (or DNS name) and a port. */
export interface Target {
  readonly address: string
  readonly port: number
}

/** Why a backend cannot take a request (the proxy answers 503 and says so). */
export type Problem = "ServiceNotFound" | "PortNotFound" | "NoReadyEndpoints" | "UnsupportedBackend"

/** Where matching requests go: a Service port and its ready endpoints. */
export interface Backend {
  readonly namespace: string
  /** The Service's name (or the resource's, for a resource backend Fleet does not serve). */
  readonly service: string
  /** The Service port as the Ingress names it: a name or a number. */
  readonly port: string
  /** The addresses to balance over, in a stable order. */
  readonly targets: ReadonlyArray<Target>
  readonly problem: Problem | undefined
}

/** The result of a lookup. */
export interface Match {
  readonly backend: Backend
  /** The Ingress (`namespace/name`) whose rule or default matched. */
  readonly ingress: string
  /** The rule's path, or undefined when a default backend matched. */
  readonly path: string | undefined
}

/** Which Secret (`kubernetes.io/tls`) serves a TLS server name. */
export interface TlsSource {
  readonly namespace: string
  readonly secretName: string
  readonly ingress: string
}

interface PathRoute {
  readonly path: string
  readonly exact: boolean
  /** The path without a trailing `/` (Prefix), the length that decides "longest". */
  readonly key: string
  readonly match: Match
}

interface HostRoutes {
  readonly paths: Array<PathRoute>
  /** The default backends of the Ingresses that name this host, oldest first. */
  readonly defaults: Array<Match>
}

/** A built route table. */
export interface RouteTable {
  readonly exact: ReadonlyMap<string, HostRoutes>
  /** Wildcard rules by the domain after `*.`. */
  readonly wildcard: ReadonlyMap<string, HostRoutes>
  /** Rules without a host. */
  readonly any: HostRoutes
  readonly defaultBackend: Match | undefined
  readonly tls: ReadonlyMap<string, TlsSource>
  readonly tlsWildcard: ReadonlyMap<string, TlsSource>
  /** A TLS entry without hosts: the certificate for names nothing else claims. */
  readonly tlsDefault: TlsSource | undefined
  /** The Ingresses this table serves (`namespace/name`), oldest first. */
  readonly served: ReadonlyArray<string>
  /** Who owns which host, and which claims lost (`IngressHosts.decide` over the served Ingresses). */
  readonly ownership: IngressHosts.Ownership
}

/** What a table is built from (everything the proxy's informers hold). */
export interface Sources {
  readonly ingresses: ReadonlyArray<JsonObject>
  readonly ingressClasses: ReadonlyArray<JsonObject>
  readonly services: ReadonlyArray<JsonObject>
  readonly endpointSlices: ReadonlyArray<JsonObject>
  /** The controller whose classes are served (default Fleet's, `fleet.koder.dev/ingress`). */
  readonly controller?: string
  /** The admin's host policy (`IngressHosts.parsePolicy`). */
  readonly hostPolicy?: IngressHosts.Policy
}

const keyOf = (o: JsonObject) => `${asString(metadataOf(o)["namespace"])}/${asString(metadataOf(o)["name"])}`

/** The IngressClass `fleet` a cluster gets at start when it has none (the default class unless another is). */
export const fleetIngressClass = (isDefault: boolean): JsonObject => ({
  apiVersion: "networking.k8s.io/v1",
  kind: "IngressClass",
  metadata: { name: Ingress.FleetClass, ...(isDefault ? { annotations: { [DefaultClassAnnotation]: "true" } } : {}) },
  spec: { controller: Ingress.FleetController }
})

/** Whether an IngressClass is marked as the cluster's default. */
export const isDefaultClass = (c: JsonObject): boolean => asString(asObject(metadataOf(c)["annotations"])[DefaultClassAnnotation]) === "true"

/** Whether the proxy serves this Ingress (see the module comment). */
export const isServed = (ingress: JsonObject, classes: ReadonlyArray<JsonObject>, controller: string = Ingress.FleetController): boolean => {
  if (metadataOf(ingress)["deletionTimestamp"] !== undefined) return false
  const named = asString(asObject(ingress["spec"])["ingressClassName"]) || asString(asObject(metadataOf(ingress)["annotations"])[Ingress.LegacyClassAnnotation])
  const ours = (c: JsonObject) => asString(asObject(c["spec"])["controller"]) === controller
  if (named === "") return classes.some((c) => isDefaultClass(c) && ours(c))
  const cls = classes.find((c) => asString(metadataOf(c)["name"]) === named)
  // A class object may be missing (created after the Ingress, or never): `fleet` is still ours.
  return cls === undefined ? named === Ingress.FleetClass && controller === Ingress.FleetController : ours(cls)
}

/** `Host` header (or TLS server name) as routes compare it: lower case, no port, no trailing dot. */
export const normalizeHost = (host: string): string => {
  let h = host.trim().toLowerCase()
  if (h.startsWith("[")) {
    const end = h.indexOf("]")
    h = end < 0 ? h : h.slice(0, end + 1)
  } else if (h.indexOf(":") === h.lastIndexOf(":")) h = h.replace(/:\d*$/, "")
  return h.endsWith(".") ? h.slice(0, -1) : h
}

/** Whether a rule path matches a request path (`exact`, else Prefix by elements). */
export const pathMatches = (rulePath: string, exact: boolean, requestPath: string): boolean => {
  if (exact) return requestPath === rulePath
  const p = trimSlash(rulePath)
  return p === "" || requestPath === p || requestPath.startsWith(`${p}/`)
}

const trimSlash = (p: string) => p.replace(/\/+$/, "")

const creation = (o: JsonObject) => asString(metadataOf(o)["creationTimestamp"])

const compareText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

const byAge = (a: JsonObject, b: JsonObject) => compareText(creation(a), creation(b)) || compareText(keyOf(a), keyOf(b))

interface Index {
  readonly services: ReadonlyMap<string, JsonObject>
  readonly slices: ReadonlyMap<string, Array<JsonObject>>
}

const index = (sources: Sources): Index => {
  const services = new Map<string, JsonObject>()
  for (const s of sources.services) services.set(keyOf(s), s)
  const slices = new Map<string, Array<JsonObject>>()
  for (const s of sources.endpointSlices) {
    const svc = asString(asObject(metadataOf(s)["labels"])[ServiceBackends.serviceNameLabel])
    if (svc === "") continue
    const k = `${asString(metadataOf(s)["namespace"])}/${svc}`
    const list = slices.get(k) ?? []
    list.push(s)
    slices.set(k, list)
  }
  return { services, slices }
}

const resolve = (raw: unknown, namespace: string, idx: Index): Backend => {
  const b = asObject(raw)
  const service = asObject(b["service"])
  if (b["service"] === undefined) {
    return { namespace, service: asString(asObject(b["resource"])["name"]), port: "", targets: [], problem: "UnsupportedBackend" }
  }
  const name = asString(service["name"])
  const wanted = asObject(service["port"])
  const portText = typeof wanted["number"] === "number" ? String(wanted["number"]) : asString(wanted["name"])
  const base = { namespace, service: name, port: portText }
  const svc = idx.services.get(`${namespace}/${name}`)
  if (svc === undefined || metadataOf(svc)["deletionTimestamp"] !== undefined) return { ...base, targets: [], problem: "ServiceNotFound" }
  const spec = asObject(svc["spec"])
  const sp = ServiceBackends.servicePort(svc, typeof wanted["number"] === "number" ? { number: wanted["number"], protocol: "TCP" } : { name: asString(wanted["name"]), protocol: "TCP" })
  if (spec["type"] === "ExternalName") {
    const port = typeof wanted["number"] === "number" ? wanted["number"] : sp?.port
    return port !== undefined && asString(spec["externalName"]) !== ""
      ? { ...base, targets: [{ address: asString(spec["externalName"]), port }], problem: undefined }
      : { ...base, targets: [], problem: "PortNotFound" }
  }
  if (sp === undefined) return { ...base, targets: [], problem: "PortNotFound" }
  const targets = ServiceBackends.usable(ServiceBackends.backends(idx.slices.get(`${namespace}/${name}`) ?? [], sp)).map((b) => ({ address: b.address, port: b.port }))
  return { ...base, targets, problem: targets.length === 0 ? "NoReadyEndpoints" : undefined }
}

const emptyHost = (): HostRoutes => ({ paths: [], defaults: [] })

/** Build the table (pure; cheap enough to rebuild on every change of a source). */
export const build = (sources: Sources): RouteTable => {
  const controller = sources.controller ?? Ingress.FleetController
  const idx = index(sources)
  // Many paths name the same Service port: resolve each once per build.
  const resolved = new Map<string, Backend>()
  const backendOf = (raw: unknown, namespace: string): Backend => {
    const key = `${namespace}\u0000${JSON.stringify(raw)}`
    let b = resolved.get(key)
    if (b === undefined) resolved.set(key, (b = resolve(raw, namespace, idx)))
    return b
  }
  const claimed = sources.ingresses.filter((i) => isServed(i, sources.ingressClasses, controller))
  const ownership = IngressHosts.decide(claimed, sources.hostPolicy)
  // What each Ingress serves is what it did not lose to another namespace.
  const served = claimed.map((i) => IngressHosts.withoutLost(i, ownership.lost.get(keyOf(i)))).sort(byAge)
  const exact = new Map<string, HostRoutes>()
  const wildcard = new Map<string, HostRoutes>()
  const any = emptyHost()
  const tls = new Map<string, TlsSource>()
  const tlsWildcard = new Map<string, TlsSource>()
  let tlsDefault: TlsSource | undefined
  let defaultBackend: Match | undefined
  const groupOf = (host: string): HostRoutes => {
    if (host === "") return any
    const [map, key] = host.startsWith("*.") ? [wildcard, host.slice(2)] : [exact, host]
    let g = map.get(key)
    if (g === undefined) map.set(key, (g = emptyHost()))
    return g
  }
  for (const ing of served) {
    const namespace = asString(metadataOf(ing)["namespace"])
    const name = keyOf(ing)
    const spec = asObject(ing["spec"])
    const fallback = spec["defaultBackend"] === undefined ? undefined : { backend: backendOf(spec["defaultBackend"], namespace), ingress: name, path: undefined }
    if (fallback !== undefined && ownership.lost.get(name)?.has("") !== true) defaultBackend ??= fallback
    for (const rule of asArray(spec["rules"]).map(asObject)) {
      const host = normalizeHost(asString(rule["host"]))
      const group = groupOf(host)
      if (fallback !== undefined && host !== "" && !group.defaults.some((d) => d.ingress === name)) group.defaults.push(fallback)
      for (const p of asArray(asObject(rule["http"])["paths"]).map(asObject)) {
        const exactType = p["pathType"] === "Exact"
        const path = asString(p["path"]) || "/"
        // An older Ingress already routes this host and path: it keeps it.
        if (group.paths.some((r) => r.path === path && r.exact === exactType)) continue
        group.paths.push({ path, exact: exactType, key: exactType ? path : trimSlash(path), match: { backend: backendOf(p["backend"], namespace), ingress: name, path } })
      }
    }
    for (const t of asArray(spec["tls"]).map(asObject)) {
      const secretName = asString(t["secretName"])
      if (secretName === "") continue
      const source = { namespace, secretName, ingress: name }
      const hosts = asArray(t["hosts"]).map((h) => normalizeHost(asString(h))).filter((h) => h !== "")
      if (hosts.length === 0) tlsDefault ??= source
      for (const h of hosts) {
        const [map, key] = h.startsWith("*.") ? [tlsWildcard, h.slice(2)] : [tls, h]
        if (!map.has(key)) map.set(key, source)
      }
    }
  }
  // Longest first; Exact before Prefix when equally long.
  const order = (a: PathRoute, b: PathRoute) => b.key.length - a.key.length || Number(b.exact) - Number(a.exact)
  for (const g of [any, ...exact.values(), ...wildcard.values()]) g.paths.sort(order)
  return { exact, wildcard, any, defaultBackend, tls, tlsWildcard, tlsDefault, served: served.map(keyOf), ownership }
}

const parentDomain = (host: string): string | undefined => {
  const dot = host.indexOf(".")
  return dot <= 0 ? undefined : host.slice(dot + 1)
}

/** The namespace owning a request host (its exact claim, else the wildcard one); undefined: nobody's. */
export const ownerOf = (table: RouteTable, host: string): string | undefined => {
  const h = normalizeHost(host)
  const parent = parentDomain(h)
  return (table.ownership.owners.get(h) ?? (parent === undefined ? undefined : table.ownership.owners.get(`*.${parent}`)))?.namespace
}

/** Whether the catch-all (rules without a host, the global default backend) may answer for `host`: it is nobody's, or the catch-all's owner's. */
const catchAllServes = (table: RouteTable, host: string): boolean => {
  const owner = ownerOf(table, host)
  return owner === undefined || owner === table.ownership.owners.get("")?.namespace
}

/** Where a request for `host` (a Host header, port allowed) and `path` (no query) goes; undefined: nowhere (404). */
export const lookup = (table: RouteTable, host: string, path: string): Match | undefined => {
  const h = normalizeHost(host)
  const parent = parentDomain(h)
  const named = [table.exact.get(h), parent === undefined ? undefined : table.wildcard.get(parent)].filter((g): g is HostRoutes => g !== undefined)
  // Another namespace's catch-all never answers for a host someone owns (what it does not route is a 404).
  const catchAll = catchAllServes(table, h)
  for (const group of catchAll ? [...named, table.any] : named) {
    const hit = group.paths.find((r) => pathMatches(r.path, r.exact, path))
    if (hit !== undefined) return hit.match
  }
  for (const group of named) if (group.defaults.length > 0) return group.defaults[0]
  return catchAll ? table.defaultBackend : undefined
}

/** Which Secret serves a TLS server name (SNI); undefined: the proxy's own default certificate. */
export const tlsFor = (table: RouteTable, serverName: string | undefined): TlsSource | undefined => {
  const h = normalizeHost(serverName ?? "")
  const parent = parentDomain(h)
  const named = (h === "" ? undefined : table.tls.get(h)) ?? (parent === undefined ? undefined : table.tlsWildcard.get(parent))
  if (named !== undefined) return named
  // The certificate for an owned host comes from its owner's namespace only.
  const owner = ownerOf(table, h)
  return owner === undefined || owner === table.tlsDefault?.namespace ? table.tlsDefault : undefined
}

/** A Service as error pages and logs name it: `namespace/name:port`. */
export const describeBackend = (b: Backend): string => `${b.namespace}/${b.service}${b.port === "" ? "" : `:${b.port}`}`

/** The load-balancer status an Ingress gets from a proxy reachable at `ip` on `ports` (pure; compare before writing). */
export const loadBalancerStatus = (ip: string, ports: ReadonlyArray<number>): JsonObject => ({
  loadBalancer: { ingress: [{ ...(/^[\d.]+$|:/.test(ip) ? { ip } : { hostname: ip }), ...(ports.length === 0 ? {} : { ports: ports.map((port) => ({ port, protocol: "TCP" })) }) }] }
})
