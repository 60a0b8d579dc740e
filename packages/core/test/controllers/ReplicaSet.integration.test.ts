/** The ReplicaSet controller through the real API, with the test cluster's scheduler and simulated kubelets. */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Pods from "../../src/object/Pods.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, any>

const ns = "default"
const RSRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "ReplicaSet" }
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }

const replicaSet = (name: string, replicas: number, spec: Json = {}): Json => ({
  apiVersion: "apps/v1",
  kind: "ReplicaSet",
  metadata: { name, namespace: ns },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: "img:1" }] } },
    ...spec
  }
})

const cluster = () => TestCluster.make({ nodes: 2, podStartupMs: 30, controllers: [ReplicaSet.reconciler()] })

const check = (ok: boolean, why: () => string) => (ok ? Effect.void : Effect.fail(new Error(why())))
const live = (pod: Json) => Pods.isActive(pod)
const podsOf = (c: TestCluster.TestCluster, app: string) => Effect.map(TestCluster.pods(c, ns, `app=${app}`), (pods) => pods as ReadonlyArray<Json>)

/** Wait until `app` has exactly `n` live pods, all ready, and its status says so. */
const settled = (c: TestCluster.TestCluster, app: string, n: number) =>
  c.eventually(
    Effect.gen(function* () {
      const pods = (yield* podsOf(c, app)).filter(live)
      yield* check(pods.length === n && pods.every(Pods.isReady), () => `${pods.length} live pods, ${pods.filter(Pods.isReady).length} ready`)
      const rs = (yield* c.client.get(RSRef, ns, app)) as Json
      yield* check(rs.status?.readyReplicas === n && rs.status?.replicas === n && rs.status?.observedGeneration === rs.metadata.generation, () => JSON.stringify(rs.status))
      return pods
    }),
    { timeoutMs: 30_000 }
  )

describe("ReplicaSet through the API", () => {
  it.live("creates its pods, and replaces a deleted one", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const rs = yield* c.client.create(replicaSet("web", 3))
        const first = yield* settled(c, "web", 3)
        for (const p of first) {
          expect(Metadata.controllerRefOf(p)).toMatchObject({ kind: "ReplicaSet", name: "web", uid: Metadata.metadataOf(rs)["uid"], controller: true })
          expect(String(p.metadata.name).startsWith("web-")).toBe(true)
        }
        const victim = first[0]!.metadata.name as string
        yield* c.client.delete(PodRef, ns, victim)
        const next = yield* c.eventually(
          Effect.gen(function* () {
            const pods = yield* settled(c, "web", 3)
            yield* check(pods.every((p) => p.metadata.name !== victim), () => "victim still counted")
            return pods
          }),
          { timeoutMs: 30_000 }
        )
        expect(next.filter((p) => first.some((f) => f.metadata.name === p.metadata.name))).toHaveLength(2)
        const events = ((yield* c.client.list({ apiVersion: "v1", kind: "Event" }, { namespace: ns }))["items"] as Array<Json>).filter(
          (e) => e.involvedObject.name === "web" && e.reason === "SuccessfulCreate"
        )
        expect(events.length).toBeGreaterThanOrEqual(1)
      })
    ),
    60_000
  )

  it.live("scaling down removes the not-ready pod first", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(replicaSet("db", 3))
        const pods = yield* settled(c, "db", 3)
        const sick = pods[1]!.metadata.name as string
        c.setReady(ns, sick, false)
        yield* c.eventually(
          Effect.flatMap(c.client.get(RSRef, ns, "db"), (rs: Json) => check(rs.status?.readyReplicas === 2, () => JSON.stringify(rs.status))),
          { timeoutMs: 30_000 }
        )
        yield* c.client.patch(RSRef, ns, "db", "merge", { spec: { replicas: 2 } })
        const left = yield* settled(c, "db", 2)
        expect(left.map((p) => p.metadata.name)).not.toContain(sick)
      })
    ),
    60_000
  )

  it.live("adopts a matching orphan pod instead of creating one, and releases a pod that stops matching", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "stray", namespace: ns, labels: { app: "api" } },
          spec: { containers: [{ name: "app", image: "img:0" }] }
        })
        const rs = yield* c.client.create(replicaSet("api", 2))
        const pods = yield* settled(c, "api", 2)
        const stray = pods.find((p) => p.metadata.name === "stray")
        expect(stray).toBeDefined()
        expect(Metadata.controllerRefOf(stray!)).toMatchObject({ kind: "ReplicaSet", name: "api", uid: Metadata.metadataOf(rs)["uid"], controller: true, blockOwnerDeletion: true })

        // Relabelled out of the selector: released (no owner left) and replaced.
        yield* c.client.patch(PodRef, ns, "stray", "merge", { metadata: { labels: { app: "debug" } } })
        yield* settled(c, "api", 2)
        yield* c.eventually(
          Effect.flatMap(c.client.get(PodRef, ns, "stray"), (p: Json) => check((p.metadata.ownerReferences ?? []).length === 0, () => JSON.stringify(p.metadata.ownerReferences)))
        )
      })
    ),
    60_000
  )

  it.live("minReadySeconds: pods count as available only after it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(replicaSet("slow", 2, { minReadySeconds: 1 }))
        yield* settled(c, "slow", 2)
        const rs = (yield* c.client.get(RSRef, ns, "slow")) as Json
        // Ready at once, available a second later (a timed requeue, no other event needed).
        yield* c.eventually(
          Effect.flatMap(c.client.get(RSRef, ns, "slow"), (x: Json) => check(x.status?.availableReplicas === 2, () => JSON.stringify(x.status))),
          { timeoutMs: 30_000 }
        )
        expect(rs.status.readyReplicas).toBe(2)
      })
    ),
    60_000
  )

  it.live("creates that fail (quota) set ReplicaFailure; it clears once creates succeed", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create({ apiVersion: "v1", kind: "ResourceQuota", metadata: { name: "pods", namespace: ns }, spec: { hard: { pods: "2" } } })
        yield* c.client.create(replicaSet("capped", 3))
        const failing = yield* c.eventually(
          Effect.flatMap(c.client.get(RSRef, ns, "capped"), (rs: Json) => {
            const f = (rs.status?.conditions as Array<Json> | undefined)?.find((x) => x.type === "ReplicaFailure")
            return check(f !== undefined && rs.status.replicas === 2, () => JSON.stringify(rs.status)).pipe(Effect.as(f!))
          }),
          { timeoutMs: 30_000 }
        )
        expect(failing).toMatchObject({ status: "True", reason: "FailedCreate" })
        expect(String(failing.message)).toContain("exceeded quota")

        yield* c.client.patch({ apiVersion: "v1", kind: "ResourceQuota" }, ns, "pods", "merge", { spec: { hard: { pods: "10" } } })
        yield* settled(c, "capped", 3)
        yield* c.eventually(
          Effect.flatMap(c.client.get(RSRef, ns, "capped"), (rs: Json) => check(rs.status?.conditions === undefined, () => JSON.stringify(rs.status))),
          { timeoutMs: 30_000 }
        )
      })
    ),
    60_000
  )
})
