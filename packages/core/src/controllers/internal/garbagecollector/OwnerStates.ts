/**
 * The state of each owner an object names (the look-ups of upstream's attemptToDeleteItem:
 * isDangling, then classifyReferences' solid / dangling / waiting): the informer cache first,
 * absence confirmed by a live GET, since an informer may lag.
 */
import { Effect } from "effect"
import type * as ApiError from "../../../api/ApiError.js"
import type * as Controller from "../../Controller.js"
import type { JsonObject } from "../../../object/Json.js"
import { uidOf } from "../../../object/Metadata.js"
import { ownerLocation } from "./Graph.js"
import { isDeletingDependents, type OwnerRef, ownerRefs } from "./Ownership.js"
import { refOf, type ResourceTable } from "./ResourceTable.js"

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

/** The state of a live owner: waiting when it is being deleted in the foreground. */
const stateOf = (owner: JsonObject): OwnerState => (isDeletingDependents(owner) ? "Waiting" : "Solid")

/**
 * The state of one owner reference of `item`: cache first, absence confirmed by a live GET; an
 * invalid or cross-namespace reference records a Warning event `OwnerRefInvalidNamespace`.
 */
export const ownerState = (ctx: Controller.Context, table: ResourceTable, item: JsonObject, ref: OwnerRef): Effect.Effect<OwnerState, ApiError.ApiError> =>
  Effect.gen(function* () {
    const loc = ownerLocation(table, item, ref)
    if (loc === undefined) return "Unresolvable" as const
    if (loc.invalid) {
      yield* ctx.events.record(item, "Warning", "OwnerRefInvalidNamespace", `ownerRef [${ref.apiVersion}/${ref.kind}, namespace: , name: ${ref.name}, uid: ${ref.uid}] is a namespaced kind referenced from a cluster-scoped object`)
      return "Invalid" as const
    }
    const informer = ctx.informers.for(refOf(loc.resource))
    const cached = informer.get(loc.namespace, ref.name)
    if (cached !== undefined && uidOf(cached) === ref.uid) return stateOf(cached)
    const live = yield* ctx.client.get(refOf(loc.resource), loc.namespace, ref.name).pipe(
      Effect.map((o): JsonObject | undefined => o),
      Effect.catchIf((e) => e.status.code === 404, () => Effect.succeed(undefined))
    )
    if (live !== undefined && uidOf(live) === ref.uid) return stateOf(live)
    if (loc.namespace !== undefined) {
      // The uid may live in another namespace: an invalid cross-namespace reference.
      const elsewhere = informer.list().find((o) => uidOf(o) === ref.uid)
      if (elsewhere !== undefined) {
        yield* ctx.events.record(item, "Warning", "OwnerRefInvalidNamespace", `ownerRef [${ref.apiVersion}/${ref.kind}, namespace: ${loc.namespace}, name: ${ref.name}, uid: ${ref.uid}] does not exist in namespace "${loc.namespace}"`)
      }
    }
    return "Dangling" as const
  })

/** The states of every owner reference of `item`, by uid, looked up one after the other. */
export const ownerStates = (ctx: Controller.Context, table: ResourceTable, item: JsonObject): Effect.Effect<ReadonlyMap<string, OwnerState>, ApiError.ApiError> =>
  Effect.gen(function* () {
    const owners = new Map<string, OwnerState>()
    for (const ref of ownerRefs(item)) owners.set(ref.uid, yield* ownerState(ctx, table, item, ref))
    return owners
  })
