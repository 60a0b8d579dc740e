/**
 * A node's Service data path in isolated network mode, as an nftables ruleset (table `ip fleet`):
 * ClusterIP:port DNAT to the ready endpoints, spread by a random number per connection (the
 * nftables mode of kube-proxy does the same), a reject for Services without endpoints, masquerade
 * for pods reaching outside the cluster, and the pods' DNS (the gateway's port 53) sent to the
 * node's DNS server. Pure: the agent renders it from its informers and applies it with `nft -f`
 * only when the text changed; the whole table is replaced in one nftables transaction, so no
 * packet ever sees half a ruleset.
 *
 *   Services + EndpointSlices ─▶ fromCluster ─▶ ServiceRule[] ─┐
 *   node's pod CIDR, every node's pod CIDR, bridge, DNS ───────┴▶ render ─▶ "table ip fleet { … }"
 *
 *   prerouting/output (nat) ─▶ services: daddr . proto . dport ─▶ svc-N ─▶ numgen ─▶ svc-N-ep-M: dnat
 *   postrouting (nat): masquerade pod → outside, and a pod reaching itself through its Service
 *   input/forward/output (filter) ─▶ no-endpoints: reject
 */
import * as IpRange from "./IpRange.js"
import * as ServiceBackends from "./ServiceBackends.js"
import { asArray, asObject, asString } from "../object/Json.js"

type JsonObject = Readonly<Record<string, unknown>>


/** The table the agent owns (family `ip`). */
export const defaultTable = "fleet"

/** Packet mark of a pod reaching itself through its own Service (masqueraded, or it would drop its own packet). */
export const hairpinMark = 0x4000

/** One Service port and where its connections go. */
export interface PortRule {
  readonly port: number
  readonly protocol: "TCP" | "UDP" | "SCTP"
  readonly backends: ReadonlyArray<{ readonly address: string; readonly port: number }>
}

/** One Service: its cluster IPs (IPv4 ones; this table is `ip`) and ports. */
export interface ServiceRule {
  /** `namespace/name`, for comments. */
  readonly name: string
  readonly clusterIPs: ReadonlyArray<string>
  readonly ports: ReadonlyArray<PortRule>
}

/** What the table is made of. */
export interface Input {
  readonly services: ReadonlyArray<ServiceRule>
  /** This node's pod CIDR; without one nothing is masqueraded (no pod can be here yet). */
  readonly podCidr: string | undefined
  /** Every node's pod CIDR (or the cluster CIDR): traffic between pods keeps its source address. */
  readonly clusterCidrs: ReadonlyArray<string>
  /** The pods' bridge. */
  readonly bridge: string
  /** Pods' DNS: `gateway:53` (UDP and TCP) is sent to `target`; absent: no DNS rule. */
  readonly dns?: { readonly gateway: string; readonly target: { readonly address: string; readonly port: number } }
  readonly table?: string
}

const protocols = { TCP: "tcp", UDP: "udp", SCTP: "sctp" } as const

const isIPv4 = (ip: string) => IpRange.familyOf(ip) === "IPv4"

/** nftables string literal (names and comments): quoted, quotes and backslashes dropped. */
const quoted = (s: string) => `"${s.replace(/["\\\n]/g, "")}"`

/**
 * The Services with a cluster IP, and their ready backends from the EndpointSlices (the
 * serving-terminating ones when none is ready, see ServiceBackends.usable). Headless and
 * ExternalName Services have no virtual IP and get no rule.
 */
