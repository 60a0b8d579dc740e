import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as GarbageCollector from "../../src/controllers/GarbageCollector.js"
import * as Namespace from "../../src/controllers/NamespaceController.js"
import * as Pods from "../../src/object/Pods.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, unknown>

const NS = { apiVersion: "v1", kind: "Namespace" } as const
const CM = { apiVersion: "v1", kind: "ConfigMap" } as const
const PodRef = { apiVersion: "v1", kind: "Pod" } as const

const gone = (cluster: TestCluster.TestCluster, ref: Client.ResourceRef, namespace: string | undefined, name: string) =>
  cluster.eventually(
    Effect.flatMap(TestCluster.find(cluster, ref, namespace, name), (o) => (o === undefined ? Effect.void : Effect.fail(new Error(`${name} still exists: ${JSON.stringify(o["status"])}`)))),
    { timeoutMs: 30_000 }
  )

/** `kind/name` of every DELETED event, in the order the informers saw them. */
const deletions = (cluster: TestCluster.TestCluster, refs: ReadonlyArray<Client.ResourceRef>) => {
  const seen: Array<string> = []
  for (const ref of refs) {
    cluster.informers.for(ref).subscribe((c) => {
      if (c.type === "DELETED") seen.push(`${String(c.object["kind"])}/${String(Metadata.metadataOf(c.object)["name"])}`)
    })
  }
  return seen
}

/** Whether the server serves `namespaces/{name}/finalize` (only then are conditions written). */
const finalizeServed = (cluster: TestCluster.TestCluster) =>
  Effect.map(Effect.either(cluster.client.patch(NS, undefined, "default", "merge", {}, "finalize")), (e) => e._tag === "Right")

const conditionOf = (ns: Json, type: string) => Pods.condition(ns, type)

describe("Namespace lifecycle through the API", () => {
  it.live("deleting a namespace deletes its contents, then the namespace", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [Namespace.reconciler()] })
        const seen = deletions(cluster, [NS, CM, { apiVersion: "v1", kind: "Secret" }, { apiVersion: "v1", kind: "ServiceAccount" }, { apiVersion: "apps/v1", kind: "Deployment" }])
        yield* cluster.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "team" } })
        yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", namespace: "team" }, data: { a: "b" } })
        yield* cluster.client.create({ apiVersion: "v1", kind: "Secret", metadata: { name: "s", namespace: "team" }, stringData: { a: "b" } })
        yield* cluster.client.create({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "robot", namespace: "team" } })
        yield* cluster.client.create({
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: "web", namespace: "team" },
          spec: { replicas: 0, selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "c", image: "nginx:1" }] } } }
        })
        yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "stays", namespace: "default" } })
        const deleting = yield* cluster.client.delete(NS, undefined, "team")
        expect((deleting["status"] as Json)["phase"]).toBe("Terminating")
        yield* gone(cluster, NS, undefined, "team")
        expect(seen[seen.length - 1]).toBe("Namespace/team")
        expect([...seen].sort()).toEqual(["ConfigMap/cfg", "Deployment/web", "Namespace/team", "Secret/s", "ServiceAccount/robot"])
        expect(yield* TestCluster.find(cluster, CM, "default", "stays")).toBeDefined()
      })
    ),
    60_000
  )

  it.live("a namespace with running pods finishes only after the pods are gone", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [Namespace.reconciler()] })
        const seen = deletions(cluster, [NS, PodRef])
        yield* cluster.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } })
        for (const name of ["p1", "p2"]) {
          yield* cluster.client.create({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: "apps" }, spec: { containers: [{ name: "c", image: "nginx:1" }] } })
        }
        yield* cluster.eventually(Effect.flatMap(TestCluster.pods(cluster, "apps"), (ps) => (ps.length === 2 && ps.every(Pods.isReady) ? Effect.void : Effect.fail(new Error("not ready")))))
        // The node goes quiet: its kubelet will not confirm the pods' deletion for now.
        cluster.stopHeartbeats("node-0")
        yield* cluster.client.delete(NS, undefined, "apps")
        yield* cluster.eventually(
          Effect.flatMap(TestCluster.pods(cluster, "apps"), (ps) => (ps.length === 2 && ps.every(Metadata.isTerminating) ? Effect.void : Effect.fail(new Error("pods not terminating"))))
        )
        yield* cluster.idle
        const waiting = yield* cluster.client.get(NS, undefined, "apps")
        expect((waiting["status"] as Json)["phase"]).toBe("Terminating")
        if (yield* finalizeServed(cluster)) {
          expect(conditionOf(waiting, "NamespaceContentRemaining")).toMatchObject({ status: "True", reason: "SomeResourcesRemain", message: "Some resources are remaining: pods. has 2 resource instances" })
        }
        cluster.resumeHeartbeats("node-0")
        yield* gone(cluster, NS, undefined, "apps")
        expect(seen.slice(0, 2).sort()).toEqual(["Pod/p1", "Pod/p2"])
        expect(seen[2]).toBe("Namespace/apps")
      })
    ),
    60_000
  )

  it.live("content held by a finalizer keeps the namespace until the finalizer goes; custom resources are emptied too", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [Namespace.reconciler(), GarbageCollector.reconciler()] })
        yield* cluster.client.create({
          apiVersion: "apiextensions.k8s.io/v1",
          kind: "CustomResourceDefinition",
          metadata: { name: "gadgets.example.com" },
          spec: {
            group: "example.com",
            scope: "Namespaced",
            names: { plural: "gadgets", singular: "gadget", kind: "Gadget", listKind: "GadgetList" },
            versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } }]
          }
        })
        const GadgetRef = { apiVersion: "example.com/v1", kind: "Gadget", plural: "gadgets", namespaced: true } as const
        yield* cluster.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "lab" } })
        yield* cluster.eventually(cluster.client.create({ apiVersion: "example.com/v1", kind: "Gadget", metadata: { name: "g", namespace: "lab" } }))
        yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "held", namespace: "lab", finalizers: ["example.com/hold"] } })
        yield* cluster.client.delete(NS, undefined, "lab")
        yield* gone(cluster, GadgetRef, "lab", "g")
        yield* cluster.eventually(Effect.flatMap(cluster.client.get(CM, "lab", "held"), (o) => (Metadata.isTerminating(o) ? Effect.void : Effect.fail(new Error("not deleting")))))
        yield* cluster.idle
        const waiting = yield* cluster.client.get(NS, undefined, "lab")
        expect(Namespace.needsFinalizing(waiting)).toBe(true)
        if (yield* finalizeServed(cluster)) {
          expect(conditionOf(waiting, "NamespaceFinalizersRemaining")).toMatchObject({
            status: "True",
            message: "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
          })
        }
        yield* cluster.client.patch(CM, "lab", "held", "merge", { metadata: { finalizers: null } })
        yield* gone(cluster, NS, undefined, "lab")
      })
    ),
    60_000
  )

  it.live("nothing can be created in a terminating namespace", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [Namespace.reconciler()] })
        yield* cluster.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "closing" } })
        yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "held", namespace: "closing", finalizers: ["example.com/hold"] } })
        yield* cluster.client.delete(NS, undefined, "closing")
        const refused = yield* Effect.either(cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "late", namespace: "closing" } }))
        expect(refused._tag === "Left" ? refused.left.status.code : 0).toBe(403)
        yield* cluster.client.patch(CM, "closing", "held", "merge", { metadata: { finalizers: null } })
        yield* gone(cluster, NS, undefined, "closing")
      })
    ),
    60_000
  )
})
