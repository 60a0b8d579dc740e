/**
 * The contract on compaction: reads, watches and continue tokens below the horizon fail with typed errors; the state at and after it is intact.
 */
import { Effect, Fiber, Stream } from "effect"
import { expect } from "vitest"
import { outcome, type Register, summary, take } from "./harness.js"

/** Compaction: old reads, watches and continue tokens fail typed, the current state stays whole. */
export const compaction = (t: Register): void => {
  t("compacts history: old reads and watches fail with Compacted, the current state stays whole", (store) =>
    Effect.gen(function* () {
      yield* store.create("h/a", "a1") // 1
      yield* store.create("h/b", "b1") // 2
      yield* store.update("h/a", "a2", 1) // 3
      yield* store.delete("h/b") // 4
      yield* store.create("h/c", "c1") // 5
      yield* store.compact(4)
      expect(yield* store.compactRevision).toBe(4)

      expect(yield* outcome(store.list("h/", { atRevision: 3 }))).toMatchObject({ _tag: "Compacted", compactRevision: 4 })
      expect(yield* outcome(Stream.runDrain(Stream.take(store.watch("h/", 2), 1)))).toMatchObject({ _tag: "Compacted", requestedRevision: 2, compactRevision: 4 })

      // The state at the horizon and after is intact.
      expect((yield* store.list("h/", { atRevision: 4 })).items.map((i) => [i.key, i.value])).toEqual([["h/a", "a2"]])
      expect((yield* store.list("h/")).items.map((i) => i.key)).toEqual(["h/a", "h/c"])
      expect(yield* store.get("h/a")).toMatchObject({ value: "a2", createRevision: 1, version: 2 })
      expect(summary(yield* take(store, "h/", 4, 1))).toEqual(["ADDED 5 h/c"])
      // Writes go on densely; compacting backwards or beyond the head is harmless.
      yield* store.compact(2)
      yield* store.compact(1_000)
      expect(yield* store.compactRevision).toBe(5)
      expect((yield* store.update("h/a", "a3", 3)).modRevision).toBe(6)
      const next = yield* Effect.fork(take(store, "h/", 5, 1))
      yield* Effect.yieldNow()
      expect(summary(yield* Fiber.join(next))).toEqual(["MODIFIED 6 h/a"])
    }))

  t("fails a continue token with Expired once its revision is compacted, or when it is not a token", (store) =>
    Effect.gen(function* () {
      for (let i = 0; i < 5; i++) yield* store.create(`e/${i}`, "x")
      const page1 = yield* store.list("e/", { limit: 2 })
      yield* store.update("e/0", "y", 1)
      yield* store.compact(6)
      expect(yield* outcome(store.list("e/", { limit: 2, continue: page1.continue! }))).toMatchObject({ _tag: "Expired" })
      expect(yield* outcome(store.list("e/", { continue: "not-a-token" }))).toMatchObject({ _tag: "Expired" })
      expect(yield* outcome(store.list("e/", { continue: "" }))).toMatchObject({ _tag: "Expired" })
    }))
}
