/**
 * The Deployment controller: rolls a Deployment's pod template out over ReplicaSets it owns,
 * following kube-controller-manager's deployment controller step for step. Each template gets a
 * ReplicaSet named `<deployment>-<pod-template-hash>` (hash of the template salted with
 * `status.collisionCount`; the label is also in the ReplicaSet's selector and template). A sync
 * claims ReplicaSets by selector (adopt orphans, release mismatches), then either only scales
 * (paused, or `spec.replicas` changed mid-rollout: proportional scaling by the
 * `desired-replicas`/`max-replicas` annotations), or rolls out: RollingUpdate grows the new
 * ReplicaSet within `replicas + maxSurge` and shrinks old ones while `replicas - maxUnavailable`
 * stay available (unhealthy old replicas first); Recreate scales old ReplicaSets to 0, waits until
 * their pods are gone, then creates the new one. Revisions (`deployment.kubernetes.io/revision`
 * on ReplicaSets and the Deployment), `revisionHistoryLimit` cleanup of old empty ReplicaSets,
 * `Available`/`Progressing` conditions with upstream's reasons and messages (paused, progress
 * deadline exceeded), status counts and `ScalingReplicaSet` events are upstream's.
 *
 * Rollback: apps/v1 has no `spec.rollbackTo`; `kubectl rollout undo` copies an old ReplicaSet's
 * template (without `pod-template-hash`) into the Deployment. That template then equals the old
 * ReplicaSet's, so the old ReplicaSet becomes the new one again and gets the next revision number
 * (its previous numbers kept in `deployment.kubernetes.io/revision-history`); no ReplicaSet is
 * created. `kubectl rollout restart` sets a `kubectl.kubernetes.io/restartedAt` template
 * annotation: a different template, hence a new ReplicaSet.
 *
 * Departures (both make the budgets hold on pods, not only on ReplicaSet counts, at every moment):
 * the surge budget counts each ReplicaSet as `max(spec.replicas, status.replicas)`, so pods an old
 * ReplicaSet has not yet deleted still count; the availability budget counts
 * `min(status.availableReplicas, spec.replicas)`, so pods about to be deleted do not. Upstream
 * counts `spec.replicas` and `status.availableReplicas` alone. Also: the writes upstream spreads
 * over several requests (status after finding the new ReplicaSet, then after scaling) are one
 * plan applied in order, with one status write at the end; ReplicaSets are scaled with merge
 * patches rather than updates pinned to a resourceVersion; no `status.terminatingReplicas` (a
 * newer upstream field the model lacks); no "selects everything" branch (the API refuses an empty
 * selector).
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import * as Actions from "./internal/deployment/Actions.js"
import * as NewReplicaSet from "./internal/deployment/NewReplicaSet.js"
import * as Plan from "./internal/deployment/Plan.js"
import * as Progress from "./internal/deployment/Progress.js"
import * as Recreate from "./internal/deployment/Recreate.js"
import * as Rolling from "./internal/deployment/Rolling.js"
import * as Scaling from "./internal/deployment/Scaling.js"
import * as Rollout from "./internal/deployment/Rollout.js"
import * as ReplicaSet from "./ReplicaSet.js"
import { asFiniteNumber, asObject, type JsonObject } from "../object/Json.js"
import { controllerRefOf, isControlledBy, isTerminating, labelsOf, nameOf, namespaceOrUndefined, rfc3339, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"

/** The Deployment resource. */
export const DeploymentRef = ResourceRefs.Deployment

const ReplicaSetRef = ReplicaSet.ReplicaSetRef

/** The label telling a Deployment's ReplicaSets (and their pods) apart. */
export const PodTemplateHashLabel = Rollout.PodTemplateHashLabel
/** The revision of a ReplicaSet, and of the Deployment (its newest). */
export const RevisionAnnotation = Plan.RevisionAnnotation
/** Earlier revisions of a ReplicaSet that was rolled back to. */
export const RevisionHistoryAnnotation = Plan.RevisionHistoryAnnotation
/** The Deployment's `spec.replicas` when it last scaled this ReplicaSet. */
export const DesiredReplicasAnnotation = Plan.DesiredReplicasAnnotation
/** The Deployment's `replicas + maxSurge` when it last scaled this ReplicaSet. */
export const MaxReplicasAnnotation = Plan.MaxReplicasAnnotation
/** The template annotation `kubectl rollout restart` sets. */
export const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

