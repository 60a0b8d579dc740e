import { describe, expect, it } from "@effect/vitest"
import * as WatchBudget from "../../src/api/WatchBudget.js"

const MiB = 1024 * 1024

describe("WatchBudget", () => {
  it("admits a user's first watch whatever its initial state, and refuses one that would pass the budget", () => {
    const budget = WatchBudget.make(10 * MiB)
    const big = budget.admit("alice", 25 * MiB)
    expect(big).toBeDefined()
    expect(budget.used("alice")).toBe(25 * MiB)
    // alice already owes her clients more than the budget: no second watch.
    expect(budget.admit("alice", 1)).toBeUndefined()
    // Another user is not affected.
    expect(budget.admit("bob", 4 * MiB)).toBeDefined()
    expect(budget.total()).toBe(29 * MiB)
  })

  it("refuses a watch only for the bytes its user's watches have not delivered", () => {
    const budget = WatchBudget.make(10 * MiB)
    const first = budget.admit("alice", 6 * MiB)!
    expect(budget.admit("alice", 6 * MiB)).toBeUndefined()
    // The initial state goes out: writing moves reserved bytes to unsent (no new charge) ...
    expect(first.write(6 * MiB)).toBe(true)
    expect(first.reserved()).toBe(0)
    expect(first.unsent()).toBe(6 * MiB)
    expect(budget.used("alice")).toBe(6 * MiB)
    expect(budget.admit("alice", 6 * MiB)).toBeUndefined()
    // ... and the client reading it frees the budget.
    first.flushed(6 * MiB)
    expect(budget.used("alice")).toBe(0)
    const second = budget.admit("alice", 6 * MiB)
    expect(second).toBeDefined()
    expect(budget.used("alice")).toBe(6 * MiB)
  })

  it("tells a running watch to close when its write takes the user past the budget, unless it is the user's only one", () => {
    const budget = WatchBudget.make(1 * MiB)
    const only = budget.admit("alice", 0)!
    // Alone, a watch is bounded by the HTTP layer's window and stall timeout, not the budget.
    expect(only.write(2 * MiB)).toBe(true)
    only.flushed(2 * MiB)
    const other = budget.admit("alice", 0)!
    expect(only.write(768 * 1024)).toBe(true)
    expect(other.write(512 * 1024)).toBe(false)
    // The closed watch returns everything it held; later callbacks change nothing.
    other.release()
    other.flushed(512 * 1024)
    expect(budget.used("alice")).toBe(768 * 1024)
    expect(other.write(1)).toBe(false)
  })

  it("returns a watch's whole share when it ends, once, and forgets users with no watches", () => {
    const budget = WatchBudget.make(10 * MiB)
    const w = budget.admit("alice", 3 * MiB)!
    w.write(1 * MiB)
    w.write(1 * MiB)
    w.flushed(1 * MiB)
    expect(budget.used("alice")).toBe(2 * MiB) // 1 MiB reserved, 1 MiB unsent
    w.release()
    w.release()
    expect(budget.used("alice")).toBe(0)
    expect(budget.total()).toBe(0)
    // More flushed than unsent (a late callback) never goes negative.
    const v = budget.admit("alice", 0)!
    v.write(10)
    v.flushed(20)
    expect(budget.used("alice")).toBe(0)
  })

  it("with 0 only accounts, never refuses", () => {
    const budget = WatchBudget.make(0)
    const a = budget.admit("alice", 100 * MiB)!
    expect(budget.admit("alice", 100 * MiB)).toBeDefined()
    expect(a.write(200 * MiB)).toBe(true)
    expect(budget.used("alice")).toBe(300 * MiB)
  })
})
