/**
 * PersistentVolumeClaimResize admission, as kube-apiserver's plugin of that name: a claim's
 * storage request may grow only when the claim is bound and its StorageClass says
 * `allowVolumeExpansion: true`; otherwise the update is refused with 403 and Kubernetes' message.
 * (That a request may not shrink, and that only a bound claim may change it, is the claim's own
 * update validation.)
 */
import { Effect } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Quantity from "../model/Quantity.js"
import * as Status from "../model/Status.js"
import * as Views from "../object/Views.js"
import type { StoreService } from "../store/Store.js"
import { getObject } from "./internal/json.js"

/** The plugin's name. */
export const name = "PersistentVolumeClaimResize"

/** What the plugin reads. */
export interface Options {
  readonly store: StoreService
  readonly transformer?: Transformer
}

const storageOf = (v: Views.PersistentVolumeClaim) => {
  const s = v.spec?.resources?.requests?.["storage"]
  const q = s === undefined || s === null ? undefined : Quantity.parse(String(s))
  return q === undefined || q._tag === "Left" ? Quantity.zero : q.right
}

/** Kubernetes' refusal of a resize. */
export const refusal = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"

/** The plugin. */
export const make = (options: Options): Admission.Plugin => ({
  name,
  validate: (request) => {
    const r = request.resource
    const admitted = Effect.succeed([])
    if (request.operation !== "UPDATE" || r.group !== "" || r.plural !== "persistentvolumeclaims" || request.subresource !== "" || request.oldObject === undefined) return admitted
    const claim = Views.persistentVolumeClaim(request.object)
    const old = Views.persistentVolumeClaim(request.oldObject)
    if (Quantity.compare(storageOf(claim), storageOf(old)) <= 0) return admitted
    const forbidden = (detail: string) => Effect.fail(ApiError.of(Status.forbidden({ group: "", resource: "persistentvolumeclaims" }, request.name, detail)))
    // Kubernetes' order: an unbound claim cannot be resized at all.
    if ((old.spec?.volumeName ?? "") === "") return forbidden("Only bound persistent volume claims can be resized")
    const className = old.spec?.storageClassName ?? ""
    if (className === "") return forbidden(refusal)
    return Effect.flatMap(getObject(options.store, options.transformer ?? identity, { group: "storage.k8s.io", plural: "storageclasses", name: className }), (stored) =>
      stored !== undefined && Views.storageClass(stored.object).allowVolumeExpansion === true ? admitted : forbidden(refusal)
    )
  }
})
