import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Deployment from "../../src/controllers/Deployment.js"
import * as GarbageCollector from "../../src/controllers/GarbageCollector.js"
import * as Pods from "../../src/object/Pods.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, unknown>

const CM = { apiVersion: "v1", kind: "ConfigMap" } as const
const ns = "default"

const configMap = (name: string, owners: ReadonlyArray<Json> = []): Json => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: ns, ...(owners.length > 0 ? { ownerReferences: owners } : {}) },
  data: { k: name }
})

/** An owner reference to `o`, blocking its deletion when asked (as a controller's is). */
const owned = (o: Json, block = false): Json => ({ ...Metadata.ownerReference(o, false), ...(block ? { blockOwnerDeletion: true } : {}) })

const exists = (cluster: TestCluster.TestCluster, ref: Client.ResourceRef, namespace: string | undefined, name: string) =>
  Effect.map(TestCluster.find(cluster, ref, namespace, name), (o) => o !== undefined)

const gone = (cluster: TestCluster.TestCluster, ref: Client.ResourceRef, namespace: string | undefined, name: string) =>
  cluster.eventually(Effect.flatMap(exists(cluster, ref, namespace, name), (present) => (present ? Effect.fail(new Error(`${name} still exists`)) : Effect.void)), { timeoutMs: 30_000 })

/** The names of DELETED events of a resource, in the order the informer saw them. */
const deletions = (cluster: TestCluster.TestCluster, ref: Client.ResourceRef) => {
  const seen: Array<string> = []
  cluster.informers.for(ref).subscribe((c) => {
    if (c.type === "DELETED") seen.push(String(Metadata.metadataOf(c.object)["name"]))
  })
  return seen
}

const cluster = () => TestCluster.make({ nodes: 1, controllers: [GarbageCollector.reconciler()] })

