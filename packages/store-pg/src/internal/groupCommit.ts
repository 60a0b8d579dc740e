/**
 * The write path: group commit across a shared counter row. Mutations queued in the same turn(s)
 * of the event loop become ONE PostgreSQL transaction of two round trips (three when another
 * process wrote in between):
 *
 *   queue ─▶ ① BEGIN; set tenant; newest row of every batch key (+ the counter, one snapshot);
 *              SELECT revision … FOR UPDATE                     (waits for other writers, any process)
 *         ─▶ [newest rows again, under the lock, unless ① plus our own commits explain the gap]
 *         ─▶ check each mutation in JS, in queue order            (a txn as a unit; rejects take no revision)
 *         ─▶ ② INSERT rows (unnest) + UPDATE counter + pg_notify; COMMIT
 *         ─▶ onCommitted(events) ─▶ resolve callers
 *
 * The counter row lock is held to COMMIT, so revision order is commit order in every process:
 * a reader that sees revision N committed sees everything below N. The checks must see the
 * newest rows as of the lock. ① reads them just BEFORE the lock (statements in READ COMMITTED
 * each take a new snapshot), together with the counter of that snapshot; if the counter under
 * the lock is the same, nothing committed in between; if the revisions in between are all this
 * process's own committed batches, their known effects are applied; otherwise (another process
 * wrote, or an outcome is unknown) the newest rows are read again under the lock. Up to
 * `maxInFlight` batches run at once on separate connections; the next one waits on the row lock
 * while the previous one commits, which takes its first round trip off the critical path.
 *
 * This module owns the queue, the batches in flight and the transaction of each; the checks are
 * batchPlan.ts, the SQL writeStatements.ts, and the catch-up over our own batches localBatches.ts.
 */
import type pg from "pg"
import { StoreError, type Store } from "@koder/fleet-core"
import { plan, type Head, type Outcome, type Pending } from "./batchPlan.js"
import { classify, int, messageOf } from "./connection.js"
import * as LocalBatches from "./localBatches.js"
import * as WriteStatements from "./writeStatements.js"

export { isFailure, type Outcome, type Rejection } from "./batchPlan.js"

/** Counters of the write path (for tests and metrics). */
export interface WriteStats {
  /** PostgreSQL transactions committed. */
  readonly commits: number
  /** Mutations (single ops or txns) that committed. */
  readonly committed: number
  /** Mutations rejected by their own checks. */
  readonly rejected: number
  /** Batches that failed before COMMIT (nothing written; callers got `Unavailable`). */
  readonly failedBatches: number
  /** Batches whose COMMIT lost its connection (outcome unknown; callers got `Unavailable`). */
  readonly unknownOutcomes: number
  /** Batches that re-read their keys under the lock because another process wrote in between. */
  readonly reReads: number
}

/** A running writer. */
export interface GroupCommit {
  /** Queue a mutation (one op or a txn's ops); `resume` is called once with its outcome. */
  readonly submit: (ops: ReadonlyArray<Store.TxnOp>, resume: (outcome: Outcome) => void) => void
  /** Resolves when nothing is queued or in flight. */
  readonly drain: () => Promise<void>
  readonly stats: () => WriteStats
}

/** Options of the writer. */
export interface Options {
  readonly pool: pg.Pool
  /** Told the size of every committed batch (the group-commit metric). */
  readonly onBatch?: (mutations: number) => void
  readonly schema: string
  readonly tenant: string
  /** The NOTIFY channel that carries the new head revision. */
  readonly channel: string
  /** Called after COMMIT with the batch's events (dense, ascending), before callers resume. */
  readonly onCommitted: (events: ReadonlyArray<Store.WatchEvent>) => void
  /** Called when a COMMIT's outcome is unknown, so the reader side re-reads the log. */
  readonly onUnknown: () => void
  /** Batches in flight at once (default 2). */
  readonly maxInFlight?: number
  /** Mutations per batch (default 512). */
  readonly maxBatch?: number
  /** Approximate value bytes per batch (default 8 MiB). */
  readonly maxBatchBytes?: number
}

/** A batch that did not commit, as `Unavailable` (retryable unless the failure is fatal). */
const failed = (what: string, e: unknown) =>
  new StoreError.Unavailable({
    reason:
      classify(e) === "fatal"
        ? `${what}: ${messageOf(e)}`
        : `${what}: PostgreSQL connection lost or unreachable (${messageOf(e)}); retry when it is back`,
    retryable: classify(e) !== "fatal"
  })

/** A batch whose COMMIT lost its connection, as `Unavailable`: it may or may not have been applied. */
const unknownOutcome = (e: unknown) =>
  new StoreError.Unavailable({
    reason: `commit outcome unknown: the PostgreSQL connection was lost during COMMIT (${messageOf(e)}); the write may or may not have been applied, read the key to find out`,
    retryable: true
  })

