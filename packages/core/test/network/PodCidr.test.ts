/** Pod CIDR arithmetic: node blocks of the cluster CIDR and the addresses a block reserves. */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as PodCidr from "../../src/network/PodCidr.js"

const plan = (cidr: string, mask?: number) => Either.getOrThrow(PodCidr.plan(cidr, mask))

describe("PodCidr", () => {
  it("cuts the cluster CIDR into /24 blocks, lowest free first", () => {
    const p = plan("10.42.0.0/16")
    expect(p.blocks).toBe(256n)
    expect(PodCidr.nodeBlock(p, 0n)).toBe("10.42.0.0/24")
    expect(PodCidr.nodeBlock(p, 255n)).toBe("10.42.255.0/24")
    expect(PodCidr.nodeBlock(p, 256n)).toBeUndefined()
    expect(PodCidr.firstFree(p, [])).toBe("10.42.0.0/24")
    expect(PodCidr.firstFree(p, ["10.42.0.0/24", "10.42.2.0/24"])).toBe("10.42.1.0/24")
    // Written in another form (host bits set) it still counts as taken; foreign blocks are ignored.
    expect(PodCidr.firstFree(p, ["10.42.0.7/24", "192.168.0.0/24"])).toBe("10.42.1.0/24")
  })

  it("answers nothing when every block is taken", () => {
    const p = plan("10.1.0.0/23", 24)
    expect(PodCidr.firstFree(p, ["10.1.0.0/24", "10.1.1.0/24"])).toBeUndefined()
  })

  it("honours other block sizes", () => {
    const p = plan("10.0.0.0/8", 26)
    expect(PodCidr.nodeBlock(p, 5n)).toBe("10.0.1.64/26")
  })

  it.each([
    ["fd00::/48", 64, /IPv4/],
    ["10.42.0.0/16", 8, /between/],
    ["10.42.0.0/16", 31, /between/],
    ["not-a-cidr", 24, /invalid CIDR/]
  ])("refuses %s with /%i", (cidr, mask, why) => {
    const r = PodCidr.plan(cidr, mask)
    expect(Either.isLeft(r) && why.test(r.left)).toBe(true)
  })

  it("reserves the network, gateway and broadcast addresses of a node block", () => {
    const b = Either.getOrThrow(PodCidr.block("10.42.3.0/24"))
    expect(b.gateway).toBe("10.42.3.1")
    expect([b.first, b.last]).toEqual([2n, 254n])
    expect(Either.isLeft(PodCidr.block("10.42.3.0/31"))).toBe(true)
  })

  it("tells membership and overlap", () => {
    expect(PodCidr.contains("10.42.3.0/24", "10.42.3.9")).toBe(true)
    expect(PodCidr.contains("10.42.3.0/24", "10.42.4.9")).toBe(false)
    expect(PodCidr.overlaps("10.42.0.0/16", "10.42.7.0/24")).toBe(true)
    expect(PodCidr.overlaps("10.42.0.0/24", "10.42.1.0/24")).toBe(false)
  })
})
