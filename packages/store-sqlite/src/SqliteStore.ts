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
import { CompactionPolicy, ContinueToken, FleetMetrics, KeyOrder, MetricRegistry, Store, StoreError, WatchFeed } from "@koder/fleet-core"
import { Duration, Effect, Either, Layer, type Scope } from "effect"
import * as FileFormat from "./internal/fileFormat.js"
import * as GroupCommit from "./internal/groupCommit.js"
import * as ListMemo from "./internal/listMemo.js"
import * as LogTable from "./internal/logTable.js"
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

/** Counters of a running store (for tests and metrics). */
export interface Stats extends GroupCommit.WriteStats {
  /** Compaction steps run (background and explicit). */
  readonly compactions: number
  /** Log rows deleted by compaction. */
  readonly compactedRows: number
  /** Times the background compactor woke and consulted the policy. */
  readonly compactorWakeups: number
}

/** The Store service plus SQLite-specific introspection. */
export interface SqliteStoreService extends Store.StoreService {
  /** Counters of the write path and the compactor. */
  readonly stats: Effect.Effect<Stats>
}

const closedError = () => new StoreError.Unavailable({ reason: "store closed", retryable: false })

const readFailure = (e: unknown) =>
  new StoreError.Unavailable({ reason: `read failed: ${e instanceof Error ? e.message : String(e)}`, retryable: true })

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

    let compactRev = log.metaNumber("compact_revision")
    // Compaction may delete the newest row (a tombstone), so the horizon also bounds the head.
    const initialRevision = Math.max(log.maxRevision(), compactRev)
    let closed = false
    let compactions = 0
    let compactedRows = 0
    let compactorWakeups = 0

    const feed = WatchFeed.make(
      {
        compactRevision: Effect.sync(() => compactRev),
        readEvents: (prefix, after, upTo, limit) =>
          Effect.suspend((): Effect.Effect<ReadonlyArray<Store.WatchEvent>, StoreError.Compacted | StoreError.Unavailable> => {
            if (closed) return Effect.fail(closedError())
            if (after < compactRev) {
              return Effect.fail(new StoreError.Compacted({ requestedRevision: after, compactRevision: compactRev }))
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
        ...(config.watchRingEvents === undefined ? {} : { ringEvents: config.watchRingEvents })
      }
    )

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
        closed = true
        writer.flush()
        feed.close("store closed")
      })
    )

    /** Run a synchronous read unless closed; SQLite errors become `Unavailable`. */
    const read = <A, E>(f: () => Effect.Effect<A, E>): Effect.Effect<A, E | StoreError.Unavailable> =>
      Effect.suspend((): Effect.Effect<A, E | StoreError.Unavailable> => {
        if (closed) return Effect.fail(closedError())
        try {
          return f()
        } catch (e) {
          return Effect.fail(readFailure(e))
        }
      })

    /** Queue one mutation; resolves after its batch commits. */
    const write = <A, E>(op: Store.TxnOp, map: (r: Store.TxnResult) => A): Effect.Effect<A, E | StoreError.Unavailable> =>
      Effect.async<A, E | StoreError.Unavailable>((resume) => {
        if (closed) return resume(Effect.fail(closedError()))
        writer.submit(op, (outcome) =>
          resume(GroupCommit.isFailure(outcome) ? Effect.fail(outcome as E) : Effect.succeed(map(outcome)))
        )
      })

    const txn: Store.StoreService["txn"] = (ops) =>
      Effect.async((resume) => {
        if (closed) return resume(Effect.fail(closedError()))
        writer.submitTxn(ops, (outcome) => resume(GroupCommit.isFailure(outcome) ? Effect.fail(outcome) : Effect.succeed(outcome)))
      })

    const list: Store.StoreService["list"] = (prefix, options = {}) =>
      read((): Effect.Effect<Store.ListResult, StoreError.Compacted | StoreError.Expired> => {
        const current = writer.revision()
        let at = options.atRevision && options.atRevision > 0 ? Math.min(options.atRevision, current) : current
        let from = prefix
        if (options.continue !== undefined) {
          const token = ContinueToken.decode(options.continue)
          if (Either.isLeft(token)) return Effect.fail(token.left)
          if (token.right.revision < compactRev) return Effect.fail(ContinueToken.expired(token.right.revision, compactRev))
          at = token.right.revision
          const after = LogTable.keyAfter(token.right.after)
          if (KeyOrder.compare(after, from) > 0) from = after
        } else if (at < compactRev) {
          return Effect.fail(new StoreError.Compacted({ requestedRevision: at, compactRevision: compactRev }))
        }
        const limit = options.limit && options.limit > 0 ? options.limit : -1
        // A whole list at the current revision: admission asks for the same few small ones on
        // every write (see ListMemo).
        const whole = limit < 0 && from === prefix && at === current
        const memoized = whole ? memo.get(prefix) : undefined
        if (memoized !== undefined) return Effect.succeed({ items: memoized, revision: at, continue: undefined, remaining: 0 })
        const end = LogTable.prefixEnd(prefix)
        const items = log.list(from, end, at, limit < 0 ? -1 : limit + 1)
        if (whole && items.length <= ListMemo.maxItems) memo.set(prefix, items.slice())
        if (limit < 0 || items.length <= limit) {
          return Effect.succeed({ items, revision: at, continue: undefined, remaining: 0 })
        }
        items.length = limit
        const last = items[limit - 1]!.key
        return Effect.succeed({
          items,
          revision: at,
          continue: ContinueToken.encode({ revision: at, after: last }),
          remaining: log.count(LogTable.keyAfter(last), end, at)
        })
      })

    /** One compaction step to `to` (clamped); returns whether anything was compacted. */
    const compactStep = (target: number): boolean => {
      const to = Math.min(target, writer.revision())
      if (to <= compactRev) return false
      db.exec("BEGIN")
      try {
        compactedRows += log.compact(compactRev, to)
        db.exec("COMMIT")
      } catch (e) {
        if (db.inTransaction) db.exec("ROLLBACK")
        throw e
      }
      compactRev = to
      compactions++
      return true
    }

    /** The newest revision committed at or before `cutoff` (binary search; rows above the horizon are dense). */
    const newestCommittedBy = (cutoff: number): number => {
      let lo = compactRev
      let hi = writer.revision()
      while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2)
        const at = log.committedAt(mid)
        if (at !== undefined && at <= cutoff) lo = mid
        else hi = mid - 1
      }
      return lo
    }

    const compact = (revision: number): Effect.Effect<void, StoreError.Unavailable> =>
      read(() => {
        const step = Effect.suspend((): Effect.Effect<boolean, StoreError.Unavailable> => {
          if (closed) return Effect.fail(closedError())
          try {
            return Effect.succeed(compactStep(Math.min(revision, compactRev + policy.batchRevisions)))
          } catch (e) {
            return Effect.fail(new StoreError.Unavailable({ reason: `compaction failed: ${String(e)}`, retryable: true }))
          }
        })
        // Batches with a yield between them, so writers and readers interleave.
        const loop: Effect.Effect<void, StoreError.Unavailable> = Effect.flatMap(step, (more) =>
          more && compactRev < Math.min(revision, writer.revision()) ? Effect.zipRight(Effect.yieldNow(), loop) : Effect.void
        )
        return loop
      })

    const backgroundStep = Effect.sync(() => {
      if (closed) return false
      const target = CompactionPolicy.nextStep(policy, {
        currentRevision: writer.revision(),
        compactRevision: compactRev,
        newestExpiredRevision: newestCommittedBy(Date.now() - policy.minAgeMillis)
      })
      return target !== undefined && compactStep(target)
    })
    const drainSteps: Effect.Effect<void> = Effect.flatMap(backgroundStep, (more) =>
      more ? Effect.zipRight(Effect.yieldNow(), drainSteps) : Effect.void
    )
    // Wake every interval; drain what the policy allows, one batch per step.
    yield* drainSteps.pipe(
      Effect.ensuring(Effect.sync(() => compactorWakeups++)),
      Effect.catchAllDefect((e) => Effect.logWarning("store compaction step failed", e)),
      Effect.zipLeft(Effect.sleep(Duration.millis(policy.intervalMillis))),
      Effect.forever,
      Effect.forkScoped
    )

    const service: SqliteStoreService = {
      currentRevision: read(() => Effect.succeed(writer.revision())),
      compactRevision: read(() => Effect.succeed(compactRev)),
      get: (key) =>
        read(() => {
          const head = log.head(key)
          return head === undefined || head[1] === null
            ? Effect.fail(new StoreError.NotFound({ key }))
            : Effect.succeed({ key, value: head[1], createRevision: head[2], modRevision: head[0], version: head[3] })
        }),
      list,
      count: (prefix) => read(() => Effect.succeed(log.count(prefix, LogTable.prefixEnd(prefix), writer.revision()))),
      create: (key, value) => write({ op: "create", key, value }, (r) => r.kv!),
      update: (key, value, expectedRevision) => write({ op: "update", key, value, expectedRevision }, (r) => r.kv!),
      delete: (key, expectedRevision) =>
        write(
          expectedRevision === undefined ? { op: "delete", key } : { op: "delete", key, expectedRevision },
          (r): Store.Deleted => ({ revision: r.revision, prev: r.kv! })
        ),
      txn,
      watch: (prefix, fromRevision) => feed.watch(prefix, fromRevision),
      compact,
      stats: Effect.sync(() => ({ ...writer.stats(), compactions, compactedRows, compactorWakeups }))
    }
    return service
  })

/** The Store port on a SQLite file, for the lifetime of the layer. */
export const layer = (config: Config): Layer.Layer<Store.Store, SqliteStoreError> => Layer.scoped(Store.Store, make(config))
