/**
 * Old ReplicaSets a Deployment no longer needs (upstream's cleanupDeployment): beyond
 * `revisionHistoryLimit`, the oldest revisions that are empty, not being deleted, and whose
 * controller has seen their newest spec are deleted; the rest are kept for rollbacks.
 */
import * as Rollout from "./Rollout.js"
import { type Plan, revisionOf, type Rs } from "./Plan.js"

/** Upstream's cleanupDeployment: delete the oldest empty ReplicaSets beyond revisionHistoryLimit. */
export const cleanup = (plan: Plan, olds: ReadonlyArray<Rs>): void => {
  const limit = plan.spec.revisionHistoryLimit
  if (limit === undefined) return
  const alive = olds.filter((rs) => !rs.deleting && rs.exists)
  const diff = alive.length - limit
  if (diff <= 0) return
  const byRevision = [...alive].sort((a, b) => revisionOf(a) - revisionOf(b) || Rollout.byCreation(a, b))
  for (const rs of byRevision.slice(0, diff)) {
    if (rs.statusReplicas !== 0 || rs.replicas !== 0 || rs.storedReplicas !== 0 || rs.generation > rs.observedGeneration) continue
    plan.deletes.push(rs)
  }
}
