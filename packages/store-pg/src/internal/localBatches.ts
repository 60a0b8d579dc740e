/**
 * This process's recent batches, so the next batch can account for them without re-reading its
 * keys: when every revision between its snapshot and the counter lock is one of ours and
 * committed, their known effects bring the snapshot's rows up to the lock.
 */
import type { Head } from "./batchPlan.js"

/** A batch this process planned: its revisions, the newest row of each key it wrote, its fate. */
export interface LocalBatch {
  readonly first: number
  readonly last: number
  readonly heads: Map<string, Head | undefined>
  readonly committed: Promise<boolean>
}

/** Batches remembered at most; older ones are forgotten (a re-read covers them). */
const maxRemembered = 32

/** The recent batches of one writer. */
export interface LocalBatches {
  /** Remember a batch about to COMMIT. */
  readonly remember: (batch: LocalBatch) => void
  /** Forget a batch whose COMMIT failed. */
  readonly forget: (batch: LocalBatch) => void
  /**
   * The newest rows as of `locked`, given those as of `snapshot`: apply the effects of our own
   * batches in (snapshot, locked]; undefined if some revision in there is not ours (or unknown).
   */
  readonly catchUp: (
    snapshot: number,
    locked: number,
    heads: Map<string, Head | undefined>
  ) => Promise<Map<string, Head | undefined> | undefined>
}

/** An empty memory of batches. */
export const make = (): LocalBatches => {
  const recent: Array<LocalBatch> = []
  return {
    remember: (batch) => {
      recent.push(batch)
      if (recent.length > maxRemembered) recent.shift()
    },
    forget: (batch) => {
      const i = recent.indexOf(batch)
      if (i >= 0) recent.splice(i, 1)
    },
    catchUp: async (snapshot, locked, heads) => {
      if (!Number.isSafeInteger(snapshot) || snapshot > locked) return undefined
      let cursor = snapshot
      while (cursor < locked) {
        const local = recent.find((b) => b.first === cursor + 1)
        if (local === undefined || local.last > locked || !(await local.committed)) return undefined
        for (const [key, head] of local.heads) if (heads.has(key)) heads.set(key, head)
        cursor = local.last
      }
      return heads
    }
  }
}
