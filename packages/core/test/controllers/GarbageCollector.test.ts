import { describe, expect, it } from "vitest"
import * as GarbageCollector from "../../src/controllers/GarbageCollector.js"

type Json = Record<string, unknown>

const ref = (uid: string, extra: Json = {}) => ({ apiVersion: "v1", kind: "ConfigMap", name: `owner-${uid}`, uid, ...extra })

const object = (name: string, m: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: "7", ...m }
})

const deletingAt = "2024-01-01T00:00:00Z"

const dependent = (name: string, blocking: boolean, m: Json = {}): GarbageCollector.Dependent => ({ object: object(name, m), blocking })

describe("GarbageCollector.decide", () => {
  const cases: ReadonlyArray<[string, GarbageCollector.Observed, GarbageCollector.Action]> = [
    ["no owners: nothing", { item: object("a"), owners: new Map(), dependents: [] }, { _tag: "None", retry: false }],
    [
      "a live owner keeps the item",
      { item: object("a", { ownerReferences: [ref("o1")] }), owners: new Map([["o1", "Solid"]]), dependents: [] },
      { _tag: "None", retry: false }
    ],
    [
      "its only owner is gone: delete in the background",
      { item: object("a", { ownerReferences: [ref("o1")] }), owners: new Map([["o1", "Dangling"]]), dependents: [] },
      { _tag: "Delete", propagation: "Background", unblock: false }
    ],
    [
      "every owner is gone: delete",
      { item: object("a", { ownerReferences: [ref("o1"), ref("o2")] }), owners: new Map([["o1", "Dangling"], ["o2", "Dangling"]]), dependents: [] },
      { _tag: "Delete", propagation: "Background", unblock: false }
    ],
    [
      "one owner gone, another alive: drop only the dangling reference",
      { item: object("a", { ownerReferences: [ref("o1"), ref("o2")] }), owners: new Map([["o1", "Dangling"], ["o2", "Solid"]]), dependents: [] },
      { _tag: "RemoveOwnerReferences", uids: ["o1"] }
    ],
    [
      "an owner waiting in the foreground and another alive: drop the waiting reference",
      { item: object("a", { ownerReferences: [ref("o1"), ref("o2")] }), owners: new Map([["o1", "Waiting"], ["o2", "Solid"]]), dependents: [] },
      { _tag: "RemoveOwnerReferences", uids: ["o1"] }
    ],
    [
      "owner waiting in the foreground, no dependents of its own: delete in the background",
      { item: object("a", { ownerReferences: [ref("o1", { blockOwnerDeletion: true })] }), owners: new Map([["o1", "Waiting"]]), dependents: [] },
      { _tag: "Delete", propagation: "Background", unblock: false }
    ],
    [
      "owner waiting in the foreground, dependents of its own: propagate Foreground",
      { item: object("a", { ownerReferences: [ref("o1")] }), owners: new Map([["o1", "Waiting"]]), dependents: [dependent("p", true)] },
      { _tag: "Delete", propagation: "Foreground", unblock: false }
    ],
    [
      "a dependent already deleting in the foreground: unblock first (cycle guard)",
      {
        item: object("a", { ownerReferences: [ref("o1")] }),
        owners: new Map([["o1", "Waiting"]]),
        dependents: [dependent("p", true, { deletionTimestamp: deletingAt, finalizers: ["foregroundDeletion"] })]
      },
      { _tag: "Delete", propagation: "Foreground", unblock: true }
    ],
    [
      "garbage that already asks for orphaning keeps that policy",
      { item: object("a", { ownerReferences: [ref("o1")], finalizers: ["orphan"] }), owners: new Map([["o1", "Dangling"]]), dependents: [] },
      { _tag: "Delete", propagation: "Orphan", unblock: false }
    ],
    [
      "garbage that already asks for foreground keeps that policy",
      { item: object("a", { ownerReferences: [ref("o1")], finalizers: ["foregroundDeletion"] }), owners: new Map([["o1", "Dangling"]]), dependents: [] },
      { _tag: "Delete", propagation: "Foreground", unblock: false }
    ],
    [
      "an unresolvable reference: keep and retry",
      { item: object("a", { ownerReferences: [ref("o1"), ref("o2")] }), owners: new Map([["o1", "Dangling"], ["o2", "Unresolvable"]]), dependents: [] },
      { _tag: "None", retry: true }
    ],
    [
      "an invalid reference (namespaced owner of a cluster-scoped object) keeps the item, without retry",
      { item: object("a", { ownerReferences: [ref("o1"), ref("o2")] }), owners: new Map([["o1", "Invalid"], ["o2", "Dangling"]]), dependents: [] },
      { _tag: "RemoveOwnerReferences", uids: ["o2"] }
    ],
    [
      "only an invalid reference: nothing",
      { item: object("a", { ownerReferences: [ref("o1")] }), owners: new Map([["o1", "Invalid"]]), dependents: [] },
      { _tag: "None", retry: false }
    ],
    [
      "a reference with no known state counts as unresolvable",
      { item: object("a", { ownerReferences: [ref("o1")] }), owners: new Map(), dependents: [] },
      { _tag: "None", retry: true }
    ],
    [
      "deleting in the foreground with blocking dependents: wait",
      {
        item: object("a", { deletionTimestamp: deletingAt, finalizers: ["foregroundDeletion"] }),
        owners: new Map(),
        dependents: [dependent("p", true), dependent("q", false)]
      },
      { _tag: "AwaitDependents", blocking: [object("p")] }
    ],
    [
      "deleting in the foreground, only non-blocking dependents: remove the finalizer",
      { item: object("a", { deletionTimestamp: deletingAt, finalizers: ["foregroundDeletion"] }), owners: new Map(), dependents: [dependent("q", false)] },
      { _tag: "RemoveFinalizer", finalizer: "foregroundDeletion" }
    ],
    [
      "deleting in the foreground, no dependents: remove the finalizer",
      { item: object("a", { deletionTimestamp: deletingAt, finalizers: ["x.example/keep", "foregroundDeletion"] }), owners: new Map(), dependents: [] },
      { _tag: "RemoveFinalizer", finalizer: "foregroundDeletion" }
    ],
    [
      "deleting with orphan: orphan every dependent",
      { item: object("a", { deletionTimestamp: deletingAt, finalizers: ["orphan"] }), owners: new Map(), dependents: [dependent("p", true), dependent("q", false)] },
      { _tag: "OrphanDependents", dependents: [object("p"), object("q")] }
    ],
    [
      "deleting with orphan and no dependents: still remove the finalizer (through OrphanDependents)",
      { item: object("a", { deletionTimestamp: deletingAt, finalizers: ["orphan"] }), owners: new Map(), dependents: [] },
      { _tag: "OrphanDependents", dependents: [] }
    ],
    [
      "deleting for another reason (grace period): not the collector's business",
      { item: object("a", { deletionTimestamp: deletingAt, ownerReferences: [ref("o1")] }), owners: new Map([["o1", "Dangling"]]), dependents: [] },
      { _tag: "None", retry: false }
    ]
  ]
  it.each(cases)("%s", (_what, observed, action) => {
    expect(GarbageCollector.decide(observed)).toEqual(action)
  })
})

