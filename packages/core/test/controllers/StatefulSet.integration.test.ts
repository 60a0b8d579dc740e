import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as GarbageCollector from "../../src/controllers/GarbageCollector.js"
import * as History from "../../src/controllers/History.js"
import * as Pods from "../../src/object/Pods.js"
import * as StatefulSet from "../../src/controllers/StatefulSet.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, unknown>

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const ClaimRef = { apiVersion: "v1", kind: "PersistentVolumeClaim" } as const
const SetRef = StatefulSet.StatefulSetRef

const nameOf = (o: Json) => String(Metadata.metadataOf(o)["name"])
const uidOf = (o: Json) => String(Metadata.metadataOf(o)["uid"])

const webSet = (spec: Json = {}, image = "nginx:1"): Json => ({
  apiVersion: "apps/v1",
  kind: "StatefulSet",
  metadata: { name: "web", namespace: "default" },
  spec: {
    replicas: 3,
    serviceName: "web",
    selector: { matchLabels: { app: "web" } },
    template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "app", image }] } },
    volumeClaimTemplates: [{ metadata: { name: "www" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } }],
    ...spec
  }
})

/** The set's pods as the API lists them, by name. */
const setPods = (cluster: TestCluster.TestCluster) =>
  Effect.map(TestCluster.pods(cluster, "default", "app=web"), (ps) => [...ps].sort((a, b) => nameOf(a).localeCompare(nameOf(b))))

const fail = (why: string) => Effect.fail(new Error(why))

/** Wait until the set has exactly `names` pods, all Running and Ready, and its status says so. */
const settled = (cluster: TestCluster.TestCluster, names: ReadonlyArray<string>) =>
  cluster.eventually(
    Effect.gen(function* () {
      const pods = yield* setPods(cluster)
      const seen = pods.map(nameOf)
      if (seen.join() !== names.join()) return yield* fail(`pods ${seen.join()}`)
      if (!pods.every((p) => Pods.isReady(p) && !Metadata.isTerminating(p))) return yield* fail("not all ready")
      const status = (yield* cluster.client.get(SetRef, "default", "web"))["status"] as Json | undefined
      if (status?.["readyReplicas"] !== names.length || status?.["replicas"] !== names.length) return yield* fail(`status ${JSON.stringify(status)}`)
      return pods
    }),
    { timeoutMs: 25_000 }
  )

/** Records pod lifecycle events of the set: creation, deletion start and disappearance. */
const recorder = (cluster: TestCluster.TestCluster) => {
  const log: Array<string> = []
  const violations: Array<string> = []
  const informer = cluster.informers.for(PodRef)
  informer.subscribe((c) => {
    const name = nameOf(c.object)
    if (!name.startsWith("web-")) return
    if (c.type === "ADDED") {
      log.push(`+${name}`)
      // OrderedReady: when ordinal i appears, every lower ordinal is Running and Ready.
      const ordinal = StatefulSet.parentAndOrdinal(name).ordinal
      for (let j = 0; j < ordinal; j++) {
        const lower = informer.get("default", `web-${j}`)
        if (lower === undefined || !Pods.isReady(lower) || Pods.phase(lower) !== "Running") violations.push(`${name} created before web-${j} was ready`)
      }
    } else if (c.type === "MODIFIED" && Metadata.isTerminating(c.object) && (c.old === undefined || !Metadata.isTerminating(c.old))) {
      log.push(`~${name}`)
    } else if (c.type === "DELETED") {
      log.push(`-${name}`)
    }
  })
  return { log, violations }
}

