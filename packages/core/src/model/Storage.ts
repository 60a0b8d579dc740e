/**
 * The `storage.k8s.io/v1` `StorageClass` kind: a cluster-scoped name for a kind of storage. Claims
 * name a class (`spec.storageClassName`, or get the default class: the one annotated
 * `storageclass.kubernetes.io/is-default-class: "true"`); the class says who provisions its volumes
 * (`provisioner`), when (`volumeBindingMode`: at once, or once a pod is scheduled), what happens to
 * them when their claim goes (`reclaimPolicy`), and whether a bound claim may grow.
 *
 * Follows kube-apiserver: v1 defaulting (Delete, Immediate), `ValidateStorageClass` and
 * `ValidateStorageClassUpdate` (provisioner, parameters, reclaim policy and binding mode are
 * fixed once created), with its messages. The annotations the PersistentVolume controller, the
 * scheduler and provisioners exchange are named here too.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"
import * as Validation from "./Validation.js"
import type { ReclaimPolicy } from "./Volume.js"

/** When a class's claims are bound: at once, or once a pod using them is scheduled (its node known). */
export const VolumeBindingMode = Schema.Literal("Immediate", "WaitForFirstConsumer")

/** A volume binding mode. */
export type VolumeBindingMode = typeof VolumeBindingMode.Type

/** A topology a class's volumes may be provisioned in (a node label key and its values). */
export const TopologySelectorTerm = Schema.Struct({
  matchLabelExpressions: optional(Schema.Array(Schema.Struct({ key: Schema.String, values: Schema.Array(Schema.String) })))
})

/** The `StorageClass` kind (storage.k8s.io/v1, cluster-scoped, short name `sc`). */
export const StorageClass = Schema.Struct({
  apiVersion: Schema.Literal("storage.k8s.io/v1"),
  kind: Schema.Literal("StorageClass"),
  metadata: ObjectMeta,
  provisioner: Schema.String,
  parameters: optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  reclaimPolicy: optional(Schema.Literal("Delete", "Retain")),
  mountOptions: optional(Schema.Array(Schema.String)),
  allowVolumeExpansion: optional(Schema.Boolean),
  volumeBindingMode: optional(VolumeBindingMode),
  allowedTopologies: optional(Schema.Array(TopologySelectorTerm))
})

/** A StorageClass object. */
export type StorageClass = typeof StorageClass.Type

/** The annotation that makes a class the default for claims that name none. */
export const IsDefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

/** The beta annotation that also marks the default class (still honoured by Kubernetes). */
export const BetaIsDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"

/** Set by the scheduler on a claim waiting for its first consumer: the node its volume must be made on. */
export const SelectedNodeAnnotation = "volume.kubernetes.io/selected-node"

/** Set by the PersistentVolume controller on a claim it hands to a provisioner: that provisioner's name. */
export const StorageProvisionerAnnotation = "volume.kubernetes.io/storage-provisioner"

/** On a provisioned volume: the provisioner that made it (and must delete it). */
export const ProvisionedByAnnotation = "pv.kubernetes.io/provisioned-by"

/** On a claim: the controller finished binding it. */
export const BindCompletedAnnotation = "pv.kubernetes.io/bind-completed"

/** On a claim or volume: the controller, not the user, chose the pairing. */
export const BoundByControllerAnnotation = "pv.kubernetes.io/bound-by-controller"

/** The provisioner of classes with no dynamic provisioning (pre-made local volumes). */
export const NoProvisioner = "kubernetes.io/no-provisioner"

/** Fleet's built-in provisioner: a directory per volume under the node's data dir. */
export const LocalPathProvisioner = "fleet.koder.dev/local-path"

/** The name of the built-in class (as k3s names its own). */
export const LocalPathClassName = "local-path"

/** On a Node: the directory under which its local-path volumes are made (set by its agent). */
export const LocalPathRootAnnotation = "storage.fleet.koder.dev/local-path-root"

/** The finalizer that keeps a local-path volume until its node's agent removed its directory. */
export const LocalPathFinalizer = "storage.fleet.koder.dev/local-path"

/** The class a server creates at start: local-path, the default, made when a pod is scheduled. */
export const localPathClass: StorageClass = {
  apiVersion: "storage.k8s.io/v1",
  kind: "StorageClass",
  metadata: { name: LocalPathClassName, annotations: { [IsDefaultClassAnnotation]: "true" } },
  provisioner: LocalPathProvisioner,
  reclaimPolicy: "Delete",
  volumeBindingMode: "WaitForFirstConsumer",
  allowVolumeExpansion: true
}

