/**
 * The write path: group commit. Mutations submitted in the same turn(s) of the event loop are
 * queued; one flush runs them all in ONE SQLite transaction and one fsync. Each mutation is
 * still checked on its own against the state left by the ones before it: a failed check rejects
 * that caller only and takes no revision, and a multi-op txn runs under a SAVEPOINT so a failure
 * part-way undoes just that txn. After COMMIT, the events go to the WatchFeed (dense, in revision
 * order) and every caller is resolved.
 *
 *   create/update/delete/txn ─▶ queue ─setImmediate─▶ BEGIN ─ op, op, SAVEPOINT txn …, op ─ COMMIT
 *                                                          └─▶ feed.publish(events) ─▶ resolve callers
 */
import type Database from "better-sqlite3"
import { StoreError, type Store, type WatchFeed } from "@koder/fleet-core"
import type { LogTable } from "./logTable.js"

/** Why one mutation was rejected (its own fault; other mutations in the batch are unaffected). */
export type Rejection = StoreError.NotFound | StoreError.AlreadyExists | StoreError.Conflict

/** What a caller receives: its results, or why it failed. */
export type Outcome<A> = A | Rejection | StoreError.Unavailable

/** Counters of the write path (for tests and metrics). */
export interface WriteStats {
  /** SQLite transactions committed by flushes. */
  readonly commits: number
  /** Mutations (single ops or txns) that committed. */
  readonly committed: number
  /** Mutations rejected by their own checks. */
  readonly rejected: number
  /** Flushes that failed as a whole (I/O errors); all their callers got `Unavailable`. */
  readonly failedCommits: number
}

interface Pending {
  /** One op (create/update/delete) or a txn's ops. */
  readonly op: Store.TxnOp | ReadonlyArray<Store.TxnOp>
  readonly resume: (outcome: Outcome<Store.TxnResult> & Outcome<ReadonlyArray<Store.TxnResult>>) => void
  outcome: Outcome<Store.TxnResult> | Outcome<ReadonlyArray<Store.TxnResult>> | undefined
}

/** Tell a rejection or failure from a result. */
export const isFailure = <A extends object>(outcome: Outcome<A>): outcome is Rejection | StoreError.Unavailable =>
  "_tag" in outcome

/** A running group-commit writer. */
export interface GroupCommit {
  /** The newest committed revision. */
  readonly revision: () => number
  /** When the newest revision was committed (ms since the epoch; never decreases). */
  readonly lastCommittedAt: () => number
  /** Queue one create/update/delete. */
  readonly submit: (op: Store.TxnOp, resume: (outcome: Outcome<Store.TxnResult>) => void) => void
  /** Queue a txn. */
  readonly submitTxn: (
    ops: ReadonlyArray<Store.TxnOp>,
    resume: (outcome: Outcome<ReadonlyArray<Store.TxnResult>>) => void
  ) => void
  /** Run the queued mutations now (the close path drains with this). */
  readonly flush: () => void
  readonly stats: () => WriteStats
}

