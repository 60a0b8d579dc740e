/**
 * The scheduler of a Fleet process's fibers: Effect's default one with a time slice and with
 * priorities that hold across slices.
 *
 * A time slice: Effect's default drains queued fiber work in microtasks, up to 2,048 drains in a
 * row, before it lets the event loop run, so under a burst of work a server answered no socket for
 * 50–150 ms at a time (timers measured it in `koder-fleet dev`): the TLS handshakes of a client's
 * new connections finished about 100 ms apart, one per stall, and a burst's first creates waited
 * on them. This one runs fiber work for at most `sliceMs`, then yields to the event loop
 * (setImmediate: after pending I/O, without a timer's millisecond) and goes on. It keeps one queue
 * per priority for every fiber, as Effect's did before 3.20 (which keeps one per fiber). In the
 * agent benchmark (a 2-core VM, 14 interleaved pairs against Effect's default with slices of
 * 2–20 ms), the burst's p99 was lower in 11 and the create call's p99 fell from 630–970 ms to
 * 460–570 ms with a 10 ms slice; the main thread's CPU per burst was within the noise or higher.
 *
 * Priorities: the API runs the cluster's own requests (nodes' status writes, the scheduler's
 * bindings) at `FlowControl.systemSchedulingPriority`, and their steps run before the users'
 * creates queued beside them, in this slice or the next. Effect's default drains every queued task
 * at once, whatever its priority, so on one thread the work that finishes a burst's pods took
 * turns with the creates that add more. With priorities kept, in 5 interleaved pairs of the agent
 * benchmark, the burst's p50 was lower in 5 (mean 347 against 470 ms) and its p99 in 4 (mean 621
 * against 696 ms).
 */
import { Scheduler } from "effect"

/** The slice a process's fibers run for before the event loop gets a turn. */
export const DefaultSliceMs = 10

/** One priority's tasks, first in first out. */
interface Bucket {
  readonly priority: number
  tasks: Array<() => void>
  head: number
}

/**
 * A scheduler that runs fiber work for at most `sliceMs` at a time, lowest priority number first
 * (Effect's order: `PriorityBuckets` runs its buckets ascending), first in first out within one.
 * The order is kept across slices: a task queued meanwhile at a lower number runs before what a
 * slice left of a higher one.
 */
export const make = (sliceMs: number = DefaultSliceMs): Scheduler.Scheduler => {
  // Ascending by priority; a handful at most (the default 0 and the API's system level).
  const buckets: Array<Bucket> = []
  let queued = 0
  let running = false
  let sliceStart = 0
  const bucketOf = (priority: number): Bucket => {
    let i = 0
    while (i < buckets.length && buckets[i]!.priority < priority) i++
    if (i < buckets.length && buckets[i]!.priority === priority) return buckets[i]!
    const b: Bucket = { priority, tasks: [], head: 0 }
    buckets.splice(i, 0, b)
    return b
  }
  const drain = (): void => {
    while (queued > 0) {
      let b = buckets[0]!
      for (let i = 1; b.head === b.tasks.length; i++) b = buckets[i]!
      const task = b.tasks[b.head++]!
      if (b.head === b.tasks.length) {
        b.tasks = []
        b.head = 0
      }
      queued--
      task()
      if (queued > 0 && performance.now() - sliceStart >= sliceMs) return void setImmediate(next)
    }
    running = false
  }
  const next = (): void => {
    sliceStart = performance.now()
    drain()
  }
  return Scheduler.make((task, priority) => {
    bucketOf(priority).tasks.push(task)
    queued++
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
