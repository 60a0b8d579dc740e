/**
 * The garbage collector: reconciles `metadata.ownerReferences` across every served resource, as
 * kube-controller-manager's garbagecollector does.
 *
 * - Background: a dependent whose every owner is gone (no object of that name with that uid,
 *   confirmed by a live GET, since an informer may lag) is deleted; one that still has a live
 *   owner only loses its dangling references. An owner re-created under the same name (another
 *   uid) counts as gone.
 * - Foreground: an owner being deleted with the `foregroundDeletion` finalizer gets its dependents
 *   deleted (in Foreground themselves when they have dependents of their own); the finalizer is
 *   removed once no dependent with `blockOwnerDeletion: true` remains, and the API then deletes it.
 * - Orphan: an owner being deleted with the `orphan` finalizer has its reference removed from
 *   every dependent, then the finalizer removed.
 *
 * The graph is the shared informers' owner index (uid → dependents) over every resource: the
 * built-in kinds (`Kinds.all`, or the `resources` option), plus every CustomResourceDefinition's
 * resource, watched from the moment its CRD appears: custom resources are not in the runner's
 * fixed watch list, so the CRD's key mapper subscribes to them and queues their keys itself.
 *
 * Departures from upstream: an owner found in the informer cache with the same uid is trusted
 * without a GET (absence is always confirmed live, presence only from the cache: a later deletion
 * queues the dependents again); a reference to a kind that is not served keeps its dependent and
 * is retried later (upstream retries with backoff); namespaced owners are looked up in the
 * dependent's namespace, so a reference across namespaces counts as absent (with a Warning event
 * `OwnerRefInvalidNamespace` when the uid lives in another namespace), and a cluster-scoped
 * dependent naming a namespaced kind is never collected through that reference, as upstream.
 *
 * `decide` is here; the parts around it live in `internal/garbagecollector/`, as upstream splits
 * its collector: `ResourceTable` (the served resources), `Ownership` and `Graph` (owner references,
 * keys, dependents), `GraphBuilder` (the event handlers: which keys a change concerns, CRDs
 * followed), `OwnerStates` (the owner look-ups) and `Actions` (the writes).
 */
import { Effect } from "effect"
import type * as Controller from "./Controller.js"
import type * as Informer from "../informer/Informer.js"
import type { JsonObject } from "../object/Json.js"
import { finalizersOf, isTerminating } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Actions from "./internal/garbagecollector/Actions.js"
import * as Graph from "./internal/garbagecollector/Graph.js"
import * as GraphBuilder from "./internal/garbagecollector/GraphBuilder.js"
import * as OwnerStates from "./internal/garbagecollector/OwnerStates.js"
import * as Ownership from "./internal/garbagecollector/Ownership.js"
import * as ResourceTable from "./internal/garbagecollector/ResourceTable.js"

/** A served resource the collector (and the namespace controller) works on. */
export type Resource = ResourceTable.Resource

/** The finalizer that makes the API keep an owner until its dependents are gone. */
export const foregroundFinalizer = Ownership.foregroundFinalizer

/** The finalizer that makes the API keep an owner until its dependents are orphaned. */
export const orphanFinalizer = Ownership.orphanFinalizer

/** Every built-in kind as a resource. */
export const builtInResources: ReadonlyArray<Resource> = ResourceTable.builtInResources

/**
 * The resource a CustomResourceDefinition serves (its storage version, else its first served
 * one), or undefined while it is not established or being deleted.
 */
export const crdResource: (crd: JsonObject) => Resource | undefined = ResourceTable.crdResource

/** An owner reference as the collector reads it. */
export type OwnerRef = Ownership.OwnerRef

/** The owner references of an object. */
export const ownerRefs: (o: JsonObject) => ReadonlyArray<OwnerRef> = Ownership.ownerRefs

/** Whether the object is being deleted in the foreground (waiting for its dependents). */
export const isDeletingDependents: (o: JsonObject) => boolean = Ownership.isDeletingDependents

/** What the collector found about one owner reference. */
export type OwnerState = OwnerStates.OwnerState

/** One dependent of the object being reconciled. */
export type Dependent = Graph.Dependent

/** What `decide` looks at. */
export interface Observed {
  readonly item: JsonObject
  /** The state of each owner reference, by uid (needed only when the item is not being deleted). */
  readonly owners: ReadonlyMap<string, OwnerState>
  /** The item's own dependents. */
  readonly dependents: ReadonlyArray<Dependent>
}

/** The propagation policy of a DELETE. */
export type Propagation = Actions.Propagation

/** What to do about one object. */
export type Action = Actions.Action

/**
 * The collector's decision for one object (upstream's attemptToDeleteItem, processDeletingDependentsItem
 * and orphanDependents): pure, from the object, the states of its owners and its dependents.
 */
