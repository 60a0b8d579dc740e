/**
 * The ownership graph (upstream's GraphBuilder `uidToNode`, here the shared informers' owner
 * index over every resource of the table): the work-queue key of an object, where an owner
 * reference points, and an owner's dependents.
 */
import type * as Informer from "../../../informer/Informer.js"
import type { JsonObject } from "../../../object/Json.js"
import { nameOf, namespaceOrUndefined, uidOf } from "../../../object/Metadata.js"
import { type OwnerRef, ownerRefs } from "./Ownership.js"
import { groupOf, refOf, type Resource, type ResourceTable } from "./ResourceTable.js"

/** The work-queue key of an object of a resource (`apiVersion|kind|namespace|name`). */
export const keyFor = (r: Pick<Resource, "apiVersion" | "kind">, namespace: string | undefined, name: string): string =>
  `${r.apiVersion}|${r.kind}|${namespace ?? ""}|${name}`

/** Splits a key made by `keyFor`. */
export const splitKey = (key: string) => {
  const [apiVersion = "", kind = "", namespace = "", name = ""] = key.split("|")
  return { apiVersion, kind, namespace: namespace === "" ? undefined : namespace, name }
}

/** The work-queue key of `o`, an object of `r`. */
export const keyOfObject = (r: Resource, o: JsonObject): string => keyFor(r, namespaceOrUndefined(o), nameOf(o))

/** Where an owner reference points. */
export interface OwnerLocation {
  readonly resource: Resource
  /** The namespace to find the owner in (undefined for a cluster-scoped owner). */
  readonly namespace: string | undefined
  /** A namespaced kind referenced from a cluster-scoped dependent: never resolvable. */
  readonly invalid: boolean
}

/** The resource an owner reference names, and the namespace to find it in (undefined while its kind is not served). */
export const ownerLocation = (table: ResourceTable, dependent: JsonObject, r: OwnerRef): OwnerLocation | undefined => {
  const resource = table.byGroupKind(groupOf(r.apiVersion), r.kind)
  if (resource === undefined) return undefined
  const ns = namespaceOrUndefined(dependent)
  if (resource.namespaced && ns === undefined) return { resource, namespace: undefined, invalid: true }
  return { resource, namespace: resource.namespaced ? ns : undefined, invalid: false }
}

/** The work-queue keys of the owners `refs` of `o` name (unresolvable and invalid references left out). */
export const ownerKeys = (table: ResourceTable, o: JsonObject, refs: ReadonlyArray<OwnerRef>): ReadonlyArray<string> =>
  refs.flatMap((ref) => {
    const loc = ownerLocation(table, o, ref)
    return loc === undefined || loc.invalid ? [] : [keyFor(loc.resource, loc.namespace, ref.name)]
  })

/** One dependent of the object being reconciled. */
export interface Dependent {
  readonly object: JsonObject
  /** Its reference to the owner has `blockOwnerDeletion: true`. */
  readonly blocking: boolean
}

/** A dependent and the resource it is an object of. */
export type LocatedDependent = Dependent & { readonly resource: Resource }

/** The dependents of `owner` across every resource (same namespace when the owner is namespaced). */
export const dependentsOf = (table: ResourceTable, informers: Informer.Informers, owner: JsonObject): ReadonlyArray<LocatedDependent> => {
  const uid = uidOf(owner)
  if (uid === "") return []
  const ns = namespaceOrUndefined(owner)
  const out: Array<LocatedDependent> = []
  for (const r of table.all()) {
    if (ns !== undefined && !r.namespaced) continue
    for (const o of informers.for(refOf(r)).ownedBy(uid)) {
      if (ns !== undefined && namespaceOrUndefined(o) !== ns) continue
      out.push({ object: o, resource: r, blocking: ownerRefs(o).some((ref) => ref.uid === uid && ref.blockOwnerDeletion === true) })
    }
  }
  return out
}
