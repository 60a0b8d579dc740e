/**
 * The Job's active pods (upstream's manageJob): how many should run, which to delete when there
 * are too many (wrong or repeated indexes first), which to create when too few (after the failure
 * backoff, the lowest pending indexes for Indexed Jobs), and the pods themselves.
 */
import * as Batch from "../../../model/Batch.js"
import { type JsonObject, asArray, asObject, asStrings } from "../../../object/Json.js"
import { nameOf, uidOf } from "../../../object/Metadata.js"
import * as Pods from "../../../object/Pods.js"
import * as ReplicaSet from "../../ReplicaSet.js"
import { backoffRemainingMs, defaultBackoffMs, defaultMaxBackoffMs } from "./Backoff.js"
import type { DecideOptions, PodDeletion } from "./Decision.js"
import { completionIndex, completionIndexAnnotation, pendingIndexes } from "./Indexes.js"
import { type Params, specOf } from "./Params.js"
import { type Counts, trackingFinalizer } from "./Tracking.js"

// Upstream's bound: at most this many pod creations/deletions per sync.
const maxPodChangesPerSync = 500

/**
 * Active pods to delete: for Indexed Jobs first those with a missing, out-of-range or repeated
 * index (keeping the most advanced pod of each index), then up to `atLeast` in upstream's
 * ActivePods order (the ReplicaSet's: unscheduled, pending, unready, ready for less time first).
 */
const podsForRemoval = (active: ReadonlyArray<JsonObject>, atLeast: number, indexed: boolean, completions: number) => {
  const remove: Array<JsonObject> = []
  let left: ReadonlyArray<JsonObject> = active
  if (indexed) {
    const byIndex = new Map<number, Array<JsonObject>>()
    for (const p of active) {
      const ix = completionIndex(p)
      if (ix === undefined || ix >= completions) remove.push(p)
      else byIndex.set(ix, [...(byIndex.get(ix) ?? []), p])
    }
    for (const group of byIndex.values()) remove.push(...ReplicaSet.podsToDelete(group, [], group.length - 1))
    left = active.filter((p) => !remove.includes(p))
  }
  if (remove.length < atLeast) remove.push(...ReplicaSet.podsToDelete(left, [], atLeast - remove.length))
  return remove
}

/** A pod for `job` (with `index` for Indexed Jobs), carrying the tracking finalizer. */
export const podFor = (job: JsonObject, index: number | undefined): JsonObject => {
  const name = nameOf(job)
  const template = asObject(specOf(job)["template"])
  const templateLabels = asObject(asObject(template["metadata"])["labels"])
  // The API server's defaulting puts these labels on the template already; add them only if absent.
  const extraLabels: Record<string, string> = {}
  if (templateLabels[Batch.ControllerUidLabel] === undefined) extraLabels[Batch.ControllerUidLabel] = uidOf(job)
  if (templateLabels[Batch.JobNameLabel] === undefined) extraLabels[Batch.JobNameLabel] = name
  if (index !== undefined) extraLabels[completionIndexAnnotation] = String(index)
  const pod = Pods.fromTemplate(template, job, {
    generateName: index === undefined ? `${name}-` : `${name}-${index}-`,
    extraLabels,
    ...(index === undefined ? {} : { extraAnnotations: { [completionIndexAnnotation]: String(index) } })
  })
  const m = asObject(pod["metadata"])
  const finalizers = asStrings(m["finalizers"])
  m["finalizers"] = finalizers.includes(trackingFinalizer) ? finalizers : [...finalizers, trackingFinalizer]
  if (index !== undefined) {
    const spec = asObject(pod["spec"])
    spec["hostname"] = `${name}-${index}`
    // As upstream: the index reaches the process through the downward API, from the annotation.
    const env = { name: "JOB_COMPLETION_INDEX", valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${completionIndexAnnotation}']` } } }
    for (const key of ["initContainers", "containers"]) {
      if (!Array.isArray(spec[key])) continue
      spec[key] = asArray(spec[key]).map((c) => {
        const container = asObject(c)
        const vars = asArray(container["env"]).map(asObject)
        return vars.some((v) => v["name"] === env.name) ? container : { ...container, env: [...vars, env] }
      })
    }
  }
  return pod
}

/** What a sync does to the active pods. */
export interface Managed {
  readonly delete: ReadonlyArray<PodDeletion>
  readonly create: ReadonlyArray<JsonObject>
  /** How many pods are active once these are done. */
  readonly activeAfter: number
  /** The active pods that stay. */
  readonly kept: ReadonlyArray<JsonObject>
  /** Look again when the failure backoff is over. */
  readonly requeueAfterMs?: number
}

/** Every active pod deleted; `removeFinalizer` when they must not be counted. */
const deleteAll = (active: ReadonlyArray<JsonObject>, removeFinalizer: boolean): Managed => ({
  delete: active.map((pod) => ({ pod, removeFinalizer })),
  create: [],
  activeAfter: 0,
  kept: []
})

/** A failed Job stops its pods; they keep the finalizer and are counted as failed. */
export const stopAll = (active: ReadonlyArray<JsonObject>): Managed => deleteAll(active, false)

/** The active pods left as they are (a Job being deleted, or one with the pods it wants). */
export const leaveAlone = (active: ReadonlyArray<JsonObject>): Managed => ({ delete: [], create: [], activeAfter: active.length, kept: active })

/**
 * Upstream's manageJob for a Job neither finished nor being deleted: suspended, every active pod
 * goes uncounted; else too many are deleted, or, past the failure backoff, missing ones created
 * (never both in one sync: deletion wins), at most `maxPodChangesPerSync`.
 */
export const manage = (
  job: JsonObject,
  params: Params,
  counts: Pick<Counts, "succeeded" | "succeededIndexes">,
  pods: ReadonlyArray<JsonObject>,
  active: ReadonlyArray<JsonObject>,
  nowMs: number,
  options: DecideOptions
): Managed => {
  const { indexed, completions, parallelism } = params
  // Suspension is not failure: the finalizer goes first, so these pods are never counted.
  if (params.suspended) return deleteAll(active, true)
  const succeeded = counts.succeeded
  const wantActive = completions === undefined ? (succeeded > 0 ? active.length : parallelism) : Math.max(0, Math.min(completions - succeeded, parallelism))
  const remove = podsForRemoval(active, Math.max(0, active.length - wantActive), indexed, completions ?? 0).slice(0, maxPodChangesPerSync)
  if (remove.length > 0) {
    return {
      delete: remove.map((pod) => ({ pod, removeFinalizer: true })),
      create: [],
      activeAfter: active.length - remove.length,
      kept: active.filter((p) => !remove.includes(p))
    }
  }
  if (wantActive <= active.length) return leaveAlone(active)
  const wait = backoffRemainingMs(pods, nowMs, options.podFailureBackoffMs ?? defaultBackoffMs, options.maxPodFailureBackoffMs ?? defaultMaxBackoffMs)
  if (wait > 0) return { ...leaveAlone(active), requeueAfterMs: wait }
  const count = Math.min(wantActive - active.length, maxPodChangesPerSync)
  const indexes = indexed ? pendingIndexes(count, completions ?? 0, counts.succeededIndexes, active) : Array.from({ length: count }, () => undefined)
  const create = indexes.map((ix) => podFor(job, ix))
  return { delete: [], create, activeAfter: active.length + create.length, kept: active }
}
