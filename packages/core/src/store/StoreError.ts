/**
 * The typed failures of the Store port (DESIGN §4). The API server maps each to a Kubernetes
 * `Status` (404, 409, 409, 410, 410, 503); every backend fails with exactly these.
 */
import { Data } from "effect"

/** The key does not exist (or is deleted) at the revision read. */
export class NotFound extends Data.TaggedError("NotFound")<{
  readonly key: string
}> {
  override get message() {
    return `key ${JSON.stringify(this.key)} not found`
  }
}

/** `create` found the key already present. */
export class AlreadyExists extends Data.TaggedError("AlreadyExists")<{
  readonly key: string
  readonly currentRevision: number
}> {
  override get message() {
    return `key ${JSON.stringify(this.key)} already exists (revision ${this.currentRevision})`
  }
}

/**
 * A compare-and-swap lost: the key's modification revision is not the one expected.
 * `currentRevision` is the key's revision now (0 when the key is absent).
 */
export class Conflict extends Data.TaggedError("Conflict")<{
  readonly key: string
  readonly expectedRevision: number
  readonly currentRevision: number
}> {
  override get message() {
    return `key ${JSON.stringify(this.key)} is at revision ${this.currentRevision}, not ${this.expectedRevision}`
  }
}

/** The revision asked for is older than the compaction horizon; re-list from the current state. */
export class Compacted extends Data.TaggedError("Compacted")<{
  readonly requestedRevision: number
  readonly compactRevision: number
}> {
  override get message() {
    return `revision ${this.requestedRevision} has been compacted (oldest available: ${this.compactRevision})`
  }
}

/** A `continue` token is malformed or pins a revision that has since been compacted. */
export class Expired extends Data.TaggedError("Expired")<{
  readonly reason: string
}> {
  override get message() {
    return `continue token expired or invalid: ${this.reason}`
  }
}

/**
 * The backend could not be reached or failed (I/O error, connection lost, closed store).
 * `retryable` says whether the same request may succeed later without change.
 */
export class Unavailable extends Data.TaggedError("Unavailable")<{
  readonly reason: string
  readonly retryable: boolean
}> {
  override get message() {
    return `store unavailable: ${this.reason}`
  }
}

/** Any failure a Store operation can produce. */
export type StoreError = NotFound | AlreadyExists | Conflict | Compacted | Expired | Unavailable
