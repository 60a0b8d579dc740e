/**
 * NetworkPolicy enforcement inside one pod's network namespace: the rules the agent resolved
 * (`Runtime.NetworkPolicyRules`) become one nftables table, `inet fleet_policy`, with an `ingress`
 * chain on the input hook and an `egress` chain on the output hook, each only when that direction
 * is isolated. The whole table is replaced in one `nft -f` transaction, so a pod never runs with
 * half a policy, and the table dies with the namespace (nothing to clean up on the node).
 *
 *   rules ─▶ render ─▶ "table inet fleet_policy { chain ingress { … policy drop; } … }" ─▶ nsenter --net=NS nft -f -
 *
 * What every isolated chain allows before the policy's own rules: loopback, replies to allowed
 * connections (conntrack established/related), ICMP (NetworkPolicy governs TCP, UDP and SCTP; ICMP
 * errors and IPv6 neighbour discovery must keep flowing), and the node the pod runs on (its
 * gateway on the pod network), which Kubernetes always allows so that probes and the node's DNS
 * work. Everything else is dropped, not rejected: a denied peer sees a timeout, as with other
 * NetworkPolicy implementations.
 */
import { Runtime } from "@koder/fleet-core"
import * as Nftables from "./Nftables.js"

/** The table each pod's namespace gets. */
export const table = "fleet_policy"

/** What the chains always allow besides the policy. */
export interface Options {
  /**
   * Addresses of the node the pod runs on (always allowed both ways). Default: the gateways of
   * the namespace's default routes.
   */
  readonly node?: ReadonlyArray<string>
}

/** A rendered ruleset and how many policy rules (accepts from the policy itself) it holds. */
export interface Rendered {
  readonly script: string
  readonly rules: number
}

const isV6 = (cidrOrIp: string) => cidrOrIp.includes(":")

const set = (items: ReadonlyArray<string>) => (items.length === 1 ? items[0]! : `{ ${items.join(", ")} }`)

const l4 = { TCP: "tcp", UDP: "udp", SCTP: "sctp" } as const

/** The port matches of an allow entry, one per protocol: `tcp dport { 80, 8000-8080 }` or `meta l4proto tcp`. */
const portMatches = (ports: ReadonlyArray<Runtime.PolicyPort> | undefined): ReadonlyArray<string> => {
  if (ports === undefined) return [""]
  const out: Array<string> = []
  for (const protocol of ["TCP", "UDP", "SCTP"] as const) {
    const mine = ports.filter((p) => p.protocol === protocol)
    if (mine.length === 0) continue
    if (mine.some((p) => p.port === undefined)) {
      out.push(`meta l4proto ${l4[protocol]}`)
      continue
    }
    const values = mine.map((p) => (p.endPort !== undefined && p.endPort > p.port! ? `${p.port}-${p.endPort}` : String(p.port)))
    out.push(`${l4[protocol]} dport ${set([...new Set(values)])}`)
  }
  // A ports list that names no protocol allows nothing (the agent never sends one; be safe).
  return out
}

/** The address matches of an allow entry, one per family: `ip saddr { … } ip saddr != { holes }`. */
const addressMatches = (allow: Runtime.PolicyAllow, field: "saddr" | "daddr"): ReadonlyArray<string> => {
  if (allow.cidrs === undefined) return [""]
  const out: Array<string> = []
  for (const v6 of [false, true]) {
    const cidrs = allow.cidrs.filter((c) => isV6(c) === v6)
    if (cidrs.length === 0) continue
    const family = v6 ? "ip6" : "ip"
    const holes = (allow.except ?? []).filter((c) => isV6(c) === v6)
    out.push(`${family} ${field} ${set(cidrs)}${holes.length === 0 ? "" : ` ${family} ${field} != ${set(holes)}`}`)
  }
  return out
}

const chain = (name: string, hook: "input" | "output", direction: Runtime.PolicyDirection, node: ReadonlyArray<string>): { readonly text: string; readonly rules: number } => {
  const field = hook === "input" ? "saddr" : "daddr"
  const lines = [
    `type filter hook ${hook} priority filter; policy drop;`,
    `${hook === "input" ? "iif" : "oif"} "lo" accept`,
    "ct state established,related accept",
    "meta l4proto { icmp, ipv6-icmp } accept",
    ...node.map((a) => `${isV6(a) ? "ip6" : "ip"} ${field} ${a} accept comment "the pod's node"`)
  ]
  let rules = 0
  for (const allow of direction.allow) {
    for (const address of addressMatches(allow, field))
      for (const port of portMatches(allow.ports)) {
        lines.push(`${[address, port].filter((s) => s !== "").join(" ")} accept`.trimStart())
        rules++
      }
  }
  return { text: `\tchain ${name} {\n${lines.map((l) => `\t\t${l}`).join("\n")}\n\t}`, rules }
}

