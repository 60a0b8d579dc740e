/**
 * The PersistentVolume controller (kube-controller-manager's `persistentvolume-binder`): claims
 * and volumes are paired and their phases kept, as upstream.
 *
 *   claim, no class ─▶ the default StorageClass (retroactive assignment)
 *   claim unbound ──┬▶ a volume pre-bound to it, or (Immediate, or WaitForFirstConsumer once the
 *                   │  scheduler annotated `volume.kubernetes.io/selected-node`) the smallest free
 *                   │  volume that fits ─▶ volume.claimRef, claim.volumeName, both Bound
 *                   ├▶ none, and the class has a provisioner ─▶ `volume.kubernetes.io/storage-provisioner`
 *                   │  (the provisioner, e.g. LocalPathProvisioner, makes a volume pre-bound to it)
 *                   └▶ otherwise Pending, with upstream's Events (WaitForFirstConsumer, FailedBinding);
 *                      a claim with no StorageClass object is the scheduler's (VolumeBindingScope)
 *   claim bound ────▶ its volume gone ─▶ Lost; its request grown past the volume (class allows
 *                     expansion, a volume of the local-path provisioner) ─▶ capacity raised
 *   volume ─────────▶ no claimRef: Available; its claim there: Bound; its claim gone (checked
 *                     against the API, not the cache): Released, then by its reclaim policy:
 *                     Retain stays Released; Delete of a provisioned volume deletes it (its
 *                     provisioner's finalizer removes the storage); Delete of anything else, and
 *                     Recycle, is Failed (Fleet has no deleter for hand-made volumes).
 *
 * The decisions are pure (`decideClaim`, `decideVolume`); the reconcilers write them with
 * compare-and-swap updates, so a race with the scheduler's own binding is a retry.
 */
import { Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Informer from "../informer/Informer.js"
import * as VolumeMatch from "../matching/VolumeMatch.js"
import * as Storage from "../model/Storage.js"
import type { JsonObject } from "../object/Json.js"
import { annotationsOf, metadataOf, nameOf, namespaceOf, resourceVersionOf, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"
import type * as Controller from "./Controller.js"

/** What to do about a claim. */
export type ClaimAction =
  | { readonly _tag: "None" }
  | { readonly _tag: "SetClass"; readonly className: string }
  | { readonly _tag: "Bind"; readonly volume: JsonObject }
  | { readonly _tag: "Provision"; readonly provisioner: string }
  | { readonly _tag: "Pending"; readonly event?: { readonly type: "Normal" | "Warning"; readonly reason: string; readonly message: string } }
  | { readonly _tag: "Lost"; readonly message: string }
  | { readonly _tag: "Expand"; readonly volume: JsonObject; readonly storage: string }
  | { readonly _tag: "SyncStatus"; readonly volume: JsonObject }

/** What a claim's decision reads besides the claim. */
export interface ClaimView {
  readonly volumes: ReadonlyArray<JsonObject>
  readonly volume: (name: string) => JsonObject | undefined
  readonly storageClass: (name: string) => JsonObject | undefined
  readonly defaultClass: string | undefined
}

const isDeleting = (o: JsonObject) => metadataOf(o)["deletionTimestamp"] !== undefined && metadataOf(o)["deletionTimestamp"] !== null

const storageOf = (claim: JsonObject) => Views.persistentVolumeClaim(claim).spec?.resources?.requests?.["storage"]

/** The claim's decision (pure). */
export const decideClaim = (claim: JsonObject, view: ClaimView): ClaimAction => {
  if (isDeleting(claim)) return { _tag: "None" }
  const c = Views.persistentVolumeClaim(claim)
  const className = c.spec?.storageClassName
  if ((className === undefined || className === null) && VolumeMatch.classOf(claim) === "" && view.defaultClass !== undefined) {
    return { _tag: "SetClass", className: view.defaultClass }
  }
  const volumeName = c.spec?.volumeName ?? ""
  if (volumeName !== "") {
    const pv = view.volume(volumeName)
    if (pv === undefined) {
      return c.status?.phase === "Bound" ? { _tag: "Lost", message: "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!" } : { _tag: "None" }
    }
    const ref = Views.persistentVolume(pv).spec?.claimRef
    if (ref !== undefined && ref !== null && !VolumeMatch.refersTo(pv, claim)) {
      return c.status?.phase === "Bound" ? { _tag: "Lost", message: "Two claims are bound to the same volume, this one is bound incorrectly" } : { _tag: "None" }
    }
    if (ref === undefined || ref === null || (ref.uid ?? "") === "") return { _tag: "Bind", volume: pv }
    const want = VolumeMatch.requestOf(claim)
    if (c.status?.phase === "Bound" && want > VolumeMatch.capacityOf(pv)) {
      const sc = view.storageClass(VolumeMatch.classOf(claim))
      const local = annotationsOf(pv)[Storage.ProvisionedByAnnotation] === Storage.LocalPathProvisioner
      const grow = sc !== undefined && Views.storageClass(sc).allowVolumeExpansion === true && local
      const storage = storageOf(claim)
      if (grow && storage !== undefined && storage !== null) return { _tag: "Expand", volume: pv, storage: String(storage) }
      return { _tag: "None" }
    }
    return statusInSync(claim, pv) ? { _tag: "None" } : { _tag: "SyncStatus", volume: pv }
  }
  const prebound = view.volumes.find((pv) => VolumeMatch.refersTo(pv, claim) && !isDeleting(pv))
  if (prebound !== undefined) return VolumeMatch.fits(claim, prebound) ? { _tag: "Bind", volume: prebound } : { _tag: "Pending", event: { type: "Warning", reason: "FailedBinding", message: `volume "${nameOf(prebound)}" is pre-bound to this claim but does not fit it` } }
  const cls = VolumeMatch.classOf(claim)
  const sc = cls === "" ? undefined : view.storageClass(cls)
  // No class, or one with no StorageClass object: the scheduler binds such claims to local
  // volumes when a pod is placed (VolumeBindingScope), so they are not bound here at once.
  if (sc === undefined) return c.status?.phase === undefined ? { _tag: "Pending" } : { _tag: "None" }
  const scView = Views.storageClass(sc)
  const waits = scView.volumeBindingMode === "WaitForFirstConsumer"
  const selected = annotationsOf(claim)[Storage.SelectedNodeAnnotation]
  if (waits && selected === undefined) {
    return c.status?.phase === undefined
      ? { _tag: "Pending", event: { type: "Normal", reason: "WaitForFirstConsumer", message: "waiting for first consumer to be created before binding" } }
      : { _tag: "None" }
  }
  // With a selected node the scheduler has already bound any fitting pre-made volume: provision.
  const found = waits ? undefined : VolumeMatch.findFor(claim, view.volumes)
  if (found !== undefined) return { _tag: "Bind", volume: found }
  const provisioner = scView.provisioner ?? ""
  if (provisioner !== "" && provisioner !== Storage.NoProvisioner) {
    return annotationsOf(claim)[Storage.StorageProvisionerAnnotation] === provisioner && c.status?.phase !== undefined ? { _tag: "None" } : { _tag: "Provision", provisioner }
  }
  if (c.status?.phase !== undefined) return { _tag: "None" }
  return { _tag: "Pending", event: { type: "Warning", reason: "FailedBinding", message: "no persistent volumes available for this claim" } }
}

const statusInSync = (claim: JsonObject, pv: JsonObject): boolean => {
  const s = Views.persistentVolumeClaim(claim).status
  const v = Views.persistentVolume(pv)
  return (
    s?.phase === "Bound" &&
    JSON.stringify(s.accessModes ?? []) === JSON.stringify(v.spec?.accessModes ?? []) &&
    JSON.stringify(s.capacity ?? {}) === JSON.stringify(v.spec?.capacity ?? {}) &&
    v.status?.phase === "Bound"
  )
}

/** What to do about a volume. */
export type VolumeAction =
  | { readonly _tag: "None" }
  | { readonly _tag: "Phase"; readonly phase: "Available" | "Bound" | "Released" | "Failed"; readonly reason?: string; readonly message?: string }
  | { readonly _tag: "Delete" }

/**
 * The volume's decision (pure). `claim` is its claimRef's claim as the API has it now (undefined:
 * gone), read only when the volume has a claimRef.
 */
export const decideVolume = (pv: JsonObject, claim: JsonObject | undefined): VolumeAction => {
  if (isDeleting(pv)) return { _tag: "None" }
  const v = Views.persistentVolume(pv)
  const phase = v.status?.phase
  const ref = v.spec?.claimRef
  if (ref === undefined || ref === null) return phase === "Available" ? { _tag: "None" } : { _tag: "Phase", phase: "Available" }
  if (claim !== undefined && ((ref.uid ?? "") === "" || ref.uid === uidOf(claim))) {
    // A claim bound elsewhere is not this volume's: the volume waits for the claim's controller.
    const other = Views.persistentVolumeClaim(claim).spec?.volumeName ?? ""
    if (other !== "" && other !== nameOf(pv)) return { _tag: "None" }
    return phase === "Bound" || (ref.uid ?? "") === "" ? { _tag: "None" } : { _tag: "Phase", phase: "Bound" }
  }
  // The claim is gone (or is a new claim of the same name).
  const policy = v.spec?.persistentVolumeReclaimPolicy ?? "Retain"
  if (phase !== "Released" && phase !== "Failed") return { _tag: "Phase", phase: "Released" }
  if (phase === "Failed" || policy === "Retain") return { _tag: "None" }
  if (policy === "Delete" && (annotationsOf(pv)[Storage.ProvisionedByAnnotation] ?? "") !== "") return { _tag: "Delete" }
  return {
    _tag: "Phase",
    phase: "Failed",
    reason: policy === "Delete" ? "VolumeFailedDelete" : "VolumeFailedRecycle",
    message: policy === "Delete" ? "no deleter for this volume: Fleet deletes only volumes its provisioners made" : "Recycle is not supported: use Delete or Retain"
  }
}

const claimKeyOf = (pv: JsonObject): string | undefined => {
  const ref = Views.persistentVolume(pv).spec?.claimRef
  return ref === undefined || ref === null ? undefined : `${ref.namespace ?? ""}/${ref.name ?? ""}`
}

const claimRefTo = (claim: JsonObject) => ({ kind: "PersistentVolumeClaim", apiVersion: "v1", namespace: namespaceOf(claim), name: nameOf(claim), uid: uidOf(claim), resourceVersion: resourceVersionOf(claim) })

/** The writes of a binding: the volume's claimRef, its phase, the claim's volumeName, its status. */
const bind = (ctx: Controller.Context, claim: JsonObject, pv: JsonObject): Effect.Effect<void, ApiError.ApiError> =>
  Effect.gen(function* () {
    const ref = Views.persistentVolume(pv).spec?.claimRef
    let volume = pv
    if (ref === undefined || ref === null || (ref.uid ?? "") === "") {
      const annotations = ref === undefined || ref === null ? { [Storage.BoundByControllerAnnotation]: "yes" } : {}
      volume = yield* ctx.client.patch(ResourceRefs.PersistentVolume, undefined, nameOf(pv), "merge", {
        metadata: { resourceVersion: resourceVersionOf(pv), annotations },
        spec: { claimRef: claimRefTo(claim) }
      })
    }
    if (Views.persistentVolume(volume).status?.phase !== "Bound") {
      yield* ctx.client.patch(ResourceRefs.PersistentVolume, undefined, nameOf(pv), "merge", { status: { phase: "Bound" } }, "status")
    }
    const c = Views.persistentVolumeClaim(claim)
    let current = claim
    if ((c.spec?.volumeName ?? "") === "" || annotationsOf(claim)[Storage.BindCompletedAnnotation] === undefined) {
      const chosen = (c.spec?.volumeName ?? "") === "" ? { [Storage.BoundByControllerAnnotation]: "yes" } : {}
      current = yield* ctx.client.patch(ResourceRefs.PersistentVolumeClaim, namespaceOf(claim), nameOf(claim), "merge", {
        metadata: { resourceVersion: resourceVersionOf(claim), annotations: { [Storage.BindCompletedAnnotation]: "yes", ...chosen } },
        spec: { volumeName: nameOf(pv) }
      })
    }
    yield* syncStatus(ctx, current, volume)
  })

const syncStatus = (ctx: Controller.Context, claim: JsonObject, pv: JsonObject) => {
  const v = Views.persistentVolume(pv)
  return ctx.client.patch(
    ResourceRefs.PersistentVolumeClaim,
    namespaceOf(claim),
    nameOf(claim),
    "merge",
    { status: { phase: "Bound", accessModes: v.spec?.accessModes ?? null, capacity: v.spec?.capacity ?? null } },
    "status"
  )
}

const splitKey = (key: string) => [key.slice(0, key.indexOf("/")), key.slice(key.indexOf("/") + 1)] as const

const classesOf = (informers: Informer.Informers) => informers.for(ResourceRefs.StorageClass)

/** The claim half: one key per claim. */
export const claimReconciler = (): Controller.Reconciler => ({
  name: "persistentvolume-binder",
  primary: ResourceRefs.PersistentVolumeClaim,
  watches: [
    { ref: ResourceRefs.PersistentVolume, keys: (c) => [c.object, c.old].flatMap((o) => (o === undefined ? [] : (claimKeyOf(o) ?? []))) },
    // A new class (or a new default) may settle the claims still Pending.
    {
      ref: ResourceRefs.StorageClass,
      keys: (_c, informers) =>
        informers
          .for(ResourceRefs.PersistentVolumeClaim)
          .list()
          .filter((claim) => (Views.persistentVolumeClaim(claim).spec?.volumeName ?? "") === "")
          .map((claim) => `${namespaceOf(claim)}/${nameOf(claim)}`)
    }
  ],
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const [namespace, name] = splitKey(key)
      const claim = ctx.informers.for(ResourceRefs.PersistentVolumeClaim).get(namespace, name)
      if (claim === undefined) return
      const volumes = ctx.informers.for(ResourceRefs.PersistentVolume)
      const classes = classesOf(ctx.informers)
      const action = decideClaim(claim, {
        volumes: volumes.list(),
        volume: (n) => volumes.get(undefined, n),
        storageClass: (n) => classes.get(undefined, n),
        defaultClass: Storage.defaultClass(classes.list().map(Views.storageClass))?.metadata?.name ?? undefined
      })
      switch (action._tag) {
        case "None":
          return
        case "SetClass":
          yield* ctx.client.patch(ResourceRefs.PersistentVolumeClaim, namespace, name, "merge", { metadata: { resourceVersion: resourceVersionOf(claim) }, spec: { storageClassName: action.className } })
          return
        case "Bind":
          yield* bind(ctx, claim, action.volume)
          yield* ctx.events.record(claim, "Normal", "Bound", `Successfully bound to volume "${nameOf(action.volume)}"`)
          return
        case "SyncStatus":
          yield* syncStatus(ctx, claim, action.volume)
          return
        case "Provision": {
          yield* ctx.client.patch(ResourceRefs.PersistentVolumeClaim, namespace, name, "merge", {
            metadata: { resourceVersion: resourceVersionOf(claim), annotations: { [Storage.StorageProvisionerAnnotation]: action.provisioner, "volume.beta.kubernetes.io/storage-provisioner": action.provisioner } }
          })
          if (Views.persistentVolumeClaim(claim).status?.phase === undefined) {
            yield* ctx.client.patch(ResourceRefs.PersistentVolumeClaim, namespace, name, "merge", { status: { phase: "Pending" } }, "status")
          }
          yield* ctx.events.record(
            claim,
            "Normal",
            "ExternalProvisioning",
            `Waiting for a volume to be created either by the external provisioner '${action.provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.`
          )
          return
        }
        case "Pending":
          if (Views.persistentVolumeClaim(claim).status?.phase !== "Pending") {
            yield* ctx.client.patch(ResourceRefs.PersistentVolumeClaim, namespace, name, "merge", { status: { phase: "Pending" } }, "status")
          }
          if (action.event !== undefined) yield* ctx.events.record(claim, action.event.type, action.event.reason, action.event.message)
          return
        case "Lost":
          yield* ctx.client.patch(ResourceRefs.PersistentVolumeClaim, namespace, name, "merge", { status: { phase: "Lost" } }, "status")
          yield* ctx.events.record(claim, "Warning", "ClaimLost", action.message)
          return
        case "Expand": {
          // A directory has no size to grow: the new capacity is recorded on both sides.
          yield* ctx.client.patch(ResourceRefs.PersistentVolume, undefined, nameOf(action.volume), "merge", {
            metadata: { resourceVersion: resourceVersionOf(action.volume) },
            spec: { capacity: { storage: action.storage } }
          })
          const was = Views.persistentVolumeClaim(claim).status?.capacity?.["storage"]
          yield* ctx.client.patch(ResourceRefs.PersistentVolumeClaim, namespace, name, "merge", { status: { capacity: { storage: action.storage } } }, "status")
          yield* ctx.events.record(claim, "Normal", "VolumeResizeSuccessful", `resize volume "${nameOf(action.volume)}" from ${String(was ?? "?")} to ${action.storage} succeeded`)
          return
        }
      }
    })
})

