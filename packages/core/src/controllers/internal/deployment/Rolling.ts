/**
 * The RollingUpdate strategy (upstream's `rolling.go`): grow the new ReplicaSet into the surge
 * room, else shrink old ones within the availability budget; old empty revisions are cleaned up
 * once the rollout is complete.
 */
import * as Rollout from "./Rollout.js"
import { cleanup } from "./Cleanup.js"
import * as NewReplicaSet from "./NewReplicaSet.js"
import type { Plan } from "./Plan.js"
import { rolloutStatus } from "./Progress.js"
import { scaleTo } from "./Scaling.js"

/** Upstream's rolloutRolling (reconcileNewReplicaSet, then reconcileOldReplicaSets). */
export const rollout = (plan: Plan): void => {
  const { spec } = plan
  const { newRS, olds } = NewReplicaSet.find(plan, true)
  const rs = newRS! // find(plan, true) drafts one when none exists
  const all = [...olds, rs]
  let scaledUp = false
  if (rs.replicas > spec.replicas) scaledUp = scaleTo(plan, rs, spec.replicas)
  else if (rs.replicas < spec.replicas) scaledUp = scaleTo(plan, rs, Rollout.newReplicas(spec.strategy, spec.replicas, Rollout.sum(all, Rollout.podBound), rs.replicas))
  if (!scaledUp) {
    const steps = Rollout.rollingScaleDown(spec.strategy, spec.replicas, all, olds.filter((o) => o.replicas > 0), rs)
    for (const [old, size] of steps) scaleTo(plan, old, size)
    if (steps.length === 0 && Rollout.complete(spec, plan.stored)) cleanup(plan, olds)
  }
  rolloutStatus(plan, all, rs)
}
