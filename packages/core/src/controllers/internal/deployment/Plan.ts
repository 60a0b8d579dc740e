/**
 * The plan one Deployment sync builds (upstream's deployment controller state for one
 * `syncDeployment`, made explicit): what the Deployment asks for, its claimed ReplicaSets with the
 * sizes and annotations the sync gives them, the status conditions and counts as they evolve, and
 * the writes collected so far. The sync steps (NewReplicaSet, Scaling, Rolling, Recreate,
 * Progress, Cleanup) each take the plan and change it; `Actions` turns it into writes. A plan
 * lives for one `decide` call only, so the steps stay pure as a whole.
 */
import * as Conditions from "../../../object/Conditions.js"
import { asArray, asObject, type JsonObject } from "../../../object/Json.js"
import { rfc3339 } from "../../../object/Metadata.js"
import * as Rollout from "./Rollout.js"

type Condition = Conditions.Condition

/** The revision of a ReplicaSet, and of the Deployment (its newest). */
export const RevisionAnnotation = "deployment.kubernetes.io/revision"
/** Earlier revisions of a ReplicaSet that was rolled back to. */
export const RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
/** The Deployment's `spec.replicas` when it last scaled this ReplicaSet. */
export const DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
/** The Deployment's `replicas + maxSurge` when it last scaled this ReplicaSet. */
export const MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"

/** Condition reasons, as upstream names them. */
export const Reason = {
  NewReplicaSetCreated: "NewReplicaSetCreated",
  FoundNewReplicaSet: "FoundNewReplicaSet",
  ReplicaSetUpdated: "ReplicaSetUpdated",
  NewReplicaSetAvailable: "NewReplicaSetAvailable",
  ProgressDeadlineExceeded: "ProgressDeadlineExceeded",
  DeploymentPaused: "DeploymentPaused",
  DeploymentResumed: "DeploymentResumed",
  ReplicaSetCreateError: "ReplicaSetCreateError",
  MinimumReplicasAvailable: "MinimumReplicasAvailable",
  MinimumReplicasUnavailable: "MinimumReplicasUnavailable"
} as const

/** An event about the Deployment. */
export interface Event {
  readonly type: "Normal" | "Warning"
  readonly reason: string
  readonly message: string
}

/** One write of a sync, applied in order. */
export type Action =
  /** Create the new ReplicaSet; `events` once it exists. */
  | { readonly type: "create"; readonly replicaSet: JsonObject; readonly events: ReadonlyArray<Event> }
  /** Merge-patch a ReplicaSet (size, annotations, minReadySeconds); `events` once done. */
  | { readonly type: "update"; readonly name: string; readonly patch: JsonObject; readonly events: ReadonlyArray<Event> }
  /** Delete an old empty ReplicaSet beyond `revisionHistoryLimit`. */
  | { readonly type: "delete"; readonly name: string; readonly uid: string }
  /** Set annotations on the Deployment (its revision). */
  | { readonly type: "annotate"; readonly annotations: Readonly<Record<string, string>> }

/** What one sync of a Deployment does. */
export interface Decision {
  /** Orphan ReplicaSets to adopt. */
  readonly adopt: ReadonlyArray<JsonObject>
  /** Owned ReplicaSets the selector no longer matches, to release. */
  readonly release: ReadonlyArray<JsonObject>
  /** Writes to make, in order. */
  readonly actions: ReadonlyArray<Action>
  /** The new status, or undefined when the stored one is current. */
  readonly status: JsonObject | undefined
  /** When to look again to check the progress deadline. */
  readonly requeueAfterMs: number | undefined
}

/** What `decide` looks at. */
export interface Observed {
  readonly deployment: JsonObject
  /** The namespace's ReplicaSets. */
  readonly replicaSets: ReadonlyArray<JsonObject>
  /** The namespace's pods (only Recreate reads them: it waits for old pods to be gone). */
  readonly pods?: ReadonlyArray<JsonObject>
}

/** A ReplicaSet as the sync plans it. */
export type Rs = Rollout.Planned

