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
import type * as Client from "../client/Client.js"
import * as Conditions from "../object/Conditions.js"
import * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import * as Rollout from "./internal/Rollout.js"
import * as Pods from "../object/Pods.js"
import * as ReplicaSet from "./ReplicaSet.js"
import { type JsonObject, stableJson } from "../object/Json.js"
import { controllerRefOf, isControlledBy, isTerminating, labelsOf, metadataOf, ownerReference, rfc3339, timeMs } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"

type Condition = Conditions.Condition

/** The Deployment resource. */
export const DeploymentRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "Deployment" }

const ReplicaSetRef = ReplicaSet.ReplicaSetRef

/** The label telling a Deployment's ReplicaSets (and their pods) apart. */
export const PodTemplateHashLabel = Rollout.PodTemplateHashLabel
/** The revision of a ReplicaSet, and of the Deployment (its newest). */
export const RevisionAnnotation = "deployment.kubernetes.io/revision"
/** Earlier revisions of a ReplicaSet that was rolled back to. */
export const RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
/** The Deployment's `spec.replicas` when it last scaled this ReplicaSet. */
export const DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
/** The Deployment's `replicas + maxSurge` when it last scaled this ReplicaSet. */
export const MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
/** The template annotation `kubectl rollout restart` sets. */
export const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

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

// Deployment annotations never copied to its ReplicaSets.
const skipCopy = new Set([
  "kubectl.kubernetes.io/last-applied-configuration",
  RevisionAnnotation,
  RevisionHistoryAnnotation,
  DesiredReplicasAnnotation,
  MaxReplicasAnnotation,
  "deprecated.deployment.rollback.to"
])

const { byCreation, podBound, sum, num, obj, arr, nameOf, uidOf, parseRevision, planned, specOf, countsOf, complete, progressed, hasProgressDeadline } = Rollout
type Rs = Rollout.Planned
const revisionOf = (rs: Rs) => parseRevision(rs.annotations[RevisionAnnotation])

/** Whether two pod templates are equal apart from the `pod-template-hash` label (upstream's EqualIgnoreHash). */
export const equalIgnoreHash = Rollout.equalIgnoreHash

/**
 * Set a Deployment condition as upstream's SetDeploymentCondition: no change when status and
 * reason are the same (a new message alone does not count); otherwise `lastUpdateTime` moves and
 * `lastTransitionTime` only with the status.
 */
const setCondition = (list: ReadonlyArray<Condition>, next: Omit<Condition, "lastTransitionTime" | "lastUpdateTime">, now: string): ReadonlyArray<Condition> => {
  const old = Conditions.get(list, next.type)
  if (old !== undefined && old.status === next.status && old.reason === next.reason) return list
  return Conditions.set(list, next, now, { updateTime: true })
}

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

