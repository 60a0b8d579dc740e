/**
 * The contract on single-key writes: etcd-style revisions, compare-and-swap, and typed rejections that take no revision.
 */
import { Effect } from "effect"
import { expect } from "vitest"
import { outcome, type Register } from "./harness.js"

/** Single-key create, read, update and delete: revisions, compare-and-swap, typed errors. */
export const crudAndCas = (t: Register): void => {
  t("creates, reads, updates and deletes a key with etcd-style revisions", (store) =>
    Effect.gen(function* () {
      expect(yield* store.currentRevision).toBe(0)
      const created = yield* store.create("/registry/pods/default/a", "v1")
      expect(created).toEqual({ key: "/registry/pods/default/a", value: "v1", createRevision: 1, modRevision: 1, version: 1 })
      expect(yield* store.get("/registry/pods/default/a")).toEqual(created)

      const updated = yield* store.update("/registry/pods/default/a", "v2", 1)
      expect(updated).toEqual({ key: "/registry/pods/default/a", value: "v2", createRevision: 1, modRevision: 2, version: 2 })

      const deleted = yield* store.delete("/registry/pods/default/a", 2)
      expect(deleted.revision).toBe(3)
      expect(deleted.prev).toEqual(updated)
      expect(yield* outcome(store.get("/registry/pods/default/a"))).toMatchObject({ _tag: "NotFound", key: "/registry/pods/default/a" })

      // A re-created key starts a new life: new createRevision, version 1.
      const again = yield* store.create("/registry/pods/default/a", "v3")
      expect(again).toMatchObject({ createRevision: 4, modRevision: 4, version: 1 })
      expect(yield* store.currentRevision).toBe(4)
    }))

  t("rejects duplicate creates, stale compare-and-swaps and missing keys with typed errors", (store) =>
    Effect.gen(function* () {
      yield* store.create("k", "a")
      yield* store.update("k", "b", 1)
      expect(yield* outcome(store.create("k", "x"))).toMatchObject({ _tag: "AlreadyExists", key: "k", currentRevision: 2 })
      expect(yield* outcome(store.update("k", "x", 1))).toMatchObject({ _tag: "Conflict", key: "k", expectedRevision: 1, currentRevision: 2 })
      expect(yield* outcome(store.delete("k", 1))).toMatchObject({ _tag: "Conflict", currentRevision: 2 })
      expect(yield* outcome(store.update("missing", "x", 1))).toMatchObject({ _tag: "NotFound", key: "missing" })
      expect(yield* outcome(store.delete("missing"))).toMatchObject({ _tag: "NotFound", key: "missing" })
      // Failed operations take no revision and change nothing.
      expect(yield* store.currentRevision).toBe(2)
      expect((yield* store.get("k")).value).toBe("b")
      // An unconditional delete succeeds whatever the revision.
      expect((yield* store.delete("k")).prev.value).toBe("b")
    }))

  t("gives every committed mutation the next revision, with no gaps", (store) =>
    Effect.gen(function* () {
      const seen: Array<number> = []
      for (let i = 0; i < 20; i++) {
        seen.push((yield* store.create(`dense/${i}`, `${i}`)).modRevision)
        yield* Effect.either(store.create(`dense/${i}`, "dup"))
      }
      for (let i = 0; i < 20; i += 2) seen.push((yield* store.update(`dense/${i}`, "u", seen[i]!)).modRevision)
      expect(seen).toEqual(Array.from({ length: 30 }, (_, i) => i + 1))
    }))
}
