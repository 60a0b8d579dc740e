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
 */
import { Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import * as Kinds from "../model/Kinds.js"
import type * as Controller from "./Controller.js"
import type * as Informer from "../informer/Informer.js"
import { metadataOf, namespaceOrUndefined } from "../object/Metadata.js"
import { type JsonObject, asArray, asObject } from "../object/Json.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** A served resource the collector (and the namespace controller) works on. */
export interface Resource {
  readonly apiVersion: string
  readonly kind: string
  readonly plural: string
  readonly namespaced: boolean
}

/** The finalizer that makes the API keep an owner until its dependents are gone. */
export const foregroundFinalizer = "foregroundDeletion"

/** The finalizer that makes the API keep an owner until its dependents are orphaned. */
export const orphanFinalizer = "orphan"

/** Every built-in kind as a resource. */
export const builtInResources: ReadonlyArray<Resource> = Kinds.all.map((k) => ({
  apiVersion: k.apiVersion,
  kind: k.kind,
  plural: k.plural,
  namespaced: k.namespaced
}))



/**
 * The resource a CustomResourceDefinition serves (its storage version, else its first served
 * one), or undefined while it is not established or being deleted.
 */
export const crdResource = (crd: JsonObject): Resource | undefined => {
  const spec = asObject(crd["spec"])
  const names = asObject(spec["names"])
  const versions = asArray(spec["versions"]).map(asObject)
  const version = versions.find((v) => v["storage"] === true && v["served"] !== false) ?? versions.find((v) => v["served"] !== false)
  if (version === undefined || typeof spec["group"] !== "string" || typeof names["plural"] !== "string" || typeof names["kind"] !== "string") return undefined
  return { apiVersion: `${spec["group"]}/${String(version["name"])}`, kind: names["kind"], plural: names["plural"], namespaced: spec["scope"] !== "Cluster" }
}

/** The group of an apiVersion (`""` for the core group). */
const groupOf = (apiVersion: string) => (apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "")

/** An owner reference as the collector reads it. */
export interface OwnerRef {
  readonly apiVersion: string
  readonly kind: string
  readonly name: string
  readonly uid: string
  readonly controller?: boolean
  readonly blockOwnerDeletion?: boolean
}

/** The owner references of an object. */
export const ownerRefs = (o: JsonObject): ReadonlyArray<OwnerRef> =>
  asArray(metadataOf(o)["ownerReferences"]).map(asObject).filter((r) => typeof r["uid"] === "string") as unknown as ReadonlyArray<OwnerRef>

const finalizersOf = (o: JsonObject): ReadonlyArray<string> => asArray(metadataOf(o)["finalizers"]).filter((f): f is string => typeof f === "string")
const deleting = (o: JsonObject) => metadataOf(o)["deletionTimestamp"] !== undefined

/** Whether the object is being deleted in the foreground (waiting for its dependents). */
export const isDeletingDependents = (o: JsonObject): boolean => deleting(o) && finalizersOf(o).includes(foregroundFinalizer)

/** What the collector found about one owner reference. */
export type OwnerState =
  /** The owner exists and is not waiting for its dependents. */
  | "Solid"
  /** No object of that name has that uid (confirmed live). */
  | "Dangling"
  /** The owner exists and is being deleted in the foreground. */
  | "Waiting"
  /** The reference cannot be resolved yet (kind not served): decided again later. */
  | "Unresolvable"
  /** A namespaced kind referenced from a cluster-scoped object: never resolvable, keeps the object. */
  | "Invalid"

/** One dependent of the object being reconciled. */
export interface Dependent {
  readonly object: JsonObject
  /** Its reference to the owner has `blockOwnerDeletion: true`. */
  readonly blocking: boolean
}

/** What `decide` looks at. */
export interface Observed {
  readonly item: JsonObject
  /** The state of each owner reference, by uid (needed only when the item is not being deleted). */
  readonly owners: ReadonlyMap<string, OwnerState>
  /** The item's own dependents. */
  readonly dependents: ReadonlyArray<Dependent>
}

/** The propagation policy of a DELETE. */
export type Propagation = "Background" | "Foreground" | "Orphan"

/** What to do about one object. */
export type Action =
  | { readonly _tag: "None"; readonly retry: boolean }
  /** Remove the reference to the item from these dependents, then remove the `orphan` finalizer. */
  | { readonly _tag: "OrphanDependents"; readonly dependents: ReadonlyArray<JsonObject> }
  /** Remove this finalizer from the item (the API then finishes deleting it). */
  | { readonly _tag: "RemoveFinalizer"; readonly finalizer: string }
  /** The item waits in the foreground for these blocking dependents to go. */
  | { readonly _tag: "AwaitDependents"; readonly blocking: ReadonlyArray<JsonObject> }
  /** Drop the references to these owners (dangling, or waiting for this item's deletion). */
  | { readonly _tag: "RemoveOwnerReferences"; readonly uids: ReadonlyArray<string> }
  /** Delete the item; `unblock` first sets `blockOwnerDeletion: false` on its references (cycle guard). */
  | { readonly _tag: "Delete"; readonly propagation: Propagation; readonly unblock: boolean }

/**
 * The collector's decision for one object (upstream's attemptToDeleteItem, processDeletingDependentsItem
 * and orphanDependents): pure, from the object, the states of its owners and its dependents.
 */
export const decide = (observed: Observed): Action => {
  const { item, owners, dependents } = observed
  const finalizers = finalizersOf(item)
  if (deleting(item)) {
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
export const keyFor = (r: Pick<Resource, "apiVersion" | "kind">, namespace: string | undefined, name: string): string =>
  `${r.apiVersion}|${r.kind}|${namespace ?? ""}|${name}`

/** Splits a key made by `keyFor`. */
export const splitKey = (key: string) => {
  const [apiVersion = "", kind = "", namespace = "", name = ""] = key.split("|")
  return { apiVersion, kind, namespace: namespace === "" ? undefined : namespace, name }
}

/** The served resources, built-in and custom, by group and kind. */
interface Table {
  readonly all: () => ReadonlyArray<Resource>
  readonly byGroupKind: (group: string, kind: string) => Resource | undefined
  readonly add: (r: Resource) => void
  readonly remove: (r: Resource) => void
}

const makeTable = (initial: ReadonlyArray<Resource>): Table => {
  const byKey = new Map<string, Resource>()
  const k = (r: Resource) => `${groupOf(r.apiVersion)}/${r.kind}`
  for (const r of initial) byKey.set(k(r), r)
  return {
    all: () => [...byKey.values()],
    byGroupKind: (g, kind) => byKey.get(`${g}/${kind}`),
    add: (r) => void byKey.set(k(r), r),
    remove: (r) => void byKey.delete(k(r))
  }
}

const refOf = (r: Resource): Client.ResourceRef => ({ apiVersion: r.apiVersion, kind: r.kind, plural: r.plural, namespaced: r.namespaced })

/** The resource an owner reference names, and the namespace to find it in (undefined when invalid). */
const ownerLocation = (table: Table, dependent: JsonObject, r: OwnerRef) => {
  const resource = table.byGroupKind(groupOf(r.apiVersion), r.kind)
  if (resource === undefined) return undefined
  const ns = namespaceOrUndefined(dependent)
  if (resource.namespaced && ns === undefined) return { resource, namespace: undefined, invalid: true }
  return { resource, namespace: resource.namespaced ? ns : undefined, invalid: false }
}

/** The dependents of `owner` across every resource (same namespace when the owner is namespaced). */
const dependentsOf = (table: Table, informers: Informer.Informers, owner: JsonObject): ReadonlyArray<Dependent & { readonly resource: Resource }> => {
  const uid = String(metadataOf(owner)["uid"] ?? "")
  if (uid === "") return []
  const ns = namespaceOrUndefined(owner)
  const out: Array<Dependent & { readonly resource: Resource }> = []
  for (const r of table.all()) {
    if (ns !== undefined && !r.namespaced) continue
    for (const o of informers.for(refOf(r)).ownedBy(uid)) {
      if (ns !== undefined && namespaceOrUndefined(o) !== ns) continue
      out.push({ object: o, resource: r, blocking: ownerRefs(o).some((ref) => ref.uid === uid && ref.blockOwnerDeletion === true) })
    }
  }
  return out
}

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

/** The garbage collector. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const table = makeTable(options.resources ?? builtInResources)
  const resyncMs = options.resyncMs ?? 30_000

  const keyOfObject = (r: Resource, o: JsonObject) => keyFor(r, namespaceOrUndefined(o), String(metadataOf(o)["name"]))

  const ownerKeys = (o: JsonObject, refs: ReadonlyArray<OwnerRef>) =>
    refs.flatMap((ref) => {
      const loc = ownerLocation(table, o, ref)
      return loc === undefined || loc.invalid ? [] : [keyFor(loc.resource, loc.namespace, ref.name)]
    })

  /** Which keys a change of an object of `r` concerns (upstream's GraphBuilder.processGraphChanges). */
  const keysOf =
    (r: Resource): Controller.KeyMapper =>
    (change, informers) => {
      const o = change.object
      const keys = new Set<string>()
      const refs = ownerRefs(o)
      const dependentKeys = () => {
        for (const d of dependentsOf(table, informers, o)) keys.add(keyOfObject(d.resource, d.object))
      }
      if (change.type === "DELETED") {
        // Its dependents may now be garbage; owners waiting in the foreground may be done.
        dependentKeys()
        ownerKeys(o, refs).forEach((k) => keys.add(k))
        return [...keys]
      }
      const old = change.old
      const gcFinalizer = deleting(o) && finalizersOf(o).some((f) => f === foregroundFinalizer || f === orphanFinalizer)
      const refsChanged = old === undefined || JSON.stringify(ownerRefs(old)) !== JSON.stringify(refs)
      const deletionChanged = old === undefined || deleting(old) !== deleting(o) || JSON.stringify(finalizersOf(old)) !== JSON.stringify(finalizersOf(o))
      if ((refs.length > 0 && (refsChanged || deletionChanged)) || (gcFinalizer && deletionChanged)) keys.add(keyOfObject(r, o))
      if (isDeletingDependents(o) && (old === undefined || !isDeletingDependents(old))) dependentKeys()
      if (old !== undefined && refsChanged) {
        // Owners whose reference changed or went may have been waiting for this dependent.
        const now = new Map(refs.map((x) => [x.uid, x]))
        const changed = ownerRefs(old).filter((x) => JSON.stringify(now.get(x.uid)) !== JSON.stringify(x))
        ownerKeys(old, changed).forEach((k) => keys.add(k))
      }
      return [...keys]
    }

  /**
   * Follow a CRD: while it exists, its resource is part of the graph and its changes are queued
   * as they happen; once it is gone, its resource leaves the graph (its objects were
   * deleted before it, by the API's CRD cleanup).
   */
  const builtIn = new Set(table.all().map((r) => `${groupOf(r.apiVersion)}/${r.kind}`))
  const subscribed = new Set<string>()
  const crdMapper: Controller.KeyMapper = (change, informers, enqueue) => {
    const r = crdResource(change.object)
    if (options.customResources === false || r === undefined || builtIn.has(`${groupOf(r.apiVersion)}/${r.kind}`)) return []
    if (change.type === "DELETED") {
      table.remove(r)
      return []
    }
    table.add(r)
    const id = `${r.apiVersion}/${r.kind}`
    if (!subscribed.has(id)) {
      subscribed.add(id)
      const mapper = keysOf(r)
      informers.for(refOf(r)).subscribe((c) => {
        if (enqueue !== undefined && table.byGroupKind(groupOf(r.apiVersion), r.kind) !== undefined) mapper(c, informers, enqueue).forEach(enqueue)
      })
    }
    return []
  }

  /** Objects waiting on one of the collector's finalizers (a safety net for missed events). */
  const stuck = (informers: Informer.Informers) =>
    table.all().flatMap((r) =>
      informers
        .for(refOf(r))
        .list()
        .filter((o) => deleting(o) && finalizersOf(o).some((f) => f === foregroundFinalizer || f === orphanFinalizer))
        .map((o) => keyOfObject(r, o))
    )

  /** The state of one owner reference of `item`: cache first, absence confirmed by a live GET. */
  const ownerState = (ctx: Controller.Context, item: JsonObject, ref: OwnerRef): Effect.Effect<OwnerState, ApiError.ApiError> =>
    Effect.gen(function* () {
      const loc = ownerLocation(table, item, ref)
      if (loc === undefined) return "Unresolvable" as const
      if (loc.invalid) {
        yield* ctx.events.record(item, "Warning", "OwnerRefInvalidNamespace", `ownerRef [${ref.apiVersion}/${ref.kind}, namespace: , name: ${ref.name}, uid: ${ref.uid}] is a namespaced kind referenced from a cluster-scoped object`)
        return "Invalid" as const
      }
      const informer = ctx.informers.for(refOf(loc.resource))
      const stateOf = (owner: JsonObject): OwnerState => (isDeletingDependents(owner) ? "Waiting" : "Solid")
      const cached = informer.get(loc.namespace, ref.name)
      if (cached !== undefined && metadataOf(cached)["uid"] === ref.uid) return stateOf(cached)
      const live = yield* ctx.client.get(refOf(loc.resource), loc.namespace, ref.name).pipe(
        Effect.map((o): JsonObject | undefined => o),
        Effect.catchIf((e) => e.status.code === 404, () => Effect.succeed(undefined))
      )
      if (live !== undefined && metadataOf(live)["uid"] === ref.uid) return stateOf(live)
      if (loc.namespace !== undefined) {
        // The uid may live in another namespace: an invalid cross-namespace reference.
        const elsewhere = informer.list().find((o) => metadataOf(o)["uid"] === ref.uid)
        if (elsewhere !== undefined) {
          yield* ctx.events.record(item, "Warning", "OwnerRefInvalidNamespace", `ownerRef [${ref.apiVersion}/${ref.kind}, namespace: ${loc.namespace}, name: ${ref.name}, uid: ${ref.uid}] does not exist in namespace "${loc.namespace}"`)
        }
      }
      return "Dangling" as const
    })

  const ignoreGone = <A>(effect: Effect.Effect<A, ApiError.ApiError>) =>
    effect.pipe(
      Effect.asVoid,
      Effect.catchIf((e) => e.status.code === 404, () => Effect.void)
    )

  /** Merge-patch an object's metadata, pinned to the revision decided on (a stale view conflicts and retries). */
  const patchMeta = (ctx: Controller.Context, r: Resource, o: JsonObject, metadata: Record<string, unknown>) =>
    ignoreGone(
      ctx.client.patch(refOf(r), namespaceOrUndefined(o), String(metadataOf(o)["name"]), "merge", {
        metadata: { ...metadata, resourceVersion: metadataOf(o)["resourceVersion"] }
      })
    )

  const withoutOwners = (o: JsonObject, uids: ReadonlyArray<string>) => {
    const kept = asArray(metadataOf(o)["ownerReferences"]).filter((x) => !uids.includes(String(asObject(x)["uid"])))
    return { ownerReferences: kept.length === 0 ? null : kept }
  }

  const apply = (
    ctx: Controller.Context,
    r: Resource,
    item: JsonObject,
    action: Action,
    resourceOf: (dependent: JsonObject) => Resource | undefined
  ): Effect.Effect<Controller.Result | void, ApiError.ApiError> =>
    Effect.gen(function* () {
      const name = String(metadataOf(item)["name"])
      switch (action._tag) {
        case "None":
        case "AwaitDependents":
          return action._tag === "None" && action.retry ? { requeueAfterMs: 10_000 } : undefined
        case "OrphanDependents": {
          const uid = String(metadataOf(item)["uid"])
          for (const d of action.dependents) {
            const dr = resourceOf(d)
            if (dr !== undefined) yield* patchMeta(ctx, dr, d, withoutOwners(d, [uid]))
          }
          const rest = finalizersOf(item).filter((f) => f !== orphanFinalizer)
          return yield* patchMeta(ctx, r, item, { finalizers: rest.length === 0 ? null : rest })
        }
        case "RemoveFinalizer": {
          const rest = finalizersOf(item).filter((f) => f !== action.finalizer)
          return yield* patchMeta(ctx, r, item, { finalizers: rest.length === 0 ? null : rest })
        }
        case "RemoveOwnerReferences":
          return yield* patchMeta(ctx, r, item, withoutOwners(item, action.uids))
        case "Delete": {
          let target = item
          if (action.unblock) {
            const refs = asArray(metadataOf(item)["ownerReferences"]).map((x) => (asObject(x)["blockOwnerDeletion"] === true ? { ...asObject(x), blockOwnerDeletion: false } : x))
            const patched = yield* ctx.client
              .patch(refOf(r), namespaceOrUndefined(item), name, "merge", { metadata: { ownerReferences: refs, resourceVersion: metadataOf(item)["resourceVersion"] } })
              .pipe(Effect.catchIf((e) => e.status.code === 404, () => Effect.succeed(undefined)))
            if (patched === undefined) return
            target = patched
          }
          // Preconditions: the object decided on, with the owner references decided on.
          return yield* ignoreGone(
            ctx.client.delete(refOf(r), namespaceOrUndefined(target), name, {
              propagationPolicy: action.propagation,
              preconditions: { uid: metadataOf(target)["uid"], resourceVersion: metadataOf(target)["resourceVersion"] }
            })
          )
        }
      }
    })

  return {
    name: "garbage-collector",
    primary: ResourceRefs.CustomResourceDefinition,
    reactToPrimary: false,
    workers: options.workers ?? 4,
    watches: [
      ...table.all().map((r) => ({
        ref: refOf(r),
        keys:
          r.apiVersion === ResourceRefs.CustomResourceDefinition.apiVersion && r.kind === ResourceRefs.CustomResourceDefinition.kind
            ? (c: Informer.Change, i: Informer.Informers, enqueue?: (key: string) => void) => [...crdMapper(c, i, enqueue), ...keysOf(r)(c, i, enqueue)]
            : keysOf(r)
      })),
      ...(table.byGroupKind("apiextensions.k8s.io", "CustomResourceDefinition") === undefined ? [{ ref: ResourceRefs.CustomResourceDefinition, keys: crdMapper }] : [])
    ],
    // A safety net for missed events: objects still waiting on one of the collector's finalizers.
    resync: { everyMs: resyncMs, keys: stuck },
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const { apiVersion, kind, namespace, name } = splitKey(key)
        const r = table.byGroupKind(groupOf(apiVersion), kind)
        if (r === undefined) return
        const item = ctx.informers.for(refOf(r)).get(namespace, name)
        if (item === undefined) return
        // Every informer the graph reads must have listed, or missing dependents look like none.
        const synced = yield* Effect.forEach(table.all(), (x) => ctx.informers.for(refOf(x)).synced, { discard: true }).pipe(
          Effect.timeoutTo({ duration: syncTimeoutMs, onTimeout: () => false, onSuccess: () => true })
        )
        if (!synced) return { requeueAfterMs: 1_000 }
        const dependents = dependentsOf(table, ctx.informers, item)
        const owners = new Map<string, OwnerState>()
        if (!deleting(item)) {
          for (const ref of ownerRefs(item)) owners.set(ref.uid, yield* ownerState(ctx, item, ref))
        }
        const resources = new Map(dependents.map((d) => [d.object, d.resource]))
        return yield* apply(ctx, r, item, decide({ item, owners, dependents }), (d) => resources.get(d))
      })
  }
}
