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
 */
import pg from "pg"
import { StoreError, type Store } from "@koder/fleet-core"
import { classify, int, literal, messageOf } from "./connection.js"

/** Why one mutation was rejected (its own fault; other mutations in the batch are unaffected). */
export type Rejection = StoreError.NotFound | StoreError.AlreadyExists | StoreError.Conflict

/** What a caller receives: its results, or why it failed. */
export type Outcome = ReadonlyArray<Store.TxnResult> | Rejection | StoreError.Unavailable

/** Tell a rejection or failure from results. */
export const isFailure = (outcome: Outcome): outcome is Rejection | StoreError.Unavailable => "_tag" in outcome

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

interface Pending {
  readonly ops: ReadonlyArray<Store.TxnOp>
  readonly bytes: number
  readonly resume: (outcome: Outcome) => void
}

/** The newest row of a key; `value` null is a tombstone. */
interface Head {
  readonly revision: number
  readonly value: string | null
  readonly createRevision: number
  readonly version: number
}

/** A batch this process planned: its revisions, the newest row of each key it wrote, its fate. */
interface LocalBatch {
  readonly first: number
  readonly last: number
  readonly heads: Map<string, Head | undefined>
  readonly committed: Promise<boolean>
}

/** The columns of the rows a batch inserts. */
interface Rows {
  readonly r: Array<number>
  readonly k: Array<string>
  readonly v: Array<string | null>
  readonly c: Array<number>
  readonly p: Array<number>
  readonly n: Array<number>
}

/** An int8[] literal. */
const ints = (values: ReadonlyArray<number>): string => `'{${values.join(",")}}'::int8[]`

/**
 * A text[] constructor of escaped literals. The write statements go as one simple-protocol
 * message with COMMIT (one round trip), which takes no parameters.
 */
const texts = (values: ReadonlyArray<string | null>): string =>
  `ARRAY[${values.map((v) => (v === null ? "NULL" : escapeLiteral(v))).join(",")}]::text[]`

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

const { escapeLiteral } = pg

const kv = (key: string, value: string, createRevision: number, modRevision: number, version: number): Store.KeyValue => ({
  key,
  value,
  createRevision,
  modRevision,
  version
})

