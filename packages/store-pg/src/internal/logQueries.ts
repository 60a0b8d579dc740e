/**
 * The read side of the MVCC log, one SQL statement each (so each reads one snapshot, and one
 * round trip). A read that must agree with the compaction horizon or the head reads the
 * `tenants` row in the same statement, so a concurrent compaction or commit cannot slip between.
 *
 * - get: the key's newest row (index (tenant, key, revision), backwards, one step).
 * - list at R: per key in the prefix range, the newest row with revision ≤ R, unless a tombstone.
 * - events: rows with after < revision ≤ upTo, joined to their previous row for prevValue.
 */
import type pg from "pg"
import type { Store } from "@koder/fleet-core"
import { int } from "./connection.js"

/** Anything that runs a query: the pool or a checked-out client. */
export type Queryable = Pick<pg.Pool, "query"> | Pick<pg.ClientBase, "query">

/**
 * The exclusive upper bound of the keys that start with `prefix` in code point order (the "C"
 * collation): the prefix with its last code point incremented, or undefined when unbounded.
 */
export const prefixEnd = (prefix: string): string | undefined => {
  const points = Array.from(prefix)
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!
    if (last < 0x10ffff) return points.join("") + String.fromCodePoint(last + 1 === 0xd800 ? 0xe000 : last + 1)
  }
  return undefined
}

/**
 * The event a row stands for: a tombstone is DELETED (carrying the deleted value), a row that
 * (re)created its key is ADDED, anything else MODIFIED.
 */
export const eventOf = (
  revision: number,
  key: string,
  value: string | null,
  createRevision: number,
  version: number,
  prevValue: string | undefined
): Store.WatchEvent =>
  value === null
    ? { type: "DELETED", revision, key, value: prevValue ?? "", prevValue, createRevision, version }
    : createRevision === revision
      ? { type: "ADDED", revision, key, value, prevValue: undefined, createRevision, version }
      : { type: "MODIFIED", revision, key, value, prevValue, createRevision, version }

/** A page of `list`, with the snapshot's revision and horizon. */
export interface Page {
  /** The revision read at (the head when none was asked for; clamped to the head). */
  readonly at: number
  readonly horizon: number
  readonly items: Array<Store.KeyValue>
  /** Live keys after the cursor in the range at `at` (including `items`). */
  readonly total: number
}

/** Events with the head and horizon of the same snapshot. */
export interface EventBatch {
  readonly head: number
  readonly horizon: number
  readonly events: Array<Store.WatchEvent>
}

