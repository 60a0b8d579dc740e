/**
 * The synchronous heart of the watch cache: the current objects of one resource, a ring of
 * recent changes, and the registered watchers with their bounded queues. Everything here is
 * plain TypeScript with no awaits, so each store event is applied, and fanned out to every
 * watcher, atomically; the Effect edges (store watch, timers, Streams) live in `WatchCache.ts`.
 *
 *   store event ──apply──▶ objects (key → Entry)      list(filter) reads here
 *                   │
 *                   ├────▶ ring of Changes           watch(from) replays from here
 *                   └────▶ watcher.queue (+ wake)    one shared output event per change & type
 */
import type * as LabelSelector from "../../model/LabelSelector.js"
import * as Status from "../../model/Status.js"
import * as KeyOrder from "../../store/KeyOrder.js"
import type { KeyValue, WatchEvent } from "../../store/Store.js"
import type * as FieldSelector from "../FieldSelector.js"

/** One event delivered to a watcher, in kube-apiserver's watch shape. */
export type OutEvent =
  | { readonly type: "ADDED" | "MODIFIED" | "DELETED"; readonly object: object }
  | { readonly type: "BOOKMARK"; readonly object: object }
  | { readonly type: "ERROR"; readonly object: Status.Status }

/** What a watcher or a list selects. */
export interface Filter {
  readonly namespace?: string | undefined
  readonly label?: LabelSelector.Matcher | undefined
  readonly field?: FieldSelector.Matcher | undefined
}

/** One cached object with what filters need, computed once when it is stored. */
interface Entry {
  readonly key: string
  readonly object: object
  readonly revision: number
  readonly namespace: string
  readonly labels: Readonly<Record<string, string>> | undefined
  readonly fields: FieldSelector.Fields
  /**
   * This revision's ADDED event, shared by every watcher whose initial state holds it (and so its
   * serialised line, memoized per event in `WatchCache.encodeLine`). Held weakly: once no
   * watcher's queue or unsent batch holds it, the event and its bytes are garbage.
   */
  added: WeakRef<OutEvent> | undefined
}

/** The entry's ADDED event: the one still alive if any watcher holds it, else a new one. */
const addedOf = (e: Entry): OutEvent => {
  let event = e.added?.deref()
  if (event === undefined) {
    event = { type: "ADDED", object: e.object }
    e.added = new WeakRef(event)
  }
  return event
}

/** One applied store event: the new entry (for DELETED, the last state) and the one it replaced. */
class Change {
  private added: OutEvent | undefined
  private modified: OutEvent | undefined
  private deleted: OutEvent | undefined
  constructor(
    readonly type: "ADDED" | "MODIFIED" | "DELETED",
    readonly revision: number,
    readonly cur: Entry,
    readonly prev: Entry | undefined
  ) {}

  // Output events are built once per change and shared by every watcher that receives them.
  asAdded(): OutEvent {
    return (this.added ??= addedOf(this.cur))
  }
  asModified(): OutEvent {
    return (this.modified ??= { type: "MODIFIED", object: this.cur.object })
  }
  asDeleted(): OutEvent {
    if (this.deleted !== undefined) return this.deleted
    // An object that stopped matching is deleted for this watcher. Like kube-apiserver's cacher,
    // send the state the watcher last matched, stamped with this event's resourceVersion.
    const object = this.type === "DELETED" || this.prev === undefined ? this.cur.object : withResourceVersion(this.prev.object, this.revision)
    return (this.deleted = { type: "DELETED", object })
  }
}

const withResourceVersion = (object: object, revision: number): object => {
  const o = object as { readonly metadata?: object }
  return { ...o, metadata: { ...(o.metadata ?? {}), resourceVersion: String(revision) } }
}

const matchesEntry = (filter: Filter, e: Entry): boolean =>
  (filter.namespace === undefined || filter.namespace === e.namespace) &&
  (filter.label === undefined || filter.label(e.labels)) &&
  (filter.field === undefined || filter.field(e.fields))

// kube-apiserver's cacher semantics: what a change looks like through a watcher's filter.
const transition = (filter: Filter, c: Change): OutEvent | undefined => {
  const curOk = c.type !== "DELETED" && matchesEntry(filter, c.cur)
  const prevOk = c.prev !== undefined && matchesEntry(filter, c.prev)
  if (curOk) return prevOk ? c.asModified() : c.asAdded()
  return prevOk ? c.asDeleted() : undefined
}

