/**
 * Why a SQLite store file could not be opened. Each names the file, so an operator reading the
 * message knows which file to look at; none of these is retryable without a change on disk.
 */
import { Data } from "effect"

/** The file exists but is not a Koder Fleet store (another program's database, or not SQLite). */
export class ForeignFile extends Data.TaggedError("ForeignFile")<{
  readonly filename: string
  readonly reason: string
}> {
  override get message() {
    return `${this.filename} is not a Koder Fleet store (${this.reason}); refusing to open it`
  }
}

/** The file was written by a newer Fleet whose schema this code does not know. */
export class SchemaTooNew extends Data.TaggedError("SchemaTooNew")<{
  readonly filename: string
  readonly fileVersion: number
  readonly supportedVersion: number
}> {
  override get message() {
    return (
      `${this.filename} has store schema version ${this.fileVersion}, but this Koder Fleet supports ` +
      `up to version ${this.supportedVersion}; upgrade Koder Fleet to open it`
    )
  }
}

/** Another process (or another store in this process) holds the file. */
export class FileLocked extends Data.TaggedError("FileLocked")<{
  readonly filename: string
}> {
  override get message() {
    return `${this.filename} is in use by another Koder Fleet store (one process owns the file)`
  }
}

/** SQLite failed to open, read or migrate the file (I/O error, permissions, corruption). */
export class OpenFailed extends Data.TaggedError("OpenFailed")<{
  readonly filename: string
  readonly reason: string
}> {
  override get message() {
    return `cannot open store ${this.filename}: ${this.reason}`
  }
}

/** Any failure of opening a SQLite store. */
export type SqliteStoreError = ForeignFile | SchemaTooNew | FileLocked | OpenFailed
