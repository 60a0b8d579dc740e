/**
 * The ReplicaSet controller: keeps `spec.replicas` active pods that match a ReplicaSet's selector
 * and are controlled by it, following kube-controller-manager's replicaset controller. It claims
 * pods first (adopts matching orphans with a controller ownerReference, releases owned pods whose
 * labels no longer match), then creates the missing pods from the template in slow-start batches
 * (1, 2, 4, …, at most 500 per sync) or deletes the extras in upstream's order (unscheduled,
 * pending, not ready, cheaper to delete, doubled up on a node, ready for less time, more restarts,
 * newer first), and reports `replicas`, `fullyLabeledReplicas`, `readyReplicas`,
 * `availableReplicas`, `observedGeneration` and the `ReplicaFailure` condition (FailedCreate /
 * FailedDelete) through the status subresource. Pods being deleted and finished pods do not count.
 *
 * Departures: no "expectations" (the runner waits until the informers show this reconcile's
 * writes, see Controller.ts); the minReadySeconds requeue is at the moment the next pod becomes
 * available rather than a whole `minReadySeconds` later; the status is written with a merge patch
 * instead of an update retried on conflict; ready-time and age comparisons are exact rather than
 * log-bucketed (upstream's LogarithmicScaleDown); a ReplicaSet being deleted neither adopts,
 * releases, creates nor deletes pods (upstream skips the same), but its status stays current.
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import * as LabelSelector from "../model/LabelSelector.js"
import * as Conditions from "../object/Conditions.js"
import * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import * as Pods from "../object/Pods.js"
import { type JsonObject, asArray, asObject, stableJson } from "../object/Json.js"
import { controllerRefOf, isTerminating, labelsOf, metadataOf, nameOf, ownerReference, rfc3339, timeMs, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The ReplicaSet resource. */
export const ReplicaSetRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "ReplicaSet" }


/** At most this many pods are created or deleted in one sync (upstream's `burstReplicas`). */
export const burstReplicas = 500

/** The annotation that makes a pod cheaper (lower) or dearer (higher) to delete on scale-down. */
export const PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

const spec = (rs: JsonObject) => asObject(rs["spec"])

/** The desired replica count (`spec.replicas`, 1 when unset as the API defaults it). */
export const desiredReplicas = (rs: JsonObject): number => {
  const n = spec(rs)["replicas"]
  return typeof n === "number" ? n : 1
}

/** Whether the workload's `spec.selector` selects these labels (a missing selector selects nothing). */
export const selects = (owner: JsonObject, labels: Readonly<Record<string, string>>): boolean => {
  const selector = spec(owner)["selector"]
  return selector === undefined ? false : LabelSelector.matches(selector as LabelSelector.LabelSelector, labels)
}

/** What an owner claims among candidate objects (upstream's ControllerRefManager). */
export interface Claim {
  /** Objects the owner controls (or will, once adopted) whose labels its selector matches. */
  readonly owned: ReadonlyArray<JsonObject>
  /** Matching orphans to adopt. */
  readonly adopt: ReadonlyArray<JsonObject>
  /** Controlled objects that no longer match, to release. */
  readonly release: ReadonlyArray<JsonObject>
}

/**
 * Claims objects for `owner` by its `spec.selector` (upstream's ClaimObject): keep what it controls
 * and still selects, release what it controls but no longer selects, adopt orphans it selects that
 * are not being deleted; an owner being deleted adopts and releases nothing.
 */
export const claim = (owner: JsonObject, candidates: ReadonlyArray<JsonObject>): Claim => {
  const uid = uidOf(owner)
  const deleting = isTerminating(owner)
  const owned: Array<JsonObject> = []
  const adopt: Array<JsonObject> = []
  const release: Array<JsonObject> = []
  for (const o of candidates) {
    const ref = controllerRefOf(o)
    const matches = selects(owner, labelsOf(o))
    if (ref !== undefined) {
      if (ref["uid"] !== uid) continue
      if (matches) owned.push(o)
      else if (!deleting) release.push(o)
    } else if (matches && !deleting && !isTerminating(o)) {
      adopt.push(o)
      owned.push(o)
    }
  }
  return { owned, adopt, release }
}