/** A registered watcher: a bounded queue its stream drains, and a wake-up for its consumer. */
export interface Watcher {
  readonly filter: Filter
  readonly bookmarks: boolean
  /** Changes at or below this revision are not for this watcher (already delivered or in its start state). */
  position: number
  queue: Array<OutEvent>
  /**
   * Queued events not counted against the buffer, until the next drain: the initial batch, and
   * any batch that arrived while the consumer was parked waiting (it had kept up).
   */
  allowance: number
  /** The fan-out batch during which the consumer was found parked. */
  exemptBatch: number
  /** No more events will be queued: drain the queue, then end. */
  done: boolean
  /** Set by a waiting consumer; called (once) when the queue gains an event or the watcher ends. */
  wake: (() => void) | undefined
}

/** What the state needs from its owner. */
export interface StateOptions {
  readonly decode: (key: string, value: string, revision: number) => object
  readonly fields: (object: object) => FieldSelector.Fields
  readonly ringEvents: number
  readonly watcherBuffer: number
  readonly kind?: string | undefined
  readonly apiVersion?: string | undefined
}

/** A consistent snapshot of the resource read from the store. */
export interface Snapshot {
  readonly revision: number
  readonly items: ReadonlyArray<KeyValue>
}

/** Watch start options (see `WatchCache.WatchOptions`). */
export interface RegisterOptions {
  readonly bookmarks: boolean
  readonly initialEvents?: boolean | undefined
  readonly initialEventsEndBookmark?: boolean | undefined
}

const emptyLabels: Readonly<Record<string, string>> | undefined = undefined

/** The watch cache's state; every method is synchronous. */
export class WatchCacheState {
  private readonly objects = new Map<string, Entry>()
  private sortedKeys: Array<string> | undefined = undefined
  private readonly ring: Array<Change | undefined>
  private ringHead = 0
  private ringSize = 0
  /** Watching from a revision below this needs history the cache no longer has. */
  private horizon: number
  /** The revision of the newest store event applied (or of the last snapshot). */
  private applied: number
  /** The revision the cached state is known to equal the store's at (≥ applied). */
  private fresh: number
  private readonly active = new Set<Watcher>()
  private changeWaiters: Array<() => void> = []
  /** Counts fan-out batches (one per `apply` or `bookmark`), for the parked-consumer exemption. */
  private batch = 0
  private closed = false
  /** Values the decoder rejected (kept out of the cache); for metrics and logs. */
  decodeFailures = 0

  constructor(
    private readonly options: StateOptions,
    snapshot: Snapshot
  ) {
    this.ring = new Array<Change | undefined>(Math.max(1, options.ringEvents))
    this.horizon = snapshot.revision
    this.applied = snapshot.revision
    this.fresh = snapshot.revision
    this.load(snapshot)
  }

  // ---- reads ---------------------------------------------------------------------------------

  /** The revision the cached state is consistent at. */
  revision(): number {
    return Math.max(this.applied, this.fresh)
  }

  /** The revision of the newest store event applied; the store watch resumes after it. */
  appliedRevision(): number {
    return this.applied
  }

  size(): number {
    return this.objects.size
  }

  watcherCount(): number {
    return this.active.size
  }

  /**
   * Matching objects in key order, at `revision()`: at most `limit` (0: all) of those after
   * key `after`, with the last key returned and how many matching items follow.
   */
  list(
    filter: Filter,
    limit: number,
    after: string | undefined
  ): { items: Array<object>; revision: number; lastKey: string | undefined; remaining: number } {
    const keys = this.keys()
    const items: Array<object> = []
    let lastKey: string | undefined
    let remaining = 0
    let i = 0
    if (after !== undefined) {
      i = KeyOrder.lowerBound(keys, after)
      if (keys[i] === after) i++
    }
    for (; i < keys.length; i++) {
      const e = this.objects.get(keys[i]!)!
      if (!matchesEntry(filter, e)) continue
      if (limit > 0 && items.length >= limit) remaining++
      else {
        items.push(e.object)
        lastKey = e.key
      }
    }
    return { items, revision: this.revision(), lastKey: remaining > 0 ? lastKey : undefined, remaining }
  }

  /**
   * The ADDED events of a watch's initial state, in key order. Each is shared by every watcher
   * that starts while another still holds it, so N watchers of one namespace cost one copy of
   * its serialisation, not N.
   */
  initialEvents(filter: Filter): Array<OutEvent> {
    const out: Array<OutEvent> = []
    for (const key of this.keys()) {
      const e = this.objects.get(key)!
      if (matchesEntry(filter, e)) out.push(addedOf(e))
    }
    return out
  }

  private keys(): ReadonlyArray<string> {
    // Rebuilt only after a key was added or removed; updates keep the order.
    return (this.sortedKeys ??= [...this.objects.keys()].sort(KeyOrder.compare))
  }

  // ---- the store side ------------------------------------------------------------------------

