/**
 * The routes a node needs to reach other nodes' pods in isolated network mode, flannel's
 * "host-gw" way: every other node's pod CIDR via that node's InternalIP, no encapsulation. It
 * works when the nodes share a link (one L2 segment, or routers that know nothing of pod CIDRs
 * are not in between); the agent programs what this answers and removes what it no longer does.
 *
 *   Nodes ─▶ routes(self) ─▶ [{ cidr: 10.42.2.0/24, via: 192.168.1.12, node: b }, …]
 */
import * as IpRange from "./IpRange.js"
import { asArray, asObject, asString } from "../object/Json.js"

type JsonObject = Readonly<Record<string, unknown>>


/** A route to another node's pods. */
export interface Route {
  readonly cidr: string
  readonly via: string
  readonly node: string
}

/** A Node's IPv4 pod CIDRs (`spec.podCIDRs`, else `spec.podCIDR`). */
export const podCidrsOf = (node: JsonObject): ReadonlyArray<string> => {
  const spec = asObject(node["spec"])
  const all = asArray(spec["podCIDRs"]).map(asString).filter((c) => c !== "")
  const list = all.length > 0 ? all : asString(spec["podCIDR"]) === "" ? [] : [asString(spec["podCIDR"])]
  return list.filter((c) => IpRange.familyOf(c.split("/")[0] ?? "") === "IPv4")
}

/** A Node's InternalIP (IPv4), as its agent reported it. */
export const internalIPOf = (node: JsonObject): string | undefined =>
  asArray(asObject(node["status"])["addresses"])
    .map(asObject)
    .find((a) => asString(a["type"]) === "InternalIP" && IpRange.familyOf(asString(a["address"])) === "IPv4")?.["address"] as string | undefined

/**
 * Routes from node `self` to every other node's pod CIDRs. A node without an InternalIP or a pod
 * CIDR yet gets none; a node whose InternalIP is this node's own (two agents on one host) neither.
 */
export const routes = (nodes: ReadonlyArray<JsonObject>, self: string): ReadonlyArray<Route> => {
  const me = nodes.find((n) => asString(asObject(n["metadata"])["name"]) === self)
  const myIP = me === undefined ? undefined : internalIPOf(me)
  const out: Array<Route> = []
  for (const n of nodes) {
    const name = asString(asObject(n["metadata"])["name"])
    if (name === self) continue
    const via = internalIPOf(n)
    if (via === undefined || via === myIP) continue
    for (const cidr of podCidrsOf(n)) out.push({ cidr, via, node: name })
  }
  return out.sort((a, b) => (a.cidr < b.cidr ? -1 : a.cidr > b.cidr ? 1 : 0))
}

/** Every node's pod CIDRs (what pod traffic may reach without masquerade). */
export const allPodCidrs = (nodes: ReadonlyArray<JsonObject>): ReadonlyArray<string> => [...new Set(nodes.flatMap(podCidrsOf))].sort()