/** Start a writer over an open log whose newest revision is `revision`. */
export const make = (options: {
  readonly db: Database.Database
  readonly log: LogTable
  readonly feed: WatchFeed.WatchFeed
  readonly revision: number
  readonly lastCommittedAt: number
  /** Told the size of every committed batch (the group-commit metric). */
  readonly onBatch?: (mutations: number) => void
  /** Told every committed batch's events, before they are published and any caller resumes. */
  readonly onCommit?: (events: ReadonlyArray<Store.WatchEvent>) => void
}): GroupCommit => {
  const { db, log, feed } = options
  const begin = db.prepare("BEGIN")
  const commit = db.prepare("COMMIT")
  const rollback = db.prepare("ROLLBACK")
  const savepoint = db.prepare("SAVEPOINT txn")
  const rollbackTo = db.prepare("ROLLBACK TO txn")
  const release = db.prepare("RELEASE txn")

  let committed = options.revision
  let lastAt = options.lastCommittedAt
  // During a flush: the last revision handed out, the commit time, the events so far.
  let next = committed
  let now = lastAt
  let events: Array<Store.WatchEvent> = []

  let queue: Array<Pending> = []
  let scheduled = false
  let commits = 0
  let committedOps = 0
  let rejected = 0
  let failedCommits = 0

  const kv = (key: string, value: string, createRevision: number, modRevision: number, version: number): Store.KeyValue => ({
    key,
    value,
    createRevision,
    modRevision,
    version
  })

  /** Check and write one op inside the open transaction. */
  const apply = (op: Store.TxnOp): Store.TxnResult | Rejection => {
    const key = op.key
    const head = log.head(key)
    // A tombstone head means the key is absent; it still links the next row's history.
    const live = head !== undefined && head[1] !== null ? head : undefined
    switch (op.op) {
      case "create": {
        if (live) return new StoreError.AlreadyExists({ key, currentRevision: live[0] })
        const r = ++next
        log.insert(r, key, op.value, r, head ? head[0] : 0, 1, now)
        events.push({ type: "ADDED", revision: r, key, value: op.value, prevValue: undefined, createRevision: r, version: 1 })
        return { op: "create", revision: r, kv: kv(key, op.value, r, r, 1) }
      }
      case "update": {
        if (!live) return new StoreError.NotFound({ key })
        if (live[0] !== op.expectedRevision) {
          return new StoreError.Conflict({ key, expectedRevision: op.expectedRevision, currentRevision: live[0] })
        }
        const r = ++next
        const version = live[3] + 1
        log.insert(r, key, op.value, live[2], live[0], version, now)
        events.push({ type: "MODIFIED", revision: r, key, value: op.value, prevValue: live[1]!, createRevision: live[2], version })
        return { op: "update", revision: r, kv: kv(key, op.value, live[2], r, version) }
      }
      case "delete": {
        if (!live) return new StoreError.NotFound({ key })
        if (op.expectedRevision !== undefined && live[0] !== op.expectedRevision) {
          return new StoreError.Conflict({ key, expectedRevision: op.expectedRevision, currentRevision: live[0] })
        }
        const r = ++next
        const value = live[1]!
        const version = live[3] + 1
        log.insert(r, key, null, live[2], live[0], version, now)
        events.push({ type: "DELETED", revision: r, key, value, prevValue: value, createRevision: live[2], version })
        return { op: "delete", revision: r, kv: kv(key, value, live[2], live[0], live[3]) }
      }
      case "check": {
        const at = live ? live[0] : 0
        if (at !== op.expectedRevision) return new StoreError.Conflict({ key, expectedRevision: op.expectedRevision, currentRevision: at })
        return { op: "check", revision: at, kv: live ? kv(key, live[1]!, live[2], live[0], live[3]) : undefined }
      }
    }
  }

  /** Run a txn's ops; on the first rejection undo them (SAVEPOINT) and give their revisions back. */
  const applyTxn = (ops: ReadonlyArray<Store.TxnOp>): ReadonlyArray<Store.TxnResult> | Rejection => {
    if (ops.length === 1) {
      const r = apply(ops[0]!)
      return "_tag" in r ? r : [r]
    }
    const mark = next
    const eventMark = events.length
    savepoint.run()
    const results: Array<Store.TxnResult> = []
    for (const op of ops) {
      const r = apply(op)
      if ("_tag" in r) {
        rollbackTo.run()
        release.run()
        next = mark
        events.length = eventMark
        return r
      }
      results.push(r)
    }
    release.run()
    return results
  }

  const flush = () => {
    scheduled = false
    if (queue.length === 0) return
    const batch = queue
    queue = []
    next = committed
    now = Math.max(Date.now(), lastAt)
    events = []
    let failure: StoreError.Unavailable | undefined
    let ok = 0
    try {
      begin.run()
      for (const p of batch) {
        const outcome = Array.isArray(p.op) ? applyTxn(p.op) : apply(p.op as Store.TxnOp)
        p.outcome = outcome
        if (!("_tag" in outcome)) ok++
      }
      commit.run()
      commits++
      committedOps += ok
      rejected += batch.length - ok
      options.onBatch?.(batch.length)
    } catch (e) {
      if (db.inTransaction) {
        try {
          rollback.run()
        } catch {
          // the connection is beyond saving; every caller below learns it is unavailable
        }
      }
      failedCommits++
      failure = new StoreError.Unavailable({ reason: `commit failed: ${e instanceof Error ? e.message : String(e)}`, retryable: true })
    }
    const published = events
    events = []
    if (failure === undefined) {
      committed = next
      lastAt = now
      options.onCommit?.(published)
      feed.publish(published)
    } else {
      next = committed
    }
    for (const p of batch) p.resume((failure ?? p.outcome) as never)
  }

  const schedule = () => {
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }

  return {
    revision: () => committed,
    lastCommittedAt: () => lastAt,
    submit: (op, resume) => {
      queue.push({ op, resume: resume as Pending["resume"], outcome: undefined })
      schedule()
    },
    submitTxn: (ops, resume) => {
      queue.push({ op: ops, resume: resume as Pending["resume"], outcome: undefined })
      schedule()
    },
    flush,
    stats: () => ({ commits, committed: committedOps, rejected, failedCommits })
  }
}