describe("StatefulSet through the API", () => {
  it.live("scaled 3→0→3 comes up in order 0,1,2, goes down in reverse, and gets its claims back", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2, controllers: [StatefulSet.reconciler()], podStartupMs: 10 })
        const events = recorder(cluster)
        yield* cluster.client.create(webSet())
        const first = yield* settled(cluster, ["web-0", "web-1", "web-2"])
        expect(events.log).toEqual(["+web-0", "+web-1", "+web-2"])

        // Identity and storage: hostname, subdomain, labels, and a claim per replica.
        for (const [i, p] of first.entries()) {
          const spec = p["spec"] as any
          expect(spec.hostname).toBe(`web-${i}`)
          expect(spec.subdomain).toBe("web")
          expect((Metadata.metadataOf(p)["labels"] as any)[StatefulSet.PodNameLabel]).toBe(`web-${i}`)
          expect((Metadata.metadataOf(p)["labels"] as any)[StatefulSet.PodIndexLabel]).toBe(String(i))
          expect(spec.volumes).toContainEqual({ name: "www", persistentVolumeClaim: { claimName: `www-web-${i}` } })
        }
        const claims = (yield* cluster.client.listAll(ClaimRef, { namespace: "default" })).items
        const claimUids = new Map(claims.map((c) => [nameOf(c), uidOf(c)] as const))
        expect([...claimUids.keys()].sort()).toEqual(["www-web-0", "www-web-1", "www-web-2"])
        // No provisioner in the simulated cluster: the claims stay Pending, and that is fine.
        for (const c of claims) expect((c["status"] as any)?.phase ?? "Pending").toBe("Pending")

        events.log.length = 0
        yield* cluster.client.patch(SetRef, "default", "web", "merge", { spec: { replicas: 0 } })
        yield* cluster.eventually(Effect.flatMap(setPods(cluster), (ps) => (ps.length === 0 ? Effect.void : fail(`${ps.length} pods left`))), { timeoutMs: 25_000 })
        // One at a time from the highest ordinal: each deletion starts after the previous pod is gone.
        expect(events.log).toEqual(["~web-2", "-web-2", "~web-1", "-web-1", "~web-0", "-web-0"])
        const kept = (yield* cluster.client.listAll(ClaimRef, { namespace: "default" })).items
        expect(new Map(kept.map((c) => [nameOf(c), uidOf(c)] as const))).toEqual(claimUids)

        events.log.length = 0
        yield* cluster.client.patch(SetRef, "default", "web", "merge", { spec: { replicas: 3 } })
        const again = yield* settled(cluster, ["web-0", "web-1", "web-2"])
        expect(events.log).toEqual(["+web-0", "+web-1", "+web-2"])
        const back = (yield* cluster.client.listAll(ClaimRef, { namespace: "default" })).items
        expect(new Map(back.map((c) => [nameOf(c), uidOf(c)] as const))).toEqual(claimUids)
        for (const [i, p] of again.entries()) expect((p["spec"] as any).volumes).toContainEqual({ name: "www", persistentVolumeClaim: { claimName: `www-web-${i}` } })
        expect(events.violations).toEqual([])
      })
    ),
  120_000
  )

  it.live("RollingUpdate with partition 2 of a 3-replica set updates only ordinal 2, then the rest from the top when lowered", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2, controllers: [StatefulSet.reconciler()], podStartupMs: 10 })
        yield* cluster.client.create(webSet({ updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 2 } } }, "nginx:1"))
        const before = yield* settled(cluster, ["web-0", "web-1", "web-2"])
        const v1 = (yield* cluster.client.get(SetRef, "default", "web"))["status"] as any
        expect(v1.currentRevision).toBe(v1.updateRevision)

        const events = recorder(cluster)
        events.log.length = 0
        yield* cluster.client.patch(SetRef, "default", "web", "merge", {
          spec: { template: { spec: { containers: [{ name: "app", image: "nginx:2" }] } } }
        })
        const image = (p: Json) => (p["spec"] as any).containers[0].image
        const status = yield* cluster.eventually(
          Effect.gen(function* () {
            const s = ((yield* cluster.client.get(SetRef, "default", "web"))["status"] ?? {}) as any
            const pods = yield* setPods(cluster)
            const web2 = pods.find((p) => nameOf(p) === "web-2")
            if (web2 === undefined || image(web2) !== "nginx:2" || !Pods.isReady(web2)) return yield* fail("web-2 not updated yet")
            if (s.updatedReplicas !== 1 || s.readyReplicas !== 3) return yield* fail(`status ${JSON.stringify(s)}`)
            return s
          }),
          { timeoutMs: 25_000 }
        )
        expect(status.updateRevision).not.toBe(v1.updateRevision)
        expect(status.currentRevision).toBe(v1.currentRevision)
        expect(status.currentReplicas).toBe(2)
        yield* cluster.idle
        const after = yield* setPods(cluster)
        expect(after.map((p) => [nameOf(p), image(p), (Metadata.metadataOf(p)["labels"] as any)[History.HashLabel]])).toEqual([
          ["web-0", "nginx:1", v1.currentRevision],
          ["web-1", "nginx:1", v1.currentRevision],
          ["web-2", "nginx:2", status.updateRevision]
        ])
        // The partitioned pods were never touched.
        expect(after.slice(0, 2).map(uidOf)).toEqual(before.slice(0, 2).map(uidOf))
        expect(events.log.filter((e) => e.startsWith("~"))).toEqual(["~web-2"])
        const revisions = (yield* cluster.client.listAll(History.ControllerRevisionRef, { namespace: "default" })).items
        expect(revisions.map((r) => r["revision"]).sort()).toEqual([1, 2])

        // Lowering the partition finishes the rollout from the highest remaining ordinal down.
        yield* cluster.client.patch(SetRef, "default", "web", "merge", { spec: { updateStrategy: { rollingUpdate: { partition: 0 } } } })
        const done = yield* cluster.eventually(
          Effect.gen(function* () {
            const s = ((yield* cluster.client.get(SetRef, "default", "web"))["status"] ?? {}) as any
            if (s.currentRevision !== status.updateRevision || s.updatedReplicas !== 3 || s.readyReplicas !== 3) return yield* fail(`status ${JSON.stringify(s)}`)
            return s
          }),
          { timeoutMs: 25_000 }
        )
        expect(done.currentReplicas).toBe(3)
        expect((yield* setPods(cluster)).map(image)).toEqual(["nginx:2", "nginx:2", "nginx:2"])
        expect(events.log.filter((e) => e.startsWith("~"))).toEqual(["~web-2", "~web-1", "~web-0"])
      })
    ),
  120_000
  )

  it.live("persistentVolumeClaimRetentionPolicy Delete: scale-down and set deletion take the claims with them (via the collector)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [StatefulSet.reconciler(), GarbageCollector.reconciler()], podStartupMs: 10 })
        yield* cluster.client.create(webSet({ replicas: 2, persistentVolumeClaimRetentionPolicy: { whenDeleted: "Delete", whenScaled: "Delete" } }))
        yield* settled(cluster, ["web-0", "web-1"])
        const claimNames = Effect.map(cluster.client.listAll(ClaimRef, { namespace: "default" }), (l) => l.items.map(nameOf).sort())
        const claimsAre = (want: ReadonlyArray<string>) =>
          cluster.eventually(Effect.flatMap(claimNames, (names) => (names.join() === want.join() ? Effect.void : fail(`claims ${names.join()}`))), { timeoutMs: 25_000 })
        yield* claimsAre(["www-web-0", "www-web-1"])
        const set = yield* cluster.client.get(SetRef, "default", "web")
        const owners = (yield* cluster.client.get(ClaimRef, "default", "www-web-0"))["metadata"] as any
        expect(owners.ownerReferences).toEqual([{ apiVersion: "apps/v1", kind: "StatefulSet", name: "web", uid: uidOf(set), controller: true, blockOwnerDeletion: true }])

        yield* cluster.client.patch(SetRef, "default", "web", "merge", { spec: { replicas: 1 } })
        yield* settled(cluster, ["web-0"])
        yield* claimsAre(["www-web-0"])

        yield* cluster.client.delete(SetRef, "default", "web")
        yield* claimsAre([])
      })
    ),
  120_000
  )

  it.live("Parallel creates every replica at once and recreates a deleted pod with the same name and claim", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [StatefulSet.reconciler()], podStartupMs: 10 })
        // Unready pods would block OrderedReady; Parallel goes on regardless.
        const set = webSet({ podManagementPolicy: "Parallel" })
        const template = (set["spec"] as any).template
        template.metadata.annotations = { "sim.fleet.koder.dev/ready": "false" }
        yield* cluster.client.create(set)
        const pods = yield* cluster.eventually(
          Effect.flatMap(setPods(cluster), (ps) => (ps.length === 3 && ps.every((p) => Pods.phase(p) === "Running") ? Effect.succeed(ps) : fail(`${ps.length} running`))),
          { timeoutMs: 25_000 }
        )
        expect(pods.some(Pods.isReady)).toBe(false)
        const old = uidOf(pods[1]!)
        yield* cluster.client.delete(PodRef, "default", "web-1")
        const replaced = yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(PodRef, "default", "web-1"), (p) => (uidOf(p) !== old && !Metadata.isTerminating(p) ? Effect.succeed(p) : fail("not replaced"))),
          { timeoutMs: 25_000 }
        )
        expect((replaced["spec"] as any).volumes).toContainEqual({ name: "www", persistentVolumeClaim: { claimName: "www-web-1" } })
      })
    ),
  120_000
  )
})
