/**
 * Cluster DNS as data: what the cluster's DNS server answers for one question, following the
 * Kubernetes DNS-based service discovery specification (and CoreDNS's `kubernetes` plugin where
 * the spec leaves room). Pure: the caller gives a view of Services and EndpointSlices; the wire
 * format, sockets and upstream forwarding live in the daemon (`net/DnsServer.ts`).
 *
 *   name ─▶ in the cluster domain?
 *            ├─ <svc>.<ns>.svc.<zone>             A/AAAA: cluster IPs; headless: ready endpoints;
 *            │                                    ExternalName: CNAME; SRV: one per named port
 *            ├─ _<port>._<proto>.<svc>.<ns>.svc…  SRV (+ A/AAAA of the targets as additionals)
 *            ├─ <host>.<svc>.<ns>.svc.<zone>      A/AAAA of a headless Service's endpoint
 *            │                                    (StatefulSet hostname, or the dashed address)
 *            ├─ <a-b-c-d>.<ns>.pod.<zone>         A (pod names by address, CoreDNS `pods insecure`)
 *            └─ anything else                     NXDOMAIN (with the zone's SOA)
 *          ─▶ a short form (<svc>.<ns>, <svc>.<ns>.svc, their SRV and hostnames) that names an
 *             existing Service: answered as the full name (processes in host mode resolve
 *             without the pod search path)
 *          ─▶ otherwise: not ours (the server forwards it upstream or refuses)
 *
 * TTLs are 5 s, CoreDNS's default, so answers follow endpoint changes quickly; the SOA's minimum
 * (the negative-caching TTL) is the same. A name that exists without records of the asked type
 * answers NOERROR with no records (NODATA). A namespace "exists" when it has a Service: agents may
 * not list namespaces, and a namespace without Services has no names to answer anyway.
 */
import * as ServiceBackends from "./ServiceBackends.js"
import { asArray, asObject, asString } from "../object/Json.js"

type JsonObject = Readonly<Record<string, unknown>>


/** The cluster domain kubelets default to. */
export const defaultDomain = "cluster.local"

/** CoreDNS's default TTL, seconds. */
export const defaultTtl = 5

/** A resource record, as the daemon encodes it. */
export type ResourceRecord =
  | { readonly type: "A" | "AAAA"; readonly name: string; readonly ttl: number; readonly data: string }
  | { readonly type: "CNAME"; readonly name: string; readonly ttl: number; readonly data: string }
  | {
      readonly type: "SRV"
      readonly name: string
      readonly ttl: number
      readonly data: { readonly priority: number; readonly weight: number; readonly port: number; readonly target: string }
    }
  | {
      readonly type: "SOA"
      readonly name: string
      readonly ttl: number
      readonly data: {
        readonly mname: string
        readonly rname: string
        readonly serial: number
        readonly refresh: number
        readonly retry: number
        readonly expire: number
        readonly minimum: number
      }
    }

/** What the server answers. */
export type Answer =
  /** NOERROR, authoritative: the records (none: NODATA, with the SOA as authority). */
  | { readonly _tag: "Found"; readonly answers: ReadonlyArray<ResourceRecord>; readonly additionals: ReadonlyArray<ResourceRecord>; readonly authorities: ReadonlyArray<ResourceRecord> }
  /** NXDOMAIN, authoritative, with the SOA as authority. */
  | { readonly _tag: "NxDomain"; readonly authorities: ReadonlyArray<ResourceRecord> }
  /** Not a cluster name: forward it, or refuse. */
  | { readonly _tag: "NotOurs" }

/** What resolution reads: the cluster's Services and their EndpointSlices. */
export interface View {
  readonly service: (namespace: string, name: string) => JsonObject | undefined
  /** The EndpointSlices of one Service. */
  readonly slices: (namespace: string, name: string) => ReadonlyArray<JsonObject>
  /** Whether the namespace has any Service. */
  readonly hasNamespace: (namespace: string) => boolean
}

/** How names are answered. */
export interface Options {
  /** The cluster domain (default `cluster.local`). */
  readonly domain?: string
  /** Record TTL, seconds (default 5). */
  readonly ttl?: number
}

/** The SOA of the cluster zone (CoreDNS's shape). */
export const soa = (domain: string, ttl: number): ResourceRecord => ({
  type: "SOA",
  name: domain,
  ttl,
  data: { mname: `ns.dns.${domain}`, rname: `hostmaster.${domain}`, serial: 1, refresh: 7200, retry: 1800, expire: 86400, minimum: ttl }
})

