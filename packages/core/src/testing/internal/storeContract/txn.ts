/**
 * The contract on multi-op txns: all-or-nothing, consecutive revisions, and `check` ops as fences.
 */
import { Effect } from "effect"
import { expect } from "vitest"
import { outcome, type Register } from "./harness.js"

/** Multi-op txns: all-or-nothing, consecutive revisions, fencing checks. */
export const transactions = (t: Register): void => {
  t("commits a txn all-or-nothing with consecutive revisions, including fencing checks", (store) =>
    Effect.gen(function* () {
      yield* store.create("lease", "leader-a")
      yield* store.create("b", "old")

      // A failing op anywhere rolls back the whole txn.
      const failed = yield* outcome(
        store.txn([
          { op: "create", key: "a", value: "1" },
          { op: "update", key: "b", value: "new", expectedRevision: 2 },
          { op: "create", key: "lease", value: "dup" }
        ])
      )
      expect(failed).toMatchObject({ _tag: "AlreadyExists", key: "lease" })
      expect(yield* outcome(store.get("a"))).toMatchObject({ _tag: "NotFound" })
      expect((yield* store.get("b")).value).toBe("old")
      expect(yield* store.currentRevision).toBe(2)

      // A stale fencing check fails the write it guards.
      expect(
        yield* outcome(
          store.txn([
            { op: "check", key: "lease", expectedRevision: 99 },
            { op: "create", key: "a", value: "1" }
          ])
        )
      ).toMatchObject({ _tag: "Conflict", key: "lease", currentRevision: 1 })
      expect(yield* outcome(store.txn([{ op: "check", key: "nothing", expectedRevision: 0 }]))).toBe("success")

      const results = yield* store.txn([
        { op: "check", key: "lease", expectedRevision: 1 },
        { op: "create", key: "a", value: "1" },
        { op: "update", key: "a", value: "2", expectedRevision: 3 },
        { op: "delete", key: "b", expectedRevision: 2 }
      ])
      expect(results.map((r) => [r.op, r.revision])).toEqual([["check", 1], ["create", 3], ["update", 4], ["delete", 5]])
      expect(yield* store.get("a")).toMatchObject({ value: "2", createRevision: 3, modRevision: 4, version: 2 })
      expect(results[3]!.kv?.value).toBe("old")
      expect(yield* store.currentRevision).toBe(5)
    }))
}
