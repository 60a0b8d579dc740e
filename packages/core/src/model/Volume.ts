/**
 * Persistent storage kinds (v1): `PersistentVolumeClaim` (a namespaced request for storage, which
 * pods mount by name and StatefulSets stamp out per replica) and `PersistentVolume` (a
 * cluster-scoped piece of storage a claim binds to). Validation follows kube-apiserver: a claim
 * needs access modes and a positive storage request, and its spec is frozen once created except
 * for growing a bound claim and the binder filling in `volumeName`.
 */
import { Either, Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { LabelSelector } from "./LabelSelector.js"
import { ConditionStatus, ObjectMeta, ObjectReference } from "./Meta.js"
import { HostPathVolumeSource, NodeSelector } from "./Pod.js"
import * as Quantity from "./Quantity.js"
import { Time } from "./Scalars.js"
import * as Validation from "./Validation.js"

// Literal members are in the order kube-apiserver lists them in "supported values" (sorted).

/** How a volume can be mounted: by one node, read-only by many, read-write by many, by one pod. */
export const AccessMode = Schema.Literal("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")

/** An access mode. */
export type AccessMode = typeof AccessMode.Type

/** Whether a volume is a filesystem or a raw block device. */
export const VolumeMode = Schema.Literal("Block", "Filesystem")

/** A volume mode. */
export type VolumeMode = typeof VolumeMode.Type

/** The storage a claim asks for (`requests.storage`) and may be limited to. */
export const VolumeResourceRequirements = Schema.Struct({
  requests: optional(Quantity.ResourceList),
  limits: optional(Quantity.ResourceList)
})

// ---- PersistentVolumeClaim -----------------------------------------------------------------

/** The desired state of a claim. */
export const PersistentVolumeClaimSpec = Schema.Struct({
  accessModes: optional(Schema.Array(AccessMode)),
  selector: optional(LabelSelector),
  resources: optional(VolumeResourceRequirements),
  volumeName: optional(Schema.String),
  storageClassName: optional(Schema.String),
  volumeMode: optional(VolumeMode),
  volumeAttributesClassName: optional(Schema.String)
})

/** A claim spec. */
export type PersistentVolumeClaimSpec = typeof PersistentVolumeClaimSpec.Type

/** The lifecycle phase of a claim. */
export const ClaimPhase = Schema.Literal("Pending", "Bound", "Lost")

/** A claim phase. */
export type ClaimPhase = typeof ClaimPhase.Type

/** A claim condition such as `Resizing` or `FileSystemResizePending`. */
export const PersistentVolumeClaimCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  lastProbeTime: optional(Time),
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** The observed state of a claim: its phase and, once bound, the volume's modes and capacity. */
export const PersistentVolumeClaimStatus = Schema.Struct({
  phase: optional(ClaimPhase),
  accessModes: optional(Schema.Array(AccessMode)),
  capacity: optional(Quantity.ResourceList),
  conditions: optional(Schema.Array(PersistentVolumeClaimCondition))
})

/** A claim status. */
export type PersistentVolumeClaimStatus = typeof PersistentVolumeClaimStatus.Type

/** The `PersistentVolumeClaim` kind (v1, namespaced). */
export const PersistentVolumeClaim = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("PersistentVolumeClaim"),
  metadata: ObjectMeta,
  spec: PersistentVolumeClaimSpec,
  status: optional(PersistentVolumeClaimStatus)
})

/** A PersistentVolumeClaim object. */
export type PersistentVolumeClaim = typeof PersistentVolumeClaim.Type

/**
 * A claim as a StatefulSet's `volumeClaimTemplates` embed it: `apiVersion` and `kind` may be
 * omitted there (kubectl writes them, hand-written manifests rarely do).
 */
export const PersistentVolumeClaimTemplate = Schema.Struct({
  apiVersion: optional(Schema.String),
  kind: optional(Schema.String),
  metadata: ObjectMeta,
  spec: PersistentVolumeClaimSpec,
  status: optional(PersistentVolumeClaimStatus)
})

/** A claim template. */
export type PersistentVolumeClaimTemplate = typeof PersistentVolumeClaimTemplate.Type

const positiveQuantity = (path: string, value: string): ReadonlyArray<FieldError.FieldError> => {
  const q = Quantity.parse(value)
  return Either.isRight(q) && q.right.nanos > 0n ? [] : [FieldError.invalid(path, value, "must be greater than zero")]
}

const validateStorageClassName = (name: string | undefined, path: string): ReadonlyArray<FieldError.FieldError> =>
  name === undefined || name === "" ? [] : Validation.isDNS1123Subdomain(name).map((d) => FieldError.invalid(path, name, d))

