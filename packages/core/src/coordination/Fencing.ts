/**
 * Fencing tokens. A leader's writes are conditional on the term it was elected in: every txn
 * it commits carries a `check` of the term key at the revision its election wrote. When another
 * candidate takes over, it rewrites the term key in the same txn as the lease, so every later
 * write of the deposed leader fails with `Conflict` in the store itself, however late it arrives.
 */
import type { TxnOp } from "../store/Store.js"

/** Proof of leadership for one term. */
export interface FencingToken {
  /** The election's term key; its revision changes exactly when leadership changes hands. */
  readonly key: string
  /** The term key's revision written by this leader's election. */
  readonly revision: number
  /** The term number (the Lease's `leaseTransitions` when this leader acquired it). */
  readonly term: number
  /** The identity of the leader holding this token. */
  readonly holder: string
}

/** Prefix `ops` with the check that makes them commit only while `token`'s term is current. */
export const guard = (token: FencingToken, ops: ReadonlyArray<TxnOp>): ReadonlyArray<TxnOp> => [
  { op: "check", key: token.key, expectedRevision: token.revision },
  ...ops
]