/** One sync's plan: inputs (read-only) and what the steps have decided so far (mutable). */
export interface Plan {
  readonly deployment: JsonObject
  readonly pods: ReadonlyArray<JsonObject> | undefined
  readonly spec: Rollout.Spec
  readonly nowMs: number
  /** `nowMs` as RFC 3339, for condition times. */
  readonly now: string
  readonly storedStatus: JsonObject
  /** The counts of the stored status. */
  readonly stored: Rollout.Counts
  /** The surge allowed for `spec.replicas`. */
  readonly surge: number
  /** Whether the Deployment has a progress deadline. */
  readonly deadline: boolean
  readonly collisionCount: number | undefined
  /** The claimed ReplicaSets, and the new one once drafted. */
  readonly replicaSets: Array<Rs>
  conditions: ReadonlyArray<Condition>
  counts: Rollout.Counts
  /** The new ReplicaSet this sync creates, if any. */
  created: Rs | undefined
  /** ReplicaSets whose size, annotations or minReadySeconds changed, in order. */
  readonly touched: Array<Rs>
  /** Old empty ReplicaSets to delete. */
  readonly deletes: Array<Rs>
  /** Annotations to set on the Deployment. */
  readonly deploymentAnnotations: Record<string, string>
  requeueAfterMs: number | undefined
}

/** The plan at the start of a sync of `observed.deployment` over its claimed ReplicaSets. */
export const make = (observed: Observed, owned: ReadonlyArray<JsonObject>, nowMs: number): Plan => {
  const d = observed.deployment
  const spec = Rollout.specOf(d)
  const storedStatus = asObject(d["status"])
  const stored = Rollout.countsOf(storedStatus)
  return {
    deployment: d,
    pods: observed.pods,
    spec,
    nowMs,
    now: rfc3339(nowMs),
    storedStatus,
    stored,
    surge: Rollout.maxSurge(spec.strategy, spec.replicas),
    deadline: Rollout.hasProgressDeadline(spec),
    collisionCount: typeof storedStatus["collisionCount"] === "number" ? storedStatus["collisionCount"] : undefined,
    replicaSets: owned.map(Rollout.planned),
    conditions: conditionsOf(storedStatus),
    counts: stored,
    created: undefined,
    touched: [],
    deletes: [],
    deploymentAnnotations: {},
    requeueAfterMs: undefined
  }
}

/** The conditions of a stored status. */
export const conditionsOf = (status: JsonObject): ReadonlyArray<Condition> => asArray(status["conditions"]) as ReadonlyArray<Condition> // schema-checked on write

/** Records that `rs` changed (once, in the order of first change). */
export const touch = (plan: Plan, rs: Rs): void => {
  if (!plan.touched.includes(rs)) plan.touched.push(rs)
}

/** A ReplicaSet's revision number (0 when absent). */
export const revisionOf = (rs: Rs): number => Rollout.parseRevision(rs.annotations[RevisionAnnotation])

/** The new ReplicaSet (if known) after the old ones. */
export const allOf = (newRS: Rs | undefined, olds: ReadonlyArray<Rs>): ReadonlyArray<Rs> => [...olds, ...(newRS ? [newRS] : [])]

/**
 * Set a Deployment condition as upstream's SetDeploymentCondition: no change when status and
 * reason are the same (a new message alone does not count); otherwise `lastUpdateTime` moves and
 * `lastTransitionTime` only with the status.
 */
export const setCondition = (list: ReadonlyArray<Condition>, next: Omit<Condition, "lastTransitionTime" | "lastUpdateTime">, now: string): ReadonlyArray<Condition> => {
  const old = Conditions.get(list, next.type)
  if (old !== undefined && old.status === next.status && old.reason === next.reason) return list
  return Conditions.set(list, next, now, { updateTime: true })
}

/** Sets a condition on the plan's conditions at the plan's time. */
export const condition = (plan: Plan, next: Omit<Condition, "lastTransitionTime" | "lastUpdateTime">): void => {
  plan.conditions = setCondition(plan.conditions, next, plan.now)
}
