/**
 * The Store port: a revisioned key-value log with etcd semantics (DESIGN §4). Every backend
 * (memory, SQLite, PostgreSQL) implements this contract and passes `StoreContract.suite`.
 *
 * - One store-wide revision counter; each committed mutation takes the next revision, so
 *   revisions are dense and in commit order and `watch(prefix, r)` can never miss an event.
 * - Reads may be pinned to a past revision until compaction discards it.
 * - Values are opaque strings (the API server stores JSON).
 */
import { Context, Effect, Layer, type Stream } from "effect"
import { makeMemory } from "./internal/memoryStore.js"
import type { AlreadyExists, Compacted, Conflict, Expired, NotFound, Unavailable } from "./StoreError.js"

/** One key at one revision. */
export interface KeyValue {
  readonly key: string
  readonly value: string
  /** Revision at which this key was (last) created. */
  readonly createRevision: number
  /** Revision of the mutation that produced this value: the CAS token and the resourceVersion. */
  readonly modRevision: number
  /** Number of writes since the key was created (1 on create). */
  readonly version: number
}

/** What a committed mutation did to its key. */
export type EventType = "ADDED" | "MODIFIED" | "DELETED"

/** One committed mutation, as delivered by `watch`. */
export interface WatchEvent {
  readonly type: EventType
  readonly revision: number
  readonly key: string
  /** The new value; for DELETED, the value the key held when it was deleted. */
  readonly value: string
  /** The value before this mutation; `undefined` for ADDED. */
  readonly prevValue: string | undefined
  readonly createRevision: number
  readonly version: number
}

/** Options of `list`. */
export interface ListOptions {
  /** At most this many items (0 or absent: all). */
  readonly limit?: number
  /** Token from a previous page; pins the page to that page's revision. */
  readonly continue?: string
  /** Read at this past revision (0 or absent: the current one). Ignored with `continue`. */
  readonly atRevision?: number
}

/** A consistent page of a prefix at one revision. */
export interface ListResult {
  readonly items: ReadonlyArray<KeyValue>
  /** The revision the page was read at. */
  readonly revision: number
  /** Present when more items follow; pass it back to read the next page at the same revision. */
  readonly continue: string | undefined
  /** How many items follow this page (exact), when `continue` is present. */
  readonly remaining: number
}

/** A mutation inside `txn`. `check` asserts a key's revision without writing (fencing). */
export type TxnOp =
  | { readonly op: "create"; readonly key: string; readonly value: string }
  | { readonly op: "update"; readonly key: string; readonly value: string; readonly expectedRevision: number }
  | { readonly op: "delete"; readonly key: string; readonly expectedRevision?: number }
  | { readonly op: "check"; readonly key: string; readonly expectedRevision: number }

/** The outcome of one `TxnOp`: the written key (for delete, its last value) and its new revision. */
export interface TxnResult {
  readonly op: TxnOp["op"]
  readonly revision: number
  readonly kv: KeyValue | undefined
}

/** The result of a delete: the revision of the deletion and the value that was removed. */
export interface Deleted {
  readonly revision: number
  readonly prev: KeyValue
}

/** The Store service. */
export interface StoreService {
  /** The newest committed revision (0 for an empty store). */
  readonly currentRevision: Effect.Effect<number, Unavailable>
  /** The compaction horizon: reads and watches older than this fail with `Compacted`. */
  readonly compactRevision: Effect.Effect<number, Unavailable>
  /** The current value of a key. */
  readonly get: (key: string) => Effect.Effect<KeyValue, NotFound | Unavailable>
  /** Keys starting with `prefix`, ascending, as one consistent snapshot across pages. */
  readonly list: (
    prefix: string,
    options?: ListOptions
  ) => Effect.Effect<ListResult, Compacted | Expired | Unavailable>
  /** Number of keys starting with `prefix` at the current revision. */
  readonly count: (prefix: string) => Effect.Effect<number, Unavailable>
  /** Create a key that must not exist. */
  readonly create: (key: string, value: string) => Effect.Effect<KeyValue, AlreadyExists | Unavailable>
  /** Compare-and-swap: write only if the key's `modRevision` is `expectedRevision`. */
  readonly update: (
    key: string,
    value: string,
    expectedRevision: number
  ) => Effect.Effect<KeyValue, NotFound | Conflict | Unavailable>
  /** Delete a key, optionally only at `expectedRevision`. */
  readonly delete: (
    key: string,
    expectedRevision?: number
  ) => Effect.Effect<Deleted, NotFound | Conflict | Unavailable>
  /** All-or-nothing: every op succeeds and commits with consecutive revisions, or none does. */
  readonly txn: (
    ops: ReadonlyArray<TxnOp>
  ) => Effect.Effect<ReadonlyArray<TxnResult>, NotFound | AlreadyExists | Conflict | Unavailable>
  /**
   * Every event on keys under `prefix` with revision > `fromRevision`, in revision order:
   * first the history, then live. Fails with `Compacted` when that history is gone.
   */
  readonly watch: (prefix: string, fromRevision: number) => Stream.Stream<WatchEvent, Compacted | Unavailable>
  /** Discard history older than `revision` (clamped to the current revision). */
  readonly compact: (revision: number) => Effect.Effect<void, Unavailable>
}

/** The Store port. */
export class Store extends Context.Tag("@koder/fleet-core/Store")<Store, StoreService>() {}

/** A fresh in-memory store per build of the layer; its watches end when the layer's scope closes. */
export const layerMemory: Layer.Layer<Store> = Layer.scoped(
  Store,
  Effect.acquireRelease(Effect.sync(makeMemory), (store) => Effect.sync(store.close))
)

/** Build an in-memory store directly (for embedding and tests that manage its lifetime). */
export { makeMemory }