const validateAccessModes = (modes: ReadonlyArray<AccessMode> | undefined, path: string): ReadonlyArray<FieldError.FieldError> => {
  if (modes === undefined || modes.length === 0) return [FieldError.required(path, "at least 1 access mode is required")]
  return modes.includes("ReadWriteOncePod") && modes.length > 1
    ? [FieldError.forbidden(path, "may not use ReadWriteOncePod with other access modes")]
    : []
}

/** Errors of a claim spec at `path` (kube-apiserver's `ValidatePersistentVolumeClaimSpec`). */
export const validateClaimSpec = (spec: PersistentVolumeClaimSpec, path = "spec"): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = [...validateAccessModes(spec.accessModes, `${path}.accessModes`)]
  const storage = spec.resources?.requests?.["storage"]
  if (storage === undefined) errors.push(FieldError.required(`${path}.resources[storage]`))
  else errors.push(...positiveQuantity(`${path}.resources[storage]`, storage))
  errors.push(...validateStorageClassName(spec.storageClassName, `${path}.storageClassName`))
  return errors
}

/** Errors of a claim. */
export const validateClaim = (claim: PersistentVolumeClaim): ReadonlyArray<FieldError.FieldError> => validateClaimSpec(claim.spec)

const storageOf = (spec: PersistentVolumeClaimSpec) => {
  const s = spec.resources?.requests?.["storage"]
  const q = s === undefined ? undefined : Quantity.parse(s)
  return q !== undefined && Either.isRight(q) ? q.right : Quantity.zero
}

/**
 * Errors of a claim update (kube-apiserver's `ValidatePersistentVolumeClaimUpdate`): the spec is
 * immutable except that the binder may set `volumeName` once, and a bound claim may grow.
 */
export const validateClaimUpdate = (claim: PersistentVolumeClaim, old: PersistentVolumeClaim): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const comparable = (spec: Record<string, unknown> & Pick<PersistentVolumeClaimSpec, "resources">, volumeName: string | undefined, storage: string | undefined) => ({
    ...spec,
    volumeName,
    resources: { ...spec.resources, requests: { ...spec.resources?.requests, storage } }
  })
  const oldVolumeName = old.spec.volumeName ?? ""
  const volumeName = oldVolumeName === "" ? claim.spec.volumeName : old.spec.volumeName
  const bound = claim.status?.phase === "Bound"
  const newComparable = comparable(claim.spec, claim.spec.volumeName, bound ? old.spec.resources?.requests?.["storage"] : claim.spec.resources?.requests?.["storage"])
  // A claim created without a class may get one later (the default class, assigned retroactively).
  const oldSpec = old.spec.storageClassName === undefined ? { ...old.spec, storageClassName: claim.spec.storageClassName } : old.spec
  const oldComparable = comparable(oldSpec, volumeName, old.spec.resources?.requests?.["storage"])
  if (JSON.stringify(canonical(newComparable)) !== JSON.stringify(canonical(oldComparable))) {
    errors.push(FieldError.forbidden("spec", "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
  }
  if (Quantity.compare(storageOf(claim.spec), storageOf(old.spec)) < 0) {
    errors.push(FieldError.forbidden("spec.resources.requests.storage", "field can not be less than previous value"))
  }
  return errors
}

// Key-order-independent JSON for comparisons, dropping absent values.
const canonical = (v: unknown): unknown => {
  if (Array.isArray(v)) return v.map(canonical)
  if (typeof v !== "object" || v === null) return v
  const o = v as Record<string, unknown>
  return Object.fromEntries(
    Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => [k, canonical(o[k])])
  )
}

// ---- PersistentVolume ----------------------------------------------------------------------

/** What happens to a volume when its claim is deleted. */
export const ReclaimPolicy = Schema.Literal("Delete", "Recycle", "Retain")

/** A reclaim policy. */
export type ReclaimPolicy = typeof ReclaimPolicy.Type

/** A directory or disk on one node (needs `nodeAffinity` to that node). */
export const LocalVolumeSource = Schema.Struct({
  path: Schema.String,
  fsType: optional(Schema.String)
})

/** The nodes a volume can be used from. */
export const VolumeNodeAffinity = Schema.Struct({ required: optional(NodeSelector) })

/** The desired state of a volume. */
export const PersistentVolumeSpec = Schema.Struct({
  capacity: optional(Quantity.ResourceList),
  accessModes: optional(Schema.Array(AccessMode)),
  persistentVolumeReclaimPolicy: optional(ReclaimPolicy),
  storageClassName: optional(Schema.String),
  hostPath: optional(HostPathVolumeSource),
  local: optional(LocalVolumeSource),
  claimRef: optional(ObjectReference),
  nodeAffinity: optional(VolumeNodeAffinity),
  volumeMode: optional(VolumeMode),
  mountOptions: optional(Schema.Array(Schema.String))
})

