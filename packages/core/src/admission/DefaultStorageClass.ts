/**
 * DefaultStorageClass admission, as kube-apiserver's plugin of that name: a claim created without
 * `spec.storageClassName` (absent or null; an explicit `""` means "no class" and is kept) gets the
 * default StorageClass, the newest one annotated `storageclass.kubernetes.io/is-default-class:
 * "true"`. With no default class the claim is left as it is; the PersistentVolume controller
 * gives it the default later, when one appears (Kubernetes' retroactive default assignment).
 */
import { Effect } from "effect"
import type * as Admission from "../api/Admission.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Storage from "../model/Storage.js"
import { asObject } from "../object/Json.js"
import * as Views from "../object/Views.js"
import type { StoreService } from "../store/Store.js"
import { listObjects } from "./internal/json.js"

/** The plugin's name. */
export const name = "DefaultStorageClass"

/** What the plugin reads. */
export interface Options {
  readonly store: StoreService
  readonly transformer?: Transformer
}

/** The plugin. */
export const make = (options: Options): Admission.Plugin => ({
  name,
  mutate: (request) => {
    const r = request.resource
    if (request.operation !== "CREATE" || r.group !== "" || r.plural !== "persistentvolumeclaims" || request.subresource !== "") return Effect.succeed(request.object)
    const spec = asObject(request.object["spec"])
    if (spec["storageClassName"] !== undefined && spec["storageClassName"] !== null) return Effect.succeed(request.object)
    return Effect.map(listObjects(options.store, options.transformer ?? identity, "storage.k8s.io", "storageclasses"), (stored) => {
      const chosen = Storage.defaultClass(stored.map((s) => Views.storageClass(s.object)))
      const className = chosen?.metadata?.name
      return className === undefined || className === null ? request.object : { ...request.object, spec: { ...spec, storageClassName: className } }
    })
  }
})