/** Decide one sync of a Deployment at `nowMs` (pure): upstream's syncDeployment as a plan. */
export const decide = (observed: Observed, nowMs: number): Decision => {
  const d = observed.deployment
  const spec = specOf(d)
  const now = rfc3339(nowMs)
  const storedStatus = obj(d["status"])
  const stored = countsOf(storedStatus)
  const claimed = ReplicaSet.claim(d, observed.replicaSets)
  const rsList = claimed.owned.map(planned)
  const surge = Rollout.maxSurge(spec.strategy, spec.replicas)
  const deadline = hasProgressDeadline(spec)

  let conditions = arr(storedStatus["conditions"]) as ReadonlyArray<Condition>
  const collisionCount = typeof storedStatus["collisionCount"] === "number" ? storedStatus["collisionCount"] : undefined
  const deploymentAnnotations: Record<string, string> = {}
  let created: Rs | undefined
  const deletes: Array<Rs> = []
  const touched: Array<Rs> = []
  let requeueAfterMs: number | undefined
  let counts: Rollout.Counts = stored

  const touch = (rs: Rs) => {
    if (!touched.includes(rs)) touched.push(rs)
  }

  const setReplicasAnnotations = (rs: Rs) => {
    const want = { [DesiredReplicasAnnotation]: String(spec.replicas), [MaxReplicasAnnotation]: String(spec.replicas + surge) }
    for (const [k, v] of Object.entries(want)) if (rs.annotations[k] !== v) rs.annotations[k] = v
  }

  /** Upstream's SetNewReplicaSetAnnotations: copy the Deployment's annotations, move the revision up. */
  const setNewReplicaSetAnnotations = (rs: Rs, newRevision: number, exists: boolean) => {
    for (const [k, v] of Object.entries(spec.annotations)) if (!skipCopy.has(k) && rs.annotations[k] !== v) rs.annotations[k] = v
    const oldRevision = rs.annotations[RevisionAnnotation]
    const oldNumber = parseRevision(oldRevision)
    if (oldRevision !== undefined && oldRevision !== "" && String(oldNumber) !== oldRevision) return
    if (oldNumber < newRevision) {
      rs.annotations[RevisionAnnotation] = String(newRevision)
      // A ReplicaSet that had a revision and gets a newer one is being rolled back to: keep its past.
      if (oldRevision !== undefined) {
        const history = Rollout.appendRevisionHistory(rs.annotations[RevisionHistoryAnnotation], oldRevision)
        if (history !== undefined) rs.annotations[RevisionHistoryAnnotation] = history
      }
    }
    if (!exists) setReplicasAnnotations(rs)
  }

  const setDeploymentRevision = (revision: string | undefined) => {
    if (revision !== undefined && spec.annotations[RevisionAnnotation] !== revision) deploymentAnnotations[RevisionAnnotation] = revision
  }

  /** Upstream's scaleReplicaSet: set the size and the replicas annotations; an event on a size change. */
  const scale = (rs: Rs, to: number, operation: string) => {
    const before = stableJson(rs.annotations)
    setReplicasAnnotations(rs)
    const resized = rs.replicas !== to
    if (resized) {
      rs.events.push(`Scaled ${operation} replica set ${rs.name} from ${rs.replicas} to ${to}`)
      rs.replicas = to
    }
    if (resized || stableJson(rs.annotations) !== before) touch(rs)
    return resized
  }
  const scaleAndRecord = (rs: Rs, to: number) => (rs.replicas === to ? false : scale(rs, to, rs.replicas < to ? "up" : "down"))

  /** Upstream's getAllReplicaSetsAndSyncRevision (with getNewReplicaSet). */
  const replicaSets = (create: boolean): { readonly newRS: Rs | undefined; readonly olds: ReadonlyArray<Rs> } => {
    const existing = [...rsList].sort(byCreation).find((rs) => equalIgnoreHash(rs.template, spec.template))
    const olds = rsList.filter((rs) => rs !== existing)
    const newRevision = Math.max(0, ...olds.map(revisionOf)) + 1
    if (existing !== undefined) {
      setNewReplicaSetAnnotations(existing, newRevision, true)
      existing.minReadySeconds = spec.minReadySeconds
      if (stableJson(existing.annotations) !== stableJson(existing.storedAnnotations) || existing.minReadySeconds !== existing.storedMinReadySeconds) {
        touch(existing)
      }
      setDeploymentRevision(existing.annotations[RevisionAnnotation])
      if (deadline && Conditions.get(conditions, "Progressing") === undefined) {
        conditions = setCondition(conditions, { type: "Progressing", status: "True", reason: Reason.FoundNewReplicaSet, message: `Found new replica set "${existing.name}"` }, now)
      }
      return { newRS: existing, olds }
    }
    if (!create) return { newRS: undefined, olds }
    const hash = Pods.templateHash(spec.template, collisionCount)
    const tm = obj(spec.template["metadata"])
    const labels = { ...(obj(tm["labels"]) as Record<string, string>), [PodTemplateHashLabel]: hash }
    const template = { ...spec.template, metadata: { ...tm, labels } }
    const selector = obj(spec.selector)
    const rs: Rs = {
      ...planned({
        apiVersion: "apps/v1",
        kind: "ReplicaSet",
        metadata: { name: `${spec.name}-${hash}`, namespace: spec.namespace, labels, ownerReferences: [ownerReference(d)] },
        spec: {
          replicas: 0,
          minReadySeconds: spec.minReadySeconds,
          selector: { ...selector, matchLabels: { ...(obj(selector["matchLabels"]) as Record<string, string>), [PodTemplateHashLabel]: hash } },
          template
        }
      }),
      exists: false,
      createdMs: nowMs,
      storedReplicas: 0
    }
    rs.replicas = Rollout.newReplicas(spec.strategy, spec.replicas, sum(olds, podBound), 0)
    setNewReplicaSetAnnotations(rs, newRevision, false)
    if (rs.replicas > 0) rs.events.push(`Scaled up replica set ${rs.name} from 0 to ${rs.replicas}`)
    rsList.push(rs)
    created = rs
    setDeploymentRevision(String(newRevision))
    if (deadline) {
      conditions = setCondition(conditions, { type: "Progressing", status: "True", reason: Reason.NewReplicaSetCreated, message: `Created new replica set "${rs.name}"` }, now)
    }
    return { newRS: rs, olds }
  }

  /** Upstream's calculateStatus: counts from the ReplicaSets, and the Available condition. */
  const calculateStatus = (all: ReadonlyArray<Rs>, newRS: Rs | undefined) => {
    const available = sum(all, (rs) => rs.available)
    counts = {
      observedGeneration: spec.generation,
      replicas: sum(all, (rs) => rs.statusReplicas),
      updatedReplicas: newRS?.statusReplicas ?? 0,
      readyReplicas: sum(all, (rs) => rs.ready),
      availableReplicas: available,
      unavailableReplicas: Math.max(0, sum(all, (rs) => rs.replicas) - available)
    }
    conditions = setCondition(
      conditions,
      available >= spec.replicas - Rollout.maxUnavailable(spec.strategy, spec.replicas)
        ? { type: "Available", status: "True", reason: Reason.MinimumReplicasAvailable, message: "Deployment has minimum availability." }
        : { type: "Available", status: "False", reason: Reason.MinimumReplicasUnavailable, message: "Deployment does not have minimum availability." },
      now
    )
  }

  /** Upstream's syncRolloutStatus: status plus the Progressing condition and the deadline check. */
  const rolloutStatus = (all: ReadonlyArray<Rs>, newRS: Rs | undefined) => {
    const current = Conditions.get(conditions, "Progressing")
    calculateStatus(all, newRS)
    if (!deadline) conditions = Conditions.remove(conditions, "Progressing")
    const alreadyComplete = counts.replicas === counts.updatedReplicas && current?.reason === Reason.NewReplicaSetAvailable
    const subject = newRS !== undefined ? `ReplicaSet "${newRS.name}"` : `Deployment "${spec.name}"`
    if (deadline && !alreadyComplete) {
      if (complete(spec, counts)) {
        conditions = setCondition(conditions, { type: "Progressing", status: "True", reason: Reason.NewReplicaSetAvailable, message: `${subject} has successfully progressed.` }, now)
      } else if (progressed(stored, counts)) {
        // Progress moves lastUpdateTime even when the reason stays: the deadline counts from it.
        const old = Conditions.get(conditions, "Progressing")
        conditions = [
          ...Conditions.remove(conditions, "Progressing"),
          {
            type: "Progressing",
            status: "True",
            reason: Reason.ReplicaSetUpdated,
            message: `${subject} is progressing.`,
            lastUpdateTime: now,
            lastTransitionTime: old?.status === "True" && old.lastTransitionTime !== undefined ? old.lastTransitionTime : now
          }
        ]
      } else if (timedOut()) {
        conditions = setCondition(conditions, { type: "Progressing", status: "False", reason: Reason.ProgressDeadlineExceeded, message: `${subject} has timed out progressing.` }, now)
      }
    }
    // The new ReplicaSet's failure first, else any old one's.
    const failure = newRS?.failure ?? all.find((rs) => rs.failure !== undefined)?.failure
    if (failure !== undefined) {
      const old = Conditions.get(conditions, "ReplicaFailure")
      if (old === undefined || old.status !== failure.status || old.reason !== failure.reason) {
        const at = failure.lastTransitionTime ?? now
        conditions = [
          ...Conditions.remove(conditions, "ReplicaFailure"),
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
    } else conditions = Conditions.remove(conditions, "ReplicaFailure")
    // Look again when the deadline passes, unless the rollout is done or already timed out.
    const cond = Conditions.get(conditions, "Progressing")
    const from = timeMs(cond?.lastUpdateTime)
    if (deadline && cond !== undefined && from !== undefined && !complete(spec, counts) && cond.reason !== Reason.ProgressDeadlineExceeded) {
      // Timestamps have whole seconds and the check is strict: a little past the deadline.
      requeueAfterMs = Math.max(0, from + spec.progressDeadlineSeconds! * 1000 - nowMs) + 100
    }
  }

  /** Upstream's DeploymentTimedOut, on the condition as it stands now. */
  const timedOut = () => {
    const cond = Conditions.get(conditions, "Progressing")
    if (cond === undefined || cond.reason === Reason.NewReplicaSetAvailable) return false
    if (cond.reason === Reason.ProgressDeadlineExceeded) return true
    const from = timeMs(cond.lastUpdateTime)
    return from !== undefined && from + spec.progressDeadlineSeconds! * 1000 < nowMs
  }

  /** Upstream's cleanupDeployment: delete the oldest empty ReplicaSets beyond revisionHistoryLimit. */
  const cleanup = (olds: ReadonlyArray<Rs>) => {
    if (spec.revisionHistoryLimit === undefined) return
    const alive = olds.filter((rs) => !rs.deleting && rs.exists)
    const diff = alive.length - spec.revisionHistoryLimit
    if (diff <= 0) return
    const byRevision = [...alive].sort((a, b) => revisionOf(a) - revisionOf(b) || byCreation(a, b))
    for (const rs of byRevision.slice(0, diff)) {
      if (rs.statusReplicas !== 0 || rs.replicas !== 0 || rs.storedReplicas !== 0 || rs.generation > rs.observedGeneration) continue
      deletes.push(rs)
    }
  }

  /** Upstream's scale: only one active ReplicaSet takes the whole size; else proportional scaling. */
  const scaleAll = (newRS: Rs | undefined, olds: ReadonlyArray<Rs>) => {
    const only = Rollout.activeOrLatest(newRS, olds)
    if (only !== undefined) {
      scaleAndRecord(only, spec.replicas)
      return
    }
    // A saturated new ReplicaSet (adopted, say) leaves nothing for the old ones.
    const saturated =
      newRS !== undefined &&
      newRS.replicas === spec.replicas &&
      newRS.annotations[DesiredReplicasAnnotation] === String(spec.replicas) &&
      newRS.available === spec.replicas
    if (saturated) {
      for (const rs of olds.filter((o) => o.replicas > 0)) scaleAndRecord(rs, 0)
      return
    }
    if (spec.strategy.type !== "RollingUpdate") return
    const active = [...olds, ...(newRS ? [newRS] : [])].filter((rs) => rs.replicas > 0)
    const { sizes, operation } = Rollout.proportionalSizes(active, {
      desired: spec.replicas,
      maxSurge: surge,
      fallbackMax: stored.replicas,
      annotatedMax: (rs) => (rs.annotations[MaxReplicasAnnotation] === undefined ? undefined : parseRevision(rs.annotations[MaxReplicasAnnotation]))
    })
    for (const [rs, size] of sizes) scale(rs, size, operation)
  }

  /** Upstream's isScalingEvent: an active ReplicaSet was last sized for a different `replicas`. */
  const isScalingEvent = () => {
    const { newRS, olds } = replicaSets(false)
    return [...olds, ...(newRS ? [newRS] : [])].some((rs) => {
      const desired = rs.annotations[DesiredReplicasAnnotation]
      return rs.replicas > 0 && desired !== undefined && /^\d+$/.test(desired) && Number(desired) !== spec.replicas
    })
  }

  /** Upstream's sync: scale (and clean up when paused), status without progress estimation. */
  const sync = () => {
    const { newRS, olds } = replicaSets(false)
    scaleAll(newRS, olds)
    if (spec.paused) cleanup(olds)
    calculateStatus([...olds, ...(newRS ? [newRS] : [])], newRS)
  }

  /** Upstream's rolloutRolling (reconcileNewReplicaSet, then reconcileOldReplicaSets). */
  const rolloutRolling = () => {
    const { newRS, olds } = replicaSets(true)
    const rs = newRS!
    const all = [...olds, rs]
    let scaledUp = false
    if (rs.replicas > spec.replicas) scaledUp = scaleAndRecord(rs, spec.replicas)
    else if (rs.replicas < spec.replicas) scaledUp = scaleAndRecord(rs, Rollout.newReplicas(spec.strategy, spec.replicas, sum(all, podBound), rs.replicas))
    if (!scaledUp) {
      const steps = Rollout.rollingScaleDown(spec.strategy, spec.replicas, all, olds.filter((o) => o.replicas > 0), rs)
      for (const [old, size] of steps) scaleAndRecord(old, size)
      if (steps.length === 0 && complete(spec, stored)) cleanup(olds)
    }
    rolloutStatus(all, rs)
  }

  /** Upstream's rolloutRecreate: old to 0, wait for their pods to go, then the new one at full size. */
  const rolloutRecreate = () => {
    const first = replicaSets(false)
    const olds = first.olds
    let scaledDown = false
    for (const rs of olds.filter((o) => o.replicas > 0)) scaledDown = scaleAndRecord(rs, 0) || scaledDown
    if (scaledDown || oldPodsRunning(first.newRS, olds)) return rolloutStatus([...olds, ...(first.newRS ? [first.newRS] : [])], first.newRS)
    const newRS = first.newRS ?? replicaSets(true).newRS!
    scaleAndRecord(newRS, spec.replicas)
    if (complete(spec, stored)) cleanup(olds)
    rolloutStatus([...olds, newRS], newRS)
  }

  /** Whether pods of old ReplicaSets may still run (any not finished, terminating ones included). */
  const oldPodsRunning = (newRS: Rs | undefined, olds: ReadonlyArray<Rs>) => {
    if (sum(olds, (rs) => rs.statusReplicas) > 0) return true
    const oldUids = new Set(olds.map((rs) => rs.uid))
    return (observed.pods ?? []).some((pod) => {
      const owner = controllerRefOf(pod)?.["uid"]
      if (typeof owner !== "string" || !oldUids.has(owner) || owner === newRS?.uid) return false
      if (!ReplicaSet.selects(d, obj(metadataOf(pod)["labels"]) as Record<string, string>)) return false
      const phase = Pods.phase(pod)
      return phase !== "Succeeded" && phase !== "Failed"
    })
  }

  /** Upstream's checkPausedConditions: Progressing says paused or resumed (unless timed out). */
  const checkPaused = () => {
    if (!deadline) return
    const cond = Conditions.get(conditions, "Progressing")
    if (cond?.reason === Reason.ProgressDeadlineExceeded) return
    const pausedNoted = cond?.reason === Reason.DeploymentPaused
    if (spec.paused && !pausedNoted) {
      conditions = setCondition(conditions, { type: "Progressing", status: "Unknown", reason: Reason.DeploymentPaused, message: "Deployment is paused" }, now)
    } else if (!spec.paused && pausedNoted) {
      conditions = setCondition(conditions, { type: "Progressing", status: "Unknown", reason: Reason.DeploymentResumed, message: "Deployment is resumed" }, now)
    }
  }

  if (isTerminating(d)) {
    // Being deleted (upstream's syncStatusOnly): no scaling, only the status and revisions kept current.
    const { newRS, olds } = replicaSets(false)
    calculateStatus([...olds, ...(newRS ? [newRS] : [])], newRS)
  } else {
    checkPaused()
    if (spec.paused || isScalingEvent()) sync()
    else if (spec.strategy.type === "Recreate") rolloutRecreate()
    else rolloutRolling()
  }

  const actions: Array<Action> = []
  const scalingEvents = (rs: Rs): ReadonlyArray<Event> => rs.events.map((message) => ({ type: "Normal", reason: "ScalingReplicaSet", message }))
  if (created !== undefined) actions.push({ type: "create", replicaSet: materialize(created), events: scalingEvents(created) })
  for (const rs of touched) {
    if (rs === created) continue
    const changed = Object.fromEntries(Object.entries(rs.annotations).filter(([k, v]) => rs.storedAnnotations[k] !== v))
    const specPatch = {
      ...(rs.replicas !== rs.storedReplicas ? { replicas: rs.replicas } : {}),
      ...(rs.minReadySeconds !== rs.storedMinReadySeconds ? { minReadySeconds: rs.minReadySeconds } : {})
    }
    if (Object.keys(changed).length === 0 && Object.keys(specPatch).length === 0) continue
    actions.push({
      type: "update",
      name: rs.name,
      patch: {
        ...(Object.keys(changed).length > 0 ? { metadata: { annotations: changed } } : {}),
        ...(Object.keys(specPatch).length > 0 ? { spec: specPatch } : {})
      },
      events: scalingEvents(rs)
    })
  }
  for (const rs of deletes) actions.push({ type: "delete", name: rs.name, uid: rs.uid })
  if (Object.keys(deploymentAnnotations).length > 0) actions.push({ type: "annotate", annotations: deploymentAnnotations })

  const status: JsonObject = {
    ...counts,
    ...(conditions.length > 0 ? { conditions } : {}),
    ...(collisionCount !== undefined ? { collisionCount } : {})
  }
  const changed =
    stableJson(countsOf(storedStatus)) !== stableJson(counts) ||
    stableJson(arr(storedStatus["conditions"])) !== stableJson(conditions)
  return { adopt: claimed.adopt, release: claimed.release, actions, status: changed ? status : undefined, requeueAfterMs }
}

/** The ReplicaSet a planned creation writes: the draft with the planned size and annotations. */
const materialize = (rs: Rs): JsonObject => ({
  ...rs.object,
  metadata: { ...metadataOf(rs.object), annotations: rs.annotations },
  spec: { ...obj(rs.object["spec"]), replicas: rs.replicas, minReadySeconds: rs.minReadySeconds }
})

/**
 * The status after creating the new ReplicaSet failed for another reason than a name collision:
 * `Progressing=False` with reason `ReplicaSetCreateError` (only when a progress deadline is set).
 */
export const createFailedStatus = (d: JsonObject, message: string, nowMs: number): JsonObject | undefined => {
  if (!hasProgressDeadline(specOf(d))) return undefined
  const conditions = arr(obj(d["status"])["conditions"]) as ReadonlyArray<Condition>
  return {
    conditions: setCondition(conditions, { type: "Progressing", status: "False", reason: Reason.ReplicaSetCreateError, message }, rfc3339(nowMs))
  }
}

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

const patchStatus = (ctx: Controller.Context, d: JsonObject, status: JsonObject) =>
  Effect.catchIf(
    ctx.client.patch(DeploymentRef, metadataOf(d)["namespace"] as string | undefined, nameOf(d), "merge", { status }, "status"),
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
    const ns = metadataOf(d)["namespace"] as string | undefined
    if (error.status.reason === "AlreadyExists") {
      const existing = yield* Effect.catchIf(ctx.client.get(ReplicaSetRef, ns, nameOf(rs)), isNotFound, () => Effect.succeed(undefined))
      // Ours with this template: an informer behind; the next sync finds it.
      if (existing !== undefined && isControlledBy(existing, uidOf(d)) && equalIgnoreHash(obj(existing["spec"])["template"], obj(d["spec"])["template"])) {
        return false
      }
      yield* patchStatus(ctx, d, { collisionCount: num(obj(d["status"])["collisionCount"]) + 1 })
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
    const ns = metadataOf(d)["namespace"] as string | undefined
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
    const ns = metadataOf(rs)["namespace"] as string | undefined
    for (const d of informers.for(DeploymentRef).list(ns)) if (ReplicaSet.selects(d, labelsOf(rs))) keys.add(Informer.keyOf(d))
  }
  return [...keys]
}

/** A deleted pod concerns its Deployment only under Recreate, which waits for old pods to be gone. */
const podKeys: Controller.KeyMapper = (change, informers) => {
  if (change.type !== "DELETED") return []
  const ns = metadataOf(change.object)["namespace"] as string | undefined
  const rsRef = controllerRefOf(change.object)
  if (rsRef === undefined || rsRef["kind"] !== "ReplicaSet") return []
  const rs = informers.for(ReplicaSetRef).get(ns, String(rsRef["name"]))
  const dRef = rs === undefined ? undefined : controllerRefOf(rs)
  if (dRef === undefined || dRef["kind"] !== "Deployment") return []
  const d = informers.for(DeploymentRef).get(ns, String(dRef["name"]))
  return d !== undefined && obj(obj(d["spec"])["strategy"])["type"] === "Recreate" ? [Informer.keyOf(d)] : []
}

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
      const recreate = obj(obj(d["spec"])["strategy"])["type"] === "Recreate"
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
