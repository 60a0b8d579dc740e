/**
 * The contract on watches: replay then live, every revision exactly once in order, and an end as soon as the consumer stops.
 */
import { Effect, Exit, Fiber, Stream } from "effect"
import { expect } from "vitest"
import { type Register, summary, take } from "./harness.js"

/** Watches: replay from a past revision, exactly-once delivery under concurrency, prompt end. */
export const watching = (t: Register): void => {
  t("replays exactly the missed events of a watch from a past revision, then goes live", (store) =>
    Effect.gen(function* () {
      yield* store.create("w/a", "a1") // 1
      yield* store.create("w/b", "b1") // 2
      yield* store.update("w/a", "a2", 1) // 3
      yield* store.create("other/x", "x") // 4
      yield* store.delete("w/b") // 5

      const fiber = yield* Effect.fork(take(store, "w/", 2, 4))
      yield* store.create("w/c", "c1") // 6
      yield* store.update("w/c", "c2", 6) // 7
      const events = yield* Fiber.join(fiber)
      expect(summary(events)).toEqual(["MODIFIED 3 w/a", "DELETED 5 w/b", "ADDED 6 w/c", "MODIFIED 7 w/c"])
      expect(events[0]).toMatchObject({ value: "a2", prevValue: "a1", createRevision: 1, version: 2 })
      expect(events[1]).toMatchObject({ value: "b1", prevValue: "b1" })
      expect(events[2]).toMatchObject({ value: "c1", prevValue: undefined, createRevision: 6, version: 1 })
      expect(events[3]).toMatchObject({ value: "c2", prevValue: "c1" })

      // A watch from the current revision sees only what comes next.
      const live = yield* Effect.fork(take(store, "", 7, 1))
      yield* store.create("z", "z")
      expect(summary(yield* Fiber.join(live))).toEqual(["ADDED 8 z"])
    }))

  t("delivers every revision exactly once, in order, to a watcher under many concurrent writers", (store) =>
    Effect.gen(function* () {
      const writers = 8
      const perWriter = 60
      const watcher = yield* Effect.fork(take(store, "c/", 0, writers * perWriter * 2))
      yield* Effect.forEach(
        Array.from({ length: writers }, (_, w) => w),
        (w) =>
          Effect.gen(function* () {
            for (let i = 0; i < perWriter; i++) {
              const kv = yield* store.create(`c/${w}/${i}`, "x")
              yield* store.update(kv.key, "y", kv.modRevision)
            }
          }),
        { concurrency: "unbounded" }
      )
      const events = yield* Fiber.join(watcher)
      expect(events.map((e) => e.revision)).toEqual(Array.from({ length: writers * perWriter * 2 }, (_, i) => i + 1))
      expect(yield* store.currentRevision).toBe(writers * perWriter * 2)
      // Every key was created then modified, in that order.
      const types = new Map<string, Array<string>>()
      for (const e of events) types.set(e.key, [...(types.get(e.key) ?? []), e.type])
      expect(types.size).toBe(writers * perWriter)
      for (const seq of types.values()) expect(seq).toEqual(["ADDED", "MODIFIED"])
    }))

  t("ends a watch promptly when its consumer stops reading, leaving writes unaffected", (store) =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(Stream.runDrain(store.watch("s/", 0)))
      yield* store.create("s/1", "x")
      yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(yield* Fiber.await(fiber))).toBe(true)
      expect((yield* store.create("s/2", "y")).modRevision).toBe(2)
    }))
}