/** The read statements of one tenant in one schema. */
export const make = (schema: string, tenant: string) => {
  const s = schema
  const range = (from: number, to: string | undefined, column = "key") =>
    `${column} >= $${from}${to === undefined ? "" : ` AND ${column} < $${from + 1}`}`
  const rangeParams = (prefix: string, to: string | undefined) => (to === undefined ? [prefix] : [prefix, to])

  return {
    /** The head and horizon. */
    heads: async (db: Queryable): Promise<{ revision: number; compactRevision: number }> => {
      const r = await db.query(`SELECT revision, compact_revision FROM ${s}.tenants WHERE tenant = $1`, [tenant])
      const row = r.rows[0]
      if (row === undefined) throw new Error(`the tenants row of "${tenant}" is missing (schema ${s})`)
      return { revision: int(row.revision), compactRevision: int(row.compact_revision) }
    },

    /** The key's current value, or undefined. */
    get: async (db: Queryable, key: string): Promise<Store.KeyValue | undefined> => {
      const r = await db.query(
        `SELECT revision, value, create_revision, version FROM ${s}.kv
         WHERE tenant = $1 AND key = $2 ORDER BY revision DESC LIMIT 1`,
        [tenant, key]
      )
      const row = r.rows[0]
      if (row === undefined || row.value === null) return undefined
      return { key, value: row.value, createRevision: int(row.create_revision), modRevision: int(row.revision), version: int(row.version) }
    },

    /**
     * Up to `limit` (undefined: all) live keys under `prefix` after `after`, at `requested`
     * (0: the head). Returns no items when `at` is below the horizon.
     */
    list: async (db: Queryable, prefix: string, requested: number, after: string | undefined, limit: number | undefined): Promise<Page> => {
      const to = prefixEnd(prefix)
      const params: Array<unknown> = [tenant, requested, limit ?? null, ...rangeParams(prefix, to)]
      let cursor = ""
      if (after !== undefined) {
        params.push(after)
        cursor = ` AND key > $${params.length}`
      }
      const r = await db.query(
        `WITH t AS (
           SELECT CASE WHEN $2::int8 > 0 THEN LEAST($2::int8, revision) ELSE revision END AS at, compact_revision AS horizon
           FROM ${s}.tenants WHERE tenant = $1
         )
         SELECT t.at, t.horizon, p.key, p.value, p.create_revision, p.revision, p.version, p.total
         FROM t LEFT JOIN LATERAL (
           SELECT n.*, count(*) OVER () AS total FROM (
             SELECT DISTINCT ON (key) key, value, create_revision, revision, version
             FROM ${s}.kv
             WHERE tenant = $1 AND ${range(4, to)}${cursor} AND revision <= t.at
             ORDER BY key, revision DESC
           ) n
           WHERE n.value IS NOT NULL AND t.at >= t.horizon
           ORDER BY n.key
           LIMIT $3
         ) p ON true
         ORDER BY p.key`,
        params
      )
      const first = r.rows[0]
      if (first === undefined) throw new Error(`the tenants row of "${tenant}" is missing (schema ${s})`)
      const items: Array<Store.KeyValue> = []
      for (const row of r.rows) {
        if (row.key === null) continue
        items.push({ key: row.key, value: row.value, createRevision: int(row.create_revision), modRevision: int(row.revision), version: int(row.version) })
      }
      return { at: int(first.at), horizon: int(first.horizon), items, total: first.key === null ? 0 : int(first.total) }
    },

    /** Live keys under `prefix` now. */
    count: async (db: Queryable, prefix: string): Promise<number> => {
      const to = prefixEnd(prefix)
      const r = await db.query(
        `SELECT count(*) AS n FROM (
           SELECT DISTINCT ON (key) value FROM ${s}.kv WHERE tenant = $1 AND ${range(2, to)} ORDER BY key, revision DESC
         ) k WHERE value IS NOT NULL`,
        [tenant, ...rangeParams(prefix, to)]
      )
      return int(r.rows[0]?.n ?? 0)
    },

    /**
     * Events under `prefix` with `after < revision ≤ upTo`, ascending, at most `limit`, with the
     * head and horizon of the same snapshot. With `checkHorizon`, none are returned when `after`
     * is below the horizon (the caller fails with Compacted).
     */
    events: async (
      db: Queryable,
      prefix: string,
      after: number,
      upTo: number,
      limit: number,
      checkHorizon: boolean
    ): Promise<EventBatch> => {
      const to = prefixEnd(prefix)
      const r = await db.query(
        `WITH t AS (SELECT revision AS head, compact_revision AS horizon FROM ${s}.tenants WHERE tenant = $1)
         SELECT t.head, t.horizon, e.* FROM t LEFT JOIN LATERAL (
           SELECT l.revision, l.key, l.value, l.create_revision, l.version, p.value AS prev_value
           FROM ${s}.kv l
           LEFT JOIN ${s}.kv p ON p.tenant = l.tenant AND p.revision = l.prev_revision AND l.prev_revision > 0
           WHERE l.tenant = $1 AND l.revision > $2 AND l.revision <= $3 AND ${range(6, to, "l.key")}
             AND (NOT $5 OR $2 >= t.horizon)
           ORDER BY l.revision
           LIMIT $4
         ) e ON true
         ORDER BY e.revision`,
        [tenant, after, upTo, limit, checkHorizon, ...rangeParams(prefix, to)]
      )
      const first = r.rows[0]
      if (first === undefined) throw new Error(`the tenants row of "${tenant}" is missing (schema ${s})`)
      const events: Array<Store.WatchEvent> = []
      for (const row of r.rows) {
        if (row.revision === null) continue
        events.push(eventOf(int(row.revision), row.key, row.value, int(row.create_revision), int(row.version), row.prev_value ?? undefined))
      }
      return { head: int(first.head), horizon: int(first.horizon), events }
    }
  }
}

/** The read statements of one store. */
export type LogQueries = ReturnType<typeof make>
