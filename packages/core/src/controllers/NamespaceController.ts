/**
 * Namespace lifecycle, as kube-controller-manager's namespace controller: a Namespace being
 * deleted (deletionTimestamp set, phase Terminating, `kubernetes` in spec.finalizers) has every
 * namespaced object in it deleted, across every served resource (the built-in kinds and every
 * CustomResourceDefinition's, listed live at each pass — the client's discovery); its status
 * reports how that goes with upstream's conditions (`NamespaceDeletionDiscoveryFailure`,
 * `NamespaceDeletionGroupVersionParsingFailure`, `NamespaceDeletionContentFailure`,
 * `NamespaceContentRemaining`, `NamespaceFinalizersRemaining`); and once nothing remains,
 * `kubernetes` is removed from spec.finalizers through the `finalize` subresource, after which
 * the API deletes the namespace. While content remains (pods terminating on their nodes, objects
 * with finalizers) the namespace is looked at again when an object in it goes, and after an
 * estimate (the pods' remaining grace, bounded) in any case.
 *
 * Departures: objects are deleted one by one (the client has no delete-collection), always with
 * Background propagation as upstream's deleter does. On an API server that does not serve
 * `namespaces/{name}/finalize` (answers 404), the finalizer is removed by patching the namespace
 * itself, and the status conditions are not written: such a server also deletes a terminating
 * namespace on any write once `metadata.finalizers` is empty, so a status write would delete it
 * before its content is gone.
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import * as Conditions from "../object/Conditions.js"
import type * as Controller from "./Controller.js"
import * as GarbageCollector from "./GarbageCollector.js"
import type * as Informer from "../informer/Informer.js"
import { stableJson } from "../object/Json.js"
import { isTerminating, metadataOf, rfc3339, timeMs } from "../object/Metadata.js"
import { type JsonObject, asArray, asObject } from "../object/Json.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The finalizer the namespace controller owns. */
export const finalizer = "kubernetes"



/** The spec.finalizers of a namespace. */
export const specFinalizers = (ns: JsonObject): ReadonlyArray<string> => asArray(asObject(ns["spec"])["finalizers"]).filter((f): f is string => typeof f === "string")

/** Whether the namespace controller has work on this namespace: being deleted, and not yet finalized by it. */
export const needsFinalizing = (ns: JsonObject): boolean => isTerminating(ns) && specFinalizers(ns).includes(finalizer)

/** How upstream names a resource in messages: `plural.group` (`pods.` for the core group). */
export const resourceName = (r: GarbageCollector.Resource): string =>
  `${r.plural}.${r.apiVersion.includes("/") ? r.apiVersion.slice(0, r.apiVersion.indexOf("/")) : ""}`

/** What is left of one resource in the namespace after a deletion pass. */
export interface Content {
  /** As upstream names it (`pods.`, `widgets.example.com`). */
  readonly resource: string
  /** The objects still there (being deleted: grace period or finalizers). */
  readonly remaining: ReadonlyArray<JsonObject>
  /** Why listing or deleting failed, if it did. */
  readonly error?: string
}

/** What `decide` looks at. */
export interface Observed {
  readonly namespace: JsonObject
  /** Resources that could not be discovered (their content is unknown). */
  readonly discoveryErrors: ReadonlyArray<string>
  readonly contents: ReadonlyArray<Content>
  readonly now: number
}

/** The status to report and what to do next. */
export interface Decision {
  readonly conditions: ReadonlyArray<Conditions.Condition>
  /** Remove `kubernetes` from spec.finalizers now. */
  readonly finalize: boolean
  /** Look again after this long (content remains). */
  readonly requeueAfterMs: number | undefined
}

/** Bounds of the requeue while content remains (events of deleted objects usually come first). */
const minRequeueMs = 1_000
const maxRequeueMs = 15_000

const count = (entries: Map<string, number>, key: string) => entries.set(key, (entries.get(key) ?? 0) + 1)