/** Claims pods for `rs` among `pods` (its namespace's); only active pods take part, as upstream. */
export const claimPods = (rs: JsonObject, pods: ReadonlyArray<JsonObject>): Claim => claim(rs, pods.filter(Pods.isActive))

/** Batch sizes of a slow start: `initial`, doubling, until `count` is covered (upstream's slowStartBatch). */
export const slowStartBatches = (count: number, initial = 1): ReadonlyArray<number> => {
  const batches: Array<number> = []
  let left = count
  for (let size = Math.max(1, initial); left > 0; size *= 2) {
    const n = Math.min(size, left)
    batches.push(n)
    left -= n
  }
  return batches
}

const phaseOrdinal = (pod: JsonObject): number => {
  switch (Pods.phase(pod)) {
    case "Pending":
      return 0
    case "Unknown":
      return 1
    case "Running":
      return 2
    default:
      return 3
  }
}

const deletionCost = (pod: JsonObject): number => {
  const v = Number(asObject(metadataOf(pod)["annotations"])[PodDeletionCostAnnotation])
  return Number.isFinite(v) ? v : 0
}

const restarts = (pod: JsonObject): number =>
  asArray(asObject(pod["status"])["containerStatuses"]).reduce<number>((max, s) => Math.max(max, Number(asObject(s)["restartCount"] ?? 0)), 0)

const readySince = (pod: JsonObject): number => timeMs(Pods.condition(pod, "Ready")?.["lastTransitionTime"]) ?? 0
const createdAt = (pod: JsonObject): number => timeMs(metadataOf(pod)["creationTimestamp"]) ?? 0
const nodeOf = (pod: JsonObject): string => String(spec(pod)["nodeName"] ?? "")

/**
 * Negative when `a` should be deleted before `b` (upstream's ActivePodsWithRanks): unscheduled
 * first, then Pending before Unknown before Running, not ready first, lower deletion cost, more
 * pods of the same owner on the node (`rank`), ready for less time, more restarts, newer.
 */
const compareForDeletion = (rank: (pod: JsonObject) => number) => (a: JsonObject, b: JsonObject): number => {
  const na = nodeOf(a) === ""
  const nb = nodeOf(b) === ""
  if (na !== nb) return na ? -1 : 1
  if (phaseOrdinal(a) !== phaseOrdinal(b)) return phaseOrdinal(a) - phaseOrdinal(b)
  const ra = Pods.isReady(a)
  const rb = Pods.isReady(b)
  if (ra !== rb) return ra ? 1 : -1
  if (deletionCost(a) !== deletionCost(b)) return deletionCost(a) - deletionCost(b)
  if (rank(a) !== rank(b)) return rank(b) - rank(a)
  if (ra && rb && readySince(a) !== readySince(b)) return readySince(b) - readySince(a)
  if (restarts(a) !== restarts(b)) return restarts(b) - restarts(a)
  if (createdAt(a) !== createdAt(b)) return createdAt(b) - createdAt(a)
  return nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0
}

/**
 * The `count` pods to delete first among `pods`. `related` are the active pods of every
 * ReplicaSet sharing this one's owner (upstream's indirectly related pods): a pod on a node
 * crowded with its siblings goes before one alone on its node.
 */
export const podsToDelete = (pods: ReadonlyArray<JsonObject>, related: ReadonlyArray<JsonObject>, count: number): ReadonlyArray<JsonObject> => {
  const perNode = new Map<string, number>()
  for (const p of related) {
    const node = nodeOf(p)
    if (node !== "" && Pods.isActive(p)) perNode.set(node, (perNode.get(node) ?? 0) + 1)
  }
  const rank = (p: JsonObject) => (nodeOf(p) === "" ? 0 : (perNode.get(nodeOf(p)) ?? 0))
  return [...pods].sort(compareForDeletion(rank)).slice(0, count)
}

