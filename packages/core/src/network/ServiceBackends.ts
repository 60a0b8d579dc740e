import { asArray, asObject, asString } from "../object/Json.js"
/**
 * The backends of a Service port, read from the Service's EndpointSlices: what every data-path
 * component (DNS for headless Services, the NodePort and LoadBalancer proxies, the Ingress
 * proxy) needs and none should work out on its own. A backend is an address and the port the
 * endpoint serves the Service port on — the pod IP and target port in isolated mode, the host IP
 * and the host port the agent gave the container in host mode (the EndpointSlice controller
 * already wrote the host port there).
 *
 *   Service + its slices ─▶ servicePort(name | number) ─▶ backends (every endpoint, conditions)
 *                                                      ─▶ usable (ready; else serving-terminating)
 *
 * Conditions follow the EndpointSlice API: `ready` absent means unknown, taken as ready; a
 * consumer falls back to endpoints that are serving but terminating only when nothing is ready,
 * as kube-proxy does, so a rolling update never leaves a window with no backend at all.
 * Backends come out sorted (address, then port) so round-robin order is stable across updates.
 */

type JsonObject = Readonly<Record<string, unknown>>


/** The label naming the Service a slice belongs to. */
export const serviceNameLabel = "kubernetes.io/service-name"

/** One port of a Service's spec, defaulted. */
export interface ServicePort {
  /** The port's name ("" for the single unnamed port). */
  readonly name: string
  readonly port: number
  readonly protocol: "TCP" | "UDP" | "SCTP"
  /** The node port, for NodePort and LoadBalancer Services. */
  readonly nodePort: number | undefined
  readonly appProtocol: string | undefined
}

/** One endpoint serving one Service port. */
export interface Backend {
  readonly address: string
  readonly port: number
  readonly ready: boolean
  readonly serving: boolean
  readonly terminating: boolean
  /** The endpoint's hostname (a StatefulSet pod under its governing Service). */
  readonly hostname: string | undefined
  readonly nodeName: string | undefined
  /** `namespace/name` of the pod behind it, when the slice says. */
  readonly pod: string | undefined
}

const protocolOf = (v: unknown): ServicePort["protocol"] => (v === "UDP" || v === "SCTP" ? v : "TCP")

/** The ports of a Service's spec, defaulted. */
export const servicePorts = (service: JsonObject): ReadonlyArray<ServicePort> =>
  asArray(asObject(service["spec"])["ports"]).flatMap((p) => {
    const o = asObject(p)
    if (typeof o["port"] !== "number") return []
    return [
      {
        name: asString(o["name"]),
        port: o["port"],
        protocol: protocolOf(o["protocol"]),
        nodePort: typeof o["nodePort"] === "number" && o["nodePort"] > 0 ? o["nodePort"] : undefined,
        appProtocol: asString(o["appProtocol"]) === "" ? undefined : asString(o["appProtocol"])
      }
    ]
  })

/**
 * The Service port a reference names: by name (an Ingress backend's `port.name`, a named SRV
 * port) or by number (`port.number`); protocol TCP unless given.
 */
export const servicePort = (
  service: JsonObject,
  ref: { readonly name?: string; readonly number?: number; readonly protocol?: ServicePort["protocol"] }
): ServicePort | undefined =>
  servicePorts(service).find(
    (p) => (ref.protocol === undefined || p.protocol === ref.protocol) && (ref.name !== undefined && ref.name !== "" ? p.name === ref.name : p.port === ref.number)
  )

/** Of many slices, those of Service `name` in `namespace`. */
export const slicesOf = (slices: ReadonlyArray<JsonObject>, namespace: string, name: string): ReadonlyArray<JsonObject> =>
  slices.filter((s) => {
    const m = asObject(s["metadata"])
    return asString(m["namespace"]) === namespace && asString(asObject(m["labels"])[serviceNameLabel]) === name
  })

/**
 * Every endpoint serving `port` in `slices` (the Service's own; see `slicesOf`), with its
 * conditions; FQDN slices are left out (nothing here dials names). An endpoint listed twice
 * (slices being rewritten) counts once, its readiest entry winning.
 */
