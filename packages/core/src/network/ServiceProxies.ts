/**
 * Which userspace proxies a node opens for Services (pure): a listener on the node address at
 * each TCP `nodePort` of NodePort and LoadBalancer Services, and one on each load-balancer
 * address (`status.loadBalancer.ingress[].ip`) at the Service port. The daemon's
 * `net/ServiceProxy.ts` opens and closes sockets to match, and picks backends per connection
 * from `ServiceBackends`.
 *
 *   Services ─▶ listeners(node address, load balancers?) ─▶ [{ host, port, Service, Service port }]
 *
 * Two Services can want one address and port (two load-balancer Services given the same address
 * by hand): the older Service keeps it (then by name), and the other is reported as a conflict.
 * UDP and SCTP ports are left out: the proxies are TCP only.
 */
import * as ServiceBackends from "./ServiceBackends.js"
import { asArray, asObject, asString } from "../object/Json.js"

type JsonObject = Readonly<Record<string, unknown>>


/** One proxy listener and where its connections go. */
export interface Listener {
  /** `host:port` (`[v6]:port`): what identifies the socket. */
  readonly key: string
  readonly host: string
  readonly port: number
  readonly kind: "NodePort" | "LoadBalancer"
  readonly namespace: string
  readonly service: string
  /** The Service port's name ("" when unnamed): backends are looked up by it. */
  readonly portName: string
}

/** The listeners, and the ones left out because an older Service has their address. */
export interface Plan {
  readonly listeners: ReadonlyArray<Listener>
  readonly conflicts: ReadonlyArray<Listener>
}

/** What a node proxies. */
export interface Options {
  /** Where node ports listen (undefined: no node ports). */
  readonly nodeAddress: string | undefined
  /** Whether load-balancer addresses are proxied here. */
  readonly loadBalancers: boolean
}

const keyOf = (host: string, port: number) => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`)

/** The load-balancer addresses a Service's status gives. */
export const loadBalancerIPs = (service: JsonObject): ReadonlyArray<string> =>
  asArray(asObject(asObject(service["status"])["loadBalancer"])["ingress"]).flatMap((i) => (asString(asObject(i)["ip"]) === "" ? [] : [asString(asObject(i)["ip"])]))

/** The listeners for `services` on this node. */
export const plan = (services: ReadonlyArray<JsonObject>, options: Options): Plan => {
  const ordered = [...services].sort((a, b) => {
    const ma = asObject(a["metadata"])
    const mb = asObject(b["metadata"])
    const ta = asString(ma["creationTimestamp"])
    const tb = asString(mb["creationTimestamp"])
    if (ta !== tb) return ta < tb ? -1 : 1
    const na = `${asString(ma["namespace"])}/${asString(ma["name"])}`
    const nb = `${asString(mb["namespace"])}/${asString(mb["name"])}`
    return na < nb ? -1 : na > nb ? 1 : 0
  })
  const byKey = new Map<string, Listener>()
  const conflicts: Array<Listener> = []
  const add = (l: Listener) => {
    if (byKey.has(l.key)) conflicts.push(l)
    else byKey.set(l.key, l)
  }
  for (const service of ordered) {
    const type = asString(asObject(service["spec"])["type"])
    if (type !== "NodePort" && type !== "LoadBalancer") continue
    const m = asObject(service["metadata"])
    const base = { namespace: asString(m["namespace"]), service: asString(m["name"]) }
    const ports = ServiceBackends.servicePorts(service).filter((p) => p.protocol === "TCP")
    if (options.nodeAddress !== undefined) {
      for (const p of ports) {
        if (p.nodePort === undefined) continue
        add({ key: keyOf(options.nodeAddress, p.nodePort), host: options.nodeAddress, port: p.nodePort, kind: "NodePort", ...base, portName: p.name })
      }
    }
    if (options.loadBalancers && type === "LoadBalancer") {
      for (const ip of loadBalancerIPs(service)) {
        for (const p of ports) add({ key: keyOf(ip, p.port), host: ip, port: p.port, kind: "LoadBalancer", ...base, portName: p.name })
      }
    }
  }
  return { listeners: [...byKey.values()], conflicts }
}
