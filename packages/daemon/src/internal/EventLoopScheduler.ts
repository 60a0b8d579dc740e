/**
 * The scheduler of a Fleet process's fibers: Effect's default one with a time slice. Effect's
 * default drains queued fiber work in microtasks, up to 2,048 drains in a row, before it lets the
 * event loop run, so under a burst of work a server answered no socket for 50–150 ms at a time
 * (timers measured it in `koder-fleet dev`): the TLS handshakes of a client's new connections
 * finished about 100 ms apart, one per stall, and a burst's first creates waited on them. This
 * one drains for at most `sliceMs`, then yields to the event loop (setImmediate: after pending
 * I/O, without a timer's millisecond) and goes on; and it keeps one queue for every fiber, as
 * Effect's did before 3.20 (which keeps one per fiber), so a drain runs them all.
 *
 * In the agent benchmark (a 2-core VM, 14 interleaved pairs against Effect's default with slices
 * of 2–20 ms), the burst's p99 was lower in 11 and the create call's p99 fell from 630–970 ms to
 * 460–570 ms with a 10 ms slice; the main thread's CPU per burst was within the noise or higher.
 */
import { Scheduler } from "effect"

/** The slice a process's fibers run for before the event loop gets a turn. */
export const DefaultSliceMs = 10

/** A scheduler that runs fiber work for at most `sliceMs` at a time. */
export const make = (sliceMs: number = DefaultSliceMs): Scheduler.Scheduler => {
  const queue = new Scheduler.PriorityBuckets()
  let running = false
  let sliceStart = 0
  const drain = (): void => {
    for (;;) {
      const tasks = queue.buckets
      queue.buckets = []
      for (const [, toRun] of tasks) for (let i = 0; i < toRun.length; i++) toRun[i]!()
      if (queue.buckets.length === 0) {
        running = false
        return
      }
      if (performance.now() - sliceStart >= sliceMs) return void setImmediate(next)
    }
  }
  const next = (): void => {
    sliceStart = performance.now()
    drain()
  }
  return Scheduler.make((task, priority) => {
    queue.scheduleTask(task, priority)
    if (running) return
    running = true
    sliceStart = performance.now()
    queueMicrotask(drain)
  }, Scheduler.defaultShouldYield)
}

/**
 * Make `scheduler` what every fiber of this thread runs on unless it asks for another: Effect
 * reads its default scheduler from one global object (every runtime, every `Effect.runPromise`),
 * so that object's methods are pointed at `scheduler`. Call once, at the thread's start.
 */
export const install = (scheduler: Scheduler.Scheduler = make()): void => {
  const global = Scheduler.defaultScheduler as unknown as Pick<Scheduler.Scheduler, "scheduleTask" | "shouldYield">
  global.scheduleTask = (task, priority, fiber) => scheduler.scheduleTask(task, priority, fiber)
  global.shouldYield = (fiber) => scheduler.shouldYield(fiber)
}
