/**
 * A finished plan as writes (the requests upstream's sync spreads over several calls, here one
 * ordered list): create the new ReplicaSet, merge-patch the changed ones, delete cleaned-up ones,
 * annotate the Deployment; then the status, only when it changed.
 */
import { asObject, type JsonObject, stableJson } from "../../../object/Json.js"
import { metadataOf } from "../../../object/Metadata.js"
import * as Rollout from "./Rollout.js"
import { type Action, conditionsOf, type Event, type Plan, type Rs } from "./Plan.js"

/** The writes and status of a finished plan. */
export const of = (plan: Plan): { readonly actions: ReadonlyArray<Action>; readonly status: JsonObject | undefined; readonly requeueAfterMs: number | undefined } => {
  const actions: Array<Action> = []
  const created = plan.created
  if (created !== undefined) actions.push({ type: "create", replicaSet: materialize(created), events: scalingEvents(created) })
  for (const rs of plan.touched) {
    if (rs === created) continue
    const update = updateOf(rs)
    if (update !== undefined) actions.push(update)
  }
  for (const rs of plan.deletes) actions.push({ type: "delete", name: rs.name, uid: rs.uid })
  if (Object.keys(plan.deploymentAnnotations).length > 0) actions.push({ type: "annotate", annotations: plan.deploymentAnnotations })

  const status: JsonObject = {
    ...plan.counts,
    ...(plan.conditions.length > 0 ? { conditions: plan.conditions } : {}),
    ...(plan.collisionCount !== undefined ? { collisionCount: plan.collisionCount } : {})
  }
  const changed =
    stableJson(Rollout.countsOf(plan.storedStatus)) !== stableJson(plan.counts) || stableJson(conditionsOf(plan.storedStatus)) !== stableJson(plan.conditions)
  return { actions, status: changed ? status : undefined, requeueAfterMs: plan.requeueAfterMs }
}

const scalingEvents = (rs: Rs): ReadonlyArray<Event> => rs.events.map((message) => ({ type: "Normal", reason: "ScalingReplicaSet", message }))

/** The merge patch of a changed ReplicaSet (changed annotations, size, minReadySeconds), or undefined when nothing changed. */
const updateOf = (rs: Rs): Action | undefined => {
  const changed = Object.fromEntries(Object.entries(rs.annotations).filter(([k, v]) => rs.storedAnnotations[k] !== v))
  const specPatch = {
    ...(rs.replicas !== rs.storedReplicas ? { replicas: rs.replicas } : {}),
    ...(rs.minReadySeconds !== rs.storedMinReadySeconds ? { minReadySeconds: rs.minReadySeconds } : {})
  }
  if (Object.keys(changed).length === 0 && Object.keys(specPatch).length === 0) return undefined
  return {
    type: "update",
    name: rs.name,
    patch: {
      ...(Object.keys(changed).length > 0 ? { metadata: { annotations: changed } } : {}),
      ...(Object.keys(specPatch).length > 0 ? { spec: specPatch } : {})
    },
    events: scalingEvents(rs)
  }
}

/** The ReplicaSet a planned creation writes: the draft with the planned size and annotations. */
const materialize = (rs: Rs): JsonObject => ({
  ...rs.object,
  metadata: { ...metadataOf(rs.object), annotations: rs.annotations },
  spec: { ...asObject(rs.object["spec"]), replicas: rs.replicas, minReadySeconds: rs.minReadySeconds }
})