export const fromCluster = (services: ReadonlyArray<JsonObject>, slices: ReadonlyArray<JsonObject>): ReadonlyArray<ServiceRule> => {
  const out: Array<ServiceRule> = []
  for (const service of services) {
    const spec = asObject(service["spec"])
    if (asString(spec["type"]) === "ExternalName") continue
    const ips = [...new Set([asString(spec["clusterIP"]), ...asArray(spec["clusterIPs"]).map(asString)])].filter((ip) => ip !== "" && ip !== "None" && isIPv4(ip))
    if (ips.length === 0) continue
    const m = asObject(service["metadata"])
    const own = ServiceBackends.slicesOf(slices, asString(m["namespace"]), asString(m["name"]))
    const ports = ServiceBackends.servicePorts(service).map((p) => ({
      port: p.port,
      protocol: p.protocol,
      backends: ServiceBackends.usable(ServiceBackends.backends(own, p))
        .filter((b) => isIPv4(b.address))
        .map((b) => ({ address: b.address, port: b.port }))
    }))
    out.push({ name: `${asString(m["namespace"])}/${asString(m["name"])}`, clusterIPs: ips, ports })
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

/** The nftables script replacing the table atomically (`nft -f -`). */
export const render = (input: Input): string => {
  const table = input.table ?? defaultTable
  const services: Array<string> = []
  const noEndpoints: Array<string> = []
  const chains: Array<string> = []
  input.services.forEach((svc, i) => {
    svc.ports.forEach((p, j) => {
      const proto = protocols[p.protocol]
      const comment = `comment ${quoted(`${svc.name}:${p.port}/${p.protocol}`)}`
      for (const ip of svc.clusterIPs) {
        const match = `ip daddr ${ip} ${proto} dport ${p.port}`
        if (p.backends.length === 0) noEndpoints.push(`\t\t${match} reject ${p.protocol === "TCP" ? "with tcp reset " : ""}${comment}`)
        else services.push(`\t\t${match} goto svc-${i}-${j} ${comment}`)
      }
      if (p.backends.length === 0) return
      const eps = p.backends.map((b, k) => {
        const name = `svc-${i}-${j}-ep-${k}`
        chains.push(
          `\tchain ${name} {\n` +
            `\t\tip saddr ${b.address} meta mark set meta mark | ${hairpinMark}\n` +
            // A port mapping needs the transport protocol matched in the same rule.
            `\t\tmeta l4proto ${proto} dnat to ${b.address}:${b.port}\n` +
            `\t}`
        )
        return name
      })
      const spread =
        eps.length === 1 ? `\t\tgoto ${eps[0]}` : `\t\tnumgen random mod ${eps.length} vmap { ${eps.map((e, k) => `${k} : goto ${e}`).join(", ")} }`
      chains.push(`\tchain svc-${i}-${j} {\n${spread}\n\t}`)
    })
  })
  const dns: Array<string> = []
  if (input.dns !== undefined) {
    const { gateway, target } = input.dns
    for (const proto of ["udp", "tcp"]) dns.push(`\t\tip daddr ${gateway} ${proto} dport 53 dnat to ${target.address}:${target.port} comment "pod DNS"`)
  }
  const post = [`\t\tmeta mark & ${hairpinMark} == ${hairpinMark} masquerade comment "a pod reaching itself through a Service"`]
  if (input.podCidr !== undefined) {
    const cluster = input.clusterCidrs.length === 0 ? "" : ` ip daddr != { ${input.clusterCidrs.join(", ")} }`
    post.push(`\t\tip saddr ${input.podCidr}${cluster} oifname != ${quoted(input.bridge)} masquerade comment "pods to the outside"`)
  }
  // Numeric priorities: older nft accepts the name `dstnat` in prerouting only (-100 is dstnat).
  const nat = (name: string, hook: string, body: ReadonlyArray<string>) =>
    `\tchain ${name} {\n\t\ttype nat hook ${hook} priority -100; policy accept;\n${body.join("\n")}\n\t}`
  const filter = (name: string, hook: string) =>
    `\tchain ${name} {\n\t\ttype filter hook ${hook} priority 0; policy accept;\n\t\tjump no-endpoints\n\t}`
  return [
    `table ip ${table}`,
    `delete table ip ${table}`,
    `table ip ${table} {`,
    nat("prerouting", "prerouting", [...dns, "\t\tjump services"]),
    nat("output", "output", ["\t\tjump services"]),
    `\tchain postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n${post.join("\n")}\n\t}`,
    filter("filter-input", "input"),
    filter("filter-forward", "forward"),
    filter("filter-output", "output"),
    `\tchain services {\n${services.join("\n")}\n\t}`,
    `\tchain no-endpoints {\n${noEndpoints.join("\n")}\n\t}`,
    ...chains,
    "}",
    ""
  ].join("\n")
}

/** The script removing the table (and nothing else). */
export const teardown = (table = defaultTable): string => `table ip ${table}\ndelete table ip ${table}\n`
