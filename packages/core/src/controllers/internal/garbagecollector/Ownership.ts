/**
 * What the collector reads off one object: its owner references, and whether it waits on the
 * collector (being deleted with the `foregroundDeletion` or `orphan` finalizer).
 */
import type { JsonObject } from "../../../object/Json.js"
import { finalizersOf, isTerminating, type OwnerReference, ownerReferencesOf } from "../../../object/Metadata.js"

/** The finalizer that makes the API keep an owner until its dependents are gone. */
export const foregroundFinalizer = "foregroundDeletion"

/** The finalizer that makes the API keep an owner until its dependents are orphaned. */
export const orphanFinalizer = "orphan"

/** An owner reference as the collector reads it. */
export type OwnerRef = OwnerReference

/** The owner references of an object (those with a uid). */
export const ownerRefs = (o: JsonObject): ReadonlyArray<OwnerRef> => ownerReferencesOf(o).filter((r) => typeof r.uid === "string")

/** Whether the object is being deleted in the foreground (waiting for its dependents). */
export const isDeletingDependents = (o: JsonObject): boolean => isTerminating(o) && finalizersOf(o).includes(foregroundFinalizer)

/** Whether the object is being deleted and waits on one of the collector's finalizers. */
export const waitsOnCollector = (o: JsonObject): boolean =>
  isTerminating(o) && finalizersOf(o).some((f) => f === foregroundFinalizer || f === orphanFinalizer)
