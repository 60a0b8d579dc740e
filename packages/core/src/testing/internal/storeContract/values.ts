/**
 * The contract on what a store keeps byte for byte: large values, and unicode keys listed in code point order.
 */
import { Effect, Fiber } from "effect"
import { expect } from "vitest"
import * as KeyOrder from "../../../store/KeyOrder.js"
import { type Register, take } from "./harness.js"

/** Values and keys kept intact: 1 MiB values, unicode keys and values in code point order. */
export const values = (t: Register): void => {
  t("stores, lists and watches large values (1 MiB) intact", (store) =>
    Effect.gen(function* () {
      const big = Array.from({ length: 1024 * 1024 }, (_, i) => String.fromCharCode(97 + (i * 7919) % 26)).join("")
      const watcher = yield* Effect.fork(take(store, "big/", 0, 2))
      yield* store.create("big/1", big)
      const updated = big.slice(1) + "!"
      yield* store.update("big/1", updated, 1)
      expect((yield* store.get("big/1")).value).toBe(updated)
      expect((yield* store.list("big/")).items[0]!.value).toBe(updated)
      const events = yield* Fiber.join(watcher)
      expect(events[0]!.value).toBe(big)
      expect(events[1]!.value).toBe(updated)
      expect(events[1]!.prevValue).toBe(big)
    }))

  t("handles unicode keys and values, listing them in code point order", (store) =>
    Effect.gen(function* () {
      const keys = ["u/é", "u/e", "u/日本", "u/😀", "u/\uffee", "u/z", "u/Ω", "u/a\u0301"]
      for (const k of keys) yield* store.create(k, `value of ${k} ✓`)
      for (const k of keys) expect((yield* store.get(k)).value).toBe(`value of ${k} ✓`)
      const listed = (yield* store.list("u/")).items.map((i) => i.key)
      expect(listed).toEqual([...keys].sort(KeyOrder.compare))
      // Paging by continue token walks the same order.
      const paged: Array<string> = []
      let token: string | undefined
      do {
        const page = yield* store.list("u/", token === undefined ? { limit: 3 } : { limit: 3, continue: token })
        paged.push(...page.items.map((i) => i.key))
        token = page.continue
      } while (token)
      expect(paged).toEqual(listed)
    }))
}
