/**
 * The SQL of the write path, spliced once per writer from validated names: set the tenant, read
 * the newest row of every batch key with the counter of the same snapshot, lock the counter row,
 * and the one message that inserts a batch's rows, moves the counter, notifies and commits.
 */
import pg from "pg"
import type { Head, Rows } from "./batchPlan.js"
import { int, literal } from "./connection.js"

const { escapeLiteral } = pg

/** An int8[] literal. */
const ints = (values: ReadonlyArray<number>): string => `'{${values.join(",")}}'::int8[]`

/**
 * A text[] constructor of escaped literals. The write statements go as one simple-protocol
 * message with COMMIT (one round trip), which takes no parameters.
 */
export const texts = (values: ReadonlyArray<string | null>): string =>
  `ARRAY[${values.map((v) => (v === null ? "NULL" : escapeLiteral(v))).join(",")}]::text[]`

/** The statements of one writer (one schema, one tenant, one NOTIFY channel). */
export interface WriteStatements {
  /** Scope the transaction to the tenant (row-level security reads it). */
  readonly setTenant: string
  /** The counter and the newest row of each key in `keys` (a `texts` array), in one snapshot. */
  readonly headsOf: (keys: string) => string
  /** Lock the tenant's counter row to COMMIT; returns the counter. */
  readonly lockCounter: string
  /** Insert `rows`, set the counter to `head`, notify it, and COMMIT. */
  readonly commit: (rows: Rows, head: number) => string
}

/** The statements of a writer for `tenant` in `schema`, notifying on `channel`. */
export const make = (schema: string, tenant: string, channel: string): WriteStatements => {
  const s = schema
  const t = literal(tenant)
  return {
    setTenant: `SELECT set_config('fleet.tenant', ${t}, true)`,
    headsOf: (keys) => `
    SELECT (SELECT revision FROM ${s}.tenants WHERE tenant = ${t}) AS counter,
           k.key, h.revision, h.value, h.create_revision, h.version
    FROM unnest(${keys}) AS k(key)
    LEFT JOIN LATERAL (
      SELECT revision, value, create_revision, version FROM ${s}.kv
      WHERE tenant = ${t} AND key = k.key COLLATE "C" ORDER BY revision DESC LIMIT 1
    ) h ON true`,
    lockCounter: `SELECT revision FROM ${s}.tenants WHERE tenant = ${t} FOR UPDATE`,
    commit: (rows, head) => `
    WITH ins AS (
      INSERT INTO ${s}.kv (tenant, revision, key, value, create_revision, prev_revision, version, committed_at)
      SELECT ${t}, u.r, u.k, u.v, u.c, u.p, u.n, statement_timestamp()
      FROM unnest(${ints(rows.r)}, ${texts(rows.k)}, ${texts(rows.v)}, ${ints(rows.c)}, ${ints(rows.p)}, ${ints(rows.n)})
        AS u(r, k, v, c, p, n)
    ), upd AS (
      UPDATE ${s}.tenants SET revision = ${head} WHERE tenant = ${t}
    )
    SELECT pg_notify(${escapeLiteral(channel)}, '${head}');
    COMMIT`
  }
}

/** The counter and newest rows out of a `headsOf` result (counter NaN when there are no rows). */
export const readHeads = (result: pg.QueryResult): { counter: number; heads: Map<string, Head | undefined> } => {
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
