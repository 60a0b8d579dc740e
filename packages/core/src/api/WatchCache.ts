/**
 * The watch cache (DESIGN §4): one per resource, it holds the current objects and a ring of
 * recent changes in memory, fed by ONE store watch for its lifetime, so lists and thousands of
 * watchers are served without touching the store. Watchers filter like kube-apiserver's
 * cacher (an object leaving a selector is DELETED, one entering it is ADDED); a watcher that
 * falls `watcherBuffer` events behind, or asks for history older than the ring, gets one
 * 410 ERROR event and its stream ends, so clients re-list and memory stays bounded.
 *
 *   store.list ─▶ snapshot ─┐
 *   store.watch(prefix, r) ─┴▶ state (objects, ring, watchers) ─▶ list(filter)
 *        ▲ Compacted: re-list, close watchers with 410              watch(filter, from) ─▶ Stream
 *        └ Unavailable: resume from the last applied revision       waitFor(revision)
 */
import { Channel, Chunk, Duration, Effect, type Scope, Stream } from "effect"
import * as Status from "../model/Status.js"
import type { KeyValue } from "../store/Store.js"
import { Store, type StoreService } from "../store/Store.js"
import type { Compacted, Expired, Unavailable } from "../store/StoreError.js"
import * as ApiError from "./ApiError.js"
import type * as FieldSelector from "./FieldSelector.js"
import { type Filter, type OutEvent, type Snapshot, type Watcher, WatchCacheState } from "./internal/watchCacheState.js"

/** One watch event: `{type, object}` as kube-apiserver streams it; ERROR carries a 410 Status. */
export type WatchCacheEvent = OutEvent

/** What a list or watch selects: a namespace, a compiled label selector, a compiled field selector. */
export type { Filter }

/** How to build a cache. */
export interface Options {
  /** The resource's key prefix, e.g. `Keys.prefix("", "pods")`. */
  readonly prefix: string
  /**
   * Parse a stored value once into the object served, with `metadata.resourceVersion` set to
   * `String(revision)`. Must not throw (a value it throws on is kept out of the cache).
   */
  readonly decode: (key: string, value: string, revision: number) => object
  /** The selectable fields of an object (`FieldSelector.extractor(kind)`). */
  readonly fields: (object: object) => FieldSelector.Fields
  /** Changes kept for watch resumption (default 10,000). */
  readonly ringEvents?: number
  /** Events queued per watcher before it is cut off with 410 (default 1,000). */
  readonly watcherBuffer?: number
  /** How often watchers that allow bookmarks get one (default 1 minute). */
  readonly bookmarkInterval?: Duration.DurationInput
  /** `kind` and `apiVersion` put on BOOKMARK objects (omitted when absent). */
  readonly kind?: string
  readonly apiVersion?: string
  /** How errors name the resource (default: the prefix). */
  readonly resource?: Status.GroupResource
  /** Items per store page when listing (default 5,000). */
  readonly listPage?: number
}

/** Options of `list`. */
export interface ListOptions {
  /** At most this many items (0 or absent: all). */
  readonly limit?: number
  /** Only keys after this one (exclusive), e.g. the `lastKey` of a continue token. */
  readonly after?: string
}

/** A list served from memory. */
export interface ListResult {
  /** Matching objects in key order. Shared with the cache: never mutate them. */
  readonly items: ReadonlyArray<object>
  /** The revision the whole list is consistent at. */
  readonly revision: number
  /** With `limit`, the key of the last item when more matching items follow. */
  readonly lastKey: string | undefined
  /** How many matching items follow this page. */
  readonly remaining: number
}

/** Options of `watch`. */
export interface WatchOptions {
  /** Send periodic BOOKMARK events (`allowWatchBookmarks`). */
  readonly bookmarks: boolean
  /** Start with a synthetic ADDED per matching object (watch with resourceVersion unset or "0"). */
  readonly initialEvents?: boolean
  /** After the initial events, send a BOOKMARK annotated `k8s.io/initial-events-end` (`sendInitialEvents`). */
  readonly initialEventsEndBookmark?: boolean
}