/**
 * The nftables script that makes a namespace enforce `rules`: it (re)creates the table in one
 * transaction (`table …; delete table …` first, so it works whether or not one exists), or only
 * deletes it when neither direction is isolated.
 */
export const render = (rules: Runtime.NetworkPolicyRules, node: ReadonlyArray<string>): Rendered => {
  const reset = `table inet ${table}\ndelete table inet ${table}\n`
  const chains: Array<{ readonly text: string; readonly rules: number }> = []
  if (rules.ingress.isolated) chains.push(chain("ingress", "input", rules.ingress, node))
  if (rules.egress.isolated) chains.push(chain("egress", "output", rules.egress, node))
  if (chains.length === 0) return { script: reset, rules: 0 }
  return {
    script: `${reset}table inet ${table} {\n${chains.map((c) => c.text).join("\n")}\n}\n`,
    rules: chains.reduce((n, c) => n + c.rules, 0)
  }
}

/** The gateways of the namespace's default routes (IPv4 and IPv6): the pod's node. */
export const defaultGateways = async (netns: string): Promise<ReadonlyArray<string>> => {
  const out: Array<string> = []
  for (const family of ["-4", "-6"]) {
    const text = await Nftables.ip([family, "-j", "route", "show", "default"], { netns }).catch(() => "[]")
    for (const r of JSON.parse(text || "[]") as Array<{ gateway?: string }>) if (r.gateway !== undefined) out.push(r.gateway)
  }
  return out
}

/** Check rules the renderer cannot express safely (an nft syntax error would say less). */
const check = (rules: Runtime.NetworkPolicyRules): string | undefined => {
  const cidr = /^[0-9a-fA-F:.]+\/\d{1,3}$/
  for (const [name, d] of [["ingress", rules.ingress], ["egress", rules.egress]] as const)
    for (const [i, a] of d.allow.entries()) {
      for (const c of [...(a.cidrs ?? []), ...(a.except ?? [])]) if (!cidr.test(c)) return `${name}.allow[${i}]: ${JSON.stringify(c)} is not a CIDR`
      for (const p of a.ports ?? []) {
        const ok = (n: number | undefined) => n === undefined || (Number.isInteger(n) && n >= 1 && n <= 65535)
        if (!ok(p.port) || !ok(p.endPort) || (p.endPort !== undefined && p.port === undefined)) return `${name}.allow[${i}]: bad port ${JSON.stringify(p)}`
      }
    }
  return undefined
}

/** A request the enforcer refuses (bad CIDR or port). */
export class InvalidRules extends Error {}

/**
 * Enforce `rules` in the network namespace at `netns` (`/proc/PID/ns/net` or `/run/netns/NAME`);
 * resolves with the number of policy rules now in force.
 */
export const apply = async (netns: string, rules: Runtime.NetworkPolicyRules, options: Options = {}): Promise<number> => {
  const problem = check(rules)
  if (problem !== undefined) throw new InvalidRules(problem)
  const node = options.node ?? (rules.ingress.isolated || rules.egress.isolated ? await defaultGateways(netns) : [])
  const rendered = render(rules, node)
  await Nftables.apply(rendered.script, { netns })
  return rendered.rules
}

/** The table as nftables lists it, or undefined when the namespace has none (for diagnosis and tests). */
export const list = (netns: string): Promise<string | undefined> =>
  Nftables.run([Nftables.nft() ?? "nft", "list", "table", "inet", table], undefined, { netns }).catch(() => undefined)

/**
 * The box's `POST /v1/containers/{id}/network-policy`: enforce `rules` in the pod's network
 * namespace (`netns`, undefined when the pod has none of its own: `Unsupported`).
 */
export const applyToPod = async (netns: string | undefined, rules: Runtime.NetworkPolicyRules): Promise<Runtime.NetworkPolicyApplied> => {
  if (netns === undefined) {
    throw new Runtime.Unsupported({ message: "network-policy: the pod has no network namespace of its own (host network, or a box without pod networks)" })
  }
  if (Nftables.nft() === undefined) throw new Runtime.Unsupported({ message: "network-policy: nft (nftables) is not installed on this node" })
  try {
    return { rules: await apply(netns, rules) }
  } catch (e) {
    if (e instanceof InvalidRules) throw new Runtime.Invalid({ message: `network-policy: ${e.message}` })
    throw new Runtime.Unavailable({ message: `network-policy: ${e instanceof Error ? e.message : String(e)}` })
  }
}
