/**
 * The last placement decisions, by pod uid, for `explain` and the Placement API. Bounded and
 * most-recent-first kept: explanations are for people asking about a few pods, and a decision over
 * thousands of nodes is not small; a decision is explained only when asked.
 */
import * as Schedule from "./Schedule.js"

/** The last `kept` decisions. */
export class Decisions {
  private readonly byUid = new Map<string, Schedule.Decision>()
  constructor(private readonly kept: number) {}

  /** Keep `decision` as the pod's last, dropping the oldest beyond the bound. */
  remember(uid: string, decision: Schedule.Decision): void {
    this.byUid.delete(uid)
    this.byUid.set(uid, decision)
    if (this.byUid.size > this.kept) this.byUid.delete(this.byUid.keys().next().value!)
  }

  /** Forget a pod (deleted). */
  forget(uid: string): void {
    this.byUid.delete(uid)
  }

  /** The pod's last decision, explained node by node. */
  explain(uid: string): Schedule.Explanation | undefined {
    const decision = this.byUid.get(uid)
    return decision === undefined ? undefined : Schedule.explain(decision)
  }
}