  private entry(key: string, value: string, revision: number): Entry | undefined {
    let object: object
    try {
      object = this.options.decode(key, value, revision)
    } catch {
      this.decodeFailures++
      return undefined
    }
    const meta = (object as { readonly metadata?: { readonly namespace?: unknown; readonly labels?: unknown } }).metadata
    const labels = meta?.labels
    return {
      key,
      object,
      revision,
      namespace: typeof meta?.namespace === "string" ? meta.namespace : "",
      labels: typeof labels === "object" && labels !== null ? (labels as Record<string, string>) : emptyLabels, // stored labels passed the ObjectMeta schema
      fields: this.options.fields(object),
      added: undefined
    }
  }

  private load(snapshot: Snapshot): void {
    this.objects.clear()
    this.sortedKeys = undefined
    for (const kv of snapshot.items) {
      const e = this.entry(kv.key, kv.value, kv.modRevision)
      if (e !== undefined) this.objects.set(kv.key, e)
    }
  }

  /** Apply store events (ascending revisions) and fan each out to the watchers. */
  apply(events: ReadonlyArray<WatchEvent>): void {
    if (this.closed) return
    this.batch++
    for (const ev of events) {
      if (ev.revision <= this.applied) continue
      const prev = this.objects.get(ev.key)
      const cur = this.entry(ev.key, ev.value, ev.revision)
      this.applied = ev.revision
      if (cur === undefined) {
        // An undecodable value cannot be served; drop the key rather than serve a stale object.
        if (prev !== undefined) {
          this.objects.delete(ev.key)
          this.sortedKeys = undefined
        }
        continue
      }
      let change: Change
      if (ev.type === "DELETED") {
        if (this.objects.delete(ev.key)) this.sortedKeys = undefined
        change = new Change("DELETED", ev.revision, cur, prev)
      } else {
        if (prev === undefined) this.sortedKeys = undefined
        this.objects.set(ev.key, cur)
        change = new Change(prev === undefined ? "ADDED" : "MODIFIED", ev.revision, cur, prev)
      }
      this.record(change)
      for (const w of this.active) {
        if (change.revision <= w.position) continue
        w.position = change.revision
        const out = transition(w.filter, change)
        if (out !== undefined) this.push(w, out)
      }
    }
    this.notifyChange()
  }

  private record(change: Change): void {
    const capacity = this.ring.length
    if (this.ringSize === capacity) {
      this.horizon = this.ring[this.ringHead]!.revision
      this.ring[this.ringHead] = undefined
      this.ringHead = (this.ringHead + 1) % capacity
      this.ringSize--
    }
    this.ring[(this.ringHead + this.ringSize) % capacity] = change
    this.ringSize++
  }

  private ringAt(i: number): Change {
    return this.ring[(this.ringHead + i) % this.ring.length]!
  }

  /**
   * Replace the state with a fresh snapshot after the store watch lost history: every watcher
   * is closed with 410 (it may have missed changes) and the ring restarts empty.
   */
  replace(snapshot: Snapshot): void {
    if (this.closed) return
    this.expireAll(snapshot.revision)
    this.load(snapshot)
    this.ring.fill(undefined)
    this.ringHead = 0
    this.ringSize = 0
    this.horizon = Math.max(this.horizon, snapshot.revision)
    this.applied = Math.max(this.applied, snapshot.revision)
    this.fresh = Math.max(this.fresh, snapshot.revision)
    this.notifyChange()
  }

  /** Close every watcher with a 410 ERROR: the cache can no longer vouch for their positions. */
  expireAll(oldest: number): void {
    for (const w of [...this.active]) this.finish(w, Status.tooOldResourceVersion(w.position, oldest))
  }

  /** Whether the cached objects are exactly the store's `items` (keys and modification revisions). */
  sameAs(items: ReadonlyArray<KeyValue>): boolean {
    if (items.length !== this.objects.size) return false
    for (const kv of items) {
      if (this.objects.get(kv.key)?.revision !== kv.modRevision) return false
    }
    return true
  }

  /** The store confirmed the cached state is its state at `revision`. */
  markFresh(revision: number): void {
    if (revision > this.fresh) {
      this.fresh = revision
      this.notifyChange()
    }
  }

  /** Call `f` once, on the next applied event, snapshot or freshness change. Returns a canceller. */
  onChange(f: () => void): () => void {
    this.changeWaiters.push(f)
    return () => {
      const i = this.changeWaiters.indexOf(f)
      if (i >= 0) this.changeWaiters.splice(i, 1)
    }
  }

  private notifyChange(): void {
    if (this.changeWaiters.length === 0) return
    const waiters = this.changeWaiters
    this.changeWaiters = []
    for (const f of waiters) f()
  }

  // ---- watchers ------------------------------------------------------------------------------

