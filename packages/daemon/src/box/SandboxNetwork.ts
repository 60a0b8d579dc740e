/**
 * How a `network: pod` sandbox is linked to the node: by the built-in bridge (PodNetwork.ts, with
 * the box's persisted IPAM, Ipam.ts) or, with `--cni-conf-dir`, by CNI plugins (Cni.ts, whose IPAM
 * it is then). Either way the pod's resolv.conf is bind-mounted in its mount namespace, and what
 * `connect` answers is recorded in the sandbox, so `disconnect` after a box restart undoes it.
 */
import type { Runtime } from "@koder/fleet-core"
import { rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as Cni from "./Cni.js"
import { invalid, unavailable } from "./Driver.js"
import type { IpamStore } from "./Ipam.js"
import * as Nftables from "./Nftables.js"
import type { PodNetwork } from "./PodNetwork.js"
import * as PodNetworks from "./PodNetwork.js"

/** What a sandbox's record keeps of its network. */
export interface Attached {
  readonly ip: string
  readonly cidr: string
  /** The CNI ADD result (CNI only), for DEL and CHECK. */
  readonly cni?: Cni.Result
}

/** The sandbox as the network sees it: its id, spec, and its holder's pid while it lives. */
export interface Sandbox {
  readonly id: string
  readonly spec: Runtime.SandboxSpec
  readonly holderPid: number | undefined
}

/** Links sandboxes to the node. */
export class SandboxNetwork {
  constructor(
    private readonly dataDir: string,
    private readonly nsenter: string,
    private readonly bridge: PodNetwork,
    private readonly ipam: () => IpamStore | undefined,
    private readonly cni: Cni.CniRunner | undefined
  ) {}

  /** Whether the box's own IPAM hands out the addresses (not with CNI). */
  get ownsAddresses(): boolean {
    return this.cni === undefined
  }

  private resolvFile(id: string) {
    return join(this.dataDir, "sandboxes", `${id}.resolv.conf`)
  }

  /** An address and a link for a new sandbox, then its resolv.conf. */
  async connect(sb: Sandbox, cidr: string): Promise<Attached> {
    let attached: Attached
    if (this.cni !== undefined) {
      const result = await this.cni.add(Cni.sandboxCall(sb.id, sb.spec, cidr, sb.holderPid)).catch((e: unknown) => {
        throw unavailable(e instanceof Error ? e.message : String(e))
      })
      attached = { ip: Cni.podIpOf(result)!, cidr, cni: result }
    } else {
      let ip: string
      try {
        ip = this.ipam()!.allocate(cidr, sb.id)
      } catch (e) {
        throw invalid(`podCidr: ${e instanceof Error ? e.message : String(e)}`)
      }
      attached = { ip, cidr }
      await this.bridge.attach(sb.id, sb.holderPid!, ip, cidr)
    }
    if (sb.spec.dns !== undefined) {
      writeFileSync(this.resolvFile(sb.id), PodNetworks.resolvConf(sb.spec.dns), { mode: 0o644 })
      await Nftables.run([this.nsenter, "-t", String(sb.holderPid), "-m", "--", "mount", "--bind", this.resolvFile(sb.id), "/etc/resolv.conf"])
    }
    return attached
  }

  /**
   * CNI's CHECK of a live sandbox's network (the plugins verify what their ADD made: the
   * interface, its address, the routes, the host-side rules); the error when it no longer holds.
   * The built-in bridge has nothing to check beyond its records.
   */
  async check(sb: Sandbox, attached: Attached): Promise<string | undefined> {
    if (this.cni === undefined || attached.cni === undefined || sb.holderPid === undefined) return undefined
    return this.cni.check(Cni.sandboxCall(sb.id, sb.spec, attached.cidr, sb.holderPid), attached.cni).then(
      () => undefined,
      (e: unknown) => (e instanceof Error ? e.message : String(e))
    )
  }

  /**
   * Undo `connect` (`attached` undefined: a connect that failed midway). CNI: the plugins' DEL
   * (told of a namespace that ended by an empty `CNI_NETNS`). Built-in: the namespace ended with
   * its holder, taking the veth along; the host end goes in any case, and the address is freed.
   */
  async disconnect(sb: Sandbox, attached: Attached | undefined): Promise<void> {
    if (this.cni !== undefined) {
      if (attached !== undefined) await this.cni.del(Cni.sandboxCall(sb.id, sb.spec, attached.cidr, sb.holderPid), attached.cni).catch(() => undefined)
    } else {
      this.ipam()?.release(sb.id)
      await this.bridge.detach(sb.id)
    }
    rmSync(this.resolvFile(sb.id), { force: true })
  }
}