/** Condition reasons, as upstream names them. */
export const Reason = Plan.Reason

/** Whether two pod templates are equal apart from the `pod-template-hash` label (upstream's EqualIgnoreHash). */
export const equalIgnoreHash = Rollout.equalIgnoreHash

/** An event about the Deployment. */
export type Event = Plan.Event
/** One write of a sync, applied in order. */
export type Action = Plan.Action
/** What one sync of a Deployment does. */
export type Decision = Plan.Decision
/** What `decide` looks at. */
export type Observed = Plan.Observed

/**
 * Decide one sync of a Deployment at `nowMs` (pure): upstream's syncDeployment as a plan. The
 * steps live in `internal/deployment/`, one per part of upstream's controller.
 */
export const decide = (observed: Observed, nowMs: number): Decision => {
  const d = observed.deployment
  const claimed = ReplicaSet.claim(d, observed.replicaSets)
  const plan = Plan.make(observed, claimed.owned, nowMs)
  if (isTerminating(d)) {
    // Being deleted (upstream's syncStatusOnly): no scaling, only the status and revisions kept current.
    const { newRS, olds } = NewReplicaSet.find(plan, false)
    Progress.calculateStatus(plan, Plan.allOf(newRS, olds), newRS)
  } else {
    Progress.checkPaused(plan)
    if (plan.spec.paused || Scaling.isScalingEvent(plan)) Scaling.sync(plan)
    else if (plan.spec.strategy.type === "Recreate") Recreate.rollout(plan)
    else Rolling.rollout(plan)
  }
  return { adopt: claimed.adopt, release: claimed.release, ...Actions.of(plan) }
}

/**
 * The status after creating the new ReplicaSet failed for another reason than a name collision:
 * `Progressing=False` with reason `ReplicaSetCreateError` (only when a progress deadline is set).
 */
export const createFailedStatus = (d: JsonObject, message: string, nowMs: number): JsonObject | undefined => {
  if (!Rollout.hasProgressDeadline(Rollout.specOf(d))) return undefined
  const conditions = Plan.conditionsOf(asObject(d["status"]))
  return {
    conditions: Plan.setCondition(conditions, { type: "Progressing", status: "False", reason: Reason.ReplicaSetCreateError, message }, rfc3339(nowMs))
  }
}

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

const patchStatus = (ctx: Controller.Context, d: JsonObject, status: JsonObject) =>
  Effect.catchIf(
    ctx.client.patch(DeploymentRef, namespaceOrUndefined(d), nameOf(d), "merge", { status }, "status"),
    isNotFound,
    () => Effect.succeed({})
  )

const record = (ctx: Controller.Context, d: JsonObject, events: ReadonlyArray<Event>) =>
  Effect.forEach(events, (e) => ctx.events.record(d, e.type, e.reason, e.message), { discard: true })

/**
 * Create the new ReplicaSet. A name already taken by a ReplicaSet that is not this template's is a
 * hash collision: bump `status.collisionCount` (the next hash differs) and retry, as upstream.
 */
const createReplicaSet = (ctx: Controller.Context, d: JsonObject, rs: JsonObject, nowMs: number) =>
  Effect.gen(function* () {
    const result = yield* Effect.either(ctx.client.create(rs))
    if (result._tag === "Right") return true
    const error = result.left
    const ns = namespaceOrUndefined(d)
    if (error.status.reason === "AlreadyExists") {
      const existing = yield* Effect.catchIf(ctx.client.get(ReplicaSetRef, ns, nameOf(rs)), isNotFound, () => Effect.succeed(undefined))
      // Ours with this template: an informer behind; the next sync finds it.
      if (existing !== undefined && isControlledBy(existing, uidOf(d)) && equalIgnoreHash(Views.replicaSet(existing).spec?.template, Views.deployment(d).spec?.template)) {
        return false
      }
      yield* patchStatus(ctx, d, { collisionCount: (asFiniteNumber(Views.deployment(d).status?.collisionCount) ?? 0) + 1 })
      return yield* Effect.fail(error)
    }
    const message = `Failed to create new replica set "${nameOf(rs)}": ${error.message}`
    const status = createFailedStatus(d, message, nowMs)
    if (status !== undefined) yield* patchStatus(ctx, d, status)
    yield* ctx.events.record(d, "Warning", Reason.ReplicaSetCreateError, message)
    return yield* Effect.fail(error)
  })

