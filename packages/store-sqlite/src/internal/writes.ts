/**
 * The write side of a SQLite store as the Store port sees it: each call queues on the group
 * commit writer and resumes when its batch has committed.
 */
import { Effect } from "effect"
import type { Store, StoreError } from "@koder/fleet-core"
import * as GroupCommit from "./groupCommit.js"
import { closedError, type StoreState } from "./storeState.js"

/** The write operations of the Store port. */
export type Writes = Pick<Store.StoreService, "create" | "update" | "delete" | "txn">

/** The writes of one store, queued on `writer`. */
export const make = (state: StoreState, writer: GroupCommit.GroupCommit): Writes => {
  /** Queue one mutation; resolves after its batch commits. */
  const write = <A, E>(op: Store.TxnOp, map: (r: Store.TxnResult) => A): Effect.Effect<A, E | StoreError.Unavailable> =>
    Effect.async<A, E | StoreError.Unavailable>((resume) => {
      if (state.closed) return resume(Effect.fail(closedError()))
      writer.submit(op, (outcome) =>
        resume(GroupCommit.isFailure(outcome) ? Effect.fail(outcome as E) : Effect.succeed(map(outcome)))
      )
    })

  return {
    create: (key, value) => write({ op: "create", key, value }, (r) => r.kv!),
    update: (key, value, expectedRevision) => write({ op: "update", key, value, expectedRevision }, (r) => r.kv!),
    delete: (key, expectedRevision) =>
      write(
        expectedRevision === undefined ? { op: "delete", key } : { op: "delete", key, expectedRevision },
        (r): Store.Deleted => ({ revision: r.revision, prev: r.kv! })
      ),
    txn: (ops) =>
      Effect.async((resume) => {
        if (state.closed) return resume(Effect.fail(closedError()))
        writer.submitTxn(ops, (outcome) => resume(GroupCommit.isFailure(outcome) ? Effect.fail(outcome) : Effect.succeed(outcome)))
      })
  }
}
