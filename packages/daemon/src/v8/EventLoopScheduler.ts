/**
 * The scheduler of a Fleet process's fibers: Effect's default one with a time slice and with
 * priorities that hold across slices.
 *
 * A time slice: Effect's default drains queued fiber work in microtasks, up to 2,048 drains in a
 * row, before it lets the event loop run, so under a burst of work a server answered no socket for
 * tens of milliseconds at a time, and the TLS handshakes of a client's new connections, one per
 * stall, held up the burst's first requests. This one runs fiber work for at most `sliceMs`, then
 * yields to the event loop (setImmediate: after pending I/O, without a timer's millisecond) and
 * goes on. It keeps one queue per priority for every fiber, as Effect's did before 3.20 (which
 * keeps one per fiber).
 *
 * Priorities: the API runs the cluster's own requests (nodes' status writes, the scheduler's
 * bindings) at `FlowControl.systemSchedulingPriority`, and their steps run before the users'
 * creates queued beside them, in this slice or the next. Effect's default drains every queued task
 * at once, whatever its priority, so on one thread the work that finishes a burst's pods would take
 * turns with the creates that add more.
 *
 * Both shortened the agent benchmark's bursts (the measurements: docs/performance.md, "The fiber
 * scheduler: time slices and priorities").
 */
import { Effect, FiberId, FiberRef, FiberRefs, Layer, Runtime, Scheduler } from "effect"

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
 * Every fiber of the effect this is provided to, and every fiber those fork, runs on a scheduler
 * made by `make(sliceMs)`; nothing global changes (Effect's default scheduler stays its own).
 * Provided at each role's root (`RoleRuntime`) and in dev's node thread.
 */
export const layer = (sliceMs: number = DefaultSliceMs): Layer.Layer<never> => Layer.setScheduler(make(sliceMs))

/**
 * Effect's default runtime, but on the calling fiber's scheduler: what a callback outside any
 * fiber (a request to a plain `node:https` server) runs its effects with, so they share the
 * role's time slices and priorities and nothing else changes (logger, context: Effect's defaults).
 */
export const defaultRuntime: Effect.Effect<Runtime.Runtime<never>> = Effect.map(FiberRef.get(FiberRef.currentScheduler), (scheduler) =>
  Runtime.make({
    context: Runtime.defaultRuntime.context,
    runtimeFlags: Runtime.defaultRuntime.runtimeFlags,
    fiberRefs: FiberRefs.updateAs(Runtime.defaultRuntime.fiberRefs, { fiberId: FiberId.none, fiberRef: FiberRef.currentScheduler, value: scheduler })
  })
)
