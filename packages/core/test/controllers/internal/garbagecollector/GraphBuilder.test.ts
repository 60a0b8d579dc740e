import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type * as Client from "../../../../src/client/Client.js"
import type * as Informer from "../../../../src/informer/Informer.js"
import * as GraphBuilder from "../../../../src/controllers/internal/garbagecollector/GraphBuilder.js"
import * as ResourceTable from "../../../../src/controllers/internal/garbagecollector/ResourceTable.js"

type Json = Record<string, unknown>

const configMaps: ResourceTable.Resource = { apiVersion: "v1", kind: "ConfigMap", plural: "configmaps", namespaced: true }
const deployments: ResourceTable.Resource = { apiVersion: "apps/v1", kind: "Deployment", plural: "deployments", namespaced: true }
const crds: ResourceTable.Resource = { apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", plural: "customresourcedefinitions", namespaced: false }

const object = (kind: string, name: string, m: Json = {}): Json => ({
  apiVersion: kind === "Deployment" ? "apps/v1" : "v1",
  kind,
  metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: "1", ...m }
})
const ownedBy = (owner: string, extra: Json = {}) => ({ ownerReferences: [{ apiVersion: "apps/v1", kind: "Deployment", name: owner, uid: `uid-${owner}`, ...extra }] })
const deleting = (finalizers: ReadonlyArray<string>) => ({ deletionTimestamp: "2024-01-01T00:00:00Z", finalizers })

/** Informers over fixed objects: only what the graph reads (list, ownedBy, subscribe). */
const informersOf = (objects: ReadonlyArray<Json>, subscribed: Array<string> = []): Informer.Informers => {
  const of = (ref: Client.ResourceRef): Informer.Informer => {
    const mine = objects.filter((o) => o["kind"] === ref.kind)
    const refsOf = (o: Json) => ((o["metadata"] as Json)["ownerReferences"] ?? []) as ReadonlyArray<Json>
    return {
      ref,
      get: () => undefined,
      list: () => mine,
      controlledBy: () => [],
      ownedBy: (uid) => mine.filter((o) => refsOf(o).some((r) => r["uid"] === uid)),
      onNode: () => [],
      subscribe: () => {
        subscribed.push(ref.kind ?? "")
        return () => {}
      },
      synced: Effect.void,
      revision: () => 0,
      waitUntil: () => Effect.succeed(true)
    }
  }
  return { for: of, all: () => [] }
}

const change = (type: Informer.Change["type"], object: Json, old?: Json): Informer.Change => ({ type, object, old })

describe("GraphBuilder.keysOf (processGraphChanges)", () => {
  const table = ResourceTable.make([configMaps, deployments])
  const dependent = object("ConfigMap", "cm", ownedBy("web"))
  const owner = object("Deployment", "web")
  const informers = informersOf([dependent, owner])
  const cases: ReadonlyArray<[string, ResourceTable.Resource, Informer.Change, ReadonlyArray<string>]> = [
    ["a new dependent: its own key", configMaps, change("ADDED", dependent), ["v1|ConfigMap|ns|cm"]],
    ["a new object without owners: nothing", configMaps, change("ADDED", object("ConfigMap", "plain")), []],
    ["a dependent changed elsewhere: nothing", configMaps, change("MODIFIED", { ...dependent, data: { a: "1" } }, dependent), []],
    ["a deleted owner: its dependents", deployments, change("DELETED", owner, owner), ["v1|ConfigMap|ns|cm"]],
    ["a deleted dependent: its owners (they may wait in the foreground)", configMaps, change("DELETED", dependent, dependent), ["apps/v1|Deployment|ns|web"]],
    [
      "an owner starting foreground deletion: itself and its dependents",
      deployments,
      change("MODIFIED", object("Deployment", "web", deleting(["foregroundDeletion"])), owner),
      ["apps/v1|Deployment|ns|web", "v1|ConfigMap|ns|cm"]
    ],
    ["an owner deleted with the orphan finalizer: itself", deployments, change("MODIFIED", object("Deployment", "web", deleting(["orphan"])), owner), ["apps/v1|Deployment|ns|web"]],
    ["an owner deleted with another finalizer: nothing", deployments, change("MODIFIED", object("Deployment", "web", deleting(["example.com/x"])), owner), []],
    ["a reference dropped: the owner it named", configMaps, change("MODIFIED", object("ConfigMap", "cm"), dependent), ["apps/v1|Deployment|ns|web"]],
    [
      "a reference changed: the dependent and the owner",
      configMaps,
      change("MODIFIED", object("ConfigMap", "cm", ownedBy("web", { blockOwnerDeletion: true })), dependent),
      ["v1|ConfigMap|ns|cm", "apps/v1|Deployment|ns|web"]
    ],
    [
      "a reference to a kind not served: no owner key",
      configMaps,
      change("DELETED", object("ConfigMap", "cm", { ownerReferences: [{ apiVersion: "example.com/v1", kind: "Widget", name: "w", uid: "uid-w" }] })),
      []
    ]
  ]
  it.each(cases)("%s", (_name, r, c, keys) => {
    expect(GraphBuilder.keysOf(table, r)(c, informers)).toEqual(keys)
  })
})

describe("GraphBuilder.crdKeys (custom resources follow their CRDs)", () => {
  const crd = (group: string, kind: string) => ({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${kind.toLowerCase()}s.${group}` },
    spec: { group, scope: "Namespaced", names: { kind, plural: `${kind.toLowerCase()}s` }, versions: [{ name: "v1", served: true, storage: true }] }
  })

  it("adds the resource, subscribes once, and removes it when the CRD goes", () => {
    const table = ResourceTable.make([configMaps, crds])
    const subscribed: Array<string> = []
    const informers = informersOf([], subscribed)
    const mapper = GraphBuilder.crdKeys(table, true)
    const widget = crd("example.com", "Widget")
    expect(mapper(change("ADDED", widget), informers, () => {})).toEqual([])
    expect(table.byGroupKind("example.com", "Widget")?.apiVersion).toBe("example.com/v1")
    mapper(change("MODIFIED", widget, widget), informers, () => {})
    expect(subscribed).toEqual(["Widget"])
    mapper(change("DELETED", widget, widget), informers, () => {})
    expect(table.byGroupKind("example.com", "Widget")).toBeUndefined()
  })

  it("leaves built-in kinds alone, and does nothing when custom resources are off", () => {
    const table = ResourceTable.make([configMaps, deployments])
    const informers = informersOf([])
    GraphBuilder.crdKeys(table, true)(change("DELETED", crd("apps", "Deployment")), informers, () => {})
    expect(table.byGroupKind("apps", "Deployment")).toBe(deployments)
    GraphBuilder.crdKeys(table, false)(change("ADDED", crd("example.com", "Widget")), informers, () => {})
    expect(table.byGroupKind("example.com", "Widget")).toBeUndefined()
  })
})

describe("GraphBuilder.stuck (the resync safety net)", () => {
  it("lists only objects waiting on one of the collector's finalizers", () => {
    const table = ResourceTable.make([configMaps, deployments])
    const informers = informersOf([
      object("Deployment", "fg", deleting(["foregroundDeletion"])),
      object("Deployment", "other", deleting(["example.com/x"])),
      object("ConfigMap", "orphaning", deleting(["orphan"])),
      object("ConfigMap", "live", { finalizers: ["orphan"] })
    ])
    expect([...GraphBuilder.stuck(table, informers)].sort()).toEqual(["apps/v1|Deployment|ns|fg", "v1|ConfigMap|ns|orphaning"])
  })
})