/** The namespace's conditions and next step after a deletion pass (pure; upstream's deleteAllContent bookkeeping). */
export const decide = (observed: Observed): Decision => {
  const now = rfc3339(observed.now)
  let conditions = (asObject(observed.namespace["status"])["conditions"] as ReadonlyArray<Conditions.Condition> | undefined) ?? []
  const set = (c: Omit<Conditions.Condition, "lastTransitionTime" | "lastUpdateTime">) => {
    conditions = Conditions.set(conditions, c, now)
  }
  const { discoveryErrors, contents } = observed
  set(
    discoveryErrors.length > 0
      ? { type: "NamespaceDeletionDiscoveryFailure", status: "True", reason: "DiscoveryFailed", message: `Discovery failed for some groups, ${discoveryErrors.length} failing: ${discoveryErrors.join(", ")}` }
      : { type: "NamespaceDeletionDiscoveryFailure", status: "False", reason: "ResourcesDiscovered", message: "All resources successfully discovered" }
  )
  set({ type: "NamespaceDeletionGroupVersionParsingFailure", status: "False", reason: "ParsedGroupVersions", message: "All legacy kube types successfully parsed" })
  const failures = contents.filter((c) => c.error !== undefined).map((c) => c.error!)
  set(
    failures.length > 0
      ? { type: "NamespaceDeletionContentFailure", status: "True", reason: "ContentDeletionFailed", message: `Failed to delete all resource types, ${failures.length} remaining: ${failures.join(", ")}` }
      : { type: "NamespaceDeletionContentFailure", status: "False", reason: "ContentDeleted", message: "All content successfully deleted, may be waiting on finalization" }
  )
  const left = contents.filter((c) => c.remaining.length > 0).sort((a, b) => (a.resource < b.resource ? -1 : a.resource > b.resource ? 1 : 0))
  set(
    left.length > 0
      ? { type: "NamespaceContentRemaining", status: "True", reason: "SomeResourcesRemain", message: `Some resources are remaining: ${left.map((c) => `${c.resource} has ${c.remaining.length} resource instances`).join(", ")}` }
      : { type: "NamespaceContentRemaining", status: "False", reason: "ContentRemoved", message: "All content successfully removed" }
  )
  const byFinalizer = new Map<string, number>()
  for (const c of contents) for (const o of c.remaining) for (const f of asArray(metadataOf(o)["finalizers"])) count(byFinalizer, String(f))
  const finalizers = [...byFinalizer].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  set(
    finalizers.length > 0
      ? { type: "NamespaceFinalizersRemaining", status: "True", reason: "SomeFinalizersRemain", message: `Some content in the namespace has finalizers remaining: ${finalizers.map(([f, n]) => `${f} in ${n} resource instances`).join(", ")}` }
      : { type: "NamespaceFinalizersRemaining", status: "False", reason: "ContentHasNoFinalizers", message: "All content-preserving finalizers finished" }
  )
  const done = discoveryErrors.length === 0 && failures.length === 0 && left.length === 0
  if (done) return { conditions, finalize: true, requeueAfterMs: undefined }
  // Pods end when their kubelet confirms: look again when their grace period should be over.
  const graceLeft = contents
    .flatMap((c) => c.remaining)
    .filter((o) => o["kind"] === "Pod")
    .map((o) => (timeMs(metadataOf(o)["deletionTimestamp"]) ?? observed.now) - observed.now)
  const estimate = graceLeft.length > 0 ? Math.max(...graceLeft) : maxRequeueMs / 3
  return { conditions, finalize: false, requeueAfterMs: Math.min(maxRequeueMs, Math.max(minRequeueMs, estimate)) }
}

/** Options of the namespace controller. */
export interface Options {
  /** The namespaced resources to empty (default: every built-in namespaced kind); CRDs' are added at each pass. */
  readonly resources?: ReadonlyArray<GarbageCollector.Resource>
  /** Concurrent workers (default 2). */
  readonly workers?: number
}

const refOf = (r: GarbageCollector.Resource): Client.ResourceRef => ({ apiVersion: r.apiVersion, kind: r.kind, plural: r.plural, namespaced: true })