/** A volume spec. */
export type PersistentVolumeSpec = typeof PersistentVolumeSpec.Type

/** The lifecycle phase of a volume. */
export const VolumePhase = Schema.Literal("Pending", "Available", "Bound", "Released", "Failed")

/** A volume phase. */
export type VolumePhase = typeof VolumePhase.Type

/** The observed state of a volume. */
export const PersistentVolumeStatus = Schema.Struct({
  phase: optional(VolumePhase),
  message: optional(Schema.String),
  reason: optional(Schema.String),
  lastPhaseTransitionTime: optional(Time)
})

/** A volume status. */
export type PersistentVolumeStatus = typeof PersistentVolumeStatus.Type

/** The `PersistentVolume` kind (v1, cluster-scoped). */
export const PersistentVolume = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("PersistentVolume"),
  metadata: ObjectMeta,
  spec: PersistentVolumeSpec,
  status: optional(PersistentVolumeStatus)
})

/** A PersistentVolume object. */
export type PersistentVolume = typeof PersistentVolume.Type

const volumeSources = ["hostPath", "local"] as const

/** Errors of a volume (kube-apiserver's `ValidatePersistentVolumeSpec`, for the sources Fleet has). */
export const validateVolume = (pv: PersistentVolume): ReadonlyArray<FieldError.FieldError> => {
  const spec = pv.spec
  const errors: Array<FieldError.FieldError> = []
  if (spec.accessModes === undefined || spec.accessModes.length === 0) errors.push(FieldError.required("spec.accessModes"))
  else if (spec.accessModes.includes("ReadWriteOncePod") && spec.accessModes.length > 1) {
    errors.push(FieldError.forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes"))
  }
  const capacity = spec.capacity ?? {}
  const names = Object.keys(capacity)
  if (names.length === 0) errors.push(FieldError.required("spec.capacity"))
  else if (capacity["storage"] === undefined || names.length > 1) errors.push(FieldError.notSupported("spec.capacity", capacity, ["storage"]))
  else errors.push(...positiveQuantity("spec.capacity[storage]", capacity["storage"]))
  errors.push(...validateStorageClassName(spec.storageClassName, "spec.storageClassName"))
  const sources = volumeSources.filter((s) => spec[s] !== undefined)
  if (sources.length === 0) errors.push(FieldError.required("spec", "must specify a volume type"))
  for (const s of sources.slice(1)) errors.push(FieldError.forbidden(`spec.${s}`, "may not specify more than 1 volume type"))
  if (spec.hostPath !== undefined && spec.hostPath.path === "") errors.push(FieldError.required("spec.hostPath.path"))
  if (spec.local !== undefined) {
    if (spec.local.path === "") errors.push(FieldError.required("spec.local.path"))
    if (spec.nodeAffinity?.required === undefined) errors.push(FieldError.required("spec.nodeAffinity", "Local volume requires node affinity"))
  }
  return errors
}

/**
 * Errors of a volume update: the volume source and mode are fixed once created, and node
 * affinity once set; capacity, access modes, class, claimRef and reclaim policy may change.
 */
export const validateVolumeUpdate = (pv: PersistentVolume, old: PersistentVolume): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const source = (s: PersistentVolumeSpec) => JSON.stringify(canonical({ hostPath: s.hostPath, local: s.local }))
  if (source(pv.spec) !== source(old.spec)) {
    errors.push(FieldError.forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation"))
  }
  if (pv.spec.volumeMode !== old.spec.volumeMode) errors.push(FieldError.invalid("volumeMode", pv.spec.volumeMode ?? null, "field is immutable"))
  if (old.spec.nodeAffinity !== undefined && JSON.stringify(canonical(pv.spec.nodeAffinity)) !== JSON.stringify(canonical(old.spec.nodeAffinity))) {
    errors.push(FieldError.invalid("nodeAffinity", pv.spec.nodeAffinity ?? null, "field is immutable"))
  }
  return errors
}

/** Access modes as kubectl abbreviates them (`RWO,ROX,RWX,RWOP`), in that order. */
export const accessModesShort = (modes: ReadonlyArray<string> | undefined): string =>
  (
    [
      ["ReadWriteOnce", "RWO"],
      ["ReadOnlyMany", "ROX"],
      ["ReadWriteMany", "RWX"],
      ["ReadWriteOncePod", "RWOP"]
    ] as const
  )
    .filter(([mode]) => modes?.includes(mode))
    .map(([, short]) => short)
    .join(",")
