/**
 * VolumeBinding as the scheduler runtime registers it — which claims the scheduler judges. A claim
 * whose StorageClass exists is judged as upstream: WaitForFirstConsumer claims get a volume (or a
 * provisioning node) with the pod, Immediate ones keep the pod Pending (`pod has unbound immediate
 * PersistentVolumeClaims`) until the PersistentVolume controller binds them. So are claims whose
 * class the VolumeBinding arguments list in `waitForFirstConsumer` (local-volume classes with no
 * StorageClass object). A claim with no class (the cluster has no default) or naming a class that
 * does not exist is a departure: the pod is placed as if it did not have it and the claim stays
 * Pending, visibly. A bound claim is always honoured (its
 * volume's node affinity), a missing claim always stops the pod.
 */
import { asArray, asObject, asString, type JsonObject } from "../object/Json.js"
import * as Views from "../object/Views.js"
import type { Factory, Plugin, PreFilterPlugin, Registry } from "./Framework.js"
import * as VolumeBinding from "./plugins/VolumeBinding.js"
import type * as Snapshot from "./Snapshot.js"

/** Looks a claim up by namespace and name. */
export type ClaimLookup = (namespace: string, name: string) => JsonObject | undefined

/** Looks a StorageClass up by name. */
export type ClassLookup = (name: string) => JsonObject | undefined

/** A claim's class: `spec.storageClassName`, else the beta annotation (upstream's GetPersistentVolumeClaimClass). */
export const claimClass = (claim: JsonObject): string => {
  const c = Views.persistentVolumeClaim(claim)
  return c.spec?.storageClassName || (c.metadata?.annotations?.["volume.beta.kubernetes.io/storage-class"] ?? "")
}

/**
 * Whether VolumeBinding must judge a pod volume: not a claim (nothing to judge), a claim that is
 * missing, deleting or bound, or one whose class waits for its first consumer. Pod volumes are
 * read as plain JSON: generic ephemeral volumes are not in the Pod schema Fleet stores.
 */
export const concerns = (waiting: ReadonlySet<string>, claim: ClaimLookup, pod: Snapshot.PodInfo, volume: JsonObject, storageClass: ClassLookup = () => undefined): boolean => {
  const named = asString(asObject(volume["persistentVolumeClaim"])["claimName"])
  const name = named !== "" ? named : volume["ephemeral"] !== undefined && volume["ephemeral"] !== null ? `${pod.name}-${asString(volume["name"])}` : ""
  if (name === "") return true
  const c = claim(pod.namespace, name)
  if (c === undefined) return true
  const view = Views.persistentVolumeClaim(c)
  // Missing, deleting or bound claims are the plugin's to judge.
  if (view.metadata?.deletionTimestamp != null || (view.spec?.volumeName ?? "") !== "") return true
  // A class that exists is judged as upstream: the PersistentVolume controller binds Immediate claims.
  const cls = claimClass(c)
  return waiting.has(cls) || (cls !== "" && storageClass(cls) !== undefined)
}

/**
 * `factory` with its PreFilter seeing the pod without the unbound claims whose class is not listed
 * in `waitForFirstConsumer`. A pod left with no claim is skipped by the plugin as one that has
 * none. The plugin is otherwise the one built (its other points reached through the prototype).
 */
export const scope = (factory: Factory, claim: ClaimLookup, storageClass: ClassLookup = () => undefined): Factory => (args, handle) => {
  const built = factory(args, handle)
  if (typeof built === "string" || typeof (built as Partial<PreFilterPlugin>).preFilter !== "function") return built
  const plugin = built as PreFilterPlugin
  const waiting = new Set(asArray(asObject(args)["waitForFirstConsumer"]).map(asString))
  const preFilter: PreFilterPlugin["preFilter"] = (state, pod, snapshot) => {
    const spec = asObject(pod.pod["spec"])
    const volumes = asArray(spec["volumes"])
    let kept: Array<unknown> | undefined
    for (let i = 0; i < volumes.length; i++) {
      const keep = concerns(waiting, claim, pod, asObject(volumes[i]), storageClass)
      if (!keep && kept === undefined) kept = volumes.slice(0, i)
      else if (keep && kept !== undefined) kept.push(volumes[i])
    }
    if (kept === undefined) return plugin.preFilter(state, pod, snapshot)
    return plugin.preFilter(state, { ...pod, pod: { ...pod.pod, spec: { ...spec, volumes: kept } } }, snapshot)
  }
  return Object.create(plugin, { preFilter: { value: preFilter, enumerable: true } }) as Plugin
}

/**
 * `registry` with whatever it builds under VolumeBinding's name scoped: the claim scoping is the
 * cluster's policy (no PV controller), not the plugin's.
 */
export const scopeRegistry = (registry: Registry, claim: ClaimLookup, storageClass: ClassLookup = () => undefined): Registry => {
  const volumeBinding = Object.prototype.hasOwnProperty.call(registry, VolumeBinding.name) ? registry[VolumeBinding.name] : undefined
  return volumeBinding === undefined ? registry : { ...registry, [VolumeBinding.name]: scope(volumeBinding, claim, storageClass) }
}
