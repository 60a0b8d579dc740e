import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as WorkQueue from "../../src/controllers/WorkQueue.js"

/** A timer driven by hand: `advance(ms)` fires what is due. */
const manualTimer = () => {
  let now = 0
  const timers: Array<{ at: number; run: () => void; live: boolean }> = []
  const timer: WorkQueue.Timer = (ms, run) => {
    const t = { at: now + ms, run, live: true }
    timers.push(t)
    return () => void (t.live = false)
  }
  const advance = (ms: number) => {
    now += ms
    for (const t of timers.filter((t) => t.live && t.at <= now)) {
      t.live = false
      t.run()
    }
  }
  return { timer, advance }
}

describe("WorkQueue", () => {
  it.effect("holds a key once however often it is added", () =>
    Effect.gen(function* () {
      const q = WorkQueue.make()
      q.add("a")
      q.add("b")
      q.add("a")
      expect(q.depth()).toBe(2)
      expect(yield* q.take).toBe("a")
      expect(yield* q.take).toBe("b")
      expect(q.depth()).toBe(0)
    })
  )

  it.effect("never hands a key being processed to a second worker; re-adds it after done", () =>
    Effect.gen(function* () {
      const q = WorkQueue.make()
      q.add("a")
      expect(yield* q.take).toBe("a")
      q.add("a")
      expect(q.depth()).toBe(0)
      const second = yield* Effect.fork(q.take)
      yield* Effect.yieldNow()
      expect(second.unsafePoll()).toBeNull()
      q.done("a")
      expect(yield* Fiber.join(second)).toBe("a")
    })
  )

  it.effect("a key added while processing is processed once more, not twice", () =>
    Effect.gen(function* () {
      const q = WorkQueue.make()
      q.add("a")
      yield* q.take
      q.add("a")
      q.add("a")
      q.done("a")
      expect(q.depth()).toBe(1)
      yield* q.take
      q.done("a")
      expect(q.depth()).toBe(0)
    })
  )

  it.effect("wakes a waiting worker when a key arrives", () =>
    Effect.gen(function* () {
      const q = WorkQueue.make()
      const waiting = yield* Effect.fork(q.take)
      yield* Effect.yieldNow()
      q.add("x")
      expect(yield* Fiber.join(waiting)).toBe("x")
    })
  )

  it.each([
    [1, 5],
    [2, 10],
    [3, 20],
    [10, 2560],
    [20, 30_000],
    [100, 30_000]
  ])("backoff after %i failures is %i ms", (failures, ms) => {
    expect(WorkQueue.backoffDelay(WorkQueue.defaultBackoff, failures)).toBe(ms)
  })

  it.effect("rate-limited keys come back after their backoff; forget resets it", () =>
    Effect.sync(() => {
      const { timer, advance } = manualTimer()
      const q = WorkQueue.make({ timer, backoff: { baseMs: 100, maxMs: 1000 } })
      q.addRateLimited("a")
      q.addRateLimited("a")
      expect(q.failures("a")).toBe(2)
      expect(q.depth()).toBe(0)
      expect(q.delayed()).toBe(1)
      advance(99)
      expect(q.depth()).toBe(0)
      advance(1)
      // The earlier (100 ms) delay wins over the later (200 ms) one.
      expect(q.depth()).toBe(1)
      q.forget("a")
      expect(q.failures("a")).toBe(0)
    })
  )

  it.effect("addAfter keeps the earliest pending time; shutdown drops pending delays", () =>
    Effect.sync(() => {
      const { timer, advance } = manualTimer()
      const q = WorkQueue.make({ timer })
      q.addAfter("a", 500)
      q.addAfter("a", 100)
      q.addAfter("a", 300)
      advance(100)
      expect(q.depth()).toBe(1)
      q.addAfter("b", 50)
      q.shutdown()
      advance(100)
      expect(q.depth()).toBe(1)
      q.add("c")
      expect(q.depth()).toBe(1)
    })
  )
})
