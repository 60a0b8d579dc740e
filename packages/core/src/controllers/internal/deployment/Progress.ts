/**
 * A Deployment's status (upstream's `progress.go` and the status half of `sync.go`): counts
 * summed over its ReplicaSets, `Available` from the unavailability budget, `Progressing` with the
 * progress deadline (complete, progressing, timed out; paused and resumed), `ReplicaFailure`
 * carried over from a ReplicaSet, and when to look again for the deadline.
 */
import * as Conditions from "../../../object/Conditions.js"
import { timeMs } from "../../../object/Metadata.js"
import * as Rollout from "./Rollout.js"
import { condition, type Plan, Reason, type Rs } from "./Plan.js"

/** Upstream's calculateStatus: counts from the ReplicaSets, and the Available condition. */
export const calculateStatus = (plan: Plan, all: ReadonlyArray<Rs>, newRS: Rs | undefined): void => {
  const { spec } = plan
  const available = Rollout.sum(all, (rs) => rs.available)
  plan.counts = {
    observedGeneration: spec.generation,
    replicas: Rollout.sum(all, (rs) => rs.statusReplicas),
    updatedReplicas: newRS?.statusReplicas ?? 0,
    readyReplicas: Rollout.sum(all, (rs) => rs.ready),
    availableReplicas: available,
    unavailableReplicas: Math.max(0, Rollout.sum(all, (rs) => rs.replicas) - available)
  }
  condition(
    plan,
    available >= spec.replicas - Rollout.maxUnavailable(spec.strategy, spec.replicas)
      ? { type: "Available", status: "True", reason: Reason.MinimumReplicasAvailable, message: "Deployment has minimum availability." }
      : { type: "Available", status: "False", reason: Reason.MinimumReplicasUnavailable, message: "Deployment does not have minimum availability." }
  )
}

/** Upstream's syncRolloutStatus: status plus the Progressing condition and the deadline check. */
export const rolloutStatus = (plan: Plan, all: ReadonlyArray<Rs>, newRS: Rs | undefined): void => {
  const { spec } = plan
  const current = Conditions.get(plan.conditions, "Progressing")
  calculateStatus(plan, all, newRS)
  if (!plan.deadline) plan.conditions = Conditions.remove(plan.conditions, "Progressing")
  const alreadyComplete = plan.counts.replicas === plan.counts.updatedReplicas && current?.reason === Reason.NewReplicaSetAvailable
  if (plan.deadline && !alreadyComplete) progressing(plan, newRS !== undefined ? `ReplicaSet "${newRS.name}"` : `Deployment "${spec.name}"`)
  replicaFailure(plan, newRS?.failure ?? all.find((rs) => rs.failure !== undefined)?.failure)
  // Look again when the deadline passes, unless the rollout is done or already timed out.
  const cond = Conditions.get(plan.conditions, "Progressing")
  const from = timeMs(cond?.lastUpdateTime)
  if (plan.deadline && cond !== undefined && from !== undefined && !Rollout.complete(spec, plan.counts) && cond.reason !== Reason.ProgressDeadlineExceeded) {
    // Timestamps have whole seconds and the check is strict: a little past the deadline.
    plan.requeueAfterMs = Math.max(0, from + spec.progressDeadlineSeconds! * 1000 - plan.nowMs) + 100
  }
}

/** The Progressing condition of a rollout under a deadline: complete, progressing, or timed out. */
const progressing = (plan: Plan, subject: string): void => {
  if (Rollout.complete(plan.spec, plan.counts)) {
    condition(plan, { type: "Progressing", status: "True", reason: Reason.NewReplicaSetAvailable, message: `${subject} has successfully progressed.` })
  } else if (Rollout.progressed(plan.stored, plan.counts)) {
    // Progress moves lastUpdateTime even when the reason stays: the deadline counts from it.
    const old = Conditions.get(plan.conditions, "Progressing")
    plan.conditions = [
      ...Conditions.remove(plan.conditions, "Progressing"),
      {
        type: "Progressing",
        status: "True",
        reason: Reason.ReplicaSetUpdated,
        message: `${subject} is progressing.`,
        lastUpdateTime: plan.now,
        lastTransitionTime: old?.status === "True" && old.lastTransitionTime !== undefined ? old.lastTransitionTime : plan.now
      }
    ]
  } else if (timedOut(plan)) {
    condition(plan, { type: "Progressing", status: "False", reason: Reason.ProgressDeadlineExceeded, message: `${subject} has timed out progressing.` })
  }
}

/** ReplicaFailure as a ReplicaSet reports it (the new one's first, else any old one's), or none. */
const replicaFailure = (plan: Plan, failure: Conditions.Condition | undefined): void => {
  if (failure === undefined) {
    plan.conditions = Conditions.remove(plan.conditions, "ReplicaFailure")
    return
  }
  const old = Conditions.get(plan.conditions, "ReplicaFailure")
  if (old !== undefined && old.status === failure.status && old.reason === failure.reason) return
  const at = failure.lastTransitionTime ?? plan.now
  plan.conditions = [
    ...Conditions.remove(plan.conditions, "ReplicaFailure"),
    {
      type: "ReplicaFailure",
      status: failure.status,
      ...(failure.reason !== undefined ? { reason: failure.reason } : {}),
      ...(failure.message !== undefined ? { message: failure.message } : {}),
      lastUpdateTime: at,
      lastTransitionTime: old?.status === failure.status && old.lastTransitionTime !== undefined ? old.lastTransitionTime : at
    }
  ]
}

/** Upstream's DeploymentTimedOut, on the condition as it stands now. */
const timedOut = (plan: Plan): boolean => {
  const cond = Conditions.get(plan.conditions, "Progressing")
  if (cond === undefined || cond.reason === Reason.NewReplicaSetAvailable) return false
  if (cond.reason === Reason.ProgressDeadlineExceeded) return true
  const from = timeMs(cond.lastUpdateTime)
  return from !== undefined && from + plan.spec.progressDeadlineSeconds! * 1000 < plan.nowMs
}

/** Upstream's checkPausedConditions: Progressing says paused or resumed (unless timed out). */
export const checkPaused = (plan: Plan): void => {
  if (!plan.deadline) return
  const cond = Conditions.get(plan.conditions, "Progressing")
  if (cond?.reason === Reason.ProgressDeadlineExceeded) return
  const pausedNoted = cond?.reason === Reason.DeploymentPaused
  if (plan.spec.paused && !pausedNoted) {
    condition(plan, { type: "Progressing", status: "Unknown", reason: Reason.DeploymentPaused, message: "Deployment is paused" })
  } else if (!plan.spec.paused && pausedNoted) {
    condition(plan, { type: "Progressing", status: "Unknown", reason: Reason.DeploymentResumed, message: "Deployment is resumed" })
  }
}