/** Start a writer. */
export const make = (options: Options): GroupCommit => {
  const { pool, onCommitted } = options
  const maxInFlight = Math.max(1, options.maxInFlight ?? 2)
  const maxBatch = Math.max(1, options.maxBatch ?? 512)
  const maxBatchBytes = options.maxBatchBytes ?? 8 * 1024 * 1024
  const sql = WriteStatements.make(options.schema, options.tenant, options.channel)
  const recent = LocalBatches.make()

  let queue: Array<Pending> = []
  let inFlight = 0
  let scheduled = false
  let idle: Array<() => void> = []
  let commits = 0
  let committedOps = 0
  let rejected = 0
  let failedBatches = 0
  let unknownOutcomes = 0
  let reReads = 0

  /** Run one batch as one PostgreSQL transaction and resume its callers. */
  const runBatch = async (batch: ReadonlyArray<Pending>): Promise<void> => {
    let client: pg.PoolClient
    try {
      client = await pool.connect()
    } catch (e) {
      failedBatches++
      const failure = failed("write not committed: cannot connect to PostgreSQL", e)
      for (const p of batch) p.resume(failure)
      return
    }
    let stage: "prepare" | "commit" = "prepare"
    let broken: unknown
    let outcomes: ReadonlyArray<Outcome> | undefined
    let published: ReadonlyArray<Store.WatchEvent> = []
    let settle: ((committed: boolean) => void) | undefined
    let local: LocalBatches.LocalBatch | undefined
    try {
      const keys = WriteStatements.texts([...new Set(batch.flatMap((p) => p.ops.map((op) => op.key)))])
      const first = (await client.query(`BEGIN; ${sql.setTenant}; ${sql.headsOf(keys)}; ${sql.lockCounter}`)) as unknown as Array<pg.QueryResult>
      const lockedRow = first[3]?.rows[0]
      if (lockedRow === undefined) throw new Error(`the tenants row of "${options.tenant}" is missing (schema ${options.schema})`)
      const locked = int(lockedRow.revision)
      const before = WriteStatements.readHeads(first[2]!)
      let heads = await recent.catchUp(before.counter, locked, before.heads)
      if (heads === undefined) {
        // Someone else committed in between: read the newest rows again, now under the lock.
        heads = WriteStatements.readHeads(await client.query(sql.headsOf(keys))).heads
        reReads++
      }
      const planned = plan(batch, heads, locked)
      if (planned.rows.r.length === 0) {
        await client.query("ROLLBACK")
      } else {
        const committed = new Promise<boolean>((resolve) => (settle = resolve))
        const written = new Map<string, Head | undefined>()
        for (const key of planned.rows.k) written.set(key, heads.get(key))
        local = { first: locked + 1, last: planned.next, heads: written, committed }
        recent.remember(local)
        stage = "commit"
        await client.query(sql.commit(planned.rows, planned.next))
        commits++
        options.onBatch?.(batch.length)
        settle?.(true)
        published = planned.events
      }
      committedOps += planned.ok
      rejected += batch.length - planned.ok
      outcomes = planned.outcomes
    } catch (e) {
      broken = e
      if (local !== undefined) recent.forget(local)
      settle?.(false)
      if (stage === "commit" && classify(e) === "connection") {
        unknownOutcomes++
        options.onUnknown()
      } else {
        // The server answered with an error: the transaction did not commit.
        stage = "prepare"
        failedBatches++
        await client.query("ROLLBACK").catch(() => undefined)
      }
    } finally {
      // A connection that failed mid-transaction is not trusted again.
      client.release(broken === undefined ? undefined : broken instanceof Error ? broken : new Error(messageOf(broken)))
    }
    if (outcomes !== undefined) {
      if (published.length > 0) onCommitted(published)
      batch.forEach((p, i) => p.resume(outcomes[i]!))
      return
    }
    const failure = stage === "commit" ? unknownOutcome(broken) : failed("write not committed", broken)
    for (const p of batch) p.resume(failure)
  }

  /** The next batch off the queue: up to `maxBatch` mutations and about `maxBatchBytes`. */
  const takeBatch = (): Array<Pending> => {
    let bytes = 0
    let i = 0
    while (i < queue.length && i < maxBatch && (i === 0 || bytes + queue[i]!.bytes <= maxBatchBytes)) {
      bytes += queue[i]!.bytes
      i++
    }
    const batch = queue.slice(0, i)
    queue = queue.slice(i)
    return batch
  }

  /** Start batches while there is room in flight; wake `drain` waiters when all is done. */
  const pump = () => {
    scheduled = false
    while (inFlight < maxInFlight && queue.length > 0) {
      const batch = takeBatch()
      inFlight++
      void runBatch(batch).finally(() => {
        inFlight--
        if (queue.length > 0) pump()
        else if (inFlight === 0) {
          const waiting = idle
          idle = []
          for (const w of waiting) w()
        }
      })
    }
  }

  return {
    submit: (ops, resume) => {
      let bytes = 0
      for (const op of ops) bytes += op.key.length + ("value" in op ? op.value.length : 0)
      queue.push({ ops, bytes, resume })
      if (!scheduled && inFlight < maxInFlight) {
        scheduled = true
        setImmediate(pump)
      }
    },
    drain: () =>
      queue.length === 0 && inFlight === 0 && !scheduled ? Promise.resolve() : new Promise<void>((resolve) => idle.push(resolve)),
    stats: () => ({ commits, committed: committedOps, rejected, failedBatches, unknownOutcomes, reReads })
  }
}
