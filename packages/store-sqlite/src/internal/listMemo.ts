/**
 * The answers of recent whole lists of small prefixes, kept until a commit touches a key under
 * them. The API server's admission lists the same few prefixes for every write (a namespace's
 * resource quotas and limit ranges, the priority classes), nearly always empty and nearly never
 * changed; each was a SQLite range query. A memoized answer is exact, not merely recent: every
 * commit drops the entries of the prefixes its keys fall under before any later read runs, so a
 * list answered from here is the list at the store's current revision.
 *
 * Only prefixes ending in "/" are kept (every `Keys.prefix` does), so the prefixes a key falls
 * under are its own cuts at each "/": dropping them is a few map lookups per committed key.
 */
import type { Store } from "@koder/fleet-core"

/** Lists of more items than this are not kept (the lists worth keeping are the small, hot ones). */
export const maxItems = 32

/** Lists whose values add up to more characters than this are not kept either. */
export const maxChars = 64 * 1024

/** Prefixes kept at most; the oldest is dropped first (so the memo holds at most 16 MiB of values). */
export const maxPrefixes = 256

/** A memo of whole-prefix lists. */
export interface ListMemo {
  /** The items of `prefix` at the current revision, if kept. */
  readonly get: (prefix: string) => ReadonlyArray<Store.KeyValue> | undefined
  /** Keep `items`, the whole list of `prefix` at the current revision (ignored if not keepable). */
  readonly set: (prefix: string, items: ReadonlyArray<Store.KeyValue>) => void
  /** A commit wrote `key`: forget every prefix it falls under. */
  readonly touch: (key: string) => void
  /** Prefixes kept (for tests). */
  readonly size: () => number
}

/** An empty memo. */
export const make = (): ListMemo => {
  // Insertion order makes the map its own age order.
  const lists = new Map<string, ReadonlyArray<Store.KeyValue>>()
  return {
    // A copy: callers own the arrays they are given.
    get: (prefix) => lists.get(prefix)?.slice(),
    set: (prefix, items) => {
      if (!prefix.endsWith("/") || items.length > maxItems) return
      let chars = 0
      for (const kv of items) chars += kv.value.length
      if (chars > maxChars) return
      lists.delete(prefix)
      lists.set(prefix, items)
      if (lists.size > maxPrefixes) lists.delete(lists.keys().next().value!)
    },
    touch: (key) => {
      if (lists.size === 0) return
      for (let i = key.indexOf("/"); i >= 0; i = key.indexOf("/", i + 1)) lists.delete(key.slice(0, i + 1))
    },
    size: () => lists.size
  }
}
