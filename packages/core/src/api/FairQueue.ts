/**
 * The seats of one priority level and the fair queue in front of them, in the shape of
 * Kubernetes' API Priority and Fairness: at most `seats` requests execute at once; the rest wait
 * in one FIFO per flow (a flow is a user), and a freed seat goes to the flows in turn, so one
 * client's flood delays another client's request by at most one request per flow ahead of it.
 * Plain and synchronous: `FlowControl` puts Effect around it.
 */

/** A request waiting for a seat, or holding one once `started`. */
export interface Entry {
  readonly flow: string
  /** When it asked for a seat (the queue's clock, ms). */
  readonly enqueuedAt: number
  /** Whether it holds a seat (given at once, or later by `leave`). */
  started: boolean
  /** Called once, when the entry gets its seat. */
  readonly start: () => void
}

/** One priority level's seats and queues. */
export interface FairQueue {
  readonly seats: number
  /** Requests holding a seat. */
  readonly executing: () => number
  /** Requests waiting, over every flow. */
  readonly queued: () => number
  /**
   * Ask for a seat: started at once (`start` is called before this returns) when one is free,
   * else queued behind the flow's earlier requests; undefined (nothing queued, no
   * `start`) when `queueLimit` requests already wait.
   */
  readonly enter: (flow: string, start: () => void) => Entry | undefined
  /** A started request is done: its seat goes to the next flow in turn (no-op when none holds one). */
  readonly leave: () => void
  /** Take a waiting entry out (it gave up); false when it had already started or left. */
  readonly cancel: (entry: Entry) => boolean
}

/** A level of `seats` (≥ 1) seats and at most `queueLimit` waiting requests in all. */
export const make = (seats: number, queueLimit: number, now: () => number = () => performance.now()): FairQueue => {
  if (!Number.isInteger(seats) || seats < 1) throw new RangeError(`FairQueue: seats must be a positive integer, not ${seats}`)
  let executing = 0
  let queued = 0
  // Flows with waiters, in turn order: a Map iterates in insertion order, and a served flow that
  // still waits is deleted and set again, which moves it to the back.
  const flows = new Map<string, Array<Entry>>()

  const startNext = () => {
    while (executing < seats && queued > 0) {
      const [flow, waiting] = flows.entries().next().value as [string, Array<Entry>]
      const entry = waiting.shift()!
      flows.delete(flow)
      if (waiting.length > 0) flows.set(flow, waiting)
      queued--
      executing++
      entry.started = true
      entry.start()
    }
  }

  return {
    seats,
    executing: () => executing,
    queued: () => queued,
    enter: (flow, start) => {
      const entry: Entry = { flow, enqueuedAt: now(), started: false, start }
      // A free seat means nobody waits: `leave` hands a freed seat straight to the next waiter.
      if (executing < seats) {
        executing++
        entry.started = true
        start()
        return entry
      }
      if (queued >= queueLimit) return undefined
      const waiting = flows.get(flow)
      if (waiting === undefined) flows.set(flow, [entry])
      else waiting.push(entry)
      queued++
      return entry
    },
    leave: () => {
      if (executing === 0) return
      executing--
      startNext()
    },
    cancel: (entry) => {
      if (entry.started) return false
      const waiting = flows.get(entry.flow)
      const at = waiting?.indexOf(entry) ?? -1
      if (waiting === undefined || at < 0) return false
      waiting.splice(at, 1)
      if (waiting.length === 0) flows.delete(entry.flow)
      queued--
      return true
    }
  }
}
