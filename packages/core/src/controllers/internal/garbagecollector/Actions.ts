/**
 * The collector's decisions as writes (upstream's operations.go and patch.go, and the writing
 * halves of attemptToDeleteItem, processDeletingDependentsItem and orphanDependents): merge
 * patches of owner references and finalizers pinned to the revision decided on, and deletions
 * with preconditions. An object already gone is not an error.
 */
import { Effect } from "effect"
import type * as ApiError from "../../../api/ApiError.js"
import type * as Controller from "../../Controller.js"
import type { JsonObject } from "../../../object/Json.js"
import { finalizersOf, metadataOf, nameOf, namespaceOrUndefined, ownerReferencesOf, uidOf } from "../../../object/Metadata.js"
import { orphanFinalizer } from "./Ownership.js"
import { refOf, type Resource } from "./ResourceTable.js"

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

/** How long an item with an unresolvable owner reference waits before it is looked at again. */
const retryMs = 10_000

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

/** `effect` with its value dropped and a 404 (the object is gone) treated as done. */
const ignoreGone = <A>(effect: Effect.Effect<A, ApiError.ApiError>) =>
  effect.pipe(
    Effect.asVoid,
    Effect.catchIf(isNotFound, () => Effect.void)
  )

/** Merge-patch an object's metadata, pinned to the revision decided on (a stale view conflicts and retries). */
const patchMeta = (ctx: Controller.Context, r: Resource, o: JsonObject, metadata: JsonObject) =>
  ignoreGone(
    ctx.client.patch(refOf(r), namespaceOrUndefined(o), nameOf(o), "merge", {
      metadata: { ...metadata, resourceVersion: metadataOf(o)["resourceVersion"] }
    })
  )

/** The metadata patch that drops the references to these owners (`null` removes the list). */
const withoutOwners = (o: JsonObject, uids: ReadonlyArray<string>) => {
  const kept = ownerReferencesOf(o).filter((x) => !uids.includes(String(x.uid)))
  return { ownerReferences: kept.length === 0 ? null : kept }
}

/** The metadata patch that drops one finalizer (`null` removes the list). */
const withoutFinalizer = (o: JsonObject, finalizer: string) => {
  const rest = finalizersOf(o).filter((f) => f !== finalizer)
  return { finalizers: rest.length === 0 ? null : rest }
}

/** Upstream's orphanDependents: the reference to `item` leaves every dependent, then the `orphan` finalizer leaves `item`. */
const orphanDependents = (
  ctx: Controller.Context,
  r: Resource,
  item: JsonObject,
  dependents: ReadonlyArray<JsonObject>,
  resourceOf: (dependent: JsonObject) => Resource | undefined
) =>
  Effect.gen(function* () {
    const uid = uidOf(item)
    for (const d of dependents) {
      const dr = resourceOf(d)
      if (dr !== undefined) yield* patchMeta(ctx, dr, d, withoutOwners(d, [uid]))
    }
    return yield* patchMeta(ctx, r, item, withoutFinalizer(item, orphanFinalizer))
  })

/**
 * Delete `item` with `propagation`, preconditioned on the object decided on; `unblock` first sets
 * `blockOwnerDeletion: false` on its references, so a foreground cycle cannot deadlock.
 */
const deleteItem = (ctx: Controller.Context, r: Resource, item: JsonObject, propagation: Propagation, unblock: boolean) =>
  Effect.gen(function* () {
    const name = nameOf(item)
    let target = item
    if (unblock) {
      const refs = ownerReferencesOf(item).map((x) => (x.blockOwnerDeletion === true ? { ...x, blockOwnerDeletion: false } : x))
      const patched = yield* ctx.client
        .patch(refOf(r), namespaceOrUndefined(item), name, "merge", { metadata: { ownerReferences: refs, resourceVersion: metadataOf(item)["resourceVersion"] } })
        .pipe(Effect.catchIf(isNotFound, () => Effect.succeed(undefined)))
      if (patched === undefined) return
      target = patched
    }
    // Preconditions: the object decided on, with the owner references decided on.
    return yield* ignoreGone(
      ctx.client.delete(refOf(r), namespaceOrUndefined(target), name, {
        propagationPolicy: propagation,
        preconditions: { uid: metadataOf(target)["uid"], resourceVersion: metadataOf(target)["resourceVersion"] }
      })
    )
  })

/** Carry out `action` on `item`, an object of `r`; `resourceOf` names the resource of each of its dependents. */
export const apply = (
  ctx: Controller.Context,
  r: Resource,
  item: JsonObject,
  action: Action,
  resourceOf: (dependent: JsonObject) => Resource | undefined
): Effect.Effect<Controller.Result | void, ApiError.ApiError> => {
  switch (action._tag) {
    case "None":
      return Effect.succeed(action.retry ? { requeueAfterMs: retryMs } : undefined)
    case "AwaitDependents":
      return Effect.void
    case "OrphanDependents":
      return orphanDependents(ctx, r, item, action.dependents, resourceOf)
    case "RemoveFinalizer":
      return patchMeta(ctx, r, item, withoutFinalizer(item, action.finalizer))
    case "RemoveOwnerReferences":
      return patchMeta(ctx, r, item, withoutOwners(item, action.uids))
    case "Delete":
      return deleteItem(ctx, r, item, action.propagation, action.unblock)
  }
}
