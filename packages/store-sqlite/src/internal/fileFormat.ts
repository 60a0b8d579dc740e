/**
 * The on-disk format of a store file: how we recognise our own files, the versioned schema and
 * its migrations, and opening a file with exclusive ownership. Opening refuses (with a tagged
 * error naming the file) anything that is not ours or is newer than this code.
 *
 *   open ─▶ header is SQLite? ─▶ lock (EXCLUSIVE) ─▶ ours / empty / foreign? ─▶ migrate ─▶ WAL
 */
import * as fs from "node:fs"
import Database from "better-sqlite3"
import { Either } from "effect"
import { FileLocked, ForeignFile, OpenFailed, SchemaTooNew, type SqliteStoreError } from "../SqliteStoreError.js"

/** `PRAGMA application_id` of a store file: "KFLT". */
export const applicationId = 0x4b464c54

/** The `format` row of the meta table. */
export const formatName = "koder-fleet-store"

/**
 * The schema, one migration per version: `migrations[i]` takes a file from version i to i + 1.
 * All pending migrations run in one transaction, so a file is never left half-migrated. To
 * change the schema, append a function; never edit a released one.
 */
export const migrations: ReadonlyArray<(db: Database.Database) => void> = [
  // v1: the MVCC log (one row per revision; value NULL is a tombstone) and the meta table.
  (db) => {
    db.exec(`
      CREATE TABLE log (
        revision        INTEGER PRIMARY KEY,
        key             TEXT    NOT NULL,
        value           TEXT,
        create_revision INTEGER NOT NULL,
        prev_revision   INTEGER NOT NULL,
        version         INTEGER NOT NULL,
        committed_at    INTEGER NOT NULL
      );
      CREATE INDEX log_key_revision ON log (key, revision);
      CREATE TABLE meta (name TEXT PRIMARY KEY, value ANY) WITHOUT ROWID;
      INSERT INTO meta (name, value) VALUES ('format', '${formatName}'), ('compact_revision', 0);
    `)
  }
]

/** The schema version this code writes. */
export const schemaVersion = migrations.length

/** What a store may tune when opening. */
export interface OpenOptions {
  readonly filename: string
  readonly synchronous: "FULL" | "NORMAL" | "OFF"
}

const sqliteHeader = "SQLite format 3\0"

const errorCode = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

