/**
 * A pod's own network (isolated mode, root): the pod's network namespace is created with its
 * other namespaces by the sandbox holder (`unshare --net`), so it lives exactly as long as the
 * pod — no named netns to leak when a box crashes, no global names to collide between boxes,
 * and a box started by `ip netns exec HOST` works unchanged. The box then links it to the node:
 *
 *   bridge fleet0 (gateway = first address of the node's pod CIDR, ip_forward on)
 *     └─ veth fv<sandbox> ══ eth0 in the pod's netns: <pod IP>/<prefix>, default via the gateway, lo up
 *
 * The pod's IP comes from the box's persisted IPAM (Ipam.ts). Deleting the sandbox kills the
 * holder, the namespace goes, and the kernel deletes both ends of the veth; the box deletes the
 * host end too in case the namespace outlived it. Anything that must act inside a pod's network
 * namespace (NetworkPolicy's nftables rules) reaches it at `netnsPath(holderPid)`.
 */
import { PodCidr } from "@koder/fleet-core"
import { Either } from "effect"
import { existsSync, writeFileSync } from "node:fs"
import * as Nftables from "./Nftables.js"
import { which } from "./Tools.js"

/** The bridge pods are attached to (as the issue and flannel's `cni0` name it for Fleet). */
export const defaultBridge = "fleet0"

/** Whether this host can give pods their own network: root, iproute2 and nsenter. */
export const available = (): boolean =>
  process.getuid?.() === 0 && which("ip") !== undefined && which("nsenter") !== undefined

/** The pod's network namespace, as long as its holder (pid 1 of the pod) lives. */
export const netnsPath = (holderPid: number): string => `/proc/${holderPid}/ns/net`

/** The host end of a sandbox's veth (interface names are at most 15 characters). */
export const vethName = (sandboxId: string): string => `fv${sandboxId.replace(/[^0-9a-zA-Z]/g, "").slice(0, 13)}`

/** A pod's resolver configuration, `/etc/resolv.conf` text. */
export const resolvConf = (dns: { readonly nameservers: ReadonlyArray<string>; readonly searches?: ReadonlyArray<string>; readonly options?: ReadonlyArray<string> }): string =>
  [
    ...dns.nameservers.map((n) => `nameserver ${n}`),
    ...(dns.searches === undefined || dns.searches.length === 0 ? [] : [`search ${dns.searches.join(" ")}`]),
    ...(dns.options === undefined || dns.options.length === 0 ? [] : [`options ${dns.options.join(" ")}`]),
    ""
  ].join("\n")

const writeSysctl = (path: string, value: string) => {
  // Per network namespace: this is the namespace the box runs in (the node's).
  if (existsSync(path)) writeFileSync(path, value)
}

/** The node side: the bridge, and each sandbox's veth. */
export class PodNetwork {
  /** The bridge's address, once it has been set up in this box's life (per CIDR). */
  private bridgeReady: { readonly cidr: string; readonly done: Promise<void> } | undefined

  constructor(readonly bridge: string = defaultBridge) {}

  /**
   * The bridge with the gateway address of `cidr`, up, with forwarding on. Idempotent and
   * shared by concurrent sandbox creations; a bridge left by an earlier box is reused.
   */
  ensureBridge(cidr: string): Promise<void> {
    if (this.bridgeReady?.cidr === cidr) return this.bridgeReady.done
    const done = this.setUpBridge(cidr)
    this.bridgeReady = { cidr, done }
    done.catch(() => (this.bridgeReady = undefined))
    return done
  }

  private async setUpBridge(cidr: string): Promise<void> {
    const block = PodCidr.block(cidr)
    if (Either.isLeft(block)) throw new Error(block.left)
    const address = `${block.right.gateway}/${block.right.range.prefix}`
    const shown = await Nftables.ip(["-j", "addr", "show", "dev", this.bridge]).catch(() => undefined)
    if (shown === undefined) await Nftables.ip(["link", "add", this.bridge, "type", "bridge"]).catch((e: Error) => {
      if (!/File exists/.test(e.message)) throw e
    })
    const addrs = ((JSON.parse(shown ?? "[]") as Array<{ addr_info?: Array<{ family: string; local: string; prefixlen: number }> }>)[0]?.addr_info ?? []).filter((a) => a.family === "inet")
    if (!(addrs.length === 1 && `${addrs[0]!.local}/${addrs[0]!.prefixlen}` === address)) {
      await Nftables.ipBatch([`addr flush dev ${this.bridge}`, `addr add ${address} dev ${this.bridge}`])
    }
    await Nftables.ip(["link", "set", this.bridge, "up"])
    writeSysctl("/proc/sys/net/ipv4/ip_forward", "1")
    // Bridged pod-to-pod packets pass the host's conntrack, so a reply from a pod reached through a
    // ClusterIP on the same bridge is translated back (what kube-proxy needs br_netfilter for).
    writeSysctl("/proc/sys/net/bridge/bridge-nf-call-iptables", "1")
  }

  /** Give the pod's namespace (held by `holderPid`) its `eth0` with `ip`, linked to the bridge. */
  async attach(sandboxId: string, holderPid: number, ip: string, cidr: string): Promise<void> {
    const block = PodCidr.block(cidr)
    if (Either.isLeft(block)) throw new Error(block.left)
    await this.ensureBridge(cidr)
    const veth = vethName(sandboxId)
    // A host end left by a box that died half-way through this very sandbox.
    await Nftables.ip(["link", "del", veth]).catch(() => undefined)
    await Nftables.ip(["link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", String(holderPid)])
    await Nftables.ipBatch([`link set ${veth} master ${this.bridge}`, `link set ${veth} up`])
    await Nftables.ipBatch(
      ["link set lo up", `addr add ${ip}/${block.right.range.prefix} dev eth0`, "link set eth0 up", `route add default via ${block.right.gateway} dev eth0`],
      { netns: netnsPath(holderPid) }
    )
  }

  /** Remove a sandbox's host end (gone already when its namespace ended: fine). */
  async detach(sandboxId: string): Promise<void> {
    await Nftables.ip(["link", "del", vethName(sandboxId)]).catch(() => undefined)
  }
}
