/**
 * `rollout`'s decisions, pure: the status of a Deployment (kubectl's messages word for word, done
 * or not, and a stalled rollout as an error), a StatefulSet or DaemonSet; the revision history
 * from a Deployment's ReplicaSets; and the template `undo` restores.
 */
import { arr, meta, obj, str } from "./Cli.js"

type Json = Record<string, unknown>

/** Where a rollout stands. */
export interface Status {
  readonly done: boolean
  readonly message: string
  /** A rollout that cannot finish (progress deadline exceeded). */
  readonly failed?: boolean
}

const num = (v: unknown) => Number(v ?? 0)

/** kubectl's DeploymentStatusViewer (pure). */
export const deploymentStatus = (d: Json): Status => {
  const m = meta(d)
  const spec = obj(d["spec"])
  const status = obj(d["status"])
  const name = str(m["name"])
  if (num(m["generation"]) > num(status["observedGeneration"])) return { done: false, message: "Waiting for deployment spec update to be observed..." }
  const progressing = arr(status["conditions"]).map(obj).find((c) => c["type"] === "Progressing")
  if (progressing?.["reason"] === "ProgressDeadlineExceeded") return { done: false, failed: true, message: `deployment "${name}" exceeded its progress deadline` }
  const replicas = num(spec["replicas"] ?? 1)
  const updated = num(status["updatedReplicas"])
  const total = num(status["replicas"])
  const available = num(status["availableReplicas"])
  if (updated < replicas) return { done: false, message: `Waiting for deployment "${name}" rollout to finish: ${updated} out of ${replicas} new replicas have been updated...` }
  if (total > updated) return { done: false, message: `Waiting for deployment "${name}" rollout to finish: ${total - updated} old replicas are pending termination...` }
  if (available < updated) return { done: false, message: `Waiting for deployment "${name}" rollout to finish: ${available} of ${updated} updated replicas are available...` }
  return { done: true, message: `deployment "${name}" successfully rolled out` }
}

/** kubectl's StatefulSet and DaemonSet status viewers, simplified (pure). */
export const setStatus = (kind: string, o: Json): Status => {
  const m = meta(o)
  const status = obj(o["status"])
  const name = str(m["name"])
  if (num(m["generation"]) > num(status["observedGeneration"])) return { done: false, message: `Waiting for ${kind.toLowerCase()} spec update to be observed...` }
  if (kind === "DaemonSet") {
    const desired = num(status["desiredNumberScheduled"])
    const updated = num(status["updatedNumberScheduled"])
    const available = num(status["numberAvailable"])
    if (updated < desired) return { done: false, message: `Waiting for daemon set "${name}" rollout to finish: ${updated} out of ${desired} new pods have been updated...` }
    if (available < desired) return { done: false, message: `Waiting for daemon set "${name}" rollout to finish: ${available} of ${desired} updated pods are available...` }
    return { done: true, message: `daemon set "${name}" successfully rolled out` }
  }
  const replicas = num(obj(o["spec"])["replicas"] ?? 1)
  const ready = num(status["readyReplicas"])
  const updated = num(status["updatedReplicas"])
  if (ready < replicas) return { done: false, message: `Waiting for ${replicas - ready} pods to be ready...` }
  if (updated < replicas) return { done: false, message: `Waiting for partitioned roll out to finish: ${updated} out of ${replicas} new pods have been updated...` }
  return { done: true, message: `statefulset rolling update complete ${replicas} pods at revision ${str(status["updateRevision"])}...` }
}

const RevisionAnnotation = "deployment.kubernetes.io/revision"
const ChangeCauseAnnotation = "kubernetes.io/change-cause"

/** A ReplicaSet's revision number (0 when it has none). */
export const revisionOf = (rs: Json): number => num(obj(meta(rs)["annotations"])[RevisionAnnotation])

/** The ReplicaSets a Deployment controls, by revision (pure). */
export const owned = (deployment: Json, replicaSets: ReadonlyArray<Json>): Array<Json> => {
  const uid = meta(deployment)["uid"]
  return replicaSets
    .filter((rs) => arr(meta(rs)["ownerReferences"]).some((r) => obj(r)["uid"] === uid && obj(r)["controller"] === true))
    .sort((a, b) => revisionOf(a) - revisionOf(b))
}

/** `rollout history` rows: REVISION, CHANGE-CAUSE (pure). */
export const history = (replicaSets: ReadonlyArray<Json>): Array<Array<string>> => [
  ["REVISION", "CHANGE-CAUSE"],
  ...replicaSets.filter((rs) => revisionOf(rs) > 0).map((rs) => [String(revisionOf(rs)), str(obj(meta(rs)["annotations"])[ChangeCauseAnnotation]) || "<none>"])
]

/**
 * The template `undo` puts back: the ReplicaSet of `toRevision`, or of the second-newest
 * revision, without its `pod-template-hash` label (pure; a message when there is none).
 *
 * The revisions come from the ReplicaSets alone, as kubectl's rollback takes them: the
 * Deployment's own revision annotation is written by the controller after it creates the new
 * ReplicaSet, so right after an apply it can still name the old one.
 */
export const undoTarget = (deployment: Json, replicaSets: ReadonlyArray<Json>, toRevision: number): { readonly template: Json; readonly revision: number } | string => {
  const rss = owned(deployment, replicaSets).filter((rs) => revisionOf(rs) > 0)
  const target = toRevision > 0 ? rss.find((rs) => revisionOf(rs) === toRevision) : rss.length >= 2 ? rss[rss.length - 2] : undefined
  if (target === undefined) return toRevision > 0 ? `unable to find specified revision ${toRevision} in history` : "no rollout history found for deployment"
  const template = obj(obj(target["spec"])["template"])
  const labels = { ...obj(meta(template)["labels"]) }
  delete labels["pod-template-hash"]
  return { template: { ...template, metadata: { ...meta(template), labels } }, revision: revisionOf(target) }
}
