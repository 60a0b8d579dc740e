import type { Store} from "@koder/fleet-core";
import { StoreError, WatchFeed } from "@koder/fleet-core"
import { Chunk, Effect, Either, Fiber, Stream } from "effect"
import { describe, expect, it } from "vitest"

type Event = Store.WatchEvent

const event = (revision: number, key = `k/${revision}`, value = `v${revision}`): Event => ({
  type: "ADDED",
  revision,
  key,
  value,
  prevValue: undefined,
  createRevision: revision,
  version: 1
})

/** A history backed by an array, counting how often the feed had to fall back to it. */
const history = (compactRevision = 0) => {
  const log: Array<Event> = []
  const reads: Array<[number, number]> = []
  const source: WatchFeed.HistorySource = {
    compactRevision: Effect.sync(() => compactRevision),
    readEvents: (prefix, after, upTo, limit) =>
      Effect.suspend(() => {
        if (after < compactRevision) {
          return Effect.fail(new StoreError.Compacted({ requestedRevision: after, compactRevision }))
        }
        reads.push([after, upTo])
        return Effect.succeed(log.filter((e) => e.revision > after && e.revision <= upTo && e.key.startsWith(prefix)).slice(0, limit))
      })
  }
  return { log, reads, source }
}

const collect = (stream: Stream.Stream<Event, unknown>, n: number) =>
  Effect.runPromise(
    Stream.runCollect(Stream.take(stream, n)).pipe(
      Effect.map((c) => Chunk.toReadonlyArray(c).map((e) => e.revision)),
      Effect.timeout("5 seconds")
    )
  )

const commit = (h: ReturnType<typeof history>, feed: WatchFeed.WatchFeed, events: Array<Event>) => {
  h.log.push(...events)
  feed.publish(events)
}

describe("WatchFeed", () => {
  it("serves a watcher that starts behind the ring from history, then from the ring, with no gap or repeat", async () => {
    const h = history()
    const feed = WatchFeed.make(h.source, { initialRevision: 0, ringEvents: 4, historyPage: 3 })
    commit(h, feed, Array.from({ length: 20 }, (_, i) => event(i + 1)))
    expect(await collect(feed.watch("k/", 0), 20)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
    // Revisions 1..16 came from history in pages of at most three; 17..20 from the ring.
    expect(h.reads.length).toBeGreaterThanOrEqual(6)
    expect(h.reads.every(([, upTo]) => upTo <= 16)).toBe(true)
  })

  it("filters by prefix while still advancing past events of other prefixes", async () => {
    const h = history()
    const feed = WatchFeed.make(h.source, { initialRevision: 0, ringEvents: 2, historyPage: 2 })
    commit(h, feed, [event(1, "a/1"), event(2, "b/1"), event(3, "b/2"), event(4, "b/3"), event(5, "a/2"), event(6, "b/4"), event(7, "a/3")])
    expect(await collect(feed.watch("a/", 0), 3)).toEqual([1, 5, 7])
  })

  it("bounds the ring by bytes so large values do not pile up in memory", async () => {
    const h = history()
    const feed = WatchFeed.make(h.source, { initialRevision: 0, ringEvents: 1_000, ringBytes: 10_000 })
    commit(h, feed, Array.from({ length: 10 }, (_, i) => event(i + 1, `k/${i + 1}`, "x".repeat(4_000))))
    expect(await collect(feed.watch("k/", 0), 10)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1))
    expect(h.reads.length).toBeGreaterThan(0)
  })

  it("wakes a waiting watcher only for commits with its events: nothing for the rest, and it never falls behind the ring meanwhile", async () => {
    const h = history()
    const feed = WatchFeed.make(h.source, { initialRevision: 0, ringEvents: 8 })
    const chunks: Array<ReadonlyArray<number>> = []
    const watching = Effect.runPromise(
      feed.watch("a/", 0).pipe(
        Stream.runForEachChunk((c) => Effect.sync(() => chunks.push(Chunk.toReadonlyArray(c).map((e) => e.revision)))),
        Effect.timeout("5 seconds"),
        Effect.ignore
      )
    )
    await new Promise((r) => setTimeout(r, 5))
    // 100 commits elsewhere, far more than the ring holds, each given time to wake the watcher.
    for (let r = 1; r <= 100; r++) {
      commit(h, feed, [event(r, `b/${r}`)])
      await new Promise((resolve) => setImmediate(resolve))
    }
    commit(h, feed, [event(101, "a/1")])
    await new Promise((r) => setTimeout(r, 20))
    feed.close("done")
    await watching
    expect(chunks).toEqual([[101]])
    expect(h.reads).toEqual([])
  })

  it("delivers live events to a waiting watcher", async () => {
    const h = history()
    const feed = WatchFeed.make(h.source, { initialRevision: 5 })
    const pending = collect(feed.watch("", 5), 2)
    await new Promise((r) => setTimeout(r, 5))
    commit(h, feed, [event(6)])
    commit(h, feed, [event(7)])
    expect(await pending).toEqual([6, 7])
    expect(h.reads).toEqual([])
  })

  it("falls back to history after a publishing gap", async () => {
    const h = history()
    const feed = WatchFeed.make(h.source, { initialRevision: 0 })
    commit(h, feed, [event(1), event(2)])
    // Revisions 3 and 4 reach the history but the feed never sees them.
    h.log.push(event(3), event(4))
    commit(h, feed, [event(5)])
    expect(await collect(feed.watch("", 0), 5)).toEqual([1, 2, 3, 4, 5])
  })

  it("refuses a watch from before the compaction horizon", async () => {
    const h = history(10)
    const feed = WatchFeed.make(h.source, { initialRevision: 12 })
    const exit = await Effect.runPromise(Effect.either(Stream.runDrain(feed.watch("", 9))))
    expect(Either.isLeft(exit) && exit.left).toMatchObject({ _tag: "Compacted", requestedRevision: 9, compactRevision: 10 })
  })

  it("ends open watches with Unavailable on close and counts watchers", async () => {
    const h = history()
    const feed = WatchFeed.make(h.source, { initialRevision: 0 })
    const fiber = Effect.runFork(Effect.either(Stream.runDrain(feed.watch("", 0))))
    await Effect.runPromise(Effect.yieldNow())
    await new Promise((r) => setTimeout(r, 5))
    expect(feed.watchers()).toBe(1)
    feed.close("store closed")
    const result = await Effect.runPromise(Fiber.join(fiber))
    expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "Unavailable", reason: "store closed" })
    expect(feed.watchers()).toBe(0)
    const later = await Effect.runPromise(Effect.either(Stream.runDrain(feed.watch("", 0))))
    expect(Either.isLeft(later)).toBe(true)
  })
})