/** A registered watcher, consumed by calling `take` in a loop. */
export interface Subscription {
  /**
   * The next events (at least one), waiting while none are queued; `undefined` once the watch
   * has ended (after an ERROR event, or when the cache shuts down).
   */
  readonly take: Effect.Effect<ReadonlyArray<WatchCacheEvent> | undefined>
}

/** A running watch cache. */
export interface WatchCache {
  readonly prefix: string
  /** The revision the cached state is consistent at (the newest applied, or confirmed). */
  readonly revision: () => number
  /**
   * Wait until the cache is consistent at `revision` or later; 504 with kube-apiserver's
   * `Too large resource version: X, current: Y` after `timeout`.
   */
  readonly waitFor: (revision: number, timeout: Duration.DurationInput) => Effect.Effect<void, ApiError.ApiError>
  /** Matching objects from memory, at `revision()`: one synchronous, consistent read. */
  readonly list: (filter: Filter, options?: ListOptions) => ListResult
  /**
   * Changes after `fromRevision` (or the current objects first, with `initialEvents`), filtered.
   * Never fails: a too-old revision, a watcher too slow or a store gap yields one ERROR event
   * (410 Status) and the stream ends.
   */
  readonly watch: (filter: Filter, fromRevision: number, options: WatchOptions) => Stream.Stream<WatchCacheEvent>
  /**
   * The same watch without Stream machinery, for the hot path (the HTTP layer writing 1,000
   * watch responses): `take` costs a few microseconds per wake-up where a Stream pull costs
   * tens. The watcher is registered until the scope closes.
   */
  readonly subscribe: (filter: Filter, fromRevision: number, options: WatchOptions) => Effect.Effect<Subscription, never, Scope.Scope>
  /**
   * The ADDED events a watch with `initialEvents` would start with now: the same shared event
   * objects (and so the same encoded lines) its watcher will get while this array is held.
   */
  readonly initialEvents: (filter: Filter) => ReadonlyArray<WatchCacheEvent>
  /** Number of cached objects. */
  readonly size: () => number
  /** Number of open watchers. */
  readonly watchers: () => number
}

const listAll = (
  store: StoreService,
  prefix: string,
  page: number,
  atRevision?: number
): Effect.Effect<Snapshot, Compacted | Expired | Unavailable> =>
  Effect.gen(function* () {
    const first = yield* store.list(prefix, atRevision === undefined ? { limit: page } : { limit: page, atRevision })
    const items: Array<KeyValue> = [...first.items]
    let token = first.continue
    while (token !== undefined) {
      const next = yield* store.list(prefix, { limit: page, continue: token })
      for (const kv of next.items) items.push(kv)
      token = next.continue
    }
    return { revision: first.revision, items }
  })

const backoff = (attempt: number): Duration.Duration => Duration.millis(Math.min(5_000, 50 * 2 ** Math.min(attempt, 10)))

/** Wait until the state changes (an event, snapshot or freshness), or `maxWait` passes. */
const changeOrTimeout = (state: WatchCacheState, maxWait: Duration.Duration): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const cancel = state.onChange(() => resume(Effect.void))
    return Effect.sync(cancel)
  }).pipe(Effect.timeoutOption(maxWait), Effect.asVoid)

const encoded = new WeakMap<WatchCacheEvent, Uint8Array>()
const encodedSse = new WeakMap<WatchCacheEvent, Uint8Array>()
const utf8 = new TextEncoder()

/**
 * The event as one line of a `?watch=true` response (`JSON + "\n"`, UTF-8). Change events, and
 * the ADDED events of initial states (one per object revision), are shared by every watcher that
 * receives them, so each is serialised and encoded once for all of them (with 1,000 watchers,
 * per-watcher encoding was most of a pod event's cost; with 500 watches from resourceVersion 0,
 * per-watcher copies of a namespace's objects took the heap to gigabytes). The bytes live as long
 * as the event: until no watcher holds it.
 */
