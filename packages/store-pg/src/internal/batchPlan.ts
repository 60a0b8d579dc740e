/**
 * The checks of a group commit batch, in JavaScript: each mutation, in queue order, against the
 * newest rows as of the counter lock plus the writes of the mutations before it. A mutation that
 * fails its checks is rejected on its own and takes no revision; the rest are laid out as the
 * rows to insert, the watch events and the callers' results.
 */
import { StoreError, type Store } from "@koder/fleet-core"

/** Why one mutation was rejected (its own fault; other mutations in the batch are unaffected). */
export type Rejection = StoreError.NotFound | StoreError.AlreadyExists | StoreError.Conflict

/** What a caller receives: its results, or why it failed. */
export type Outcome = ReadonlyArray<Store.TxnResult> | Rejection | StoreError.Unavailable

/** Tell a rejection or failure from results. */
export const isFailure = (outcome: Outcome): outcome is Rejection | StoreError.Unavailable => "_tag" in outcome

/** A queued mutation: one op or a txn's ops, its approximate size, and its caller. */
export interface Pending {
  readonly ops: ReadonlyArray<Store.TxnOp>
  readonly bytes: number
  readonly resume: (outcome: Outcome) => void
}

/** The newest row of a key; `value` null is a tombstone. */
export interface Head {
  readonly revision: number
  readonly value: string | null
  readonly createRevision: number
  readonly version: number
}

/** The columns of the rows a batch inserts. */
export interface Rows {
  readonly r: Array<number>
  readonly k: Array<string>
  readonly v: Array<string | null>
  readonly c: Array<number>
  readonly p: Array<number>
  readonly n: Array<number>
}

/** A checked batch: its head revision, rows, events, one outcome per mutation, and how many passed. */
export interface Plan {
  readonly next: number
  readonly rows: Rows
  readonly events: Array<Store.WatchEvent>
  readonly outcomes: Array<Outcome>
  readonly ok: number
}

/** A KeyValue from its parts. */
const kv = (key: string, value: string, createRevision: number, modRevision: number, version: number): Store.KeyValue => ({
  key,
  value,
  createRevision,
  modRevision,
  version
})

/** Check a batch, in queue order, against the newest rows and lay out its rows and events. */
export const plan = (batch: ReadonlyArray<Pending>, heads: Map<string, Head | undefined>, base: number): Plan => {
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
