/**
 * The controller work queue, with client-go's workqueue guarantees: a key waiting in the queue is
 * held once however often it is added (deduplication); a key being processed is never handed to
 * a second worker, and if it is added meanwhile it is queued again when the first worker is done
 * (so the newest state is always reconciled once more); failed keys come back after a per-key
 * exponential backoff that a success resets.
 *
 * Plain TypeScript (it sits on every event's path); only `take` is an Effect, to wait.
 */
import { Effect } from "effect"

/** Backoff of a failing key: `base * 2^(failures-1)`, capped at `max` (client-go: 5 ms … 1000 s). */
export interface Backoff {
  readonly baseMs: number
  readonly maxMs: number
}

/** The default backoff: 5 ms doubling to at most 30 s. */
export const defaultBackoff: Backoff = { baseMs: 5, maxMs: 30_000 }

/** The delay before the `failures`-th retry of a key. */
export const backoffDelay = (backoff: Backoff, failures: number): number =>
  Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.max(0, Math.min(failures - 1, 40)))

/** Schedules `run` after `ms`; answers a cancel function (injectable for tests). */
export type Timer = (ms: number, run: () => void) => () => void

const realTimer: Timer = (ms, run) => {
  const t = setTimeout(run, ms)
  // Timers must not keep a process alive on their own.
  ;(t as { unref?: () => void }).unref?.()
  return () => clearTimeout(t)
}

/** A work queue of string keys. */
export interface WorkQueue {
  /** Queue `key` now (a no-op if it already waits). */
  readonly add: (key: string) => void
  /** Queue `key` after `ms` (the earliest of several pending delays wins). */
  readonly addAfter: (key: string, ms: number) => void
  /** Queue `key` after its backoff, counting one more failure. */
  readonly addRateLimited: (key: string) => void
  /** Reset `key`'s failure count (after a success). */
  readonly forget: (key: string) => void
  /** How many times `key` has failed in a row. */
  readonly failures: (key: string) => number
  /** Wait for the next key and mark it as being processed. */
  readonly take: Effect.Effect<string>
  /** Mark `key` processed; it is queued again if it was added meanwhile. */
  readonly done: (key: string) => void
  /** Keys waiting (not counting those being processed or delayed). */
  readonly depth: () => number
  /** Keys waiting for a delay to pass. */
  readonly delayed: () => number
  /**
   * Wait until no key has been waiting or processed for `settleMs` (default 0; keys waiting for a
   * delay do not count), or until `deadlineMs` (ms since the epoch) has passed: background work
   * done after the queue's, and not in the short gaps of a busy queue.
   */
  readonly idle: (deadlineMs: number, settleMs?: number) => Effect.Effect<void>
  /** Stop: pending delays are dropped and waiting `take`s never resume. */
  readonly shutdown: () => void
}

/** A new, empty queue. */
export const make = (options: { readonly backoff?: Backoff; readonly timer?: Timer; readonly now?: () => number } = {}): WorkQueue => {
  const backoff = options.backoff ?? defaultBackoff
  const timer = options.timer ?? realTimer
  // The clock of delays and of `idle` (ms since the epoch; injectable with the timer for tests).
  const clock = options.now ?? Date.now
  // `queue` keeps order; `dirty` says which keys need processing (waiting or re-added while processing).
  const queue: Array<string> = []
  let head = 0
  const dirty = new Set<string>()
  const processing = new Set<string>()
  const failures = new Map<string, number>()
  const pending = new Map<string, { at: number; cancel: () => void }>()
  const waiters: Array<(key: string) => void> = []
  // Callers of `idle`, told once nothing waits and nothing is processed.
  let quiet = new Set<() => void>()
  let stopped = false

  const isIdle = () => head >= queue.length && processing.size === 0
  // When the queue last went idle (ms since the epoch).
  let idleSince = 0
  const wakeQuiet = () => {
    idleSince = clock()
    if (quiet.size === 0) return
    const woken = quiet
    quiet = new Set()
    for (const w of woken) w()
  }

  const push = (key: string) => {
    const waiter = waiters.shift()
    if (waiter !== undefined) {
      processing.add(key)
      dirty.delete(key)
      waiter(key)
    } else queue.push(key)
  }

  const add = (key: string) => {
    if (stopped || dirty.has(key)) return
    dirty.add(key)
    if (processing.has(key)) return
    push(key)
  }

  const addAfter = (key: string, ms: number) => {
    if (stopped) return
    if (ms <= 0) return add(key)
    const at = clock() + ms
    const existing = pending.get(key)
    if (existing !== undefined) {
      if (existing.at <= at) return
      existing.cancel()
    }
    const cancel = timer(ms, () => {
      pending.delete(key)
      add(key)
    })
    pending.set(key, { at, cancel })
  }

  const next = (): string | undefined => {
    if (head >= queue.length) return undefined
    const key = queue[head++]!
    if (head > 1024 && head * 2 > queue.length) {
      queue.splice(0, head)
      head = 0
    }
    processing.add(key)
    dirty.delete(key)
    return key
  }

  return {
    add,
    addAfter,
    addRateLimited: (key) => {
      const n = (failures.get(key) ?? 0) + 1
      failures.set(key, n)
      addAfter(key, backoffDelay(backoff, n))
    },
    forget: (key) => void failures.delete(key),
    failures: (key) => failures.get(key) ?? 0,
    take: Effect.suspend(() => {
      const key = next()
      if (key !== undefined) return Effect.succeed(key)
      return Effect.async<string>((resume) => {
        const waiter = (k: string) => resume(Effect.succeed(k))
        waiters.push(waiter)
        return Effect.sync(() => {
          const i = waiters.indexOf(waiter)
          if (i >= 0) waiters.splice(i, 1)
        })
      })
    }),
    done: (key) => {
      processing.delete(key)
      if (dirty.has(key) && !stopped) push(key)
      if (isIdle()) wakeQuiet()
    },
    depth: () => queue.length - head,
    delayed: () => pending.size,
    idle: (deadlineMs, settleMs = 0) => {
      // Wake at the deadline, or when the queue goes idle; then idle for `settleMs` running, or again.
      const wait = (ms: number, onQuiet: boolean) =>
        Effect.async<void>((resume) => {
          let cancelTimer = () => {}
          const wake = () => {
            cancelTimer()
            resume(Effect.void)
          }
          if (onQuiet) quiet.add(wake)
          cancelTimer = timer(ms, () => {
            quiet.delete(wake)
            resume(Effect.void)
          })
          return Effect.sync(() => {
            quiet.delete(wake)
            cancelTimer()
          })
        })
      const loop: Effect.Effect<void> = Effect.suspend(() => {
        const now = clock()
        if (stopped || now >= deadlineMs) return Effect.void
        if (!isIdle()) return Effect.zipRight(wait(deadlineMs - now, true), loop)
        const settled = idleSince + settleMs - now
        if (settled <= 0) return Effect.void
        return Effect.zipRight(wait(Math.min(settled, deadlineMs - now), false), loop)
      })
      return loop
    },
    shutdown: () => {
      stopped = true
      for (const p of pending.values()) p.cancel()
      pending.clear()
      wakeQuiet()
    }
  }
}