const familyType = (address: string): "A" | "AAAA" => (address.includes(":") ? "AAAA" : "A")

const addressRecords = (name: string, addresses: ReadonlyArray<string>, qtype: string, ttl: number): ReadonlyArray<ResourceRecord> =>
  addresses.filter((a) => qtype === "ANY" || familyType(a) === qtype).map((a) => ({ type: familyType(a), name, ttl, data: a }))

const isHeadless = (spec: Record<string, unknown>) => asString(spec["clusterIP"]) === "None"

const clusterIPs = (spec: Record<string, unknown>): ReadonlyArray<string> => {
  const ips = asArray(spec["clusterIPs"]).map(asString).filter((ip) => ip !== "" && ip !== "None")
  return ips.length > 0 ? ips : asString(spec["clusterIP"]) === "" || isHeadless(spec) ? [] : [asString(spec["clusterIP"])]
}

/** The DNS label of an endpoint: its hostname, else its address with dashes (CoreDNS's endpoint names). */
export const endpointLabel = (e: Pick<ServiceBackends.Endpoint, "address" | "hostname">): string =>
  e.hostname ?? e.address.replace(/[.:]/g, "-")

/** The dashed form of an address in pod names (`10-1-2-3`), back to the address; undefined when it is none. */
export const addressOfLabel = (label: string): string | undefined => {
  if (/^\d{1,3}(-\d{1,3}){3}$/.test(label)) {
    const parts = label.split("-").map(Number)
    return parts.every((p) => p <= 255) ? parts.join(".") : undefined
  }
  if (/^[0-9a-f-]+$/.test(label) && label.includes("-")) {
    const v6 = label.replace(/-/g, ":")
    return /^[0-9a-f:]+$/.test(v6) && v6.split(":").length <= 8 ? v6 : undefined
  }
  return undefined
}

const found = (answers: ReadonlyArray<ResourceRecord>, additionals: ReadonlyArray<ResourceRecord>, domain: string, ttl: number): Answer => ({
  _tag: "Found",
  answers,
  additionals,
  authorities: answers.length === 0 ? [soa(domain, ttl)] : []
})

/**
 * The answer to `qname`/`qtype` (`A`, `AAAA`, `SRV`, `ANY`, or any other type name, which finds
 * nothing) over `view`. Record owner names are `qname` as asked (its case kept); SRV targets
 * and additionals use the full lower-case names.
 */
export const resolve = (qname: string, qtype: string, view: View, options: Options = {}): Answer => {
  const domain = (options.domain ?? defaultDomain).toLowerCase().replace(/\.$/, "")
  const ttl = options.ttl ?? defaultTtl
  const name = qname.replace(/\.$/, "")
  const lower = name.toLowerCase()
  if (lower === domain || lower.endsWith(`.${domain}`)) {
    const labels = lower === domain ? [] : lower.slice(0, -(domain.length + 1)).split(".")
    return inZone(name, labels, qtype, view, domain, ttl)
  }
  // Short forms: only for names of Services that exist, so everything else still goes upstream.
  const labels = lower.split(".")
  const relative = labels[labels.length - 1] === "svc" ? labels : labels.length >= 2 ? [...labels, "svc"] : undefined
  if (relative === undefined) return { _tag: "NotOurs" }
  const answer = inZone(name, relative, qtype, view, domain, ttl)
  return answer._tag === "Found" && relative.length >= 3 ? answer : { _tag: "NotOurs" }
}

