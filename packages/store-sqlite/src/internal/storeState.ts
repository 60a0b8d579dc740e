/**
 * What the parts of an open SQLite store share: the compaction horizon and whether the store is
 * closed, plus the one guard every read goes through.
 */
import { Effect } from "effect"
import { StoreError } from "@koder/fleet-core"

/** The mutable state the reads, the watch feed and the compactor of one store share. */
export interface StoreState {
  /** The compaction horizon: history at or below it is gone. */
  compactRev: number
  /** Set when the store's scope closes; every later call fails with `Unavailable`. */
  closed: boolean
}

/** The error of any call after close. */
export const closedError = () => new StoreError.Unavailable({ reason: "store closed", retryable: false })

/** A SQLite error on a read, as a retryable `Unavailable`. */
export const readFailure = (e: unknown) =>
  new StoreError.Unavailable({ reason: `read failed: ${e instanceof Error ? e.message : String(e)}`, retryable: true })

/** Run a synchronous read unless closed; SQLite errors become `Unavailable`. */
export const read = <A, E>(state: StoreState, f: () => Effect.Effect<A, E>): Effect.Effect<A, E | StoreError.Unavailable> =>
  Effect.suspend((): Effect.Effect<A, E | StoreError.Unavailable> => {
    if (state.closed) return Effect.fail(closedError())
    try {
      return f()
    } catch (e) {
      return Effect.fail(readFailure(e))
    }
  })