export const encodeLine = (event: WatchCacheEvent): Uint8Array => {
  let line = encoded.get(event)
  if (line === undefined) {
    line = utf8.encode(`${JSON.stringify(event)}\n`)
    encoded.set(event, line)
  }
  return line
}

/** The event as one Server-Sent Event (`event: TYPE`, `data: JSON`), memoized like `encodeLine`. */
export const encodeSse = (event: WatchCacheEvent): Uint8Array => {
  let frame = encodedSse.get(event)
  if (frame === undefined) {
    frame = utf8.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
    encodedSse.set(event, frame)
  }
  return frame
}

/** The 504 kube-apiserver sends when a resourceVersion is not reached in time. */
export const tooLargeResourceVersion = (requested: number, current: number): Status.Status => {
  const base = Status.timeout(`Too large resource version: ${requested}, current: ${current}`, 1)
  return {
    ...base,
    details: {
      ...base.details,
      causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }]
    }
  }
}

/**
 * Start a cache: list the prefix (all pages at one revision), then follow one store watch
 * from that revision until the scope closes. Fails only if the first list fails.
 */
export const make = (options: Options): Effect.Effect<WatchCache, ApiError.ApiError, Scope.Scope | Store> =>
  Effect.gen(function* () {
    const store = yield* Store
    const { prefix } = options
    const page = Math.max(1, options.listPage ?? 5_000)
    const subject = { resource: options.resource ?? prefix, name: "" }
    const snapshot = yield* listAll(store, prefix, page).pipe(Effect.mapError((e) => ApiError.fromStore(e, subject)))
    const state = new WatchCacheState(
      {
        decode: options.decode,
        fields: options.fields,
        ringEvents: options.ringEvents ?? 10_000,
        watcherBuffer: Math.max(1, options.watcherBuffer ?? 1_000),
        kind: options.kind,
        apiVersion: options.apiVersion
      },
      snapshot
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => state.close()))

    // Follow the store: resume after transient failures, re-list when history is gone.
    let reportedDecodeFailures = 0
    const follow = (attempt: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        let progressed = false
        return store.watch(prefix, state.appliedRevision()).pipe(
          Stream.runForEachChunk((chunk) =>
            Effect.suspend(() => {
              progressed = true
              state.apply(Chunk.toReadonlyArray(chunk))
              if (state.decodeFailures === reportedDecodeFailures) return Effect.void
              reportedDecodeFailures = state.decodeFailures
              return Effect.logWarning(`watch cache ${prefix}: ${reportedDecodeFailures} stored values could not be decoded`)
            })
          ),
          Effect.matchEffect({
            onSuccess: () => Effect.zipRight(Effect.sleep(backoff(progressed ? 0 : attempt)), follow(progressed ? 0 : attempt + 1)),
            onFailure: (error) => {
              if (error._tag === "Compacted") {
                return Effect.logWarning(`watch cache ${prefix}: store history compacted, re-listing`).pipe(
                  Effect.zipRight(Effect.sync(() => state.expireAll(error.compactRevision))),
                  Effect.zipRight(relist(0)),
                  Effect.zipRight(follow(0))
                )
              }
              const next = progressed ? 0 : attempt + 1
              return Effect.logWarning(`watch cache ${prefix}: store watch failed (${error.message}), resuming`).pipe(
                Effect.zipRight(Effect.sleep(backoff(next))),
                Effect.zipRight(follow(next))
              )
            }
          })
        )
      })
    const relist = (attempt: number): Effect.Effect<void> =>
      listAll(store, prefix, page).pipe(
        Effect.matchEffect({
          onSuccess: (fresh) => Effect.sync(() => state.replace(fresh)),
          onFailure: () => Effect.zipRight(Effect.sleep(backoff(attempt)), relist(attempt + 1))
        })
      )
    yield* Effect.forkScoped(follow(0))

    const interval = Duration.decode(options.bookmarkInterval ?? Duration.minutes(1))
    if (Duration.greaterThan(interval, Duration.zero)) {
      yield* Effect.forkScoped(
        Effect.forever(Effect.zipRight(Effect.sleep(interval), Effect.sync(() => state.bookmark())))
      )
    }

    const waitFor = (revision: number, timeout: Duration.DurationInput): Effect.Effect<void, ApiError.ApiError> => {
      if (revision <= state.revision()) return Effect.void
      // The cache sees only its own prefix's events, but revisions are store-wide: a revision
      // written to another resource never arrives here. When the store has passed `revision`
      // and the event has not come, compare the store's snapshot at `revision` with ours.
      const loop = (attempt: number): Effect.Effect<void> =>
        Effect.suspend(() => {
          if (revision <= state.revision()) return Effect.void
          return changeOrTimeout(state, Duration.millis(Math.min(200, 10 * 2 ** attempt))).pipe(
            Effect.zipRight(
              Effect.suspend(() => {
                if (revision <= state.revision()) return Effect.void
                return store.currentRevision.pipe(
                  Effect.flatMap((current) =>
                    current < revision
                      ? Effect.void
                      : listAll(store, prefix, page, revision).pipe(
                          Effect.map((probe) => {
                            if (state.revision() < revision && state.sameAs(probe.items)) state.markFresh(revision)
                          })
                        )
                  ),
                  Effect.ignore
                )
              })
            ),
            Effect.zipRight(loop(attempt + 1))
          )
        })
      return loop(0).pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => ApiError.of(tooLargeResourceVersion(revision, state.revision()))
        })
      )
    }

    const list = (filter: Filter, listOptions?: ListOptions): ListResult =>
      state.list(filter, listOptions?.limit ?? 0, listOptions?.after)

    // The consumer parks here; `apply` queues events synchronously and calls `wake` once. The
    // effects are built once per watcher and reused, so a wake-up allocates almost nothing.
    const parkOf = (w: Watcher): Effect.Effect<void> => {
      const cancel = Effect.sync(() => {
        w.wake = undefined
      })
      return Effect.async<void>((resume) => {
        w.wake = () => resume(Effect.void)
        return cancel
      })
    }
    const takeOf = (w: Watcher): Effect.Effect<ReadonlyArray<WatchCacheEvent> | undefined> => {
      const park = parkOf(w)
      const take: Effect.Effect<ReadonlyArray<WatchCacheEvent> | undefined> = Effect.suspend(() => {
        const events = state.take(w)
        if (events !== undefined) return Effect.succeed(events)
        return w.done ? Effect.succeed(undefined) : parkThenTake
      })
      const parkThenTake = Effect.zipRight(park, take)
      return take
    }
    const register = (filter: Filter, fromRevision: number, watchOptions: WatchOptions) =>
      Effect.acquireRelease(
        Effect.sync(() => state.register(filter, fromRevision, watchOptions)),
        (w) => Effect.sync(() => state.unregister(w))
      )

    const subscribe = (
      filter: Filter,
      fromRevision: number,
      watchOptions: WatchOptions
    ): Effect.Effect<Subscription, never, Scope.Scope> => Effect.map(register(filter, fromRevision, watchOptions), (w) => ({ take: takeOf(w) }))

    // A hand-written channel: per wake-up it costs a fraction of `Stream.repeatEffectChunkOption`.
    const watch = (filter: Filter, fromRevision: number, watchOptions: WatchOptions): Stream.Stream<WatchCacheEvent> =>
      Stream.unwrapScoped(
        Effect.map(register(filter, fromRevision, watchOptions), (w) => {
          const park = Channel.fromEffect(parkOf(w))
          const loop: Channel.Channel<Chunk.Chunk<WatchCacheEvent>> = Channel.suspend(() => {
            const events = state.take(w)
            if (events !== undefined) return Channel.zipRight(Channel.write(Chunk.unsafeFromArray(events)), loop)
            return w.done ? Channel.void : parkThenLoop
          })
          const parkThenLoop = Channel.zipRight(park, loop)
          return Stream.fromChannel(loop)
        })
      )

    return {
      prefix,
      revision: () => state.revision(),
      waitFor,
      list,
      watch,
      subscribe,
      initialEvents: (filter) => state.initialEvents(filter),
      size: () => state.size(),
      watchers: () => state.watcherCount()
    }
  })