const inZone = (qname: string, labels: ReadonlyArray<string>, qtype: string, view: View, domain: string, ttl: number): Answer => {
  const nx: Answer = { _tag: "NxDomain", authorities: [soa(domain, ttl)] }
  const n = labels.length
  // The zone apex and the structural names exist without address records.
  if (n === 0) return qtype === "SOA" ? { _tag: "Found", answers: [{ ...soa(domain, ttl), name: qname }], additionals: [], authorities: [] } : found([], [], domain, ttl)
  if (n === 1) return labels[0] === "svc" || labels[0] === "pod" ? found([], [], domain, ttl) : nx
  const kind = labels[n - 1]
  const ns = labels[n - 2]!
  if (kind === "pod") {
    if (n === 2) return view.hasNamespace(ns) ? found([], [], domain, ttl) : nx
    if (n !== 3 || !view.hasNamespace(ns)) return nx
    const address = addressOfLabel(labels[0]!)
    return address === undefined ? nx : found(addressRecords(qname, [address], qtype, ttl), [], domain, ttl)
  }
  if (kind !== "svc") return nx
  if (n === 2) return view.hasNamespace(ns) ? found([], [], domain, ttl) : nx
  const serviceName = labels[n - 3]!
  const service = view.service(ns, serviceName)
  if (service === undefined) return nx
  const spec = asObject(service["spec"])
  const ready = () => ServiceBackends.endpoints(view.slices(ns, serviceName)).filter((e) => e.ready)

  if (n === 3) {
    if (asString(spec["type"]) === "ExternalName") {
      const target = asString(spec["externalName"]).replace(/\.$/, "")
      return target === "" ? found([], [], domain, ttl) : found([{ type: "CNAME", name: qname, ttl, data: target }], [], domain, ttl)
    }
    if (qtype === "SRV") return srv(qname, service, undefined, view, domain, ttl)
    const addresses = isHeadless(spec) ? ready().map((e) => e.address) : clusterIPs(spec)
    return found(addressRecords(qname, addresses, qtype, ttl), [], domain, ttl)
  }
  if (n === 4) {
    // <host>.<svc>.<ns>.svc: an endpoint of a headless Service.
    if (!isHeadless(spec)) return nx
    const host = labels[0]!
    const matches = ServiceBackends.endpoints(view.slices(ns, serviceName)).filter((e) => e.ready && endpointLabel(e) === host)
    return matches.length === 0 ? nx : found(addressRecords(qname, matches.map((e) => e.address), qtype, ttl), [], domain, ttl)
  }
  if (n === 5 && labels[0]!.startsWith("_") && labels[1]!.startsWith("_")) {
    const protocol = labels[1]!.slice(1).toUpperCase()
    if (protocol !== "TCP" && protocol !== "UDP" && protocol !== "SCTP") return nx
    const portName = labels[0]!.slice(1)
    const port = ServiceBackends.servicePorts(service).find((p) => p.name !== "" && p.name.toLowerCase() === portName && p.protocol === protocol)
    if (port === undefined) return nx
    return qtype === "SRV" || qtype === "ANY" ? srv(qname, service, port, view, domain, ttl) : found([], [], domain, ttl)
  }
  return nx
}

/**
 * SRV records of one named port (or of every named port when `port` is undefined): one pointing
 * at the Service's name for a Service with a cluster IP, one per ready endpoint (its own port,
 * the host port in host mode) for a headless Service; the targets' addresses as additionals.
 */
const srv = (qname: string, service: JsonObject, port: ServiceBackends.ServicePort | undefined, view: View, domain: string, ttl: number): Answer => {
  const m = asObject(service["metadata"])
  const ns = asString(m["namespace"])
  const name = asString(m["name"])
  const spec = asObject(service["spec"])
  const full = `${name}.${ns}.svc.${domain}`
  const ports = port === undefined ? ServiceBackends.servicePorts(service).filter((p) => p.name !== "") : [port]
  const answers: Array<ResourceRecord> = []
  const additionals: Array<ResourceRecord> = []
  if (!isHeadless(spec)) {
    const ips = clusterIPs(spec)
    if (ips.length === 0) return found([], [], domain, ttl)
    const weight = Math.max(1, Math.floor(100 / ports.length))
    for (const p of ports) answers.push({ type: "SRV", name: qname, ttl, data: { priority: 0, weight, port: p.port, target: full } })
    if (answers.length > 0) additionals.push(...addressRecords(full, ips, "ANY", ttl))
    return found(answers, additionals, domain, ttl)
  }
  const slices = view.slices(ns, name)
  const targets = new Map<string, ReadonlyArray<string>>()
  const records: Array<{ readonly port: number; readonly target: string }> = []
  for (const p of ports) {
    for (const b of ServiceBackends.backends(slices, p).filter((b) => b.ready)) {
      const target = `${endpointLabel(b)}.${full}`
      records.push({ port: b.port, target })
      targets.set(target, [...new Set([...(targets.get(target) ?? []), b.address])])
    }
  }
  const weight = Math.max(1, Math.floor(100 / Math.max(1, records.length)))
  for (const r of records) answers.push({ type: "SRV", name: qname, ttl, data: { priority: 0, weight, port: r.port, target: r.target } })
  for (const [target, addresses] of targets) additionals.push(...addressRecords(target, addresses, "ANY", ttl))
  return found(answers, additionals, domain, ttl)
}
