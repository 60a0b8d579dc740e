/**
 * The in-memory Store: full MVCC history per key until compaction, a sorted key index for
 * prefix scans, and the shared WatchFeed for watchers. It is the reference implementation of
 * the contract and what tests and embedders use when durability does not matter.
 */
import { Effect, Either } from "effect"
import * as ContinueToken from "../ContinueToken.js"
import * as KeyOrder from "../KeyOrder.js"
import type { Deleted, KeyValue, ListOptions, ListResult, StoreService, TxnOp, TxnResult, WatchEvent } from "../Store.js"
import { AlreadyExists, Compacted, Conflict, type Expired, NotFound, Unavailable } from "../StoreError.js"
import * as WatchFeed from "../WatchFeed.js"

/** One version of a key; `value === undefined` is a tombstone. */
interface Version {
  readonly revision: number
  readonly value: string | undefined
  readonly createRevision: number
  readonly version: number
}

const toKeyValue = (key: string, v: Version): KeyValue => ({
  key,
  value: v.value!,
  createRevision: v.createRevision,
  modRevision: v.revision,
  version: v.version
})

/** The newest version at or below `revision`, by binary search. */
const versionAt = (versions: ReadonlyArray<Version>, revision: number): Version | undefined => {
  let lo = 0
  let hi = versions.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (versions[mid]!.revision <= revision) lo = mid + 1
    else hi = mid
  }
  return lo === 0 ? undefined : versions[lo - 1]
}

/** Everything a memory store holds; the functions below read and advance it. */
interface State {
  /** Every key with a version in history, in `KeyOrder`. */
  readonly keys: Array<string>
  readonly versions: Map<string, Array<Version>>
  /** Every event after the compaction horizon, dense: events[i].revision === compactRev + 1 + i. */
  events: Array<WatchEvent>
  revision: number
  compactRev: number
  closed: boolean
}

// Writes are planned against an overlay first, so a txn that fails part-way changes nothing.
type Planned = { key: string; next: Version; prev: Version | undefined }
type PlanError = NotFound | AlreadyExists | Conflict

const unavailable = () => new Unavailable({ reason: "store closed", retryable: false })

/** Run `f` unless the store is closed. */
const guard = <A, E>(state: State, f: () => Effect.Effect<A, E>): Effect.Effect<A, E | Unavailable> =>
  Effect.suspend((): Effect.Effect<A, E | Unavailable> => (state.closed ? Effect.fail(unavailable()) : f()))

/** The live (non-tombstone) newest version of a key. */
const current = (state: State, key: string): Version | undefined => {
  const vs = state.versions.get(key)
  const v = vs?.[vs.length - 1]
  return v?.value === undefined ? undefined : v
}

/** The watch history: the events in (after, upTo] under `prefix`, at most `limit`. */
const readEvents = (state: State, prefix: string, after: number, upTo: number, limit: number) =>
  Effect.suspend(() => {
    if (after < state.compactRev) {
      return Effect.fail(new Compacted({ requestedRevision: after, compactRevision: state.compactRev }))
    }
    const out: Array<WatchEvent> = []
    for (let r = after + 1; r <= upTo && out.length < limit; r++) {
      const event = state.events[r - state.compactRev - 1]!
      if (event.key.startsWith(prefix)) out.push(event)
    }
    return Effect.succeed(out)
  })