export const decide = (observed: Observed): Action => {
  const { item, owners, dependents } = observed
  const finalizers = finalizersOf(item)
  if (isTerminating(item)) {
    if (finalizers.includes(orphanFinalizer)) return { _tag: "OrphanDependents", dependents: dependents.map((d) => d.object) }
    if (finalizers.includes(foregroundFinalizer)) {
      const blocking = dependents.filter((d) => d.blocking).map((d) => d.object)
      return blocking.length === 0 ? { _tag: "RemoveFinalizer", finalizer: foregroundFinalizer } : { _tag: "AwaitDependents", blocking }
    }
    // Deleting for another reason (grace period, other finalizers): not the collector's business.
    return { _tag: "None", retry: false }
  }
  const refs = ownerRefs(item)
  if (refs.length === 0) return { _tag: "None", retry: false }
  const state = (r: OwnerRef) => owners.get(r.uid) ?? "Unresolvable"
  // Upstream cannot classify an item with an unresolvable reference and retries it later.
  if (refs.some((r) => state(r) === "Unresolvable")) return { _tag: "None", retry: true }
  // An invalid reference keeps the item, as upstream does not collect through it.
  const solid = refs.filter((r) => state(r) === "Solid" || state(r) === "Invalid")
  const dangling = refs.filter((r) => state(r) === "Dangling")
  const waiting = refs.filter((r) => state(r) === "Waiting")
  if (solid.length > 0) {
    // Another owner keeps the item; references to owners that are gone, or that wait for their
    // dependents, are removed so they do not block (or dangle) forever.
    const uids = [...dangling, ...waiting].map((r) => r.uid)
    return uids.length === 0 ? { _tag: "None", retry: false } : { _tag: "RemoveOwnerReferences", uids }
  }
  if (waiting.length > 0 && dependents.length > 0) {
    // Foreground deletion propagates: the item waits for its own dependents too. If one of them
    // is itself deleting in the foreground, unblock first so a cycle cannot deadlock.
    const unblock = dependents.some((d) => isDeletingDependents(d.object))
    return { _tag: "Delete", propagation: "Foreground", unblock }
  }
  const propagation: Propagation = finalizers.includes(orphanFinalizer) ? "Orphan" : finalizers.includes(foregroundFinalizer) ? "Foreground" : "Background"
  return { _tag: "Delete", propagation, unblock: false }
}

/** The work-queue key of an object of a resource (`apiVersion|kind|namespace|name`). */
export const keyFor: (r: Pick<Resource, "apiVersion" | "kind">, namespace: string | undefined, name: string) => string = Graph.keyFor

/** Splits a key made by `keyFor`. */
export const splitKey = Graph.splitKey

/** How long a reconcile waits for a new informer (a just-created CRD's) to list. */
const syncTimeoutMs = 5_000

/** Options of the collector. */
export interface Options {
  /** The resources to collect (default: every built-in kind). */
  readonly resources?: ReadonlyArray<Resource>
  /** Follow CustomResourceDefinitions and collect their resources too (default true). */
  readonly customResources?: boolean
  /** How often objects waiting on a finalizer of the collector are looked at again (default 30 s). */
  readonly resyncMs?: number
  /** Concurrent workers (default 4). */
  readonly workers?: number
}

/**
 * One key's reconcile (upstream's attemptToDeleteWorker): once every informer of the graph has
 * listed, observe the item's dependents and owners, `decide`, and apply the action.
 */
const reconcileKey =
  (table: ResourceTable.ResourceTable): Controller.Reconciler["reconcile"] =>
  (key, ctx) =>
    Effect.gen(function* () {
      const { apiVersion, kind, namespace, name } = splitKey(key)
      const r = table.byGroupKind(ResourceTable.groupOf(apiVersion), kind)
      if (r === undefined) return
      const item = ctx.informers.for(ResourceTable.refOf(r)).get(namespace, name)
      if (item === undefined) return
      // Every informer the graph reads must have listed, or missing dependents look like none.
      const synced = yield* Effect.forEach(table.all(), (x) => ctx.informers.for(ResourceTable.refOf(x)).synced, { discard: true }).pipe(
        Effect.timeoutTo({ duration: syncTimeoutMs, onTimeout: () => false, onSuccess: () => true })
      )
      if (!synced) return { requeueAfterMs: 1_000 }
      const dependents = Graph.dependentsOf(table, ctx.informers, item)
      const owners: ReadonlyMap<string, OwnerState> = isTerminating(item) ? new Map() : yield* OwnerStates.ownerStates(ctx, table, item)
      const resources = new Map(dependents.map((d) => [d.object, d.resource]))
      return yield* Actions.apply(ctx, r, item, decide({ item, owners, dependents }), (d) => resources.get(d))
    })

/** The watches: every resource of the table by `GraphBuilder.keysOf`, and CRDs by `crdKeys` too. */
const watchesOf = (table: ResourceTable.ResourceTable, crdKeys: Controller.KeyMapper): ReadonlyArray<Controller.Watch> => {
  const isCrd = (r: Resource) => r.apiVersion === ResourceRefs.CustomResourceDefinition.apiVersion && r.kind === ResourceRefs.CustomResourceDefinition.kind
  return [
    ...table.all().map((r) => ({
      ref: ResourceTable.refOf(r),
      keys: isCrd(r)
        ? (c: Informer.Change, i: Informer.Informers, enqueue?: (key: string) => void) => [...crdKeys(c, i, enqueue), ...GraphBuilder.keysOf(table, r)(c, i, enqueue)]
        : GraphBuilder.keysOf(table, r)
    })),
    ...(table.byGroupKind("apiextensions.k8s.io", "CustomResourceDefinition") === undefined ? [{ ref: ResourceRefs.CustomResourceDefinition, keys: crdKeys }] : [])
  ]
}

/** The garbage collector. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const table = ResourceTable.make(options.resources ?? builtInResources)
  const crdKeys = GraphBuilder.crdKeys(table, options.customResources !== false)
  return {
    name: "garbage-collector",
    primary: ResourceRefs.CustomResourceDefinition,
    reactToPrimary: false,
    workers: options.workers ?? 4,
    watches: watchesOf(table, crdKeys),
    // A safety net for missed events: objects still waiting on one of the collector's finalizers.
    resync: { everyMs: options.resyncMs ?? 30_000, keys: (informers) => GraphBuilder.stuck(table, informers) },
    reconcile: reconcileKey(table)
  }
}