/** Start a writer. */
export const make = (options: Options): GroupCommit => {
  const { pool, onCommitted } = options
  const s = options.schema
  const t = literal(options.tenant)
  const maxInFlight = Math.max(1, options.maxInFlight ?? 2)
  const maxBatch = Math.max(1, options.maxBatch ?? 512)
  const maxBatchBytes = options.maxBatchBytes ?? 8 * 1024 * 1024

  const tenantParam = options.tenant
  const setTenant = `SELECT set_config('fleet.tenant', ${t}, true)`
  const headsOf = (keys: string) => `
    SELECT (SELECT revision FROM ${s}.tenants WHERE tenant = ${t}) AS counter,
           k.key, h.revision, h.value, h.create_revision, h.version
    FROM unnest(${keys}) AS k(key)
    LEFT JOIN LATERAL (
      SELECT revision, value, create_revision, version FROM ${s}.kv
      WHERE tenant = ${t} AND key = k.key COLLATE "C" ORDER BY revision DESC LIMIT 1
    ) h ON true`
  const lockCounter = `SELECT revision FROM ${s}.tenants WHERE tenant = ${t} FOR UPDATE`
  const commitSql = (rows: Rows, head: number) => `
    WITH ins AS (
      INSERT INTO ${s}.kv (tenant, revision, key, value, create_revision, prev_revision, version, committed_at)
      SELECT ${t}, u.r, u.k, u.v, u.c, u.p, u.n, statement_timestamp()
      FROM unnest(${ints(rows.r)}, ${texts(rows.k)}, ${texts(rows.v)}, ${ints(rows.c)}, ${ints(rows.p)}, ${ints(rows.n)})
        AS u(r, k, v, c, p, n)
    ), upd AS (
      UPDATE ${s}.tenants SET revision = ${head} WHERE tenant = ${t}
    )
    SELECT pg_notify(${escapeLiteral(options.channel)}, '${head}');
    COMMIT`

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

  /** Check a batch against the newest rows and lay out its rows and events. */
  const plan = (batch: ReadonlyArray<Pending>, heads: Map<string, Head | undefined>, base: number) => {
    let next = base
    const rows: Rows = { r: [], k: [], v: [], c: [], p: [], n: [] }
    const events: Array<Store.WatchEvent> = []
    const outcomes: Array<Outcome> = []
    let ok = 0

    for (const pending of batch) {
      // A txn sees its own writes through `overlay`; only a txn that passes merges it into `heads`.
      const overlay = new Map<string, Head | undefined>()
      const look = (key: string) => (overlay.has(key) ? overlay.get(key) : heads.get(key))
      const mark = { next, rows: rows.r.length, events: events.length }
      const results: Array<Store.TxnResult> = []
      let rejection: Rejection | undefined

      const write = (key: string, value: string | null, createRevision: number, prev: number, version: number) => {
        const r = ++next
        rows.r.push(r)
        rows.k.push(key)
        rows.v.push(value)
        rows.c.push(createRevision)
        rows.p.push(prev)
        rows.n.push(version)
        overlay.set(key, { revision: r, value, createRevision, version })
        return r
      }

      for (const op of pending.ops) {
        const key = op.key
        const head = look(key)
        const live = head !== undefined && head.value !== null ? head : undefined
        if (op.op === "create") {
          if (live) {
            rejection = new StoreError.AlreadyExists({ key, currentRevision: live.revision })
            break
          }
          const r = write(key, op.value, next + 1, head?.revision ?? 0, 1)
          events.push({ type: "ADDED", revision: r, key, value: op.value, prevValue: undefined, createRevision: r, version: 1 })
          results.push({ op: "create", revision: r, kv: kv(key, op.value, r, r, 1) })
        } else if (op.op === "update") {
          if (!live) {
            rejection = new StoreError.NotFound({ key })
            break
          }
          if (live.revision !== op.expectedRevision) {
            rejection = new StoreError.Conflict({ key, expectedRevision: op.expectedRevision, currentRevision: live.revision })
            break
          }
          const version = live.version + 1
          const r = write(key, op.value, live.createRevision, live.revision, version)
          events.push({ type: "MODIFIED", revision: r, key, value: op.value, prevValue: live.value!, createRevision: live.createRevision, version })
          results.push({ op: "update", revision: r, kv: kv(key, op.value, live.createRevision, r, version) })
        } else if (op.op === "delete") {
          if (!live) {
            rejection = new StoreError.NotFound({ key })
            break
          }
          if (op.expectedRevision !== undefined && live.revision !== op.expectedRevision) {
            rejection = new StoreError.Conflict({ key, expectedRevision: op.expectedRevision, currentRevision: live.revision })
            break
          }
          const value = live.value!
          const version = live.version + 1
          const r = write(key, null, live.createRevision, live.revision, version)
          events.push({ type: "DELETED", revision: r, key, value, prevValue: value, createRevision: live.createRevision, version })
          results.push({ op: "delete", revision: r, kv: kv(key, value, live.createRevision, live.revision, live.version) })
        } else {
          const at = live ? live.revision : 0
          if (at !== op.expectedRevision) {
            rejection = new StoreError.Conflict({ key, expectedRevision: op.expectedRevision, currentRevision: at })
            break
          }
          results.push({ op: "check", revision: at, kv: live ? kv(key, live.value!, live.createRevision, live.revision, live.version) : undefined })
        }
      }

      if (rejection) {
        // Undo this txn's rows and events and give its revisions back.
        next = mark.next
        for (const column of Object.values(rows)) column.length = mark.rows
        events.length = mark.events
        outcomes.push(rejection)
      } else {
        for (const [key, head] of overlay) heads.set(key, head)
        outcomes.push(results)
        ok++
      }
    }
    return { next, rows, events, outcomes, ok }
  }

  /** This process's recent batches, so the next batch can account for them without a re-read. */
  const recent: Array<LocalBatch> = []

  /**
   * The newest rows as of `locked`, given those as of `snapshot`: apply the effects of our own
   * batches in (snapshot, locked]; undefined if some revision in there is not ours (or unknown).
   */
  const catchUp = async (
    snapshot: number,
    locked: number,
    heads: Map<string, Head | undefined>
  ): Promise<Map<string, Head | undefined> | undefined> => {
    if (!Number.isSafeInteger(snapshot) || snapshot > locked) return undefined
    let cursor = snapshot
    while (cursor < locked) {
      const local = recent.find((b) => b.first === cursor + 1)
      if (local === undefined || local.last > locked || !(await local.committed)) return undefined
      for (const [key, head] of local.heads) if (heads.has(key)) heads.set(key, head)
      cursor = local.last
    }
    return heads
  }

  const readHeads = (result: pg.QueryResult): { counter: number; heads: Map<string, Head | undefined> } => {
    const heads = new Map<string, Head | undefined>()
    let counter = Number.NaN
    for (const row of result.rows) {
      counter = int(row.counter)
      heads.set(
        row.key,
        row.revision === null
          ? undefined
          : { revision: int(row.revision), value: row.value, createRevision: int(row.create_revision), version: int(row.version) }
      )
    }
    return { counter, heads }
  }

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
    let forget = () => {}
    try {
      const keys = texts([...new Set(batch.flatMap((p) => p.ops.map((op) => op.key)))])
      const first = (await client.query(`BEGIN; ${setTenant}; ${headsOf(keys)}; ${lockCounter}`)) as unknown as Array<pg.QueryResult>
      const lockedRow = first[3]?.rows[0]
      if (lockedRow === undefined) throw new Error(`the tenants row of "${tenantParam}" is missing (schema ${s})`)
      const locked = int(lockedRow.revision)
      const before = readHeads(first[2]!)
      let heads = await catchUp(before.counter, locked, before.heads)
      if (heads === undefined) {
        // Someone else committed in between: read the newest rows again, now under the lock.
        heads = readHeads(await client.query(headsOf(keys))).heads
        reReads++
      }
      const planned = plan(batch, heads, locked)
      if (planned.rows.r.length === 0) {
        await client.query("ROLLBACK")
      } else {
        const committed = new Promise<boolean>((resolve) => (settle = resolve))
        const written = new Map<string, Head | undefined>()
        for (const key of planned.rows.k) written.set(key, heads.get(key))
        const local: LocalBatch = { first: locked + 1, last: planned.next, heads: written, committed }
        recent.push(local)
        forget = () => {
          const i = recent.indexOf(local)
          if (i >= 0) recent.splice(i, 1)
        }
        if (recent.length > 32) recent.shift()
        stage = "commit"
        await client.query(commitSql(planned.rows, planned.next))
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
      forget()
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
    const failure =
      stage === "commit"
        ? new StoreError.Unavailable({
            reason: `commit outcome unknown: the PostgreSQL connection was lost during COMMIT (${messageOf(broken)}); the write may or may not have been applied, read the key to find out`,
            retryable: true
          })
        : failed("write not committed", broken)
    for (const p of batch) p.resume(failure)
  }

  const failed = (what: string, e: unknown) =>
    new StoreError.Unavailable({
      reason:
        classify(e) === "fatal"
          ? `${what}: ${messageOf(e)}`
          : `${what}: PostgreSQL connection lost or unreachable (${messageOf(e)}); retry when it is back`,
      retryable: classify(e) !== "fatal"
    })

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