export const backends = (slices: ReadonlyArray<JsonObject>, port: Pick<ServicePort, "name" | "protocol">): ReadonlyArray<Backend> => {
  const byKey = new Map<string, Backend>()
  for (const slice of slices) {
    const type = asString(slice["addressType"])
    if (type !== "IPv4" && type !== "IPv6") continue
    const sp = asArray(slice["ports"]).map(asObject).find((p) => asString(p["name"]) === port.name && protocolOf(p["protocol"]) === port.protocol)
    if (sp === undefined || typeof sp["port"] !== "number") continue
    for (const e of asArray(slice["endpoints"]).map(asObject)) {
      const conditions = asObject(e["conditions"])
      const terminating = conditions["terminating"] === true
      const ready = conditions["ready"] !== false
      const serving = conditions["serving"] === undefined ? ready : conditions["serving"] === true
      const ref = asObject(e["targetRef"])
      const pod = asString(ref["kind"]) === "Pod" && asString(ref["name"]) !== "" ? `${asString(ref["namespace"])}/${asString(ref["name"])}` : undefined
      for (const address of asArray(e["addresses"]).map(asString).filter((a) => a !== "")) {
        const b: Backend = {
          address,
          port: sp["port"],
          ready,
          serving,
          terminating,
          hostname: asString(e["hostname"]) === "" ? undefined : asString(e["hostname"]),
          nodeName: asString(e["nodeName"]) === "" ? undefined : asString(e["nodeName"]),
          pod
        }
        const key = `${address}|${b.port}`
        const seen = byKey.get(key)
        if (seen === undefined || (!seen.ready && b.ready)) byKey.set(key, b)
      }
    }
  }
  return [...byKey.values()].sort(compare)
}

/** One endpoint of a Service whatever its ports (what DNS answers for a headless Service). */
export type Endpoint = Omit<Backend, "port">

/**
 * Every endpoint address in `slices` regardless of port (a headless Service may have none),
 * one entry per address, the readiest entry winning; sorted by address.
 */
export const endpoints = (slices: ReadonlyArray<JsonObject>): ReadonlyArray<Endpoint> => {
  const byAddress = new Map<string, Endpoint>()
  for (const slice of slices) {
    const type = asString(slice["addressType"])
    if (type !== "IPv4" && type !== "IPv6") continue
    for (const e of asArray(slice["endpoints"]).map(asObject)) {
      const conditions = asObject(e["conditions"])
      const ready = conditions["ready"] !== false
      const ref = asObject(e["targetRef"])
      for (const address of asArray(e["addresses"]).map(asString).filter((a) => a !== "")) {
        const entry: Endpoint = {
          address,
          ready,
          serving: conditions["serving"] === undefined ? ready : conditions["serving"] === true,
          terminating: conditions["terminating"] === true,
          hostname: asString(e["hostname"]) === "" ? undefined : asString(e["hostname"]),
          nodeName: asString(e["nodeName"]) === "" ? undefined : asString(e["nodeName"]),
          pod: asString(ref["kind"]) === "Pod" && asString(ref["name"]) !== "" ? `${asString(ref["namespace"])}/${asString(ref["name"])}` : undefined
        }
        const seen = byAddress.get(address)
        if (seen === undefined || (!seen.ready && entry.ready)) byAddress.set(address, entry)
      }
    }
  }
  return [...byAddress.values()].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0))
}

const compare = (a: Backend, b: Backend) => (a.address < b.address ? -1 : a.address > b.address ? 1 : a.port - b.port)

/**
 * The backends to send traffic to: the ready ones; when none is ready, those still serving while
 * terminating (kube-proxy's fallback, so connections keep landing during a rollout's last step).
 */
export const usable = (all: ReadonlyArray<Backend>): ReadonlyArray<Backend> => {
  const ready = all.filter((b) => b.ready)
  return ready.length > 0 ? ready : all.filter((b) => b.serving && b.terminating)
}

/** The usable backends of a Service port given all slices (any Service's): the one call most consumers need. */
export const readyBackends = (
  service: JsonObject,
  slices: ReadonlyArray<JsonObject>,
  ref: { readonly name?: string; readonly number?: number; readonly protocol?: ServicePort["protocol"] }
): ReadonlyArray<Backend> => {
  const port = servicePort(service, ref)
  if (port === undefined) return []
  const m = asObject(service["metadata"])
  return usable(backends(slicesOf(slices, asString(m["namespace"]), asString(m["name"])), port))
}

/** `address:port` as dialled (`[v6]:port` for IPv6). */
export const hostPort = (b: Pick<Backend, "address" | "port">): string => (b.address.includes(":") ? `[${b.address}]:${b.port}` : `${b.address}:${b.port}`)