/** The active pods controlled by `rs` or by any ReplicaSet with the same controlling owner. */
const relatedPods = (rs: JsonObject, pods: ReadonlyArray<JsonObject>, replicaSets: ReadonlyArray<JsonObject>): ReadonlyArray<JsonObject> => {
  const owner = controllerRefOf(rs)?.["uid"]
  const uids = new Set([uidOf(rs)])
  if (owner !== undefined) for (const other of replicaSets) if (controllerRefOf(other)?.["uid"] === owner) uids.add(uidOf(other))
  return pods.filter((p) => Pods.isActive(p) && uids.has(String(controllerRefOf(p)?.["uid"] ?? "")))
}

/** Why the last create or delete failed, for the `ReplicaFailure` condition. */
export interface Failure {
  readonly reason: "FailedCreate" | "FailedDelete"
  readonly message: string
}

/**
 * The status of `rs` counting `pods` (the claimed active ones) at `nowMs`; `failure` sets the
 * `ReplicaFailure` condition (kept as first reported while failures go on), its absence clears it.
 */
export const statusOf = (rs: JsonObject, pods: ReadonlyArray<JsonObject>, nowMs: number, failure?: Failure): JsonObject => {
  const minReady = Number(spec(rs)["minReadySeconds"] ?? 0)
  const templateLabels = Object.entries(asObject(asObject(asObject(spec(rs)["template"])["metadata"])["labels"]))
  const old = asObject(rs["status"])
  const current = asArray(old["conditions"]) as ReadonlyArray<Conditions.Condition>
  const conditions =
    failure === undefined
      ? Conditions.remove(current, "ReplicaFailure")
      : Conditions.get(current, "ReplicaFailure") !== undefined
        ? current
        : Conditions.set(current, { type: "ReplicaFailure", status: "True", reason: failure.reason, message: failure.message }, rfc3339(nowMs))
  return {
    replicas: pods.length,
    fullyLabeledReplicas: pods.filter((p) => {
      const labels = labelsOf(p)
      return templateLabels.every(([k, v]) => labels[k] === v)
    }).length,
    readyReplicas: pods.filter(Pods.isReady).length,
    availableReplicas: pods.filter((p) => Pods.isAvailable(p, minReady, nowMs)).length,
    observedGeneration: Number(metadataOf(rs)["generation"] ?? 0),
    ...(conditions.length > 0 ? { conditions } : {})
  }
}

const countKeys = ["replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration"] as const

/** Whether `next` differs from the stored status (absent counts read as 0). */
export const statusChanged = (stored: unknown, next: JsonObject): boolean => {
  const old = asObject(stored)
  if (countKeys.some((k) => Number(old[k] ?? 0) !== Number(next[k] ?? 0))) return true
  return stableJson(asArray(old["conditions"])) !== stableJson(asArray(next["conditions"]))
}

/** What one sync of a ReplicaSet does. */
export interface Decision {
  /** Orphans to adopt (controller ownerReference added). */
  readonly adopt: ReadonlyArray<JsonObject>
  /** Owned pods whose labels no longer match, to release. */
  readonly release: ReadonlyArray<JsonObject>
  /** How many pods to create from the template. */
  readonly create: number
  /** Pods to delete, best candidates first. */
  readonly delete: ReadonlyArray<JsonObject>
  /** The pods counted (claimed, active), from which the status is computed. */
  readonly pods: ReadonlyArray<JsonObject>
  /** The status to write if the actions succeed, or undefined when the stored one is current. */
  readonly status: JsonObject | undefined
  /** When to look again because a ready pod will become available (minReadySeconds). */
  readonly requeueAfterMs: number | undefined
}

/** Observed state for `decide`: the namespace's pods and ReplicaSets. */
export interface Observed {
  readonly pods: ReadonlyArray<JsonObject>
  /** The namespace's ReplicaSets (to rank pods by siblings of the same owner); optional. */
  readonly replicaSets?: ReadonlyArray<JsonObject>
}

