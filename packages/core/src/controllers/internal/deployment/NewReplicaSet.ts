/**
 * Finding or drafting the new ReplicaSet of a sync, and keeping revisions (upstream's
 * getAllReplicaSetsAndSyncRevision, getNewReplicaSet and SetNewReplicaSetAnnotations in `sync.go`
 * and `util`). The new ReplicaSet is the one whose template equals the Deployment's apart from
 * `pod-template-hash`; it gets the next revision number.
 *
 * Rollback: apps/v1 has no `spec.rollbackTo`; `kubectl rollout undo` copies an old ReplicaSet's
 * template into the Deployment, so that old ReplicaSet is found here as the new one and moves to
 * the next revision, its earlier numbers kept in `revision-history`. No ReplicaSet is created.
 */
import * as Conditions from "../../../object/Conditions.js"
import * as Pods from "../../../object/Pods.js"
import { asObject, asStringMap, stableJson } from "../../../object/Json.js"
import { ownerReference } from "../../../object/Metadata.js"
import * as Rollout from "./Rollout.js"
import {
  condition,
  DesiredReplicasAnnotation,
  MaxReplicasAnnotation,
  type Plan,
  Reason,
  revisionOf,
  RevisionAnnotation,
  RevisionHistoryAnnotation,
  type Rs,
  touch
} from "./Plan.js"

// Deployment annotations never copied to its ReplicaSets.
const skipCopy = new Set([
  "kubectl.kubernetes.io/last-applied-configuration",
  RevisionAnnotation,
  RevisionHistoryAnnotation,
  DesiredReplicasAnnotation,
  MaxReplicasAnnotation,
  "deprecated.deployment.rollback.to"
])

/** Upstream's SetReplicasAnnotations: the Deployment's size and max size this ReplicaSet was sized for. */
export const setReplicasAnnotations = (plan: Plan, rs: Rs): void => {
  const want = { [DesiredReplicasAnnotation]: String(plan.spec.replicas), [MaxReplicasAnnotation]: String(plan.spec.replicas + plan.surge) }
  for (const [k, v] of Object.entries(want)) if (rs.annotations[k] !== v) rs.annotations[k] = v
}

/** Upstream's SetNewReplicaSetAnnotations: copy the Deployment's annotations, move the revision up. */
const setNewReplicaSetAnnotations = (plan: Plan, rs: Rs, newRevision: number, exists: boolean): void => {
  for (const [k, v] of Object.entries(plan.spec.annotations)) if (!skipCopy.has(k) && rs.annotations[k] !== v) rs.annotations[k] = v
  const oldRevision = rs.annotations[RevisionAnnotation]
  const oldNumber = Rollout.parseRevision(oldRevision)
  if (oldRevision !== undefined && oldRevision !== "" && String(oldNumber) !== oldRevision) return
  if (oldNumber < newRevision) {
    rs.annotations[RevisionAnnotation] = String(newRevision)
    // A ReplicaSet that had a revision and gets a newer one is being rolled back to: keep its past.
    if (oldRevision !== undefined) {
      const history = Rollout.appendRevisionHistory(rs.annotations[RevisionHistoryAnnotation], oldRevision)
      if (history !== undefined) rs.annotations[RevisionHistoryAnnotation] = history
    }
  }
  if (!exists) setReplicasAnnotations(plan, rs)
}

const setDeploymentRevision = (plan: Plan, revision: string | undefined): void => {
  if (revision !== undefined && plan.spec.annotations[RevisionAnnotation] !== revision) plan.deploymentAnnotations[RevisionAnnotation] = revision
}

/** The new ReplicaSet (if any) and the old ones. */
export interface Split {
  readonly newRS: Rs | undefined
  readonly olds: ReadonlyArray<Rs>
}

/**
 * Upstream's getAllReplicaSetsAndSyncRevision: the new ReplicaSet brought to the next revision
 * (and `minReadySeconds`), or, with `create`, a new one drafted at its first size.
 */
export const find = (plan: Plan, create: boolean): Split => {
  const { spec } = plan
  const existing = [...plan.replicaSets].sort(Rollout.byCreation).find((rs) => Rollout.equalIgnoreHash(rs.template, spec.template))
  const olds = plan.replicaSets.filter((rs) => rs !== existing)
  const newRevision = Math.max(0, ...olds.map(revisionOf)) + 1
  if (existing !== undefined) {
    setNewReplicaSetAnnotations(plan, existing, newRevision, true)
    existing.minReadySeconds = spec.minReadySeconds
    if (stableJson(existing.annotations) !== stableJson(existing.storedAnnotations) || existing.minReadySeconds !== existing.storedMinReadySeconds) {
      touch(plan, existing)
    }
    setDeploymentRevision(plan, existing.annotations[RevisionAnnotation])
    if (plan.deadline && Conditions.get(plan.conditions, "Progressing") === undefined) {
      condition(plan, { type: "Progressing", status: "True", reason: Reason.FoundNewReplicaSet, message: `Found new replica set "${existing.name}"` })
    }
    return { newRS: existing, olds }
  }
  if (!create) return { newRS: undefined, olds }
  const rs = draft(plan)
  rs.replicas = Rollout.newReplicas(spec.strategy, spec.replicas, Rollout.sum(olds, Rollout.podBound), 0)
  setNewReplicaSetAnnotations(plan, rs, newRevision, false)
  if (rs.replicas > 0) rs.events.push(`Scaled up replica set ${rs.name} from 0 to ${rs.replicas}`)
  plan.replicaSets.push(rs)
  plan.created = rs
  setDeploymentRevision(plan, String(newRevision))
  if (plan.deadline) {
    condition(plan, { type: "Progressing", status: "True", reason: Reason.NewReplicaSetCreated, message: `Created new replica set "${rs.name}"` })
  }
  return { newRS: rs, olds }
}

/** The new ReplicaSet of the Deployment's template: `<name>-<hash>`, the hash in its labels and selector, size 0. */
const draft = (plan: Plan): Rs => {
  const { spec } = plan
  const hash = Pods.templateHash(spec.template, plan.collisionCount)
  const tm = asObject(spec.template["metadata"])
  const labels = { ...asStringMap(tm["labels"]), [Rollout.PodTemplateHashLabel]: hash }
  const template = { ...spec.template, metadata: { ...tm, labels } }
  const selector = asObject(spec.selector)
  return {
    ...Rollout.planned({
      apiVersion: "apps/v1",
      kind: "ReplicaSet",
      metadata: { name: `${spec.name}-${hash}`, namespace: spec.namespace, labels, ownerReferences: [ownerReference(plan.deployment)] },
      spec: {
        replicas: 0,
        minReadySeconds: spec.minReadySeconds,
        selector: { ...selector, matchLabels: { ...asStringMap(selector["matchLabels"]), [Rollout.PodTemplateHashLabel]: hash } },
        template
      }
    }),
    exists: false,
    createdMs: plan.nowMs,
    storedReplicas: 0
  }
}
