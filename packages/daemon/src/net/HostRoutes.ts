/**
 * Routes to other nodes' pods (isolated mode, flannel's host-gw): `ip route replace <pod CIDR>
 * via <node InternalIP>` for every other node, tagged with Fleet's own route protocol number so
 * the agent finds and removes exactly its own routes (a departed node's, a changed address) and
 * never touches anyone else's. Idempotent: each sync reads the routes back and fixes the
 * difference, so a route deleted by hand comes back at the next sync.
 */
import type { NodeRoutes } from "@koder/fleet-core"
import * as Nftables from "../box/Nftables.js"

/** The `proto` Fleet's routes carry (unassigned in /etc/iproute2/rt_protos). */
export const routeProtocol = 160

interface Shown {
  readonly dst: string
  readonly gateway?: string
}

/** Fleet's routes as the kernel has them now. */
export const current = async (): Promise<ReadonlyArray<{ readonly cidr: string; readonly via: string | undefined }>> => {
  const text = await Nftables.ip(["-j", "-4", "route", "show", "proto", String(routeProtocol)])
  return (JSON.parse(text === "" ? "[]" : text) as Array<Shown>).map((r) => ({ cidr: r.dst.includes("/") ? r.dst : `${r.dst}/32`, via: r.gateway }))
}

/** What one sync changed. */
export interface Changes {
  readonly added: number
  readonly removed: number
}

/**
 * Make Fleet's routes exactly `routes`: replace the missing or different ones, delete the
 * others. A route that cannot be added (its gateway is not on a directly connected network:
 * host-gw needs the nodes on one link) fails the sync with `ip`'s message, after the rest applied.
 */
export const sync = async (routes: ReadonlyArray<NodeRoutes.Route>): Promise<Changes> => {
  const have = await current()
  const want = new Map(routes.map((r) => [r.cidr, r.via]))
  const lines: Array<string> = []
  let added = 0
  let removed = 0
  for (const r of routes) {
    if (have.some((h) => h.cidr === r.cidr && h.via === r.via)) continue
    lines.push(`route replace ${r.cidr} via ${r.via} proto ${routeProtocol}`)
    added++
  }
  for (const h of have) {
    if (want.has(h.cidr)) continue
    lines.push(`route del ${h.cidr} proto ${routeProtocol}`)
    removed++
  }
  if (lines.length > 0) await Nftables.ipBatch(lines, {}, true)
  return { added, removed }
}

/** Remove every Fleet route (the agent leaving isolated mode for good). */
export const clear = async (): Promise<void> => {
  await sync([])
}
