/**
 * The Recreate strategy (upstream's `recreate.go`): scale every old ReplicaSet to 0, wait until
 * their pods are gone, then create (or grow) the new ReplicaSet at full size.
 */
import { controllerRefOf, labelsOf } from "../../../object/Metadata.js"
import * as Pods from "../../../object/Pods.js"
import * as ReplicaSet from "../../ReplicaSet.js"
import * as Rollout from "./Rollout.js"
import { cleanup } from "./Cleanup.js"
import * as NewReplicaSet from "./NewReplicaSet.js"
import { allOf, type Plan, type Rs } from "./Plan.js"
import { rolloutStatus } from "./Progress.js"
import { scaleTo } from "./Scaling.js"

/** Upstream's rolloutRecreate: old to 0, wait for their pods to go, then the new one at full size. */
export const rollout = (plan: Plan): void => {
  const first = NewReplicaSet.find(plan, false)
  const olds = first.olds
  let scaledDown = false
  for (const rs of olds.filter((o) => o.replicas > 0)) scaledDown = scaleTo(plan, rs, 0) || scaledDown
  if (scaledDown || oldPodsRunning(plan, first.newRS, olds)) return rolloutStatus(plan, allOf(first.newRS, olds), first.newRS)
  const newRS = first.newRS ?? NewReplicaSet.find(plan, true).newRS!
  scaleTo(plan, newRS, plan.spec.replicas)
  if (Rollout.complete(plan.spec, plan.stored)) cleanup(plan, olds)
  rolloutStatus(plan, [...olds, newRS], newRS)
}

/** Whether pods of old ReplicaSets may still run (any not finished, terminating ones included). */
const oldPodsRunning = (plan: Plan, newRS: Rs | undefined, olds: ReadonlyArray<Rs>): boolean => {
  if (Rollout.sum(olds, (rs) => rs.statusReplicas) > 0) return true
  const oldUids = new Set(olds.map((rs) => rs.uid))
  return (plan.pods ?? []).some((pod) => {
    const owner = controllerRefOf(pod)?.uid
    if (typeof owner !== "string" || !oldUids.has(owner) || owner === newRS?.uid) return false
    if (!ReplicaSet.selects(plan.deployment, labelsOf(pod))) return false
    const phase = Pods.phase(pod)
    return phase !== "Succeeded" && phase !== "Failed"
  })
}
