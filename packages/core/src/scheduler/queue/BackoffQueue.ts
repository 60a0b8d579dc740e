/**
 * backoffQ (upstream's `backoffQueue`): pods that failed recently wait out a per-pod backoff,
 * `initial * 2^(attempts-1)` capped at `max` (upstream: 1 s → 10 s) after the failure. One timer,
 * armed for the earliest expiry, hands the pods whose backoff is over to activeQ.
 */
import type { Timer } from "../../informer/WorkQueue.js"
import { Heap } from "./Heap.js"
import type { Entry } from "./QueueEntry.js"

/** The backoff after `attempts` attempts: `initial` doubled per attempt after the first, capped at `max`. */
export const backoffMs = (attempts: number, initialMs: number, maxMs: number): number => {
  let d = initialMs
  for (let i = 1; i < attempts && d < maxMs; i++) d *= 2
  return Math.min(d, maxMs)
}

/** backoffQ and its flush timer. */
export class BackoffQueue {
  private readonly heap = new Heap<Entry>((a, b) => a.backoffUntil < b.backoffUntil)
  private armed: { readonly at: number; readonly cancel: () => void } | undefined
  private closed = false

  /** `ready` receives each pod whose backoff is over, earliest first. */
  constructor(
    private readonly timer: Timer,
    private readonly now: () => number,
    private readonly ready: (e: Entry) => void
  ) {}

  /** Pods backing off. */
  get size(): number {
    return this.heap.size
  }

  /** `e` backs off until `until`. */
  add(e: Entry, until: number): void {
    e.place = "backoff"
    e.backoffUntil = until
    this.heap.push(e)
    this.arm()
  }

  /** Take `e` out (the timer stays: a flush with nothing due re-arms for what is left). */
  remove(e: Entry): void {
    this.heap.remove(e)
  }

  /** Hand every pod whose backoff is over to `ready`, then re-arm. */
  flush(): void {
    const t = this.now()
    for (let top = this.heap.peek(); top !== undefined && top.backoffUntil <= t; top = this.heap.peek()) {
      this.heap.pop()
      this.ready(top)
    }
    this.arm()
  }

  /** Stop the timer for good. */
  close(): void {
    this.closed = true
    this.armed?.cancel()
    this.armed = undefined
  }

  private arm(): void {
    if (this.closed) return
    const top = this.heap.peek()
    if (top === undefined) {
      this.armed?.cancel()
      this.armed = undefined
      return
    }
    if (this.armed !== undefined && this.armed.at <= top.backoffUntil) return
    this.armed?.cancel()
    const at = top.backoffUntil
    this.armed = {
      at,
      cancel: this.timer(Math.max(0, at - this.now()), () => {
        this.armed = undefined
        this.flush()
      })
    }
  }
}
