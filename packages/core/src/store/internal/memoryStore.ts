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

/** Build a memory store; `close` ends its watches. */
export const makeMemory = (): StoreService & { readonly close: () => void } => {
  const keys: Array<string> = []
  const versions = new Map<string, Array<Version>>()
  // Every event after the compaction horizon, dense: events[i].revision === compactRev + 1 + i.
  let events: Array<WatchEvent> = []
  let revision = 0
  let compactRev = 0
  let closed = false

  const unavailable = () => new Unavailable({ reason: "store closed", retryable: false })

  const feed = WatchFeed.make(
    {
      compactRevision: Effect.sync(() => compactRev),
      readEvents: (prefix, after, upTo, limit) =>
        Effect.suspend(() => {
          if (after < compactRev) {
            return Effect.fail(new Compacted({ requestedRevision: after, compactRevision: compactRev }))
          }
          const out: Array<WatchEvent> = []
          for (let r = after + 1; r <= upTo && out.length < limit; r++) {
            const event = events[r - compactRev - 1]!
            if (event.key.startsWith(prefix)) out.push(event)
          }
          return Effect.succeed(out)
        })
    },
    // Every event stays in `events` until compaction, so the ring only needs to cover the live tail.
    { initialRevision: 0, ringEvents: 4_096 }
  )

  const current = (key: string): Version | undefined => {
    const vs = versions.get(key)
    const v = vs?.[vs.length - 1]
    return v?.value === undefined ? undefined : v
  }

  const guard = <A, E>(f: () => Effect.Effect<A, E>): Effect.Effect<A, E | Unavailable> =>
    Effect.suspend((): Effect.Effect<A, E | Unavailable> => (closed ? Effect.fail(unavailable()) : f()))

  // Writes are planned against an overlay first, so a txn that fails part-way changes nothing.
  type Planned = { key: string; next: Version; prev: Version | undefined }
  type PlanError = NotFound | AlreadyExists | Conflict

  const plan = (ops: ReadonlyArray<TxnOp>): Either.Either<{ writes: Array<Planned>; results: Array<TxnResult> }, PlanError> => {
    const overlay = new Map<string, Version | undefined>()
    const look = (key: string) => (overlay.has(key) ? overlay.get(key) : current(key))
    const writes: Array<Planned> = []
    const results: Array<TxnResult> = []
    let next = revision
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

  const commit = (writes: ReadonlyArray<Planned>) => {
    const published: Array<WatchEvent> = []
    for (const { key, next, prev } of writes) {
      let vs = versions.get(key)
      if (!vs) {
        vs = []
        versions.set(key, vs)
        keys.splice(KeyOrder.lowerBound(keys, key), 0, key)
      }
      vs.push(next)
      revision = next.revision
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
      events.push(event)
      published.push(event)
    }
    feed.publish(published)
  }

  const txn: StoreService["txn"] = (ops) =>
    guard(() =>
      Either.match(plan(ops), {
        onLeft: (e) => Effect.fail(e),
        onRight: ({ results, writes }) => {
          commit(writes)
          return Effect.succeed(results)
        }
      })
    )

  const single = <E>(op: TxnOp) =>
    Effect.map(txn([op]) as Effect.Effect<ReadonlyArray<TxnResult>, E | Unavailable>, (rs) => rs[0]!)

  const list = (prefix: string, options: ListOptions = {}): Effect.Effect<ListResult, Compacted | Expired | Unavailable> =>
    guard((): Effect.Effect<ListResult, Compacted | Expired> => {
      let at = options.atRevision && options.atRevision > 0 ? Math.min(options.atRevision, revision) : revision
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
        const v = versionAt(versions.get(key)!, at)
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
    })

  const compact = (target: number) =>
    guard(() =>
      Effect.sync(() => {
        const to = Math.min(target, revision)
        if (to <= compactRev) return
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
        events = events.slice(to - compactRev)
        compactRev = to
      })
    )

  return {
    currentRevision: guard(() => Effect.succeed(revision)),
    compactRevision: guard(() => Effect.succeed(compactRev)),
    get: (key) =>
      guard(() => {
        const v = current(key)
        return v ? Effect.succeed(toKeyValue(key, v)) : Effect.fail(new NotFound({ key }))
      }),
    list,
    count: (prefix) =>
      guard(() =>
        Effect.sync(() => {
          let n = 0
          for (let i = KeyOrder.lowerBound(keys, prefix); i < keys.length && keys[i]!.startsWith(prefix); i++) {
            if (current(keys[i]!)) n++
          }
          return n
        })
      ),
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
    compact,
    close: () => {
      closed = true
      feed.close("store closed")
    }
  }
}