/** Check a txn's ops against the current state and lay out its versions and results. */
const plan = (
  state: State,
  ops: ReadonlyArray<TxnOp>
): Either.Either<{ writes: Array<Planned>; results: Array<TxnResult> }, PlanError> => {
  const overlay = new Map<string, Version | undefined>()
  const look = (key: string) => (overlay.has(key) ? overlay.get(key) : current(state, key))
  const writes: Array<Planned> = []
  const results: Array<TxnResult> = []
  let next = state.revision
  for (const op of ops) {
    const prev = look(op.key)
    switch (op.op) {
      case "create": {
        if (prev) return Either.left(new AlreadyExists({ key: op.key, currentRevision: prev.revision }))
        const v: Version = { revision: ++next, value: op.value, createRevision: next, version: 1 }
        writes.push({ key: op.key, next: v, prev })
        overlay.set(op.key, v)
        results.push({ op: op.op, revision: v.revision, kv: toKeyValue(op.key, v) })
        break
      }
      case "update": {
        if (!prev) return Either.left(new NotFound({ key: op.key }))
        if (prev.revision !== op.expectedRevision) {
          return Either.left(new Conflict({ key: op.key, expectedRevision: op.expectedRevision, currentRevision: prev.revision }))
        }
        const v: Version = { revision: ++next, value: op.value, createRevision: prev.createRevision, version: prev.version + 1 }
        writes.push({ key: op.key, next: v, prev })
        overlay.set(op.key, v)
        results.push({ op: op.op, revision: v.revision, kv: toKeyValue(op.key, v) })
        break
      }
      case "delete": {
        if (!prev) return Either.left(new NotFound({ key: op.key }))
        if (op.expectedRevision !== undefined && prev.revision !== op.expectedRevision) {
          return Either.left(new Conflict({ key: op.key, expectedRevision: op.expectedRevision, currentRevision: prev.revision }))
        }
        const v: Version = { revision: ++next, value: undefined, createRevision: prev.createRevision, version: prev.version + 1 }
        writes.push({ key: op.key, next: v, prev })
        overlay.set(op.key, undefined)
        results.push({ op: op.op, revision: v.revision, kv: toKeyValue(op.key, prev) })
        break
      }
      case "check": {
        const at = prev?.revision ?? 0
        if (at !== op.expectedRevision) {
          return Either.left(new Conflict({ key: op.key, expectedRevision: op.expectedRevision, currentRevision: at }))
        }
        results.push({ op: op.op, revision: at, kv: prev ? toKeyValue(op.key, prev) : undefined })
        break
      }
    }
  }
  return Either.right({ writes, results })
}

/** Apply planned writes to history and publish their events. */
const commit = (state: State, feed: WatchFeed.WatchFeed, writes: ReadonlyArray<Planned>) => {
  const published: Array<WatchEvent> = []
  for (const { key, next, prev } of writes) {
    let vs = state.versions.get(key)
    if (!vs) {
      vs = []
      state.versions.set(key, vs)
      state.keys.splice(KeyOrder.lowerBound(state.keys, key), 0, key)
    }
    vs.push(next)
    state.revision = next.revision
    const event: WatchEvent =
      next.value === undefined
        ? { type: "DELETED", revision: next.revision, key, value: prev!.value!, prevValue: prev!.value, createRevision: next.createRevision, version: next.version }
        : {
            type: prev ? "MODIFIED" : "ADDED",
            revision: next.revision,
            key,
            value: next.value,
            prevValue: prev?.value,
            createRevision: next.createRevision,
            version: next.version
          }
    state.events.push(event)
    published.push(event)
  }
  feed.publish(published)
}

/** One page of the keys under `prefix` at a revision (or a continue token's). */
const list = (state: State, prefix: string, options: ListOptions): Effect.Effect<ListResult, Compacted | Expired> => {
  const { keys, compactRev } = state
  let at = options.atRevision && options.atRevision > 0 ? Math.min(options.atRevision, state.revision) : state.revision
  let start = KeyOrder.lowerBound(keys, prefix)
  if (options.continue !== undefined) {
    const token = ContinueToken.decode(options.continue)
    if (Either.isLeft(token)) return Effect.fail(token.left)
    if (token.right.revision < compactRev) {
      return Effect.fail(ContinueToken.expired(token.right.revision, compactRev))
    }
    at = token.right.revision
    start = Math.max(start, KeyOrder.lowerBound(keys, token.right.after))
    if (keys[start] === token.right.after) start++
  } else if (at < compactRev) {
    return Effect.fail(new Compacted({ requestedRevision: at, compactRevision: compactRev }))
  }
  const limit = options.limit && options.limit > 0 ? options.limit : Infinity
  const items: Array<KeyValue> = []
  let remaining = 0
  for (let i = start; i < keys.length; i++) {
    const key = keys[i]!
    if (!key.startsWith(prefix)) break
    const v = versionAt(state.versions.get(key)!, at)
    if (v?.value === undefined) continue
    if (items.length < limit) items.push(toKeyValue(key, v))
    else remaining++
  }
  const last = items[items.length - 1]
  return Effect.succeed({
    items,
    revision: at,
    continue: remaining > 0 && last ? ContinueToken.encode({ revision: at, after: last.key }) : undefined,
    remaining
  })
}

