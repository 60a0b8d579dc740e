/**
 * activeQ (upstream's `activeQueue`): the pods ready to be tried, best first by the profile's
 * QueueSort, and the pods in flight — popped and in a scheduling cycle — with the cluster events
 * that arrived meanwhile. That log lets a pod rejected because of a node added during its cycle
 * be retried at once instead of being parked forever; it is dropped when nothing is in flight.
 */
import { Effect } from "effect"
import type { ClusterEvent } from "./ClusterEvents.js"
import { Heap } from "./Heap.js"
import type { Entry } from "./QueueEntry.js"

/** activeQ and the in-flight pods. */
export class ActiveQueue {
  private readonly heap: Heap<Entry>
  private inFlightCount = 0
  // Events seen while pods were in flight; `logBase` is the sequence number of log[0].
  private log: Array<ReadonlyArray<ClusterEvent>> = []
  private logBase = 0
  private waiters: Array<() => void> = []

  constructor(less: (a: Entry, b: Entry) => boolean) {
    this.heap = new Heap(less)
  }

  /** Pods waiting in activeQ. */
  get size(): number {
    return this.heap.size
  }

  /** Pods in a scheduling cycle. */
  get inFlight(): number {
    return this.inFlightCount
  }

  /** Queue `e` to be tried, waking the waiting `pop`s. */
  push(e: Entry): void {
    e.place = "active"
    this.heap.push(e)
    this.wake()
  }

  /** Take `e` out of activeQ. */
  remove(e: Entry): void {
    this.heap.remove(e)
  }

  /** Restore `e`'s order after its pod changed. */
  fix(e: Entry): void {
    this.heap.fix(e)
  }

  /** Pop the best pod into flight, counting one more attempt; undefined when activeQ is empty. */
  take(): Entry | undefined {
    const e = this.heap.pop()
    if (e === undefined) return undefined
    this.adopt(e)
    e.updated = false
    e.info = { ...e.info, attempts: e.info.attempts + 1 }
    return e
  }

  /** Count `e` in flight from now on (it sees the events from now). */
  adopt(e: Entry): void {
    e.place = "inFlight"
    this.inFlightCount++
    e.eventsFrom = this.logBase + this.log.length
  }

  /** `e`'s cycle is over: it no longer counts in flight. */
  leave(_e: Entry): void {
    this.inFlightCount--
    if (this.inFlightCount === 0) {
      this.logBase += this.log.length
      this.log = []
    }
  }

  /** Remember `events` for the pods in flight (nothing is kept when none is). */
  record(events: ReadonlyArray<ClusterEvent>): void {
    if (this.inFlightCount > 0) this.log.push(events)
  }

  /** The events that arrived since `e` was popped. */
  seenBy(e: Entry): ReadonlyArray<ReadonlyArray<ClusterEvent>> {
    return this.log.slice(Math.max(0, e.eventsFrom - this.logBase))
  }

  /** Resumes once a pod is pushed (every waiter, as upstream's broadcast: one gets the pod, the others wait again). */
  readonly wait: Effect.Effect<void> = Effect.async<void>((resume) => {
    const w = () => resume(Effect.void)
    this.waiters.push(w)
    return Effect.sync(() => {
      this.waiters = this.waiters.filter((x) => x !== w)
    })
  })

  private wake(): void {
    if (this.waiters.length === 0) return
    const ws = this.waiters
    this.waiters = []
    for (const w of ws) w()
  }
}
