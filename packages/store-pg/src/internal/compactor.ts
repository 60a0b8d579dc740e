/**
 * Compaction of one tenant's log, in small steps (DESIGN §4, `CompactionPolicy`). A step to C
 * deletes, among revisions (horizon, C], every row superseded by a newer row of its key and
 * every tombstone, then records C as the horizon, all in one transaction; rows above the
 * horizon stay dense, so each event above it still finds its previous value.
 *
 * Only one process compacts a tenant at a time: each step holds a transaction-scoped advisory
 * lock; the background compactor only tries it (another process is already at work), an
 * explicit `compact` waits for it.
 */
import type pg from "pg"
import type { CompactionPolicy } from "@koder/fleet-core"
import { CompactionPolicy as Policy } from "@koder/fleet-core"
import { int, literal } from "./connection.js"
import type { LogQueries } from "./logQueries.js"
import { lockKind, lockSpace } from "./schema.js"

/** What a step did: whether the horizon advanced, and whether more remains toward the target. */
export interface StepResult {
  readonly advanced: boolean
  readonly more: boolean
}

const nothing: StepResult = { advanced: false, more: false }

/** A tenant's compactor. */
export interface Compactor {
  /** One step toward `target` (clamped to the head and to one batch). */
  readonly step: (target: number, wait: boolean) => Promise<StepResult>
  /** One background step if the policy allows one; whether it compacted anything. */
  readonly backgroundStep: () => Promise<boolean>
  readonly stats: () => { readonly compactions: number; readonly compactedRows: number }
}

/** Build the compactor of one tenant. */
export const make = (options: {
  readonly pool: pg.Pool
  readonly schema: string
  readonly tenant: string
  readonly queries: LogQueries
  readonly policy: CompactionPolicy.CompactionPolicy
}): Compactor => {
  const { pool, policy, queries } = options
  const s = options.schema
  const t = literal(options.tenant)
  const lockKey = `hashtext(${literal(`${options.schema}.${options.tenant}`)})`
  let compactions = 0
  let compactedRows = 0

  const step = async (target: number, wait: boolean): Promise<StepResult> => {
    const client = await pool.connect()
    let broken: Error | undefined
    try {
      const lock = wait
        ? `SELECT pg_advisory_xact_lock(${lockSpace + lockKind.compact}, ${lockKey}) IS NULL AS locked`
        : `SELECT pg_try_advisory_xact_lock(${lockSpace + lockKind.compact}, ${lockKey}) AS locked`
      const began = (await client.query(
        `BEGIN; SELECT set_config('fleet.tenant', ${t}, true); ${lock}; SELECT revision, compact_revision FROM ${s}.tenants WHERE tenant = ${t}`
      )) as unknown as Array<pg.QueryResult>
      const locked = began[2]?.rows[0]?.locked
      const row = began[3]?.rows[0]
      if ((!wait && locked !== true) || row === undefined) {
        await client.query("ROLLBACK")
        return nothing
      }
      const head = int(row.revision)
      const from = int(row.compact_revision)
      const goal = Math.min(target, head)
      const to = Math.min(goal, from + policy.batchRevisions)
      if (to <= from) {
        await client.query("ROLLBACK")
        return nothing
      }
      const superseded = await client.query(
        `DELETE FROM ${s}.kv WHERE tenant = $1 AND revision IN (
           SELECT prev_revision FROM ${s}.kv WHERE tenant = $1 AND revision > $2 AND revision <= $3 AND prev_revision > 0)`,
        [options.tenant, from, to]
      )
      const tombstones = await client.query(
        `DELETE FROM ${s}.kv WHERE tenant = $1 AND revision > $2 AND revision <= $3 AND value IS NULL`,
        [options.tenant, from, to]
      )
      await client.query(`UPDATE ${s}.tenants SET compact_revision = $2 WHERE tenant = $1 AND compact_revision < $2`, [
        options.tenant,
        to
      ])
      await client.query("COMMIT")
      compactions++
      compactedRows += (superseded.rowCount ?? 0) + (tombstones.rowCount ?? 0)
      return { advanced: true, more: to < goal }
    } catch (e) {
      broken = e instanceof Error ? e : new Error(String(e))
      await client.query("ROLLBACK").catch(() => undefined)
      throw e
    } finally {
      client.release(broken)
    }
  }

  /** Whether revision `r` was committed at least `minAgeMillis` ago, by the database's clock. */
  const expired = async (r: number): Promise<boolean> => {
    const res = await pool.query(
      `SELECT committed_at <= now() - $3::float8 * interval '1 millisecond' AS expired FROM ${s}.kv WHERE tenant = $1 AND revision = $2`,
      [options.tenant, r, policy.minAgeMillis]
    )
    return res.rows[0]?.expired === true
  }

  const backgroundStep = async (): Promise<boolean> => {
    const { revision, compactRevision } = await queries.heads(pool)
    // Only the next batch matters, so search (horizon, hi] for the newest expired revision;
    // rows above the horizon are dense, so a binary search over revisions works.
    const hi = Math.min(revision - policy.minRevisions, compactRevision + policy.batchRevisions)
    if (hi <= compactRevision) return false
    let newestExpired = compactRevision
    if (await expired(hi)) newestExpired = hi
    else {
      let lo = compactRevision
      let top = hi - 1
      while (lo < top) {
        const mid = Math.ceil((lo + top) / 2)
        if (await expired(mid)) lo = mid
        else top = mid - 1
      }
      newestExpired = lo
    }
    const target = Policy.nextStep(policy, { currentRevision: revision, compactRevision, newestExpiredRevision: newestExpired })
    if (target === undefined) return false
    return (await step(target, false)).advanced
  }

  return { step, backgroundStep, stats: () => ({ compactions, compactedRows }) }
}