describe("GarbageCollector through the API", () => {
  it.live("Background: dependents go after their owner", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const seen = deletions(c, CM)
        const owner = yield* c.client.create(configMap("owner"))
        yield* c.client.create(configMap("d1", [owned(owner)]))
        yield* c.client.create(configMap("d2", [owned(owner, true)]))
        yield* c.idle
        yield* c.client.delete(CM, ns, "owner")
        yield* gone(c, CM, ns, "d1")
        yield* gone(c, CM, ns, "d2")
        expect(seen[0]).toBe("owner")
        expect([...seen].sort()).toEqual(["d1", "d2", "owner"])
      })
    ),
    60_000
  )

  it.live("Foreground: the leaf goes first, then the middle, then the owner", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const seen = deletions(c, CM)
        const top = yield* c.client.create(configMap("top"))
        const mid = yield* c.client.create(configMap("mid", [owned(top, true)]))
        yield* c.client.create(configMap("leaf", [owned(mid, true)]))
        yield* c.client.create(configMap("side", [owned(top)]))
        yield* c.idle
        const answer = yield* c.client.delete(CM, ns, "top", { propagationPolicy: "Foreground" })
        expect(Metadata.metadataOf(answer)["finalizers"]).toEqual(["foregroundDeletion"])
        yield* gone(c, CM, ns, "top")
        expect(seen.indexOf("leaf")).toBeGreaterThanOrEqual(0)
        expect(seen.indexOf("leaf")).toBeLessThan(seen.indexOf("mid"))
        expect(seen.indexOf("mid")).toBeLessThan(seen.indexOf("top"))
        expect(seen).toContain("side")
      })
    ),
    60_000
  )

  it.live("Foreground waits for a blocking dependent that has its own finalizer", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const owner = yield* c.client.create(configMap("owner"))
        yield* c.client.create({ ...configMap("held", [owned(owner, true)]), metadata: { name: "held", namespace: ns, ownerReferences: [owned(owner, true)], finalizers: ["example.com/hold"] } })
        yield* c.client.delete(CM, ns, "owner", { propagationPolicy: "Foreground" })
        // The dependent is marked for deletion but stays (its own finalizer); the owner waits.
        yield* c.eventually(Effect.flatMap(c.client.get(CM, ns, "held"), (o) => (Metadata.isTerminating(o) ? Effect.void : Effect.fail(new Error("not deleting yet")))))
        yield* c.idle
        expect(yield* exists(c, CM, ns, "owner")).toBe(true)
        yield* c.client.patch(CM, ns, "held", "merge", { metadata: { finalizers: null } })
        yield* gone(c, CM, ns, "owner")
      })
    ),
    60_000
  )

  it.live("Orphan: dependents stay, without the reference", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const owner = yield* c.client.create(configMap("owner"))
        const other = yield* c.client.create(configMap("other"))
        yield* c.client.create(configMap("d1", [owned(owner, true)]))
        yield* c.client.create(configMap("d2", [owned(owner), owned(other)]))
        yield* c.idle
        yield* c.client.delete(CM, ns, "owner", { propagationPolicy: "Orphan" })
        yield* gone(c, CM, ns, "owner")
        yield* c.idle
        const d1 = yield* c.client.get(CM, ns, "d1")
        const d2 = yield* c.client.get(CM, ns, "d2")
        expect(Metadata.metadataOf(d1)["ownerReferences"]).toBeUndefined()
        expect((Metadata.metadataOf(d2)["ownerReferences"] as Array<Json>).map((r) => r["name"])).toEqual(["other"])
      })
    ),
    60_000
  )

  it.live("a dependent with another live owner loses only the dangling reference", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const a = yield* c.client.create(configMap("a"))
        const b = yield* c.client.create(configMap("b"))
        yield* c.client.create(configMap("both", [owned(a), owned(b)]))
        yield* c.idle
        yield* c.client.delete(CM, ns, "a")
        yield* c.eventually(
          Effect.flatMap(c.client.get(CM, ns, "both"), (o) => {
            const names = ((Metadata.metadataOf(o)["ownerReferences"] as Array<Json> | undefined) ?? []).map((r) => r["name"])
            return names.length === 1 && names[0] === "b" ? Effect.void : Effect.fail(new Error(`owners ${JSON.stringify(names)}`))
          })
        )
      })
    ),
    60_000
  )

  it.live("an owner that never existed, or was re-created with another uid, counts as absent", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(configMap("orphaned", [{ apiVersion: "v1", kind: "ConfigMap", name: "ghost", uid: "no-such-uid" }]))
        const first = yield* c.client.create(configMap("phoenix"))
        yield* c.client.delete(CM, ns, "phoenix", { propagationPolicy: "Orphan" })
        yield* gone(c, CM, ns, "phoenix")
        yield* c.client.create(configMap("phoenix"))
        // Refers to the first phoenix by uid; the one now under that name is another object.
        yield* c.client.create(configMap("child", [owned(first)]))
        yield* gone(c, CM, ns, "orphaned")
        yield* gone(c, CM, ns, "child")
        expect(yield* exists(c, CM, ns, "phoenix")).toBe(true)
      })
    ),
    60_000
  )

  it.live("a cluster-scoped owner collects its namespaced dependents; a cross-namespace owner is absent", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const CR = { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole" } as const
        const role = yield* c.client.create({ apiVersion: CR.apiVersion, kind: CR.kind, metadata: { name: "owner-role" }, rules: [] })
        yield* c.client.create(configMap("by-role", [owned(role)]))
        yield* c.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "elsewhere" } })
        const foreign = yield* c.client.create({ ...configMap("foreign"), metadata: { name: "foreign", namespace: "elsewhere" } })
        // A namespaced owner in another namespace is looked up in the dependent's namespace: absent.
        yield* c.client.create(configMap("cross", [owned(foreign)]))
        yield* gone(c, CM, ns, "cross")
        expect(yield* exists(c, CM, "elsewhere", "foreign")).toBe(true)
        yield* c.idle
        expect(yield* exists(c, CM, ns, "by-role")).toBe(true)
        // A cluster-scoped object naming a namespaced owner kind is never collected through it.
        const invalid = yield* c.client.create({ apiVersion: CR.apiVersion, kind: CR.kind, metadata: { name: "odd-role", ownerReferences: [owned(foreign)] }, rules: [] })
        yield* c.client.delete(CR, undefined, "owner-role")
        yield* gone(c, CM, ns, "by-role")
        yield* c.idle
        expect(Metadata.metadataOf(yield* c.client.get(CR, undefined, "odd-role"))["uid"]).toBe(Metadata.metadataOf(invalid)["uid"])
      })
    ),
    60_000
  )

  it.live("custom resources take part: a custom owner's dependents are collected", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create({
          apiVersion: "apiextensions.k8s.io/v1",
          kind: "CustomResourceDefinition",
          metadata: { name: "widgets.example.com" },
          spec: {
            group: "example.com",
            scope: "Namespaced",
            names: { plural: "widgets", singular: "widget", kind: "Widget", listKind: "WidgetList" },
            versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } }]
          }
        })
        const WidgetRef = { apiVersion: "example.com/v1", kind: "Widget", plural: "widgets", namespaced: true } as const
        const widget = yield* c.eventually(c.client.create({ apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w", namespace: ns } }))
        yield* c.client.create(configMap("of-widget", [owned(widget)]))
        const child = yield* c.client.create(configMap("parent"))
        yield* c.client.create({ apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w-child", namespace: ns, ownerReferences: [owned(child)] } })
        yield* c.idle
        expect(yield* exists(c, CM, ns, "of-widget")).toBe(true)
        yield* c.client.delete(WidgetRef, ns, "w")
        yield* gone(c, CM, ns, "of-widget")
        yield* c.client.delete(CM, ns, "parent")
        yield* gone(c, WidgetRef, ns, "w-child")
      })
    ),
    60_000
  )

  it.live("Foreground deletion of a Deployment removes its pods, then its ReplicaSet, then the Deployment", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* TestCluster.make({
          nodes: 2,
          controllers: [Deployment.reconciler(), ReplicaSet.reconciler(), GarbageCollector.reconciler()]
        })
        const DeployRef = { apiVersion: "apps/v1", kind: "Deployment" } as const
        const RsRef = { apiVersion: "apps/v1", kind: "ReplicaSet" } as const
        const PodRef = { apiVersion: "v1", kind: "Pod" } as const
        // One ordered log of DELETED events across the three kinds.
        const log: Array<string> = []
        for (const ref of [DeployRef, RsRef, PodRef]) {
          c.informers.for(ref).subscribe((ch) => {
            if (ch.type === "DELETED") log.push(`${String(ch.object["kind"])}/${String(Metadata.metadataOf(ch.object)["name"])}`)
          })
        }
        yield* c.client.create({
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: "web", namespace: ns },
          spec: {
            replicas: 3,
            selector: { matchLabels: { app: "web" } },
            template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "c", image: "nginx:1" }] } }
          }
        })
        yield* c.eventually(
          Effect.flatMap(TestCluster.pods(c, ns, "app=web"), (ps) => (ps.length === 3 && ps.every(Pods.isReady) ? Effect.void : Effect.fail(new Error(`${ps.length} pods`)))),
          { timeoutMs: 30_000 }
        )
        yield* c.client.delete(DeployRef, ns, "web", { propagationPolicy: "Foreground" })
        yield* gone(c, DeployRef, ns, "web")
        yield* c.idle
        expect(yield* TestCluster.pods(c, ns, "app=web")).toEqual([])
        const kinds = log.map((e) => e.split("/")[0])
        const lastPod = kinds.lastIndexOf("Pod")
        const lastRs = kinds.lastIndexOf("ReplicaSet")
        const deployment = kinds.indexOf("Deployment")
        expect(lastPod).toBeGreaterThanOrEqual(0)
        expect(lastRs).toBeGreaterThan(lastPod)
        expect(deployment).toBeGreaterThan(lastRs)
        expect(deployment).toBe(log.length - 1)
      })
    ),
    60_000
  )
})
