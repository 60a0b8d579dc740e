/**
 * Storage through the real API pipeline of a test cluster: StorageClass validation, the default
 * class given by admission, the PersistentVolume controller (Immediate binding to a pre-made
 * volume, release and Retain), the scheduler choosing a node that can provision, the local-path
 * provisioner's volume, and expansion allowed or refused by the class.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as LocalPathProvisioner from "../../src/controllers/LocalPathProvisioner.js"
import * as PersistentVolumeBinder from "../../src/controllers/PersistentVolumeBinder.js"
import * as Storage from "../../src/model/Storage.js"
import * as ResourceRefs from "../../src/object/ResourceRefs.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const controllers = [PersistentVolumeBinder.claimReconciler(), PersistentVolumeBinder.volumeReconciler(), LocalPathProvisioner.reconciler()]
const fail = (why: string) => Effect.fail(new Error(why))
const claim = (name: string, spec: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name, namespace: "default" },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...spec }
})
const statusOf = (e: unknown) => (e as { status: { code: number; message: string } }).status

describe("PersistentVolumes through the test cluster", () => {
  it.live("validates StorageClasses and keeps their provisioner, parameters, reclaim policy and binding mode", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [], scheduler: false })
        const bad = yield* Effect.flip(cluster.client.create({ apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: { name: "bad" }, provisioner: "" }))
        expect(statusOf(bad).code).toBe(422)
        expect(statusOf(bad).message).toContain("provisioner: Required value")
        const made = yield* cluster.client.create({ apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: { name: "fast" }, provisioner: "example.com/fast", parameters: { tier: "1" } })
        // v1 defaults.
        expect(made["reclaimPolicy"]).toBe("Delete")
        expect(made["volumeBindingMode"]).toBe("Immediate")
        const changed = yield* Effect.flip(cluster.client.update({ ...made, provisioner: "example.com/slow", parameters: { tier: "2" }, reclaimPolicy: "Retain" }))
        expect(statusOf(changed).code).toBe(422)
        for (const part of ["parameters: Forbidden: updates to parameters are forbidden.", "provisioner: Forbidden: updates to provisioner are forbidden.", "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."]) {
          expect(statusOf(changed).message).toContain(part)
        }
        // The rest may change, e.g. expansion.
        const expanded = yield* cluster.client.update({ ...made, allowVolumeExpansion: true })
        expect(expanded["allowVolumeExpansion"]).toBe(true)
      })
    )
  )

  it.live("binds an Immediate claim to the smallest fitting volume, then releases it and keeps it (Retain)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers, scheduler: false })
        yield* cluster.client.create({ apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: { name: "manual" }, provisioner: Storage.NoProvisioner })
        const volume = (name: string, size: string): Json => ({
          apiVersion: "v1",
          kind: "PersistentVolume",
          metadata: { name },
          spec: { capacity: { storage: size }, accessModes: ["ReadWriteOnce"], storageClassName: "manual", persistentVolumeReclaimPolicy: "Retain", hostPath: { path: `/srv/${name}` } }
        })
        yield* cluster.client.create(volume("big", "10Gi"))
        yield* cluster.client.create(volume("small", "2Gi"))
        yield* cluster.client.create(volume("tiny", "500Mi"))
        yield* cluster.client.create(claim("want", { storageClassName: "manual" }))
        const bound = yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolumeClaim, "default", "want"), (c: Json) => (c["status"]?.phase === "Bound" ? Effect.succeed(c) : fail(`claim ${JSON.stringify(c["status"])}`))),
          { timeoutMs: 10_000 }
        )
        expect(bound["spec"]["volumeName"]).toBe("small")
        expect(bound["status"]["capacity"]).toEqual({ storage: "2Gi" })
        expect(bound["metadata"]["annotations"][Storage.BindCompletedAnnotation]).toBe("yes")
        const pv = (yield* cluster.client.get(ResourceRefs.PersistentVolume, undefined, "small")) as Json
        expect(pv["spec"]["claimRef"]["uid"]).toBe(bound["metadata"]["uid"])
        yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolume, undefined, "small"), (v: Json) => (v["status"]?.phase === "Bound" ? Effect.void : fail(`pv ${v["status"]?.phase}`))),
          { timeoutMs: 10_000 }
        )
        // The unclaimed volumes are Available.
        const big = (yield* cluster.client.get(ResourceRefs.PersistentVolume, undefined, "big")) as Json
        expect(big["status"]?.phase).toBe("Available")

        yield* cluster.client.delete(ResourceRefs.PersistentVolumeClaim, "default", "want")
        yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolume, undefined, "small"), (v: Json) => (v["status"]?.phase === "Released" ? Effect.void : fail(`pv ${v["status"]?.phase}`))),
          { timeoutMs: 10_000 }
        )
        // A claim of the same name later is a new claim: Retain keeps the old data out of its reach.
        yield* cluster.client.create(claim("want", { storageClassName: "manual", resources: { requests: { storage: "1Gi" } } }))
        const again = yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolumeClaim, "default", "want"), (c: Json) => (c["status"]?.phase === "Bound" ? Effect.succeed(c) : fail("not bound"))),
          { timeoutMs: 10_000 }
        )
        expect(again["spec"]["volumeName"]).toBe("big")
      })
    )
  )

  it.live("gives classless claims the default class, provisions local-path volumes on the scheduled node, and grows them only when the class allows", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2, controllers, podStartupMs: 10 })
        yield* cluster.client.create({ ...Storage.localPathClass })
        // Only node-1's agent makes local-path volumes.
        yield* cluster.client.patch(ResourceRefs.Node, undefined, "node-1", "merge", { metadata: { annotations: { [Storage.LocalPathRootAnnotation]: "/var/lib/fleet/storage" } } })
        const created = (yield* cluster.client.create(claim("data"))) as Json
        expect(created["spec"]["storageClassName"]).toBe("local-path")
        // Nothing happens before a pod uses it.
        yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolumeClaim, "default", "data"), (c: Json) => (c["status"]?.phase === "Pending" ? Effect.void : fail("no phase"))),
          { timeoutMs: 10_000 }
        )
        yield* cluster.client.create({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "user", namespace: "default" },
          spec: { containers: [{ name: "c", image: "busybox" }], volumes: [{ name: "d", persistentVolumeClaim: { claimName: "data" } }] }
        })
        const bound = yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolumeClaim, "default", "data"), (c: Json) => (c["status"]?.phase === "Bound" ? Effect.succeed(c) : fail(`claim ${JSON.stringify(c["metadata"]["annotations"])}`))),
          { timeoutMs: 15_000 }
        )
        const pod = (yield* cluster.client.get(ResourceRefs.Pod, "default", "user")) as Json
        expect(pod["spec"]["nodeName"]).toBe("node-1")
        expect(bound["metadata"]["annotations"][Storage.SelectedNodeAnnotation]).toBe("node-1")
        expect(bound["metadata"]["annotations"][Storage.StorageProvisionerAnnotation]).toBe(Storage.LocalPathProvisioner)
        const pvName = `pvc-${bound["metadata"]["uid"]}`
        expect(bound["spec"]["volumeName"]).toBe(pvName)
        const pv = (yield* cluster.client.get(ResourceRefs.PersistentVolume, undefined, pvName)) as Json
        expect(pv["spec"]["hostPath"]).toEqual({ path: `/var/lib/fleet/storage/${pvName}_default_data`, type: "DirectoryOrCreate" })
        expect(pv["metadata"]["finalizers"]).toContain(Storage.LocalPathFinalizer)

        yield* cluster.client.patch(ResourceRefs.PersistentVolumeClaim, "default", "data", "merge", { spec: { resources: { requests: { storage: "3Gi" } } } })
        yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolume, undefined, pvName), (v: Json) => (v["spec"]["capacity"]["storage"] === "3Gi" ? Effect.void : fail("not grown"))),
          { timeoutMs: 10_000 }
        )
        const shrink = yield* Effect.flip(cluster.client.patch(ResourceRefs.PersistentVolumeClaim, "default", "data", "merge", { spec: { resources: { requests: { storage: "1Gi" } } } }))
        expect(statusOf(shrink).message).toContain("field can not be less than previous value")

        // A class without expansion refuses a bigger request, as kube-apiserver's admission.
        yield* cluster.client.create({ apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: { name: "fixed" }, provisioner: Storage.NoProvisioner })
        yield* cluster.client.create({
          apiVersion: "v1",
          kind: "PersistentVolume",
          metadata: { name: "fixed-1" },
          spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], storageClassName: "fixed", hostPath: { path: "/srv/fixed-1" } }
        })
        yield* cluster.client.create(claim("fixed", { storageClassName: "fixed" }))
        yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolumeClaim, "default", "fixed"), (c: Json) => (c["status"]?.phase === "Bound" ? Effect.void : fail("not bound"))),
          { timeoutMs: 10_000 }
        )
        const refused = yield* Effect.flip(cluster.client.patch(ResourceRefs.PersistentVolumeClaim, "default", "fixed", "merge", { spec: { resources: { requests: { storage: "2Gi" } } } }))
        expect(statusOf(refused).code).toBe(403)
        expect(statusOf(refused).message).toContain("only dynamically provisioned pvc can be resized")

        // Claim gone (reclaim Delete): the volume is deleted, held by its finalizer until the node's agent removed the directory.
        yield* cluster.client.delete(ResourceRefs.Pod, "default", "user", { gracePeriodSeconds: 0 })
        yield* cluster.client.delete(ResourceRefs.PersistentVolumeClaim, "default", "data")
        yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(ResourceRefs.PersistentVolume, undefined, pvName), (v: Json) => (v["metadata"]["deletionTimestamp"] !== undefined ? Effect.void : fail(`pv ${v["status"]?.phase}`))),
          { timeoutMs: 10_000 }
        )
      })
    ),
  60_000
  )
})