/** What the default-class rules read of a class, typed or as a stored view. */
export interface ClassMeta {
  readonly metadata?: {
    readonly name?: string | null | undefined
    readonly creationTimestamp?: string | null | undefined
    readonly annotations?: Readonly<Record<string, string>> | null | undefined
  } | null | undefined
}

/** Whether a class (read as stored JSON or typed) is marked default. */
export const isDefault = (sc: ClassMeta): boolean => {
  const a = sc.metadata?.annotations ?? {}
  return a[IsDefaultClassAnnotation] === "true" || a[BetaIsDefaultClassAnnotation] === "true"
}

/** The reclaim policy of a class's volumes. */
export const reclaimPolicyOf = (sc: Pick<StorageClass, "reclaimPolicy">): Exclude<ReclaimPolicy, "Recycle"> => sc.reclaimPolicy ?? "Delete"

/** The binding mode of a class's claims. */
export const bindingModeOf = (sc: Pick<StorageClass, "volumeBindingMode">): VolumeBindingMode => sc.volumeBindingMode ?? "Immediate"

/** v1 defaulting: Delete and Immediate when unset. */
export const defaults = <O extends Record<string, unknown>>(o: O): O => ({
  ...o,
  reclaimPolicy: o["reclaimPolicy"] ?? "Delete",
  volumeBindingMode: o["volumeBindingMode"] ?? "Immediate"
})

const maxParametersBytes = 256 * 1024
const maxParameters = 512

/** Errors of a class beyond its schema (kube-apiserver's `ValidateStorageClass`). */
export const validateStorageClass = (sc: StorageClass): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (sc.provisioner === "") errors.push(FieldError.required("provisioner"))
  else {
    if (sc.provisioner.length > Validation.DNS1123SubdomainMaxLength) errors.push(FieldError.tooLong("provisioner", Validation.DNS1123SubdomainMaxLength, "characters"))
    for (const d of Validation.isQualifiedName(sc.provisioner.toLowerCase())) errors.push(FieldError.invalid("provisioner", sc.provisioner, d))
  }
  const params = Object.entries(sc.parameters ?? {})
  if (params.length > maxParameters) errors.push(FieldError.tooLong("parameters", maxParameters))
  let size = 0
  for (const [k, v] of params) {
    if (k === "") errors.push(FieldError.invalid("parameters", k, "field can not be empty."))
    size += k.length + v.length
  }
  if (size > maxParametersBytes) errors.push(FieldError.tooLong("parameters", maxParametersBytes))
  for (const [i, t] of (sc.allowedTopologies ?? []).entries()) {
    const exprs = t.matchLabelExpressions ?? []
    if (exprs.length === 0) errors.push(FieldError.required(`allowedTopologies[${i}].matchLabelExpressions`, "must have at least one label value requirement"))
    for (const [j, e] of exprs.entries()) {
      if (e.values.length === 0) errors.push(FieldError.required(`allowedTopologies[${i}].matchLabelExpressions[${j}].values`, "must specify as least one value"))
    }
  }
  return errors
}

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {})

/** What an update may not change (kube-apiserver's `ValidateStorageClassUpdate`). */
export const validateStorageClassUpdate = (sc: StorageClass, old: StorageClass): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (!same(sc.parameters, old.parameters)) errors.push(FieldError.forbidden("parameters", "updates to parameters are forbidden."))
  if (sc.provisioner !== old.provisioner) errors.push(FieldError.forbidden("provisioner", "updates to provisioner are forbidden."))
  if (reclaimPolicyOf(sc) !== reclaimPolicyOf(old)) errors.push(FieldError.forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
  if (bindingModeOf(sc) !== bindingModeOf(old)) errors.push(FieldError.invalid("volumeBindingMode", sc.volumeBindingMode ?? null, "field is immutable"))
  return errors
}

/** The default class among `classes` (the newest marked one, as Kubernetes picks when several are). */
export const defaultClass = <C extends ClassMeta>(classes: ReadonlyArray<C>): C | undefined => {
  let best: C | undefined
  for (const c of classes) {
    if (!isDefault(c)) continue
    const newer = (c.metadata?.creationTimestamp ?? "") > (best?.metadata?.creationTimestamp ?? "")
    const tie = (c.metadata?.creationTimestamp ?? "") === (best?.metadata?.creationTimestamp ?? "") && (c.metadata?.name ?? "") < (best?.metadata?.name ?? "")
    if (best === undefined || newer || tie) best = c
  }
  return best
}