  private bookmarkObject(revision: number, initialEventsEnd: boolean): object {
    const metadata = initialEventsEnd
      ? { resourceVersion: String(revision), annotations: { "k8s.io/initial-events-end": "true" } }
      : { resourceVersion: String(revision) }
    return {
      ...(this.options.kind === undefined ? {} : { kind: this.options.kind }),
      ...(this.options.apiVersion === undefined ? {} : { apiVersion: this.options.apiVersion }),
      metadata
    }
  }

  /**
   * Register a watcher and queue its start: the current matching objects as ADDED
   * (`initialEvents`), or the ring's changes after `fromRevision`. A `fromRevision` older than
   * the ring yields a watcher holding one 410 ERROR event that is already done.
   */
  register(filter: Filter, fromRevision: number, options: RegisterOptions): Watcher {
    const w: Watcher = {
      filter,
      bookmarks: options.bookmarks,
      position: fromRevision,
      queue: [],
      allowance: 0,
      exemptBatch: -1,
      done: false,
      wake: undefined
    }
    if (this.closed) {
      w.done = true
      return w
    }
    if (options.initialEvents === true) {
      w.queue = this.initialEvents(filter)
      w.position = this.revision()
      if (options.bookmarks && options.initialEventsEndBookmark === true) {
        w.queue.push({ type: "BOOKMARK", object: this.bookmarkObject(w.position, true) })
      }
    } else {
      if (fromRevision < this.horizon) {
        w.queue.push({ type: "ERROR", object: Status.tooOldResourceVersion(fromRevision, this.horizon) })
        w.done = true
        return w
      }
      // Binary search for the first change after fromRevision.
      let lo = 0
      let hi = this.ringSize
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (this.ringAt(mid).revision <= fromRevision) lo = mid + 1
        else hi = mid
      }
      for (let i = lo; i < this.ringSize; i++) {
        const change = this.ringAt(i)
        const out = transition(filter, change)
        if (out !== undefined) w.queue.push(out)
        w.position = change.revision
      }
    }
    w.allowance = w.queue.length
    this.active.add(w)
    return w
  }

  /** Forget a watcher whose consumer went away. */
  unregister(w: Watcher): void {
    this.active.delete(w)
    w.done = true
    w.queue = []
    w.wake = undefined
  }

  /** Everything queued for `w` (emptying the queue), or `undefined` when nothing is. */
  take(w: Watcher): Array<OutEvent> | undefined {
    if (w.queue.length === 0) return undefined
    const out = w.queue
    w.queue = []
    w.allowance = 0
    return out
  }

  private push(w: Watcher, out: OutEvent): void {
    // A consumer parked waiting has drained everything: however large this batch (a big txn,
    // a collection delete), it is not behind. It only has to drain it before `watcherBuffer`
    // more events arrive, so its memory stays bounded by one batch plus the buffer.
    if (w.wake !== undefined) w.exemptBatch = this.batch
    w.queue.push(out)
    if (w.exemptBatch === this.batch) w.allowance = w.queue.length
    else if (w.queue.length > w.allowance + this.options.watcherBuffer) {
      this.finish(
        w,
        Status.expired(
          `watcher fell too far behind: more than ${this.options.watcherBuffer} events queued; too old resource version: ${w.position} (${this.applied})`
        )
      )
      return
    }
    this.wakeUp(w)
  }

  private wakeUp(w: Watcher): void {
    const wake = w.wake
    if (wake !== undefined) {
      w.wake = undefined
      wake()
    }
  }

  /**
   * End a watcher and wake it. With an error, its queue is replaced by that one ERROR event
   * (memory is released now); without one (shutdown), what is queued is still delivered.
   */
  private finish(w: Watcher, error: Status.Status | undefined): void {
    this.active.delete(w)
    if (error !== undefined) w.queue = [{ type: "ERROR", object: error }]
    w.done = true
    this.wakeUp(w)
  }

  /** Queue a BOOKMARK at the newest applied revision for every watcher that asked for them. */
  bookmark(): void {
    this.batch++
    for (const w of this.active) {
      if (!w.bookmarks) continue
      const revision = Math.max(this.applied, w.position)
      w.position = revision
      const out: OutEvent = { type: "BOOKMARK", object: this.bookmarkObject(revision, false) }
      // An unread bookmark is superseded by the newer one instead of piling up.
      const last = w.queue.length - 1
      if (last >= 0 && w.queue[last]!.type === "BOOKMARK") w.queue[last] = out
      else this.push(w, out)
    }
  }

  /** End every watch normally (the server is draining) and refuse new ones. */
  close(): void {
    if (this.closed) return
    this.closed = true
    for (const w of [...this.active]) this.finish(w, undefined)
    this.notifyChange()
  }
}
