import { describe, expect, it } from "vitest"
import * as Limiter from "../../src/controllers/internal/EvictionRateLimiter.js"

describe("EvictionRateLimiter", () => {
  it("starts full with one token, then refills at qps", () => {
    let b = Limiter.make(0.1, 0)
    expect(Limiter.canAccept(b, 0)).toBe(true)
    const first = Limiter.tryAccept(b, 0)
    expect(first.accepted).toBe(true)
    b = first.bucket
    expect(Limiter.tryAccept(b, 5_000).accepted).toBe(false)
    expect(Limiter.msUntilToken(b, 5_000)).toBe(5_000)
    expect(Limiter.tryAccept(b, 10_000).accepted).toBe(true)
  })

  it("never holds more than the burst", () => {
    const b = Limiter.tryAccept(Limiter.make(1, 0), 0).bucket
    const later = Limiter.tryAccept(b, 100_000)
    expect(later.accepted).toBe(true)
    expect(Limiter.tryAccept(later.bucket, 100_000).accepted).toBe(false)
  })

  it("a rate of 0 accepts nothing, ever", () => {
    const b = Limiter.make(0, 0)
    expect(Limiter.canAccept(b, 1e9)).toBe(false)
    expect(Limiter.msUntilToken(b, 0)).toBeUndefined()
  })

  const swaps: ReadonlyArray<[string, Limiter.Bucket, number, boolean]> = [
    ["same rate: unchanged", Limiter.make(0.1, 0), 0.1, true],
    ["new rate from a bucket with a token: full", Limiter.make(0.1, 0), 1, true],
    ["new rate from an empty bucket: drained", Limiter.tryAccept(Limiter.make(0.1, 0), 0).bucket, 1, false],
    ["to zero: never", Limiter.make(0.1, 0), 0, false]
  ]
  it.each(swaps)("swap: %s", (_what, bucket, qps, token) => {
    const next = Limiter.swap(bucket, qps, 0)
    expect(next.qps).toBe(qps)
    expect(Limiter.canAccept(next, 0)).toBe(token)
  })
})
