/**
 * The read side of a SQLite store: get, list and count as prepared statements on the store's
 * connection, at the writer's newest committed revision; small whole lists answered from ListMemo.
 */
import { Effect, Either } from "effect"
import { ContinueToken, KeyOrder, type Store, StoreError } from "@koder/fleet-core"
import type { GroupCommit } from "./groupCommit.js"
import * as ListMemo from "./listMemo.js"
import * as LogTable from "./logTable.js"
import { read, type StoreState } from "./storeState.js"

/** What the reads look at. */
export interface ReadContext {
  readonly state: StoreState
  readonly log: LogTable.LogTable
  readonly writer: GroupCommit
  readonly memo: ListMemo.ListMemo
}

/** The read operations of the Store port. */
export type Reads = Pick<Store.StoreService, "currentRevision" | "compactRevision" | "get" | "list" | "count">

/** One page of `prefix` at a revision (or a continue token's); the caller guards it with `read`. */
const listPage = (
  { state, log, writer, memo }: ReadContext,
  prefix: string,
  options: Store.ListOptions
): Effect.Effect<Store.ListResult, StoreError.Compacted | StoreError.Expired> => {
  const compactRev = state.compactRev
  const current = writer.revision()
  let at = options.atRevision && options.atRevision > 0 ? Math.min(options.atRevision, current) : current
  let from = prefix
  if (options.continue !== undefined) {
    const token = ContinueToken.decode(options.continue)
    if (Either.isLeft(token)) return Effect.fail(token.left)
    if (token.right.revision < compactRev) return Effect.fail(ContinueToken.expired(token.right.revision, compactRev))
    at = token.right.revision
    const after = LogTable.keyAfter(token.right.after)
    if (KeyOrder.compare(after, from) > 0) from = after
  } else if (at < compactRev) {
    return Effect.fail(new StoreError.Compacted({ requestedRevision: at, compactRevision: compactRev }))
  }
  const limit = options.limit && options.limit > 0 ? options.limit : -1
  // A whole list at the current revision: admission asks for the same few small ones on
  // every write (see ListMemo).
  const whole = limit < 0 && from === prefix && at === current
  const memoized = whole ? memo.get(prefix) : undefined
  if (memoized !== undefined) return Effect.succeed({ items: memoized, revision: at, continue: undefined, remaining: 0 })
  const end = LogTable.prefixEnd(prefix)
  const items = log.list(from, end, at, limit < 0 ? -1 : limit + 1)
  if (whole && items.length <= ListMemo.maxItems) memo.set(prefix, items.slice())
  if (limit < 0 || items.length <= limit) {
    return Effect.succeed({ items, revision: at, continue: undefined, remaining: 0 })
  }
  items.length = limit
  const last = items[limit - 1]!.key
  return Effect.succeed({
    items,
    revision: at,
    continue: ContinueToken.encode({ revision: at, after: last }),
    remaining: log.count(LogTable.keyAfter(last), end, at)
  })
}

/** The reads of one store. */
export const make = (context: ReadContext): Reads => {
  const { state, log, writer } = context
  return {
    currentRevision: read(state, () => Effect.succeed(writer.revision())),
    compactRevision: read(state, () => Effect.succeed(state.compactRev)),
    get: (key) =>
      read(state, () => {
        const head = log.head(key)
        return head === undefined || head[1] === null
          ? Effect.fail(new StoreError.NotFound({ key }))
          : Effect.succeed({ key, value: head[1], createRevision: head[2], modRevision: head[0], version: head[3] })
      }),
    list: (prefix, options = {}) => read(state, () => listPage(context, prefix, options)),
    count: (prefix) => read(state, () => Effect.succeed(log.count(prefix, LogTable.prefixEnd(prefix), writer.revision())))
  }
}