/** The live keys under `prefix`. */
const count = (state: State, prefix: string): number => {
  const { keys } = state
  let n = 0
  for (let i = KeyOrder.lowerBound(keys, prefix); i < keys.length && keys[i]!.startsWith(prefix); i++) {
    if (current(state, keys[i]!)) n++
  }
  return n
}

/** Drop history at or below `target` (clamped to the head), keeping each key's state there. */
const compact = (state: State, target: number): void => {
  const { keys, versions } = state
  const to = Math.min(target, state.revision)
  if (to <= state.compactRev) return
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    const vs = versions.get(key)!
    // Keep the newest version at or below the horizon (unless it is a tombstone) and all after.
    let newestOld = -1
    while (newestOld + 1 < vs.length && vs[newestOld + 1]!.revision <= to) newestOld++
    if (newestOld < 0) continue
    const keepFrom = vs[newestOld]!.value === undefined ? newestOld + 1 : newestOld
    if (keepFrom > 0) vs.splice(0, keepFrom)
    if (vs.length === 0) {
      versions.delete(key)
      keys.splice(i, 1)
      i--
    }
  }
  state.events = state.events.slice(to - state.compactRev)
  state.compactRev = to
}

/** Build a memory store; `close` ends its watches. */
export const makeMemory = (): StoreService & { readonly close: () => void } => {
  const state: State = { keys: [], versions: new Map(), events: [], revision: 0, compactRev: 0, closed: false }

  const feed = WatchFeed.make(
    {
      compactRevision: Effect.sync(() => state.compactRev),
      readEvents: (prefix, after, upTo, limit) => readEvents(state, prefix, after, upTo, limit)
    },
    // Every event stays in `events` until compaction, so the ring only needs to cover the live tail.
    { initialRevision: 0, ringEvents: 4_096 }
  )

  const txn: StoreService["txn"] = (ops) =>
    guard(state, () =>
      Either.match(plan(state, ops), {
        onLeft: (e) => Effect.fail(e),
        onRight: ({ results, writes }) => {
          commit(state, feed, writes)
          return Effect.succeed(results)
        }
      })
    )

  const single = <E>(op: TxnOp) =>
    Effect.map(txn([op]) as Effect.Effect<ReadonlyArray<TxnResult>, E | Unavailable>, (rs) => rs[0]!)

  return {
    currentRevision: guard(state, () => Effect.succeed(state.revision)),
    compactRevision: guard(state, () => Effect.succeed(state.compactRev)),
    get: (key) =>
      guard(state, () => {
        const v = current(state, key)
        return v ? Effect.succeed(toKeyValue(key, v)) : Effect.fail(new NotFound({ key }))
      }),
    list: (prefix, options = {}) => guard(state, () => list(state, prefix, options)),
    count: (prefix) => guard(state, () => Effect.sync(() => count(state, prefix))),
    create: (key, value) => Effect.map(single<AlreadyExists>({ op: "create", key, value }), (r) => r.kv!),
    update: (key, value, expectedRevision) =>
      Effect.map(single<NotFound | Conflict>({ op: "update", key, value, expectedRevision }), (r) => r.kv!),
    delete: (key, expectedRevision) =>
      Effect.map(
        single<NotFound | Conflict>(expectedRevision === undefined ? { op: "delete", key } : { op: "delete", key, expectedRevision }),
        (r): Deleted => ({ revision: r.revision, prev: r.kv! })
      ),
    txn,
    watch: (prefix, fromRevision) => feed.watch(prefix, fromRevision),
    compact: (target) => guard(state, () => Effect.sync(() => compact(state, target))),
    close: () => {
      state.closed = true
      feed.close("store closed")
    }
  }
}