const errorMessage = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** Read the first bytes of an existing file to tell "not SQLite at all" from a SQLite file. */
const readHeader = (filename: string): string | undefined => {
  let fd: number | undefined
  try {
    fd = fs.openSync(filename, "r")
    const buf = Buffer.alloc(16)
    const n = fs.readSync(fd, buf, 0, 16, 0)
    return buf.toString("latin1", 0, n)
  } catch (e) {
    if (errorCode(e) === "ENOENT") return undefined
    throw e
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/**
 * The store holds every object (Secrets sealed, but names, tokens' hashes and all else in the
 * clear): its file and its WAL are the owner's alone. SQLite creates the WAL (and a -shm) with
 * the database file's mode, so a new file is made 0600 before SQLite opens it, and an existing
 * one (from before this rule, or copied in) is narrowed to 0600 with its WAL.
 */
const keepPrivate = (filename: string, create: boolean) => {
  if (filename === ":memory:" || filename === "") return
  if (create) {
    try {
      fs.closeSync(fs.openSync(filename, "wx", 0o600))
    } catch (e) {
      // Made meanwhile by another opener: narrowed below like any existing file.
      if (errorCode(e) !== "EEXIST") throw e
    }
  }
  for (const f of [filename, `${filename}-wal`, `${filename}-shm`]) {
    try {
      if ((fs.statSync(f).mode & 0o077) !== 0) fs.chmodSync(f, 0o600)
    } catch (e) {
      if (errorCode(e) !== "ENOENT") throw e
    }
  }
}

type Inspection =
  | { readonly kind: "empty" }
  | { readonly kind: "ours"; readonly version: number }
  | { readonly kind: "foreign"; readonly reason: string }

/** Decide what the (locked) file holds. */
const inspect = (db: Database.Database): Inspection => {
  const appId = db.pragma("application_id", { simple: true }) as number
  const tables = db
    .prepare<string>("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'")
    .pluck()
    .all()
  if (appId === 0 && tables.length === 0) return { kind: "empty" }
  if (appId !== applicationId) {
    return {
      kind: "foreign",
      reason:
        appId === 0
          ? `a SQLite database with other tables (${tables.slice(0, 5).join(", ")})`
          : `a SQLite database of another application (application_id 0x${appId.toString(16)})`
    }
  }
  if (!tables.includes("meta")) return { kind: "foreign", reason: "the meta table is missing" }
  const rows = db.prepare<{ name: string; value: unknown }>("SELECT name, value FROM meta").all()
  const meta = new Map(rows.map((r) => [r.name, r.value]))
  if (meta.get("format") !== formatName) {
    return { kind: "foreign", reason: `meta format is ${JSON.stringify(meta.get("format"))}, not "${formatName}"` }
  }
  const version = meta.get("schema_version")
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version < 1) {
    return { kind: "foreign", reason: `meta schema_version is ${JSON.stringify(version)}` }
  }
  return { kind: "ours", version }
}

/** Apply migrations `from..schemaVersion` in one transaction. */
const migrate = (db: Database.Database, from: number) => {
  db.exec("BEGIN IMMEDIATE")
  try {
    for (let v = from; v < schemaVersion; v++) migrations[v]!(db)
    db.prepare("INSERT INTO meta (name, value) VALUES ('schema_version', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value").run(
      schemaVersion
    )
    db.pragma(`application_id = ${applicationId}`)
    db.pragma(`user_version = ${schemaVersion}`)
    db.exec("COMMIT")
  } catch (e) {
    if (db.inTransaction) db.exec("ROLLBACK")
    throw e
  }
}

/**
 * Open, lock, verify and migrate a store file. The connection runs in EXCLUSIVE locking mode:
 * the first write takes the file lock and keeps it until close, so a second store (in any
 * process) fails with `FileLocked` instead of interleaving writes; the WAL index then lives in
 * process memory (no -shm file).
 */
export const open = (options: OpenOptions): Either.Either<Database.Database, SqliteStoreError> => {
  const { filename } = options
  let db: Database.Database | undefined
  try {
    const header = readHeader(filename)
    if (header !== undefined && header.length > 0 && header !== sqliteHeader) {
      return Either.left(new ForeignFile({ filename, reason: "not a SQLite database" }))
    }
    keepPrivate(filename, header === undefined)
    db = new Database(filename, { timeout: 0 })
    db.pragma("locking_mode = EXCLUSIVE")
    // Take the write lock now (and keep it), before looking at the contents.
    db.exec("BEGIN IMMEDIATE; COMMIT")
    const found = inspect(db)
    if (found.kind === "foreign") {
      db.close()
      return Either.left(new ForeignFile({ filename, reason: found.reason }))
    }
    const version = found.kind === "empty" ? 0 : found.version
    if (version > schemaVersion) {
      db.close()
      return Either.left(new SchemaTooNew({ filename, fileVersion: version, supportedVersion: schemaVersion }))
    }
    const mode = db.pragma("journal_mode = WAL", { simple: true })
    if (mode !== "wal") throw new Error(`cannot switch to WAL (journal_mode is ${String(mode)})`)
    db.pragma(`synchronous = ${options.synchronous}`)
    if (version < schemaVersion) migrate(db, version)
    return Either.right(db)
  } catch (e) {
    if (db?.open) db.close()
    const code = errorCode(e)
    if (code === "SQLITE_BUSY" || code === "SQLITE_LOCKED") return Either.left(new FileLocked({ filename }))
    if (code === "SQLITE_NOTADB") return Either.left(new ForeignFile({ filename, reason: "not a SQLite database" }))
    return Either.left(new OpenFailed({ filename, reason: errorMessage(e) }))
  }
}
