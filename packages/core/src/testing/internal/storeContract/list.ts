/**
 * The contract on lists: key order, pages pinned to the first page's revision, `atRevision` reads.
 */
import { Effect } from "effect"
import { expect } from "vitest"
import type { Register } from "./harness.js"

/** Prefix lists: key order, one snapshot across continue-token pages, reads of the past. */
export const listing = (t: Register): void => {
  t("lists a prefix in key order as one snapshot across pages", (store) =>
    Effect.gen(function* () {
      for (const k of ["p/c", "p/a", "p/e", "p/b", "p/d", "pp/x", "p", "o/z"]) yield* store.create(k, k)
      const all = yield* store.list("p/")
      expect(all.items.map((i) => i.key)).toEqual(["p/a", "p/b", "p/c", "p/d", "p/e"])
      expect(all.revision).toBe(8)
      expect(all.continue).toBeUndefined()
      expect(yield* store.count("p/")).toBe(5)

      const page1 = yield* store.list("p/", { limit: 2 })
      expect(page1.items.map((i) => i.key)).toEqual(["p/a", "p/b"])
      expect(page1.remaining).toBe(3)
      expect(page1.continue).toBeTypeOf("string")

      // Writes between pages do not show: the token pins the first page's revision.
      yield* store.delete("p/c")
      yield* store.update("p/d", "changed", 5)
      yield* store.create("p/bb", "new")
      const page2 = yield* store.list("p/", { limit: 2, continue: page1.continue! })
      expect(page2.items.map((i) => [i.key, i.value])).toEqual([["p/c", "p/c"], ["p/d", "p/d"]])
      expect(page2.revision).toBe(8)
      const page3 = yield* store.list("p/", { limit: 2, continue: page2.continue! })
      expect(page3.items.map((i) => i.key)).toEqual(["p/e"])
      expect(page3.continue).toBeUndefined()

      // The current state shows the writes; atRevision reads the past.
      expect((yield* store.list("p/")).items.map((i) => i.key)).toEqual(["p/a", "p/b", "p/bb", "p/d", "p/e"])
      const past = yield* store.list("p/", { atRevision: 3 })
      expect(past.items.map((i) => i.key)).toEqual(["p/a", "p/c", "p/e"])
      expect(past.revision).toBe(3)
    }))
}
