import { describe, expect, it } from "@effect/vitest"
import { BackoffQueue, backoffMs } from "../../../src/scheduler/queue/BackoffQueue.js"
import type { Entry } from "../../../src/scheduler/queue/QueueEntry.js"
import { entry, manual } from "./fixtures.js"

describe("backoffMs", () => {
  it.each([
    { attempts: 0, ms: 1000 },
    { attempts: 1, ms: 1000 },
    { attempts: 2, ms: 2000 },
    { attempts: 4, ms: 8000 },
    { attempts: 5, ms: 10_000 },
    { attempts: 50, ms: 10_000 }
  ])("after $attempts attempts: $ms ms (1 s doubling, capped at 10 s)", ({ attempts, ms }) => {
    expect(backoffMs(attempts, 1000, 10_000)).toBe(ms)
  })
})

describe("BackoffQueue", () => {
  const setup = () => {
    const clock = manual()
    const ready: Array<string> = []
    const q = new BackoffQueue(clock.timer, clock.now, (e: Entry) => ready.push(e.info.pod.name))
    return { clock, ready, q }
  }

  it("hands pods over when their backoff is over, earliest first, with one timer armed", () => {
    const { clock, ready, q } = setup()
    q.add(entry("late"), 300)
    q.add(entry("early"), 100)
    expect(q.size).toBe(2)
    expect(clock.live()).toBe(1)
    clock.advance(99)
    expect(ready).toEqual([])
    clock.advance(1)
    expect(ready).toEqual(["early"])
    clock.advance(200)
    expect(ready).toEqual(["early", "late"])
    expect(q.size).toBe(0)
    expect(clock.live()).toBe(0)
  })

  it("a removed pod is never handed over; a closed queue arms nothing", () => {
    const { clock, ready, q } = setup()
    const gone = entry("gone")
    q.add(gone, 100)
    q.add(entry("kept"), 200)
    q.remove(gone)
    clock.advance(500)
    expect(ready).toEqual(["kept"])
    q.close()
    q.add(entry("after"), 600)
    expect(clock.live()).toBe(0)
  })
})