/** The namespace controller. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const builtIn = (options.resources ?? GarbageCollector.builtInResources).filter((r) => r.namespaced)
  // Whether the server serves `namespaces/{name}/finalize` (learned from the first answer).
  let finalizeServed: boolean | undefined

  /** A deletion of an object in a terminating namespace may be the last thing it waits for. */
  const onContentChange: Controller.KeyMapper = (change: Informer.Change, informers: Informer.Informers) => {
    if (change.type !== "DELETED" && !isTerminating(change.object)) return []
    const ns = metadataOf(change.object)["namespace"]
    if (typeof ns !== "string") return []
    const namespace = informers.for(ResourceRefs.Namespace).get(undefined, ns)
    return namespace !== undefined && needsFinalizing(namespace) ? [ns] : []
  }

  /** The namespaced resources served now: built-in, plus every CRD's (discovery). */
  const discover = (ctx: Controller.Context) =>
    Effect.gen(function* () {
      const crds = yield* Effect.either(ctx.client.listAll(ResourceRefs.CustomResourceDefinition))
      if (crds._tag === "Left") return { resources: builtIn, errors: [`apiextensions.k8s.io/v1: ${crds.left.message}`] }
      const custom = crds.right.items
        .map(GarbageCollector.crdResource)
        .filter((r): r is GarbageCollector.Resource => r !== undefined && r.namespaced)
      return { resources: [...builtIn, ...custom], errors: [] as ReadonlyArray<string> }
    })

  /** Delete every object of `r` in `ns`; answer what is still there. */
  const empty = (ctx: Controller.Context, ns: string, r: GarbageCollector.Resource): Effect.Effect<Content> =>
    Effect.gen(function* () {
      const listed = yield* ctx.client.listAll(refOf(r), { namespace: ns })
      const remaining: Array<JsonObject> = []
      const errors: Array<string> = []
      for (const o of listed.items) {
        if (isTerminating(o)) {
          remaining.push(o)
          continue
        }
        const name = String(metadataOf(o)["name"])
        const answer = yield* Effect.either(ctx.client.delete(refOf(r), ns, name, { propagationPolicy: "Background", preconditions: { uid: metadataOf(o)["uid"] } }))
        if (answer._tag === "Right") {
          if (answer.right["kind"] !== "Status" && isTerminating(answer.right)) remaining.push(answer.right)
        } else if (answer.left.status.code === 409) remaining.push(o)
        else if (answer.left.status.code !== 404) errors.push(`${resourceName(r)} ${name}: ${answer.left.message}`)
      }
      return errors.length > 0 ? { resource: resourceName(r), remaining, error: errors.join("; ") } : { resource: resourceName(r), remaining }
    }).pipe(
      // A resource whose CRD went away meanwhile has nothing left to delete.
      Effect.catchAll((e: ApiError.ApiError) =>
        Effect.succeed<Content>(e.status.code === 404 ? { resource: resourceName(r), remaining: [] } : { resource: resourceName(r), remaining: [], error: `${resourceName(r)}: ${e.message}` })
      )
    )

  const finalize = (ctx: Controller.Context, ns: JsonObject) =>
    Effect.gen(function* () {
      const name = String(metadataOf(ns)["name"])
      const body = { metadata: { resourceVersion: metadataOf(ns)["resourceVersion"] }, spec: { finalizers: specFinalizers(ns).filter((f) => f !== finalizer) } }
      const viaFinalize = yield* Effect.either(ctx.client.patch(ResourceRefs.Namespace, undefined, name, "merge", body, "finalize"))
      if (viaFinalize._tag === "Right") {
        finalizeServed = true
        return
      }
      if (viaFinalize.left.status.code !== 404 && viaFinalize.left.status.code !== 405) return yield* Effect.fail(viaFinalize.left)
      finalizeServed = false
      yield* ctx.client.patch(ResourceRefs.Namespace, undefined, name, "merge", body).pipe(Effect.catchIf((e) => e.status.code === 404, () => Effect.void))
    })

  /** Learn whether `finalize` is served, with a patch that changes nothing (404: not served). */
  const probeFinalize = (ctx: Controller.Context, name: string) =>
    finalizeServed !== undefined
      ? Effect.succeed(finalizeServed)
      : Effect.map(Effect.either(ctx.client.patch(ResourceRefs.Namespace, undefined, name, "merge", {}, "finalize")), (answer) => {
          finalizeServed = answer._tag === "Right" || (answer.left.status.code !== 404 && answer.left.status.code !== 405)
          return finalizeServed
        })

  return {
    name: "namespace",
    primary: ResourceRefs.Namespace,
    workers: options.workers ?? 2,
    watches: builtIn.map((r) => ({ ref: refOf(r), keys: onContentChange })),
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const ns = ctx.informers.for(ResourceRefs.Namespace).get(undefined, key)
        if (ns === undefined || !needsFinalizing(ns)) return
        const { resources, errors } = yield* discover(ctx)
        const contents = yield* Effect.forEach(resources, (r) => empty(ctx, key, r), { concurrency: 4 })
        const now = yield* Clock.currentTimeMillis
        const decision = decide({ namespace: ns, discoveryErrors: errors, contents, now })
        const status = asObject(ns["status"])
        const changed = stableJson(decision.conditions) !== stableJson(status["conditions"] ?? []) || status["phase"] !== "Terminating"
        if (changed && (yield* probeFinalize(ctx, key))) {
          yield* ctx.client.update({ ...ns, status: { ...status, phase: "Terminating", conditions: decision.conditions } }, "status")
          if (decision.finalize) {
            // The status write moved the revision: finalize from the fresh object.
            const fresh = yield* ctx.client.get(ResourceRefs.Namespace, undefined, key)
            return yield* finalize(ctx, fresh)
          }
        }
        if (decision.finalize) return yield* finalize(ctx, ns)
        return { requeueAfterMs: decision.requeueAfterMs! }
      })
  }
}