/** Decide one sync of `rs` from what is observed at `nowMs` (pure). */
export const decide = (rs: JsonObject, observed: Observed, nowMs: number): Decision => {
  const claim = claimPods(rs, observed.pods)
  const pods = claim.owned
  const deleting = isTerminating(rs)
  const diff = pods.length - desiredReplicas(rs)
  const create = deleting || diff >= 0 ? 0 : Math.min(-diff, burstReplicas)
  const toDelete =
    deleting || diff <= 0 ? [] : podsToDelete(pods, relatedPods(rs, observed.pods, observed.replicaSets ?? [rs]), Math.min(diff, burstReplicas))
  const status = statusOf(rs, pods, nowMs)
  const minReady = Number(spec(rs)["minReadySeconds"] ?? 0)
  const waits = pods.map((p) => Pods.msUntilAvailable(p, minReady, nowMs)).filter((ms): ms is number => ms !== undefined)
  return {
    adopt: claim.adopt,
    release: claim.release,
    create,
    delete: toDelete,
    pods,
    status: statusChanged(rs["status"], status) ? status : undefined,
    // A little past the moment, so the pod is available when we look.
    requeueAfterMs: waits.length > 0 ? Math.min(...waits) + 10 : undefined
  }
}

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

/** A strategic merge patch adding a controller reference, pinned to the pod's resourceVersion. */
const adoptPatch = (owner: JsonObject, pod: JsonObject) => ({
  metadata: { resourceVersion: metadataOf(pod)["resourceVersion"], ownerReferences: [ownerReference(owner)] }
})

/** A strategic merge patch dropping the owner's reference (upstream's release patch). */
const releasePatch = (owner: JsonObject, pod: JsonObject) => ({
  metadata: { resourceVersion: metadataOf(pod)["resourceVersion"], ownerReferences: [{ $patch: "delete", uid: uidOf(owner) }] }
})

/**
 * Adopt and release by patching each object's ownerReferences. Before adopting, the owner is
 * re-read from the API (upstream's canAdopt): an owner deleted or replaced meanwhile adopts nothing.
 * Answers false when the owner is gone or going (nothing more to do this sync).
 */
export const adoptAndRelease = (
  ctx: Controller.Context,
  ref: Client.ResourceRef,
  owner: JsonObject,
  targetRef: Client.ResourceRef,
  adopt: ReadonlyArray<JsonObject>,
  release: ReadonlyArray<JsonObject>
): Effect.Effect<boolean, ApiError.ApiError> =>
  Effect.gen(function* () {
    const m = metadataOf(owner)
    const ns = m["namespace"] as string | undefined
    if (adopt.length > 0) {
      const fresh = yield* Effect.catchIf(ctx.client.get(ref, ns, nameOf(owner)), isNotFound, () => Effect.succeed(undefined))
      if (fresh === undefined || uidOf(fresh) !== uidOf(owner) || isTerminating(fresh)) return false
      yield* Effect.forEach(adopt, (o) => ctx.client.patch(targetRef, ns, nameOf(o), "strategic", adoptPatch(owner, o)), { concurrency: 8, discard: true })
    }
    yield* Effect.forEach(
      release,
      // A target gone already needs no release.
      (o) => Effect.catchIf(ctx.client.patch(targetRef, ns, nameOf(o), "strategic", releasePatch(owner, o)), isNotFound, () => Effect.void),
      { concurrency: 8, discard: true }
    )
    return true
  })

/** Create `count` pods in slow-start batches; answers the first failure, if any. */
const createPods = (ctx: Controller.Context, rs: JsonObject, count: number) =>
  Effect.gen(function* () {
    const template = asObject(spec(rs)["template"])
    for (const size of slowStartBatches(count)) {
      const results = yield* Effect.forEach(
        Array.from({ length: size }),
        () =>
          Effect.either(ctx.client.create(Pods.fromTemplate(template, rs, { generateName: `${nameOf(rs)}-` }))).pipe(
            Effect.tap((r) =>
              r._tag === "Right"
                ? ctx.events.record(rs, "Normal", "SuccessfulCreate", `Created pod: ${nameOf(r.right)}`)
                : ctx.events.record(rs, "Warning", "FailedCreate", `Error creating: ${r.left.message}`)
            )
          ),
        { concurrency: size }
      )
      // A batch with a failure stops the rest: if one create fails (quota, admission), the
      // others would most likely fail the same way.
      const failed = results.find((r) => r._tag === "Left")
      if (failed !== undefined && failed._tag === "Left") return failed.left
    }
    return undefined
  })

