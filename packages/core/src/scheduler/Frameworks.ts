/**
 * One framework per profile, built from the registry with the handle the built-in plugins read
 * through: namespace labels (InterPodAffinity's `namespaceSelector`), the Services and controllers
 * selecting a pod (PodTopologySpread's system default spreading), claims and volumes
 * (VolumeBinding, scoped as `VolumeBindingScope` says), budgets and a filter runner
 * (DefaultPreemption), and the API binding (DefaultBinder). Everything is read from the shared
 * informers when a plugin asks, never copied.
 */
import { Either, type Effect } from "effect"
import type * as Informer from "../informer/Informer.js"
import type * as LabelSelector from "../model/LabelSelector.js"
import { asObject, type JsonObject } from "../object/Json.js"
import { labelsOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"
import { type CycleState, type Framework, isSuccess, type Plugin, type Profile, type Registry, type Status, success } from "./Framework.js"
import type * as DefaultPreemption from "./plugins/DefaultPreemption.js"
import type * as InterPodAffinity from "./plugins/InterPodAffinity.js"
import * as PodTopologySpread from "./plugins/PodTopologySpread.js"
import type * as VolumeBinding from "./plugins/VolumeBinding.js"
import * as Profiles from "./Profiles.js"
import type * as Snapshot from "./Snapshot.js"
import * as VolumeBindingScope from "./VolumeBindingScope.js"

/** Everything the built-in plugins read from their handle. */
type PluginHandles = DefaultPreemption.PreemptionHandle & InterPodAffinity.AffinityHandle & PodTopologySpread.SpreadHandle & VolumeBinding.VolumeHandle

/** The handle built per profile (writable: `runFilter` is bound after the framework is built). */
type RuntimeHandle = { -readonly [K in keyof PluginHandles]: PluginHandles[K] }

/** The built frameworks by scheduler name; `first` answers for pods naming no configured profile. */
export interface Frameworks {
  readonly byName: ReadonlyMap<string, Framework>
  readonly first: Framework
  /** Every plugin that can reject a pod, once (what the queue's interest map is built from). */
  readonly rejecting: ReadonlySet<Plugin>
}

/** PodDisruptionBudgets of a namespace as preemption reads them. */
export const budgets = (informers: Informer.Informers, namespace: string): ReadonlyArray<DefaultPreemption.Budget> =>
  informers
    .for(ResourceRefs.PodDisruptionBudget)
    .list(namespace)
    .map((pdb) => {
      const v = Views.podDisruptionBudget(pdb)
      return {
        selector: v.spec?.selector as LabelSelector.LabelSelector | undefined,
        disruptionsAllowed: Number(v.status?.disruptionsAllowed ?? 0),
        disruptedPods: asObject(v.status?.disruptedPods)
      }
    })

/** Run every Filter plugin of `framework` on one node (what preemption re-checks). */
export const runFilter = (framework: Framework) => (state: CycleState, pod: Snapshot.PodInfo, node: Snapshot.NodeInfo): Status => {
  for (const p of framework.filter) {
    if (state.skipFilter.has(p.name)) continue
    const s = p.filter(state, pod, node)
    if (!isSuccess(s)) return { ...s, plugin: p.name }
  }
  return success
}

/**
 * Upstream's DefaultSelector for system default spreading: the selectors of the Services in the
 * pod's namespace that select it, merged with its controlling ReplicaSet's, ReplicationController's
 * or StatefulSet's (read from the pod's own labels, as PodTopologySpread's fallback does).
 */
export const defaultSelector = (services: Informer.Informer) => (pod: Snapshot.PodInfo): LabelSelector.LabelSelector | undefined => {
  const owner = PodTopologySpread.ownerLabelsSelector(pod)
  let matchLabels: Record<string, string> | undefined
  for (const svc of services.list(pod.namespace)) {
    const selector = Views.service(svc).spec?.selector ?? {}
    const keys = Object.keys(selector)
    // A Service without a selector selects no pod.
    if (keys.length === 0 || !keys.every((k) => pod.labels[k] === selector[k])) continue
    matchLabels = { ...matchLabels, ...selector }
  }
  if (matchLabels === undefined) return owner
  return { ...owner, matchLabels: { ...matchLabels, ...owner?.matchLabels } }
}

/** Build one framework per profile (distinct scheduler names, at least one). */
export const build = (
  profiles: ReadonlyArray<Profile>,
  base: Registry,
  informers: Informer.Informers,
  bindPod: (pod: JsonObject, node: string) => Effect.Effect<Status>
): Either.Either<Frameworks, string> => {
  const namespaces = informers.for(ResourceRefs.Namespace)
  const services = informers.for(ResourceRefs.Service)
  const volumes = informers.for(ResourceRefs.PersistentVolume)
  const claims = informers.for(ResourceRefs.PersistentVolumeClaim)
  const classes = informers.for(ResourceRefs.StorageClass)
  const claimOf = (namespace: string, name: string) => claims.get(namespace, name)
  const classOf = (name: string) => classes.get(undefined, name)
  const registry = VolumeBindingScope.scopeRegistry(base, claimOf, classOf)
  // Preemption's filter runner is bound once its framework is built (it is only called at PostFilter time).
  const byName = new Map<string, Framework>()
  for (const profile of profiles) {
    if (byName.has(profile.schedulerName)) return Either.left(`duplicate profile with scheduler name "${profile.schedulerName}"`)
    const handle: RuntimeHandle = {
      schedulerName: profile.schedulerName,
      bindPod,
      pdbs: (namespace) => budgets(informers, namespace),
      namespaceLabels: (namespace) => {
        const ns = namespaces.get(undefined, namespace)
        return ns === undefined ? undefined : labelsOf(ns)
      },
      defaultSelector: defaultSelector(services),
      volumes: { claim: claimOf, volumes: () => volumes.list(), storageClass: classOf }
    }
    const built = Profiles.build(profile, registry, handle)
    if (built._tag === "Left") return Either.left(`scheduler profile ${profile.schedulerName}: ${built.left}`)
    handle.runFilter = runFilter(built.right)
    byName.set(profile.schedulerName, built.right)
  }
  const first = [...byName.values()][0]
  if (first === undefined) return Either.left("no scheduler profile")
  const rejecting = new Set<Plugin>()
  for (const f of byName.values()) {
    for (const p of [...f.preFilter, ...f.filter, ...f.postFilter, ...f.reserve, ...f.permit]) rejecting.add(p)
  }
  return Either.right({ byName, first, rejecting })
}

/** The framework for a pod's scheduler name (`first` for an unknown one). */
export const forName = (frameworks: Frameworks, name: string): Framework => frameworks.byName.get(name) ?? frameworks.first
