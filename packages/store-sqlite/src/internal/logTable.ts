/**
 * The MVCC log table, as prepared statements (prepared once, reused for every call). One row
 * per revision: `value IS NULL` marks a tombstone, `prev_revision` links a row to the key's
 * previous row (0 for the first), so an event's previous value is one primary-key lookup away.
 *
 * - get: the key's newest row (index `(key, revision)`, read backwards, one step).
 * - list at R: per key in the prefix range, the newest row with revision ≤ R, if not a tombstone.
 * - compact to C: delete every row superseded by a row ≤ C and every tombstone ≤ C. The rows
 *   after the horizon, and the newest row ≤ C of each live key, stay; so rows above the horizon
 *   are dense and every event above it can still find its previous value.
 */
import type Database from "better-sqlite3"
import type { Store } from "@koder/fleet-core"

type Db = Database.Database
type KeyValue = Store.KeyValue
type WatchEvent = Store.WatchEvent

/** The newest row of a key: [revision, value (null = tombstone), create_revision, version]. */
export type Head = [revision: number, value: string | null, createRevision: number, version: number]

type ItemRow = [key: string, value: string, createRevision: number, modRevision: number, version: number]
type EventRow = [
  revision: number,
  key: string,
  value: string | null,
  createRevision: number,
  version: number,
  prevValue: string | null
]

/**
 * The exclusive upper bound of the keys that start with `prefix`, in SQLite's BINARY (UTF-8
 * byte, i.e. code point) order: the prefix with its last code point incremented. A BLOB sorts
 * after every TEXT, so it bounds the empty prefix (and a prefix of only U+10FFFF).
 */
export const prefixEnd = (prefix: string): string | Buffer => {
  const points = Array.from(prefix)
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!
    if (last < 0x10ffff) {
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1
      return points.join("") + String.fromCodePoint(next)
    }
  }
  return Buffer.alloc(0)
}

// The rows live at revision R in [from, to): not a tombstone, and no newer row of the key at or
// below R. Walks the (key, revision) index in key order (so ORDER BY needs no sort) with one
// index probe per row. (A bound parameter compared with the TEXT column takes TEXT affinity,
// so "after key k" is expressed as from = k + NUL, see `keyAfter`.)
const liveAt = `
  FROM log AS l
  WHERE l.key >= :from AND l.key < :to AND l.revision <= :at
    AND NOT EXISTS (SELECT 1 FROM log AS m WHERE m.key = l.key AND m.revision > l.revision AND m.revision <= :at)
    AND l.value IS NOT NULL`

/** The smallest key after `key`: strictly-after as an inclusive lower bound. */
export const keyAfter = (key: string): string => key + "\u0000"

/** Build the statements of the log table. */
export const make = (db: Db) => {
  const head = db.prepare<Head>(
    "SELECT revision, value, create_revision, version FROM log WHERE key = ? ORDER BY revision DESC LIMIT 1"
  ).raw()
  const insert = db.prepare(
    "INSERT INTO log (revision, key, value, create_revision, prev_revision, version, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
  )
  const listPage = db.prepare<ItemRow>(`
    SELECT l.key, l.value, l.create_revision, l.revision, l.version ${liveAt}
    ORDER BY l.key
    LIMIT :limit`).raw()
  const countLive = db.prepare<number>(`SELECT COUNT(*) ${liveAt}`).pluck()
  const events = db.prepare<EventRow>(`
    SELECT l.revision, l.key, l.value, l.create_revision, l.version, p.value
    FROM log AS l LEFT JOIN log AS p ON p.revision = l.prev_revision AND l.prev_revision > 0
    WHERE l.revision > :after AND l.revision <= :upTo AND l.key >= :from AND l.key < :to
    ORDER BY l.revision
    LIMIT :limit`).raw()
  const maxRevision = db.prepare<number | null>("SELECT MAX(revision) FROM log").pluck()
  const committedAt = db.prepare<number>("SELECT committed_at FROM log WHERE revision = ?").pluck()
  const readMeta = db.prepare<unknown>("SELECT value FROM meta WHERE name = ?").pluck()
  const writeMeta = db.prepare("UPDATE meta SET value = ? WHERE name = ?")
  const deleteSuperseded = db.prepare(`
    DELETE FROM log WHERE revision IN (
      SELECT prev_revision FROM log WHERE revision > :from AND revision <= :to AND prev_revision > 0)`)
  const deleteTombstones = db.prepare("DELETE FROM log WHERE revision > :from AND revision <= :to AND value IS NULL")

  return {
    /** The key's newest row (possibly a tombstone), or undefined. */
    head: (key: string): Head | undefined => head.get(key),
    /** Append one row. */
    insert: (
      revision: number,
      key: string,
      value: string | null,
      createRevision: number,
      prevRevision: number,
      version: number,
      at: number
    ): void => {
      insert.run(revision, key, value, createRevision, prevRevision, version, at)
    },
    /** Up to `limit` (-1: all) live keys of `[from, to)`, as of revision `at`. */
    list: (from: string, to: string | Buffer, at: number, limit: number): Array<KeyValue> =>
      listPage.all({ from, to, at, limit }).map(
        ([key, value, createRevision, modRevision, version]): KeyValue => ({
          key,
          value,
          createRevision,
          modRevision,
          version
        })
      ),
    /** The number of live keys of `[from, to)`, as of revision `at`. */
    count: (from: string, to: string | Buffer, at: number): number => countLive.get({ from, to, at }) ?? 0,
    /** Events on keys of `[from, to)` with `after < revision <= upTo`, ascending, at most `limit`. */
    events: (from: string, to: string | Buffer, after: number, upTo: number, limit: number): Array<WatchEvent> =>
      events.all({ from, to, after, upTo, limit }).map(([revision, key, value, createRevision, version, prevValue]) =>
        eventOf(revision, key, value, createRevision, version, prevValue ?? undefined)
      ),
    /** The newest revision in the log (0 when empty). */
    maxRevision: (): number => maxRevision.get() ?? 0,
    /** When a revision was committed (ms since the epoch), if its row exists. */
    committedAt: (revision: number): number | undefined => committedAt.get(revision),
    /** A numeric meta value. */
    metaNumber: (name: string): number => {
      const v = readMeta.get(name)
      return typeof v === "number" ? v : 0
    },
    /** Delete what compaction to `to` discards among revisions `(from, to]`, and record `to`. */
    compact: (from: number, to: number): number => {
      const a = deleteSuperseded.run({ from, to }).changes
      const b = deleteTombstones.run({ from, to }).changes
      writeMeta.run(to, "compact_revision")
      return a + b
    }
  }
}

/** The statements of one open log. */
export type LogTable = ReturnType<typeof make>

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
): WatchEvent =>
  value === null
    ? { type: "DELETED", revision, key, value: prevValue ?? "", prevValue, createRevision, version }
    : createRevision === revision
      ? { type: "ADDED", revision, key, value, prevValue: undefined, createRevision, version }
      : { type: "MODIFIED", revision, key, value, prevValue, createRevision, version }
