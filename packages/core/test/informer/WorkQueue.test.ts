import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as WorkQueue from "../../src/informer/WorkQueue.js"

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
  return { timer, advance, now: () => now }
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

  describe("idle", () => {
    /** A queue on a hand-driven clock, and whether an `idle` wait started now has ended. */
    const setup = () => {
      const clock = manualTimer()
      const q = WorkQueue.make({ timer: clock.timer, now: clock.now })
      const wait = (deadlineMs: number, settleMs?: number) =>
        Effect.gen(function* () {
          const fiber = yield* Effect.fork(q.idle(deadlineMs, settleMs))
          yield* Effect.yieldNow()
          return { ended: () => fiber.unsafePoll() !== null }
        })
      return { q, clock, wait }
    }

    it.effect("ends at once for a queue with nothing waiting or processed; delayed keys do not count", () =>
      Effect.gen(function* () {
        const { q, wait } = setup()
        q.addAfter("later", 1_000)
        expect((yield* wait(10_000)).ended()).toBe(true)
      })
    )

    it.effect("waits while a key waits or is processed, and ends when the last is done", () =>
      Effect.gen(function* () {
        const { q, wait } = setup()
        q.add("a")
        q.add("b")
        const w = yield* wait(10_000)
        expect(w.ended()).toBe(false)
        yield* q.take
        q.done("a")
        yield* Effect.yieldNow()
        expect(w.ended()).toBe(false)
        yield* q.take
        q.done("b")
        yield* Effect.yieldNow()
        expect(w.ended()).toBe(true)
      })
    )

    it.effect("with settleMs, waits for the queue to stay idle that long; a key meanwhile starts it over", () =>
      Effect.gen(function* () {
        const { q, clock, wait } = setup()
        q.add("a")
        const w = yield* wait(10_000, 250)
        yield* q.take
        q.done("a")
        clock.advance(200)
        yield* Effect.yieldNow()
        expect(w.ended()).toBe(false)
        // Busy again before the quarter second is up: the wait goes on from the next idle moment.
        q.add("b")
        clock.advance(100)
        yield* q.take
        q.done("b")
        clock.advance(200)
        yield* Effect.yieldNow()
        expect(w.ended()).toBe(false)
        clock.advance(50)
        yield* Effect.yieldNow()
        expect(w.ended()).toBe(true)
      })
    )

    it.effect("ends at the deadline however busy the queue is", () =>
      Effect.gen(function* () {
        const { q, clock, wait } = setup()
        q.add("a")
        yield* q.take
        const w = yield* wait(1_000, 250)
        clock.advance(999)
        yield* Effect.yieldNow()
        expect(w.ended()).toBe(false)
        clock.advance(1)
        yield* Effect.yieldNow()
        expect(w.ended()).toBe(true)
        // A deadline already passed does not wait at all.
        expect((yield* wait(500)).ended()).toBe(true)
      })
    )
  })
})
