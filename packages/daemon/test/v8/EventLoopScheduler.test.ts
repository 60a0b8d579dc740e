import { Effect, Fiber, Runtime, Scheduler } from "effect"
import { describe, expect, it } from "vitest"
import * as EventLoopScheduler from "../../src/v8/EventLoopScheduler.js"

/** Fiber work that never waits on I/O: it only yields to the scheduler. */
const busy = (until: () => boolean) =>
  Effect.gen(function* () {
    let spins = 0
    while (!until()) {
      spins++
      yield* Effect.yieldNow()
    }
    return spins
  })

describe("EventLoopScheduler: fibers leave the event loop a turn", () => {
  /** How many times a busy fiber yields before an I/O callback (setImmediate) gets to run. */
  const spinsBeforeIo = (run: <A>(effect: Effect.Effect<A>) => Promise<A>) => {
    let ran = false
    setImmediate(() => (ran = true))
    return run(busy(() => ran))
  }

  it("a busy fiber lets an I/O callback run once its slice is over; Effect's default lets it wait 2,048 drains", async () => {
    // A zero slice ends at every drain, so the count does not depend on the machine's speed.
    const scheduler = EventLoopScheduler.make(0)
    expect(await spinsBeforeIo((e) => Effect.runPromise(Effect.withScheduler(e, scheduler)))).toBeLessThanOrEqual(3)
    expect(await spinsBeforeIo((e) => Effect.runPromise(e))).toBeGreaterThanOrEqual(1_000)
  })

  it("provided as a Layer, it runs the program, the fibers it forks and what its runtime runs later; Effect's default stays untouched", async () => {
    const defaultTask = Scheduler.defaultScheduler.scheduleTask
    const provided = <A>(e: Effect.Effect<A>) => Effect.runPromise(Effect.provide(e, EventLoopScheduler.layer(0)))
    expect(await spinsBeforeIo(provided)).toBeLessThanOrEqual(3)
    expect(await spinsBeforeIo((e) => provided(Effect.fork(e).pipe(Effect.flatMap(Fiber.join))))).toBeLessThanOrEqual(3)
    // A callback outside any fiber (an HTTP request's) runs its effect with the runtime captured at the root.
    const runtime = await provided(Effect.runtime<never>())
    expect(await spinsBeforeIo((e) => Runtime.runPromise(runtime)(e))).toBeLessThanOrEqual(3)
    // Nothing global changed: a program run without the layer still gets Effect's own scheduler.
    expect(Scheduler.defaultScheduler.scheduleTask).toBe(defaultTask)
    expect(await spinsBeforeIo((e) => Effect.runPromise(e))).toBeGreaterThanOrEqual(1_000)
  })

  it("runs every fiber's work to its end, the fibers taking turns", async () => {
    const scheduler = EventLoopScheduler.make(5)
    const order: Array<string> = []
    const program = Effect.gen(function* () {
      const a = yield* Effect.fork(Effect.forEach([1, 2, 3], (i) => Effect.sync(() => order.push(`a${i}`)).pipe(Effect.zipLeft(Effect.yieldNow()))))
      const b = yield* Effect.fork(Effect.forEach([1, 2, 3], (i) => Effect.sync(() => order.push(`b${i}`)).pipe(Effect.zipLeft(Effect.yieldNow()))))
      yield* Fiber.join(a)
      yield* Fiber.join(b)
      return order.length
    })
    expect(await Effect.runPromise(Effect.withScheduler(program, scheduler))).toBe(6)
    // Both fibers advanced in turns: one does not run to its end before the other starts.
    expect(order.indexOf("b1")).toBeLessThan(order.indexOf("a3"))
  })

  it("runs a lower priority number first, also after a slice ends, and in order within one", async () => {
    // A zero slice ends after every task: the order below holds across slices, not only in one drain.
    const scheduler = EventLoopScheduler.make(0)
    const order: Array<string> = []
    const steps = (name: string) => Effect.forEach([1, 2, 3], (i) => Effect.sync(() => order.push(`${name}${i}`)).pipe(Effect.zipLeft(Effect.yieldNow())))
    const program = Effect.gen(function* () {
      const user = yield* Effect.fork(steps("u"))
      const user2 = yield* Effect.fork(steps("v"))
      const system = yield* Effect.fork(Effect.withSchedulingPriority(steps("s"), -1))
      yield* Fiber.join(user)
      yield* Fiber.join(user2)
      yield* Fiber.join(system)
    })
    await Effect.runPromise(Effect.withScheduler(program, scheduler))
    // Once the system fiber is queued, its steps all run before the users' next ones.
    expect(order.slice(order.indexOf("s1"), order.indexOf("s1") + 3)).toEqual(["s1", "s2", "s3"])
    expect(order.indexOf("s3")).toBeLessThan(order.indexOf("u3"))
    // The two users' fibers, of one priority, take turns first in first out.
    expect(order.filter((x) => !x.startsWith("s"))).toEqual(["u1", "v1", "u2", "v2", "u3", "v3"])
  })
})