/** Apply a decision's writes in order; the first failure stops the rest (the key is retried). */
const apply = (ctx: Controller.Context, d: JsonObject, decision: Decision, nowMs: number) =>
  Effect.gen(function* () {
    const ns = namespaceOrUndefined(d)
    for (const action of decision.actions) {
      switch (action.type) {
        case "create": {
          if (!(yield* createReplicaSet(ctx, d, action.replicaSet, nowMs))) return { requeueAfterMs: 0 }
          yield* record(ctx, d, action.events)
          break
        }
        case "update":
          yield* ctx.client.patch(ReplicaSetRef, ns, action.name, "merge", action.patch)
          yield* record(ctx, d, action.events)
          break
        case "delete":
          yield* Effect.catchIf(ctx.client.delete(ReplicaSetRef, ns, action.name, { preconditions: { uid: action.uid } }), isNotFound, () => Effect.succeed({}))
          break
        case "annotate":
          yield* ctx.client.patch(DeploymentRef, ns, nameOf(d), "merge", { metadata: { annotations: action.annotations } })
          break
      }
    }
    if (decision.status !== undefined) yield* patchStatus(ctx, d, decision.status)
    return decision.requeueAfterMs === undefined ? undefined : { requeueAfterMs: decision.requeueAfterMs }
  })


/** Queue the Deployments a ReplicaSet change concerns: its controller, or for an orphan, every Deployment selecting it. */
const replicaSetKeys: Controller.KeyMapper = (change, informers) => {
  const keys = new Set(Controller.controllerOf("Deployment")(change, informers))
  const rs = change.object
  if (change.type !== "DELETED" && controllerRefOf(rs) === undefined) {
    const ns = namespaceOrUndefined(rs)
    for (const d of informers.for(DeploymentRef).list(ns)) if (ReplicaSet.selects(d, labelsOf(rs))) keys.add(Informer.keyOf(d))
  }
  return [...keys]
}

/** A deleted pod concerns its Deployment only under Recreate, which waits for old pods to be gone. */
const podKeys: Controller.KeyMapper = (change, informers) => {
  if (change.type !== "DELETED") return []
  const ns = namespaceOrUndefined(change.object)
  const rsRef = controllerRefOf(change.object)
  if (rsRef === undefined || rsRef.kind !== "ReplicaSet") return []
  const rs = informers.for(ReplicaSetRef).get(ns, String(rsRef.name))
  const dRef = rs === undefined ? undefined : controllerRefOf(rs)
  if (dRef === undefined || dRef.kind !== "Deployment") return []
  const d = informers.for(DeploymentRef).get(ns, String(dRef.name))
  return d !== undefined && isRecreate(d) ? [Informer.keyOf(d)] : []
}

const isRecreate = (d: JsonObject): boolean => Views.deployment(d).spec?.strategy?.type === "Recreate"

/** Options of the Deployment reconciler. */
export interface Options {
  /** Concurrent workers (default 5, as kube-controller-manager's `--concurrent-deployment-syncs`). */
  readonly workers?: number
}

/** The Deployment reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => ({
  name: "deployment",
  primary: DeploymentRef,
  watches: [
    { ref: ReplicaSetRef, keys: replicaSetKeys },
    { ref: ResourceRefs.Pod, keys: podKeys }
  ],
  workers: options.workers ?? 5,
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const d = ctx.informers.for(DeploymentRef).get(namespace, name)
      if (d === undefined) return
      const recreate = isRecreate(d)
      const now = yield* Clock.currentTimeMillis
      const decision = decide(
        {
          deployment: d,
          replicaSets: ctx.informers.for(ReplicaSetRef).list(namespace),
          ...(recreate ? { pods: ctx.informers.for(ResourceRefs.Pod).list(namespace) } : {})
        },
        now
      )
      if (!(yield* ReplicaSet.adoptAndRelease(ctx, DeploymentRef, d, ReplicaSetRef, decision.adopt, decision.release))) return
      return yield* apply(ctx, d, decision, now)
    })
})