/** The volume half: one key per volume (cluster-scoped: the name). */
export const volumeReconciler = (): Controller.Reconciler => ({
  name: "persistentvolume-reclaimer",
  primary: ResourceRefs.PersistentVolume,
  watches: [
    {
      ref: ResourceRefs.PersistentVolumeClaim,
      keys: (c, informers) => {
        const keys = new Set<string>()
        for (const o of [c.object, c.old]) {
          if (o === undefined) continue
          const bound = Views.persistentVolumeClaim(o).spec?.volumeName ?? ""
          if (bound !== "") keys.add(bound)
        }
        // A deleted claim: the volumes whose claimRef names it.
        if (c.type === "DELETED") {
          for (const pv of informers.for(ResourceRefs.PersistentVolume).list()) if (VolumeMatch.refersTo(pv, c.object)) keys.add(nameOf(pv))
        }
        return [...keys]
      }
    }
  ],
  reconcile: (name, ctx) =>
    Effect.gen(function* () {
      const pv = ctx.informers.for(ResourceRefs.PersistentVolume).get(undefined, name)
      if (pv === undefined) return
      const ref = Views.persistentVolume(pv).spec?.claimRef
      let claim: JsonObject | undefined
      if (ref !== undefined && ref !== null) {
        claim = ctx.informers.for(ResourceRefs.PersistentVolumeClaim).get(ref.namespace ?? "", ref.name ?? "")
        // The cache may not have a claim made a moment ago: ask the API before releasing anything.
        if (claim === undefined || ((ref.uid ?? "") !== "" && ref.uid !== uidOf(claim))) {
          claim = yield* ctx.client.get(ResourceRefs.PersistentVolumeClaim, ref.namespace ?? "", ref.name ?? "").pipe(
            Effect.map((o) => o as JsonObject),
            Effect.catchIf(
              (e) => e.status.code === 404,
              () => Effect.succeed(undefined)
            )
          )
        }
      }
      const action = decideVolume(pv, claim)
      switch (action._tag) {
        case "None":
          return
        case "Phase":
          yield* ctx.client.patch(
            ResourceRefs.PersistentVolume,
            undefined,
            name,
            "merge",
            { metadata: { resourceVersion: resourceVersionOf(pv) }, status: { phase: action.phase, reason: action.reason ?? null, message: action.message ?? null } },
            "status"
          )
          if (action.reason !== undefined) yield* ctx.events.record(pv, "Warning", action.reason, action.message ?? "")
          return
        case "Delete":
          yield* ctx.client.delete(ResourceRefs.PersistentVolume, undefined, name, { preconditions: { uid: uidOf(pv), resourceVersion: resourceVersionOf(pv) } }).pipe(
            Effect.catchIf(
              (e) => e.status.code === 404,
              () => Effect.void
            )
          )
          return
      }
    })
})
