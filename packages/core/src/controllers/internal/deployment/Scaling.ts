/**
 * Sizing ReplicaSets (upstream's scaleReplicaSet, scale and isScalingEvent in `sync.go`): one
 * ReplicaSet scaled with its replicas annotations and a `ScalingReplicaSet` event, and a scaling
 * event — `spec.replicas` changed, or the Deployment is paused — spread over the active
 * ReplicaSets: the only active one takes the whole size, else proportionally to their sizes.
 */
import { stableJson } from "../../../object/Json.js"
import * as Rollout from "./Rollout.js"
import { cleanup } from "./Cleanup.js"
import * as NewReplicaSet from "./NewReplicaSet.js"
import { allOf, DesiredReplicasAnnotation, MaxReplicasAnnotation, type Plan, type Rs, touch } from "./Plan.js"
import { calculateStatus } from "./Progress.js"

/** Upstream's scaleReplicaSet: set the size and the replicas annotations; an event on a size change. */
export const scale = (plan: Plan, rs: Rs, to: number, operation: string): boolean => {
  const before = stableJson(rs.annotations)
  NewReplicaSet.setReplicasAnnotations(plan, rs)
  const resized = rs.replicas !== to
  if (resized) {
    rs.events.push(`Scaled ${operation} replica set ${rs.name} from ${rs.replicas} to ${to}`)
    rs.replicas = to
  }
  if (resized || stableJson(rs.annotations) !== before) touch(plan, rs)
  return resized
}

/** `scale` up or down to `to`, unless already there; answers whether the size changed. */
export const scaleTo = (plan: Plan, rs: Rs, to: number): boolean => (rs.replicas === to ? false : scale(plan, rs, to, rs.replicas < to ? "up" : "down"))

/** Upstream's scale: only one active ReplicaSet takes the whole size; else proportional scaling. */
const scaleAll = (plan: Plan, newRS: Rs | undefined, olds: ReadonlyArray<Rs>): void => {
  const { spec } = plan
  const only = Rollout.activeOrLatest(newRS, olds)
  if (only !== undefined) {
    scaleTo(plan, only, spec.replicas)
    return
  }
  // A saturated new ReplicaSet (adopted, say) leaves nothing for the old ones.
  const saturated =
    newRS !== undefined &&
    newRS.replicas === spec.replicas &&
    newRS.annotations[DesiredReplicasAnnotation] === String(spec.replicas) &&
    newRS.available === spec.replicas
  if (saturated) {
    for (const rs of olds.filter((o) => o.replicas > 0)) scaleTo(plan, rs, 0)
    return
  }
  if (spec.strategy.type !== "RollingUpdate") return
  const active = allOf(newRS, olds).filter((rs) => rs.replicas > 0)
  const { sizes, operation } = Rollout.proportionalSizes(active, {
    desired: spec.replicas,
    maxSurge: plan.surge,
    fallbackMax: plan.stored.replicas,
    annotatedMax: (rs) => (rs.annotations[MaxReplicasAnnotation] === undefined ? undefined : Rollout.parseRevision(rs.annotations[MaxReplicasAnnotation]))
  })
  for (const [rs, size] of sizes) scale(plan, rs, size, operation)
}

/** Upstream's isScalingEvent: an active ReplicaSet was last sized for a different `replicas`. */
export const isScalingEvent = (plan: Plan): boolean => {
  const { newRS, olds } = NewReplicaSet.find(plan, false)
  return allOf(newRS, olds).some((rs) => {
    const desired = rs.annotations[DesiredReplicasAnnotation]
    return rs.replicas > 0 && desired !== undefined && /^\d+$/.test(desired) && Number(desired) !== plan.spec.replicas
  })
}

/** Upstream's sync: scale (and clean up when paused), status without progress estimation. */
export const sync = (plan: Plan): void => {
  const { newRS, olds } = NewReplicaSet.find(plan, false)
  scaleAll(plan, newRS, olds)
  if (plan.spec.paused) cleanup(plan, olds)
  calculateStatus(plan, allOf(newRS, olds), newRS)
}
