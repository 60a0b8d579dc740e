import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { ActiveQueue } from "../../../src/scheduler/queue/ActiveQueue.js"
import type { Entry } from "../../../src/scheduler/queue/QueueEntry.js"
import { entry } from "./fixtures.js"

const byPriority = (a: Entry, b: Entry) => a.info.pod.priority > b.info.pod.priority

describe("ActiveQueue", () => {
  it("takes the best pod into flight, counting an attempt", () => {
    const q = new ActiveQueue(byPriority)
    q.push(entry("low", 0, [], 1))
    q.push(entry("high", 0, [], 9))
    const e = q.take()!
    expect([e.info.pod.name, e.place, e.info.attempts, q.size, q.inFlight]).toEqual(["high", "inFlight", 2, 1, 1])
    q.leave(e)
    expect(q.inFlight).toBe(0)
  })

  it("remembers events only while pods are in flight, each pod from its pop on", () => {
    const q = new ActiveQueue(byPriority)
    q.record([{ resource: "Node", action: "Add" }])
    q.push(entry("a"))
    q.push(entry("b"))
    const a = q.take()!
    q.record([{ resource: "Node", action: "Delete" }])
    const b = q.take()!
    q.record([{ resource: "Pod", action: "Add" }])
    expect(q.seenBy(a).map((es) => es[0]!.action)).toEqual(["Delete", "Add"])
    expect(q.seenBy(b).map((es) => es[0]!.resource)).toEqual(["Pod"])
    q.leave(a)
    q.leave(b)
    // Nothing in flight: the log is dropped and a new pod starts from an empty one.
    q.push(entry("c"))
    expect(q.seenBy(q.take()!)).toEqual([])
  })

  it.effect("wait resumes on the next push", () =>
    Effect.gen(function* () {
      const q = new ActiveQueue(byPriority)
      const waiting = yield* Effect.fork(q.wait)
      yield* Effect.yieldNow()
      q.push(entry("a"))
      yield* Fiber.join(waiting)
      expect(q.take()?.info.pod.name).toBe("a")
    })
  )
})
