/**
 * The watch fan-out shared by the store backends. A backend publishes every committed event
 * once, in revision order; the feed keeps the newest ones in a ring (bounded by count and bytes)
 * and serves any number of watchers from it. A watcher that starts in the past, or falls behind
 * the ring, reads the gap from the backend's history in pages and then rejoins the ring, so a
 * slow watcher costs bounded memory and never misses or repeats an event.
 *
 *   commit ──publish──▶ ring [ringStart … head] ──▶ watcher(prefix, last)
 *                                ▲ behind the ring?
 *   history ──readEvents(prefix, last, upTo)──┘
 *
 * A commit wakes only the watchers it has an event for; the others just move past it. Every
 * watch cache and index watches its own prefix, and waking each of them on every commit to find
 * nothing (an empty chunk through its stream) was a large part of a busy server's work.
 */
import { Chunk, Effect, Stream } from "effect"
import type { WatchEvent } from "./Store.js"
import { Compacted, Unavailable } from "./StoreError.js"

/** Where the feed reads history a watcher missed. */
export interface HistorySource {
  /** The compaction horizon; watching from before it fails with `Compacted`. */
  readonly compactRevision: Effect.Effect<number, Unavailable>
  /**
   * Events on keys under `prefix` with `after < revision <= upTo`, ascending, at most `limit`.
   * Fails with `Compacted` when `after` is older than the horizon.
   */
  readonly readEvents: (
    prefix: string,
    after: number,
    upTo: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<WatchEvent>, Compacted | Unavailable>
}

/** Sizing of the ring. */
export interface WatchFeedOptions {
  /** The revision committed before the feed starts (the store's current revision). */
  readonly initialRevision: number
  /** Events kept in memory (default 16,384). */
  readonly ringEvents?: number
  /** Approximate bytes of values kept in memory (default 64 MiB). */
  readonly ringBytes?: number
  /** Events read from history per page (default 1,000). */
  readonly historyPage?: number
}

/** A running feed. */
export interface WatchFeed {
  /** The newest published revision. */
  readonly head: () => number
  /** Publish committed events: dense, ascending, starting at `head() + 1`. */
  readonly publish: (events: ReadonlyArray<WatchEvent>) => void
  /** Every event under `prefix` after `fromRevision`: history first, then live. */
  readonly watch: (prefix: string, fromRevision: number) => Stream.Stream<WatchEvent, Compacted | Unavailable>
  /** End every watch with `Unavailable` (the store is closing); later watches fail at once. */
  readonly close: (reason: string) => void
  /** Number of open watches (for metrics and tests). */
  readonly watchers: () => number
}

/** A watcher waiting for its next event. */
interface Waiter {
  readonly prefix: string
  /** Move the watcher past revisions that had nothing for it. */
  readonly skip: (revision: number) => void
  readonly wake: () => void
}

const eventBytes = (event: WatchEvent): number =>
  64 + event.key.length + event.value.length + (event.prevValue?.length ?? 0)

/** Create a feed over a backend's history. */
export const make = (source: HistorySource, options: WatchFeedOptions): WatchFeed => {
  const capacity = Math.max(1, options.ringEvents ?? 16_384)
  const maxBytes = options.ringBytes ?? 64 * 1024 * 1024
  const page = Math.max(1, options.historyPage ?? 1_000)
  const ring = new Array<WatchEvent | undefined>(capacity)
  let head = options.initialRevision
  // The ring holds revisions [ringStart, head]; empty when ringStart > head.
  let ringStart = head + 1
  let bytes = 0
  let closed: Unavailable | undefined
  let waiters: Array<Waiter> = []
  let watching = 0

  const evictOne = () => {
    const slot = ringStart % capacity
    const old = ring[slot]
    if (old !== undefined) bytes -= eventBytes(old)
    ring[slot] = undefined
    ringStart++
  }

  const publish = (events: ReadonlyArray<WatchEvent>) => {
    if (events.length === 0) return
    // Waiters wait at the old head: those with no event here can skip to the new one, unless
    // there is a gap they would have to read from history.
    const contiguous = events[0]!.revision === head + 1
    for (const event of events) {
      if (event.revision !== head + 1) {
        // A gap means the publisher lost track; drop the ring so watchers read history instead.
        while (ringStart <= head) evictOne()
        ringStart = event.revision
      }
      if (head - ringStart + 1 >= capacity) evictOne()
      ring[event.revision % capacity] = event
      bytes += eventBytes(event)
      head = event.revision
      while (bytes > maxBytes && ringStart < head) evictOne()
    }
    const wake = waiters
    waiters = []
    for (const w of wake) {
      if (contiguous && !events.some((e) => e.key.startsWith(w.prefix))) {
        w.skip(head)
        waiters.push(w)
      } else w.wake()
    }
  }

  /** Wait until an event under `prefix` is published after `revision`; `skip` moves past others. */
  const waitBeyond = (revision: number, prefix: string, skip: (revision: number) => void): Effect.Effect<void, Unavailable> =>
    Effect.async<void, Unavailable>((resume) => {
      if (closed) return resume(Effect.fail(closed))
      if (head > revision) return resume(Effect.void)
      const waiter: Waiter = { prefix, skip, wake: () => resume(closed ? Effect.fail(closed) : Effect.void) }
      waiters.push(waiter)
      return Effect.sync(() => {
        const i = waiters.indexOf(waiter)
        if (i >= 0) waiters.splice(i, 1)
      })
    })

  const fromRing = (prefix: string, after: number, upTo: number): Array<WatchEvent> => {
    const out: Array<WatchEvent> = []
    for (let r = after + 1; r <= upTo; r++) {
      const event = ring[r % capacity]!
      if (event.key.startsWith(prefix)) out.push(event)
    }
    return out
  }

  const watch = (prefix: string, fromRevision: number): Stream.Stream<WatchEvent, Compacted | Unavailable> =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        if (closed) return yield* Effect.fail(closed)
        const horizon = yield* source.compactRevision
        if (fromRevision < horizon) {
          return yield* Effect.fail(new Compacted({ requestedRevision: fromRevision, compactRevision: horizon }))
        }
        yield* Effect.acquireRelease(
          Effect.sync(() => watching++),
          () => Effect.sync(() => watching--)
        )
        let last = fromRevision
        const skip = (revision: number) => {
          last = revision
        }
        // Never an empty chunk from the ring: a wake-up with nothing for this prefix waits again.
        const step: Effect.Effect<Chunk.Chunk<WatchEvent>, Compacted | Unavailable> = Effect.suspend(() => {
          if (closed) return Effect.fail(closed)
          if (last >= head) return Effect.zipRight(waitBeyond(last, prefix, skip), step)
          if (last + 1 >= ringStart) {
            const upTo = head
            const events = fromRing(prefix, last, upTo)
            last = upTo
            return events.length === 0 ? step : Effect.succeed(Chunk.unsafeFromArray(events))
          }
          const upTo = ringStart - 1
          return Effect.map(source.readEvents(prefix, last, upTo, page), (events) => {
            last = events.length < page ? upTo : events[events.length - 1]!.revision
            return Chunk.unsafeFromArray(events as Array<WatchEvent>)
          })
        })
        return Stream.repeatEffectChunk(step)
      })
    )

  const close = (reason: string) => {
    if (closed) return
    closed = new Unavailable({ reason, retryable: true })
    const wake = waiters
    waiters = []
    for (const w of wake) w.wake()
  }

  return { head: () => head, publish, watch, close, watchers: () => watching }
}
