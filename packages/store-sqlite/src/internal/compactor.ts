/**
 * Compaction of a SQLite store: steps of at most `batchRevisions` revisions, each one SQLite
 * transaction deleting superseded rows; explicit (`Store.compact`) or in the background, where
 * CompactionPolicy.nextStep decides how far each wake-up may go.
 */
import type Database from "better-sqlite3"
import { Duration, Effect } from "effect"
import { CompactionPolicy, StoreError } from "@koder/fleet-core"
import type { GroupCommit } from "./groupCommit.js"
import type { LogTable } from "./logTable.js"
import { closedError, read, type StoreState } from "./storeState.js"

/** Counters of compaction (for tests and metrics). */
export interface CompactionStats {
  /** Compaction steps run (background and explicit). */
  readonly compactions: number
  /** Log rows deleted by compaction. */
  readonly compactedRows: number
  /** Times the background compactor woke and consulted the policy. */
  readonly compactorWakeups: number
}

/** The counters behind `CompactionStats`, advanced in place. */
type Counters = { -readonly [K in keyof CompactionStats]: number }

/** What a compactor works on. */
export interface CompactorContext {
  readonly db: Database.Database
  readonly log: LogTable
  readonly writer: GroupCommit
  readonly state: StoreState
  readonly policy: CompactionPolicy.CompactionPolicy
}

/** A store's compactor. */
export interface Compactor {
  /** `Store.compact`: compact to `revision` (clamped to the head) in batches. */
  readonly compact: (revision: number) => Effect.Effect<void, StoreError.Unavailable>
  /** The background loop (wake every interval, drain what the policy allows); fork it scoped. */
  readonly background: Effect.Effect<never>
  readonly stats: () => CompactionStats
}

/** One compaction step to `to` (clamped); returns whether anything was compacted. */
const step = ({ db, log, writer, state }: CompactorContext, counters: Counters, target: number): boolean => {
  const to = Math.min(target, writer.revision())
  if (to <= state.compactRev) return false
  db.exec("BEGIN")
  try {
    counters.compactedRows += log.compact(state.compactRev, to)
    db.exec("COMMIT")
  } catch (e) {
    if (db.inTransaction) db.exec("ROLLBACK")
    throw e
  }
  state.compactRev = to
  counters.compactions++
  return true
}

/** The newest revision committed at or before `cutoff` (binary search; rows above the horizon are dense). */
const newestCommittedBy = ({ log, writer, state }: CompactorContext, cutoff: number): number => {
  let lo = state.compactRev
  let hi = writer.revision()
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2)
    const at = log.committedAt(mid)
    if (at !== undefined && at <= cutoff) lo = mid
    else hi = mid - 1
  }
  return lo
}

/** A compactor over one store's log. */
export const make = (context: CompactorContext): Compactor => {
  const { writer, state, policy } = context
  const counters: Counters = { compactions: 0, compactedRows: 0, compactorWakeups: 0 }

  const compact = (revision: number): Effect.Effect<void, StoreError.Unavailable> =>
    read(state, () => {
      const one = Effect.suspend((): Effect.Effect<boolean, StoreError.Unavailable> => {
        if (state.closed) return Effect.fail(closedError())
        try {
          return Effect.succeed(step(context, counters, Math.min(revision, state.compactRev + policy.batchRevisions)))
        } catch (e) {
          return Effect.fail(new StoreError.Unavailable({ reason: `compaction failed: ${String(e)}`, retryable: true }))
        }
      })
      // Batches with a yield between them, so writers and readers interleave.
      const loop: Effect.Effect<void, StoreError.Unavailable> = Effect.flatMap(one, (more) =>
        more && state.compactRev < Math.min(revision, writer.revision()) ? Effect.zipRight(Effect.yieldNow(), loop) : Effect.void
      )
      return loop
    })

  const backgroundStep = Effect.sync(() => {
    if (state.closed) return false
    const target = CompactionPolicy.nextStep(policy, {
      currentRevision: writer.revision(),
      compactRevision: state.compactRev,
      newestExpiredRevision: newestCommittedBy(context, Date.now() - policy.minAgeMillis)
    })
    return target !== undefined && step(context, counters, target)
  })
  const drainSteps: Effect.Effect<void> = Effect.flatMap(backgroundStep, (more) =>
    more ? Effect.zipRight(Effect.yieldNow(), drainSteps) : Effect.void
  )
  // Wake every interval; drain what the policy allows, one batch per step.
  const background = drainSteps.pipe(
    Effect.ensuring(Effect.sync(() => counters.compactorWakeups++)),
    Effect.catchAllDefect((e) => Effect.logWarning("store compaction step failed", e)),
    Effect.zipLeft(Effect.sleep(Duration.millis(policy.intervalMillis))),
    Effect.forever
  )

  return { compact, background, stats: () => ({ ...counters }) }
}
