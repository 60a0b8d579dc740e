/** host-gw routes: other nodes' pod CIDRs via their InternalIPs. */
import { describe, expect, it } from "@effect/vitest"
import * as NodeRoutes from "../../src/network/NodeRoutes.js"

const node = (name: string, ip: string | undefined, cidr: string | undefined) => ({
  metadata: { name },
  spec: cidr === undefined ? {} : { podCIDR: cidr, podCIDRs: [cidr] },
  status: { addresses: ip === undefined ? [] : [{ type: "Hostname", address: name }, { type: "InternalIP", address: ip }] }
})

describe("NodeRoutes", () => {
  it("routes every other node's pod CIDR via its InternalIP", () => {
    const nodes = [node("a", "192.168.5.2", "10.42.0.0/24"), node("b", "192.168.5.3", "10.42.1.0/24"), node("c", "192.168.5.4", "10.42.2.0/24")]
    expect(NodeRoutes.routes(nodes, "a")).toEqual([
      { cidr: "10.42.1.0/24", via: "192.168.5.3", node: "b" },
      { cidr: "10.42.2.0/24", via: "192.168.5.4", node: "c" }
    ])
    expect(NodeRoutes.allPodCidrs(nodes)).toEqual(["10.42.0.0/24", "10.42.1.0/24", "10.42.2.0/24"])
  })

  it("skips nodes without an address or a CIDR yet, and nodes on this very host", () => {
    const nodes = [node("a", "192.168.5.2", "10.42.0.0/24"), node("b", undefined, "10.42.1.0/24"), node("c", "192.168.5.4", undefined), node("d", "192.168.5.2", "10.42.3.0/24")]
    expect(NodeRoutes.routes(nodes, "a")).toEqual([])
  })

  it("reads spec.podCIDR when podCIDRs is absent, and ignores IPv6 blocks", () => {
    expect(NodeRoutes.podCidrsOf({ spec: { podCIDR: "10.42.9.0/24" } })).toEqual(["10.42.9.0/24"])
    expect(NodeRoutes.podCidrsOf({ spec: { podCIDRs: ["10.42.9.0/24", "fd00:42::/64"] } })).toEqual(["10.42.9.0/24"])
  })
})
