// Per-client in-flight limits (ClientSlots): requests and watches counted apart per client, a
// release frees its slot once, and a client with nothing in flight is forgotten.
import { describe, expect, it } from "vitest"
import * as ClientSlots from "../../src/internal/ClientSlots.js"

describe("ClientSlots", () => {
  it("admits up to the bound per client and kind, and frees a slot once per release", () => {
    const slots = ClientSlots.make(2, 1)
    const a = ClientSlots.admit(slots, "token:a", false)
    const b = ClientSlots.admit(slots, "token:a", false)
    expect(a).toBeDefined()
    expect(b).toBeDefined()
    expect(ClientSlots.admit(slots, "token:a", false)).toBeUndefined()
    expect(ClientSlots.admit(slots, "token:b", false)).toBeDefined()
    const watch = ClientSlots.admit(slots, "token:a", true)
    expect(watch).toBeDefined()
    expect(ClientSlots.admit(slots, "token:a", true)).toBeUndefined()
    a!()
    a!()
    expect(slots.perClient.get("token:a")).toEqual({ requests: 1, watches: 1 })
    expect(ClientSlots.admit(slots, "token:a", false)).toBeDefined()
  })

  it("forgets a client once nothing of it is in flight", () => {
    const slots = ClientSlots.make(1, 1)
    const request = ClientSlots.admit(slots, "addr:1", false)!
    const watch = ClientSlots.admit(slots, "addr:1", true)!
    request()
    expect(slots.perClient.has("addr:1")).toBe(true)
    watch()
    expect(slots.perClient.has("addr:1")).toBe(false)
  })
})
