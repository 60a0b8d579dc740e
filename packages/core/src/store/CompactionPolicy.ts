/**
 * How much history a store keeps (DESIGN §4): at least `minRevisions` revisions and at least
 * `minAgeMillis` of time, so that watchers and paged lists that fall a little behind can still
 * resume. Backends run the compactor in the background; the decision is this pure function.
 */

/** Retention settings. */
export interface CompactionPolicy {
  /** Keep at least this many of the newest revisions. */
  readonly minRevisions: number
  /** Keep every revision committed within this many milliseconds. */
  readonly minAgeMillis: number
  /** Compact at most this many revisions per step, so one step never holds the writer long. */
  readonly batchRevisions: number
  /** How often the background compactor wakes. */
  readonly intervalMillis: number
}

/** The defaults of DESIGN §4: ≥ 10,000 revisions and ≥ 5 minutes. */
export const defaults: CompactionPolicy = {
  minRevisions: 10_000,
  minAgeMillis: 5 * 60_000,
  batchRevisions: 1_000,
  intervalMillis: 10_000
}

/** What the compactor knows when it decides. */
export interface CompactionState {
  readonly currentRevision: number
  readonly compactRevision: number
  /** The newest revision committed at or before `now - minAgeMillis` (0 if none). */
  readonly newestExpiredRevision: number
}

/**
 * The revision the next compaction step should compact to, or `undefined` when nothing may be
 * discarded yet. Steps advance by at most `batchRevisions`.
 */
export const nextStep = (policy: CompactionPolicy, state: CompactionState): number | undefined => {
  const allowed = Math.min(state.currentRevision - policy.minRevisions, state.newestExpiredRevision)
  if (allowed <= state.compactRevision) return undefined
  return Math.min(allowed, state.compactRevision + policy.batchRevisions)
}
