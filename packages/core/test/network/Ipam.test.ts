/** Pod IP allocation: round-robin in the block, idempotent per owner, released and retained. */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Ipam from "../../src/network/Ipam.js"

const take = (state: Ipam.State, owner: string) => Either.getOrThrow(Ipam.allocate(state, owner))

describe("Ipam", () => {
  it("hands out addresses after the gateway, one per owner, the same again for a retried owner", () => {
    let s = Ipam.empty("10.42.1.0/24")
    const a = take(s, "a")
    s = a.state
    expect(a.ip).toBe("10.42.1.2")
    const b = take(s, "b")
    s = b.state
    expect(b.ip).toBe("10.42.1.3")
    expect(take(s, "a").ip).toBe("10.42.1.2")
    expect(Ipam.addressOf(s, "b")).toBe("10.42.1.3")
  })

  it("does not reuse a released address for the very next pod (round-robin), and wraps around", () => {
    let s = Ipam.empty("10.42.1.0/29") // pods: .2 … .6
    for (const o of ["a", "b", "c"]) s = take(s, o).state
    s = Ipam.release(s, "a")
    const d = take(s, "d")
    expect(d.ip).toBe("10.42.1.5")
    s = take(d.state, "e").state
    expect(Ipam.addressOf(s, "e")).toBe("10.42.1.6")
    // Past the end it starts over, at the first free one.
    expect(take(s, "f").ip).toBe("10.42.1.2")
  })

  it("fails when the block is full", () => {
    let s = Ipam.empty("10.42.1.0/30") // one pod address: .2
    s = take(s, "a").state
    const r = Ipam.allocate(s, "b")
    expect(Either.isLeft(r) && /no free address/.test(r.left)).toBe(true)
  })

  it("drops owners that are gone", () => {
    let s = Ipam.empty("10.42.1.0/24")
    for (const o of ["a", "b", "c"]) s = take(s, o).state
    s = Ipam.retain(s, new Set(["b"]))
    expect(s.allocations).toEqual({ "10.42.1.3": "b" })
    expect(Ipam.retain(s, new Set(["b"]))).toBe(s)
  })
})
