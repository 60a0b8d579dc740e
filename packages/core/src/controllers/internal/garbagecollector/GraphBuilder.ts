/**
 * The collector's event handlers (upstream's GraphBuilder: processGraphChanges and the monitors
 * syncMonitors starts): which work-queue keys a change of an object concerns, the CRD handler
 * that adds a custom resource to the table and subscribes to its changes, and the resync keys.
 */
import type * as Controller from "../../Controller.js"
import type * as Informer from "../../../informer/Informer.js"
import { finalizersOf, isTerminating } from "../../../object/Metadata.js"
import { dependentsOf, keyOfObject, ownerKeys } from "./Graph.js"
import { isDeletingDependents, ownerRefs, waitsOnCollector } from "./Ownership.js"
import { crdResource, groupKindOf, groupOf, refOf, type Resource, type ResourceTable } from "./ResourceTable.js"

/** Which keys a change of an object of `r` concerns (upstream's GraphBuilder.processGraphChanges). */
export const keysOf =
  (table: ResourceTable, r: Resource): Controller.KeyMapper =>
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
      ownerKeys(table, o, refs).forEach((k) => keys.add(k))
      return [...keys]
    }
    const old = change.old
    const refsChanged = old === undefined || JSON.stringify(ownerRefs(old)) !== JSON.stringify(refs)
    const deletionChanged = old === undefined || isTerminating(old) !== isTerminating(o) || JSON.stringify(finalizersOf(old)) !== JSON.stringify(finalizersOf(o))
    if ((refs.length > 0 && (refsChanged || deletionChanged)) || (waitsOnCollector(o) && deletionChanged)) keys.add(keyOfObject(r, o))
    if (isDeletingDependents(o) && (old === undefined || !isDeletingDependents(old))) dependentKeys()
    if (old !== undefined && refsChanged) {
      // Owners whose reference changed or went may have been waiting for this dependent.
      const now = new Map(refs.map((x) => [x.uid, x]))
      const changed = ownerRefs(old).filter((x) => JSON.stringify(now.get(x.uid)) !== JSON.stringify(x))
      ownerKeys(table, old, changed).forEach((k) => keys.add(k))
    }
    return [...keys]
  }

/**
 * The handler of CRD changes: while a CRD exists, its resource is part of the table and its
 * changes are queued as they happen (custom resources are not in the runner's fixed watch list,
 * so it subscribes to them itself); once it is gone, its resource leaves the table (its objects
 * were deleted before it, by the API's CRD cleanup). Built-in kinds are left alone. It queues no
 * keys of its own.
 */
export const crdKeys = (table: ResourceTable, customResources: boolean): Controller.KeyMapper => {
  const builtIn = new Set(table.all().map(groupKindOf))
  const subscribed = new Set<string>()
  return (change, informers, enqueue) => {
    const r = crdResource(change.object)
    if (!customResources || r === undefined || builtIn.has(groupKindOf(r))) return []
    if (change.type === "DELETED") {
      table.remove(r)
      return []
    }
    table.add(r)
    const id = `${r.apiVersion}/${r.kind}`
    if (!subscribed.has(id)) {
      subscribed.add(id)
      const mapper = keysOf(table, r)
      informers.for(refOf(r)).subscribe((c) => {
        if (enqueue !== undefined && table.byGroupKind(groupOf(r.apiVersion), r.kind) !== undefined) mapper(c, informers, enqueue).forEach(enqueue)
      })
    }
    return []
  }
}

/** The keys of objects waiting on one of the collector's finalizers (a safety net for missed events). */
export const stuck = (table: ResourceTable, informers: Informer.Informers): ReadonlyArray<string> =>
  table.all().flatMap((r) =>
    informers
      .for(refOf(r))
      .list()
      .filter(waitsOnCollector)
      .map((o) => keyOfObject(r, o))
  )
