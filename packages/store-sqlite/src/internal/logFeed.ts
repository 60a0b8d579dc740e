/**
 * The watch feed of a SQLite store: core's WatchFeed, with the MVCC log as its history (a
 * watcher that falls behind the in-memory ring reads the log table).
 */
import { Effect } from "effect"
import { type Store, StoreError, WatchFeed } from "@koder/fleet-core"
import * as LogTable from "./logTable.js"
import { closedError, readFailure, type StoreState } from "./storeState.js"

/** A feed whose history is `log`, starting after `initialRevision`. */
export const make = (
  state: StoreState,
  log: LogTable.LogTable,
  initialRevision: number,
  ringEvents: number | undefined
): WatchFeed.WatchFeed =>
  WatchFeed.make(
    {
      compactRevision: Effect.sync(() => state.compactRev),
      readEvents: (prefix, after, upTo, limit) =>
        Effect.suspend((): Effect.Effect<ReadonlyArray<Store.WatchEvent>, StoreError.Compacted | StoreError.Unavailable> => {
          if (state.closed) return Effect.fail(closedError())
          if (after < state.compactRev) {
            return Effect.fail(new StoreError.Compacted({ requestedRevision: after, compactRevision: state.compactRev }))
          }
          try {
            return Effect.succeed(log.events(prefix, LogTable.prefixEnd(prefix), after, upTo, limit))
          } catch (e) {
            return Effect.fail(readFailure(e))
          }
        })
    },
    {
      initialRevision,
      ...(ringEvents === undefined ? {} : { ringEvents })
    }
  )