/** Delete `pods` (a pod already gone is fine); answers the first failure, if any. */
const deletePods = (ctx: Controller.Context, rs: JsonObject, pods: ReadonlyArray<JsonObject>) =>
  Effect.gen(function* () {
    const results = yield* Effect.forEach(
      pods,
      (pod) =>
        Effect.either(
          ctx.client.delete(ResourceRefs.Pod, metadataOf(pod)["namespace"] as string | undefined, nameOf(pod), { preconditions: { uid: uidOf(pod) } })
        ).pipe(
          Effect.flatMap((r) =>
            r._tag === "Right"
              ? Effect.as(ctx.events.record(rs, "Normal", "SuccessfulDelete", `Deleted pod: ${nameOf(pod)}`), undefined)
              : isNotFound(r.left)
                ? Effect.succeed(undefined)
                : Effect.as(ctx.events.record(rs, "Warning", "FailedDelete", `Error deleting: ${r.left.message}`), r.left)
          )
        ),
      { concurrency: 16 }
    )
    return results.find((e) => e !== undefined)
  })

/** Queue the ReplicaSets a pod change concerns: its controller, or for an orphan, every ReplicaSet selecting it. */
const podKeys: Controller.KeyMapper = (change, informers) => {
  const keys = new Set(Controller.controllerOf("ReplicaSet")(change, informers))
  const pod = change.object
  if (change.type !== "DELETED" && controllerRefOf(pod) === undefined) {
    const old = change.old
    // Upstream looks for adopters only when something that could make one appear changed.
    const worth =
      old === undefined || stableJson(labelsOf(old)) !== stableJson(labelsOf(pod)) || controllerRefOf(old) !== undefined
    if (worth) {
      const ns = metadataOf(pod)["namespace"] as string | undefined
      for (const rs of informers.for(ReplicaSetRef).list(ns)) if (selects(rs, labelsOf(pod))) keys.add(Informer.keyOf(rs))
    }
  }
  return [...keys]
}

/** Options of the ReplicaSet reconciler. */
export interface Options {
  /** Concurrent workers (default 5, as kube-controller-manager's `--concurrent-replicaset-syncs`). */
  readonly workers?: number
}

/** The ReplicaSet reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => ({
  name: "replicaset",
  primary: ReplicaSetRef,
  watches: [{ ref: ResourceRefs.Pod, keys: podKeys }],
  workers: options.workers ?? 5,
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const rs = ctx.informers.for(ReplicaSetRef).get(namespace, name)
      if (rs === undefined) return
      const now = yield* Clock.currentTimeMillis
      const decision = decide(rs, { pods: ctx.informers.for(ResourceRefs.Pod).list(namespace), replicaSets: ctx.informers.for(ReplicaSetRef).list(namespace) }, now)
      const claimed = yield* adoptAndRelease(ctx, ReplicaSetRef, rs, ResourceRefs.Pod, decision.adopt, decision.release)
      if (!claimed) return

      let failure: { readonly error: ApiError.ApiError; readonly reason: Failure["reason"] } | undefined
      if (decision.create > 0) {
        const error = yield* createPods(ctx, rs, decision.create)
        if (error !== undefined) failure = { error, reason: "FailedCreate" }
      } else if (decision.delete.length > 0) {
        const error = yield* deletePods(ctx, rs, decision.delete)
        if (error !== undefined) failure = { error, reason: "FailedDelete" }
      }

      const status =
        failure === undefined
          ? decision.status
          : statusOf(rs, decision.pods, now, { reason: failure.reason, message: failure.error.message })
      if (status !== undefined && (failure === undefined || statusChanged(rs["status"], status))) {
        // Merge patch of the whole status: this controller owns it, so no compare-and-swap is
        // needed; `conditions: null` removes a cleared failure.
        yield* Effect.catchIf(
          ctx.client.patch(ReplicaSetRef, namespace, name, "merge", { status: { ...status, conditions: status["conditions"] ?? null } }, "status"),
          isNotFound,
          () => Effect.void
        )
      }
      if (failure !== undefined) return yield* Effect.fail(failure.error)
      return decision.requeueAfterMs === undefined ? undefined : { requeueAfterMs: decision.requeueAfterMs }
    })
})