describe("GarbageCollector keys and resources", () => {
  it("round-trips keys of namespaced and cluster-scoped objects", () => {
    const k1 = GarbageCollector.keyFor({ apiVersion: "apps/v1", kind: "ReplicaSet" }, "ns", "web-1")
    expect(GarbageCollector.splitKey(k1)).toEqual({ apiVersion: "apps/v1", kind: "ReplicaSet", namespace: "ns", name: "web-1" })
    const k2 = GarbageCollector.keyFor({ apiVersion: "v1", kind: "Node" }, undefined, "n1")
    expect(GarbageCollector.splitKey(k2)).toEqual({ apiVersion: "v1", kind: "Node", namespace: undefined, name: "n1" })
  })

  it("covers every built-in kind", () => {
    const kinds = GarbageCollector.builtInResources.map((r) => r.kind)
    expect(kinds).toEqual(expect.arrayContaining(["Pod", "ReplicaSet", "Deployment", "ConfigMap", "Namespace", "Node", "CustomResourceDefinition"]))
  })

  it("reads a CRD's served resource (storage version, scope)", () => {
    const crd = {
      spec: {
        group: "example.com",
        scope: "Namespaced",
        names: { plural: "widgets", kind: "Widget" },
        versions: [
          { name: "v1alpha1", served: true, storage: false },
          { name: "v1", served: true, storage: true }
        ]
      }
    }
    expect(GarbageCollector.crdResource(crd)).toEqual({ apiVersion: "example.com/v1", kind: "Widget", plural: "widgets", namespaced: true })
    expect(GarbageCollector.crdResource({ spec: { ...crd.spec, scope: "Cluster" } })?.namespaced).toBe(false)
    expect(GarbageCollector.crdResource({ spec: {} })).toBeUndefined()
  })

  it("knows an object deleting in the foreground", () => {
    expect(GarbageCollector.isDeletingDependents(object("a", { deletionTimestamp: deletingAt, finalizers: ["foregroundDeletion"] }))).toBe(true)
    expect(GarbageCollector.isDeletingDependents(object("a", { finalizers: ["foregroundDeletion"] }))).toBe(false)
    expect(GarbageCollector.isDeletingDependents(object("a", { deletionTimestamp: deletingAt, finalizers: ["orphan"] }))).toBe(false)
  })
})
