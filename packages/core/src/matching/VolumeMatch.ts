/**
 * Whether a PersistentVolume can take a claim, as upstream's `FindMatchingVolume` (used by the
 * PersistentVolume controller for claims bound at once; the scheduler's VolumeBinding has its own
 * indexed copy of these rules for the node-by-node search): the same class (the beta annotation
 * counts), the same volume mode, every access mode the claim asks for, at least its storage, its
 * `selector` on the volume's labels, not being deleted, and not claimed by another claim. Among
 * fitting volumes the smallest wins; a volume pre-bound to the claim (`claimRef`) always does.
 */
import * as LabelSelector from "../model/LabelSelector.js"
import * as Quantity from "../model/Quantity.js"
import type { JsonObject } from "../object/Json.js"
import * as Views from "../object/Views.js"

const classAnnotation = "volume.beta.kubernetes.io/storage-class"

/** A claim's or volume's class: `spec.storageClassName`, else the beta annotation, else "". */
export const classOf = (o: JsonObject): string => {
  const v = Views.persistentVolume(o)
  return v.spec?.storageClassName || (v.metadata?.annotations?.[classAnnotation] ?? "")
}

/** A storage quantity's nanos (0 when unreadable). */
export const storageNanos = (v: unknown): bigint => {
  if (typeof v !== "string" && typeof v !== "number") return 0n
  const q = Quantity.parse(String(v))
  return q._tag === "Right" ? q.right.nanos : 0n
}

/** The storage a claim asks for. */
export const requestOf = (claim: JsonObject): bigint => storageNanos(Views.persistentVolumeClaim(claim).spec?.resources?.requests?.["storage"])

/** The storage a volume has. */
export const capacityOf = (pv: JsonObject): bigint => storageNanos(Views.persistentVolume(pv).spec?.capacity?.["storage"])

/** Whether the volume's `claimRef` names this claim (a ref without uid names any claim of that name). */
export const refersTo = (pv: JsonObject, claim: JsonObject): boolean => {
  const ref = Views.persistentVolume(pv).spec?.claimRef
  const c = Views.persistentVolumeClaim(claim).metadata
  if (ref === undefined || ref === null) return false
  return (ref.namespace ?? "") === (c?.namespace ?? "") && (ref.name ?? "") === (c?.name ?? "") && ((ref.uid ?? "") === "" || ref.uid === c?.uid)
}

/** Whether the volume fits the claim, ignoring who claimed it. */
export const fits = (claim: JsonObject, pv: JsonObject): boolean => {
  const c = Views.persistentVolumeClaim(claim)
  const v = Views.persistentVolume(pv)
  if (v.metadata?.deletionTimestamp != null) return false
  if (classOf(claim) !== classOf(pv)) return false
  if ((c.spec?.volumeMode ?? "Filesystem") !== (v.spec?.volumeMode ?? "Filesystem")) return false
  const modes = v.spec?.accessModes ?? []
  if (!(c.spec?.accessModes ?? []).every((m) => modes.includes(m))) return false
  if (capacityOf(pv) < requestOf(claim)) return false
  const selector = c.spec?.selector
  return selector === undefined || selector === null || LabelSelector.compile(selector as LabelSelector.LabelSelector)((v.metadata?.labels ?? {}) as Record<string, string>)
}

/** The volume for a claim among `volumes`: pre-bound to it, else the smallest free one that fits. */
export const findFor = (claim: JsonObject, volumes: ReadonlyArray<JsonObject>): JsonObject | undefined => {
  let best: JsonObject | undefined
  for (const pv of volumes) {
    const ref = Views.persistentVolume(pv).spec?.claimRef
    if (ref !== undefined && ref !== null) {
      if (refersTo(pv, claim) && fits(claim, pv)) return pv
      continue
    }
    const phase = Views.persistentVolume(pv).status?.phase ?? ""
    if (phase !== "" && phase !== "Available" && phase !== "Pending") continue
    if (fits(claim, pv) && (best === undefined || capacityOf(pv) < capacityOf(best))) best = pv
  }
  return best
}
