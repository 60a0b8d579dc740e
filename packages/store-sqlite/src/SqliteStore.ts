// eslint-disable-next-line @typescript-eslint/triple-slash-reference -- better-sqlite3 ships no types; the ambient declaration must reach every package that compiles this module
/// <reference path="./internal/better-sqlite3.d.ts" />
/**
 * The Store port on embedded SQLite (DESIGN §4): one process owns one file; an MVCC log with
 * one row per revision; group commit (many mutations, one transaction, one fsync); background
 * compaction in small batches; watches served by core's WatchFeed with this log as history.
 *
 *   writers ─▶ group commit ─▶ SQLite (WAL, synchronous=FULL) ─▶ WatchFeed ─▶ watchers
 *   readers ─▶ get / list / count (prepared statements on the same connection; small whole lists
 *              answered from memory until a commit touches their prefix, ListMemo)
 *   compactor (scoped fiber) ─▶ CompactionPolicy.nextStep ─▶ delete superseded rows in batches
 */
import { CompactionPolicy, FleetMetrics, MetricRegistry, Store } from "@koder/fleet-core"
import { Effect, Layer, type Scope } from "effect"
import * as Compactor from "./internal/compactor.js"
import * as FileFormat from "./internal/fileFormat.js"
import * as GroupCommit from "./internal/groupCommit.js"
import * as ListMemo from "./internal/listMemo.js"
import * as LogFeed from "./internal/logFeed.js"
import * as LogTable from "./internal/logTable.js"
import * as Reads from "./internal/reads.js"
import type { StoreState } from "./internal/storeState.js"
import * as Writes from "./internal/writes.js"
import type { SqliteStoreError } from "./SqliteStoreError.js"

/** How to open a store. */
export interface Config {
  /** The database file; created (with its directory's permissions) when missing. */
  readonly filename: string
  /**
   * SQLite's `synchronous` in WAL mode. FULL (default): an acknowledged write survives power
   * loss. NORMAL: survives a process crash, may lose the newest commits on power loss. OFF: tests.
   */
  readonly synchronous?: "FULL" | "NORMAL" | "OFF"
  /** Retention and batching of background compaction (default `CompactionPolicy.defaults`). */
  readonly compaction?: Partial<CompactionPolicy.CompactionPolicy>
  /** Events the watch ring keeps in memory (default: WatchFeed's). */
  readonly watchRingEvents?: number
}

/** Counters of a running store (for tests and metrics): the write path's and compaction's. */
export interface Stats extends GroupCommit.WriteStats, Compactor.CompactionStats {}

/** The Store service plus SQLite-specific introspection. */
export interface SqliteStoreService extends Store.StoreService {
  /** Counters of the write path and the compactor. */
  readonly stats: Effect.Effect<Stats>
}

/**
 * Open (creating or migrating) a store file. The store lives as long as the scope: closing
 * the scope drains queued writes, stops the compactor, ends every watch and closes the file.
 */
export const make = (config: Config): Effect.Effect<SqliteStoreService, SqliteStoreError, Scope.Scope> =>
  Effect.gen(function* () {
    const policy: CompactionPolicy.CompactionPolicy = { ...CompactionPolicy.defaults, ...config.compaction }
    const db = yield* Effect.acquireRelease(
      Effect.suspend(() => FileFormat.open({ filename: config.filename, synchronous: config.synchronous ?? "FULL" })),
      (db) => Effect.sync(() => db.close())
    )
    const log = LogTable.make(db)

    const state: StoreState = { compactRev: log.metaNumber("compact_revision"), closed: false }
    // Compaction may delete the newest row (a tombstone), so the horizon also bounds the head.
    const initialRevision = Math.max(log.maxRevision(), state.compactRev)
    const feed = LogFeed.make(state, log, initialRevision, config.watchRingEvents)

    const memo = ListMemo.make()
    const writer = GroupCommit.make({
      db,
      log,
      feed,
      revision: initialRevision,
      lastCommittedAt: initialRevision > 0 ? (log.committedAt(log.maxRevision()) ?? 0) : 0,
      onBatch: FleetMetrics.store(yield* MetricRegistry.MetricRegistry).batchSize.observe,
      onCommit: (events) => {
        for (const e of events) memo.touch(e.key)
      }
    })

    // Runs before the db closes (finalizers run in reverse): drain, then end the watches.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        state.closed = true
        writer.flush()
        feed.close("store closed")
      })
    )

    const compactor = Compactor.make({ db, log, writer, state, policy })
    yield* Effect.forkScoped(compactor.background)

    const service: SqliteStoreService = {
      ...Reads.make({ state, log, writer, memo }),
      ...Writes.make(state, writer),
      watch: (prefix, fromRevision) => feed.watch(prefix, fromRevision),
      compact: compactor.compact,
      stats: Effect.sync(() => ({ ...writer.stats(), ...compactor.stats() }))
    }
    return service
  })

/** The Store port on a SQLite file, for the lifetime of the layer. */
export const layer = (config: Config): Layer.Layer<Store.Store, SqliteStoreError> => Layer.scoped(Store.Store, make(config))
