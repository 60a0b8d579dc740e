/**
 * Draining a node: the pure pod selection, and a drain through the real API against a
 * PodDisruptionBudget (test cluster, Deployment, ReplicaSet and disruption controllers, the
 * eviction subresource).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Drain from "../../src/client/Drain.js"
import * as Deployment from "../../src/controllers/Deployment.js"
import * as Disruption from "../../src/controllers/DisruptionController.js"
import * as Pods from "../../src/object/Pods.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, any>

const ns = "default"
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const NodeRef: Client.ResourceRef = { apiVersion: "v1", kind: "Node" }
const PdbRef: Client.ResourceRef = { apiVersion: "policy/v1", kind: "PodDisruptionBudget" }

describe("Drain.select", () => {
  const pod = (name: string, metadata: Json = {}) => ({ metadata: { name, namespace: ns, ...metadata } })
  it("evicts everything but DaemonSet and mirror pods", () => {
    const out = Drain.select([
      pod("plain"),
      pod("rs", { ownerReferences: [{ kind: "ReplicaSet", name: "x", controller: true }] }),
      pod("ds", { ownerReferences: [{ kind: "DaemonSet", name: "d", controller: true }] }),
      pod("ds-not-controller", { ownerReferences: [{ kind: "DaemonSet", name: "d" }] }),
      pod("static", { annotations: { [Drain.mirrorAnnotation]: "abc" } })
    ])
    expect(out.evict.map((p: Json) => p.metadata.name)).toEqual(["plain", "rs", "ds-not-controller"])
    expect(out.skipped).toEqual([
      { namespace: ns, name: "ds", reason: "DaemonSet" },
      { namespace: ns, name: "static", reason: "Mirror" }
    ])
  })
})

const deployment = (replicas: number): Json => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: ns },
  spec: {
    replicas,
    selector: { matchLabels: { app: "web" } },
    template: { metadata: { labels: { app: "web" } }, spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "app", image: "web:1", resources: { requests: { cpu: "500m" } } }] } }
  }
})

const check = (ok: boolean, why: () => string) => (ok ? Effect.void : Effect.fail(new Error(why())))
const nodeOf = (p: Json) => String(p["spec"]?.["nodeName"] ?? "")
const healthy = (p: Json) => Pods.isReady(p) && !Metadata.isTerminating(p) && p.metadata?.labels?.app === "web"

describe("Drain (integration)", () => {
  it.live(
    "drains a node one eviction at a time within a PodDisruptionBudget, waiting out the 429s",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const replicas = 6
          const c = yield* TestCluster.make({
            nodes: 3,
            podStartupMs: 150,
            controllers: [Deployment.reconciler(), ReplicaSet.reconciler(), Disruption.reconciler()]
          })
          yield* c.client.create(deployment(replicas))
          yield* c.client.create({ apiVersion: "policy/v1", kind: "PodDisruptionBudget", metadata: { name: "web", namespace: ns }, spec: { minAvailable: replicas - 1, selector: { matchLabels: { app: "web" } } } })
          const ready = yield* c.eventually(
            Effect.flatMap(TestCluster.pods(c, ns, "app=web"), (ps) => check(ps.filter(healthy).length === replicas, () => `${ps.filter(healthy).length} ready`).pipe(Effect.as(ps))),
            { timeoutMs: 30_000 }
          )
          yield* c.eventually(
            Effect.flatMap(c.client.get(PdbRef, ns, "web"), (p: Json) => check(p.status?.disruptionsAllowed === 1 && p.status?.currentHealthy === replicas, () => JSON.stringify(p.status))),
            { timeoutMs: 30_000 }
          )
          const perNode = new Map<string, number>()
          for (const p of ready) perNode.set(nodeOf(p), (perNode.get(nodeOf(p)) ?? 0) + 1)
          const victim = [...perNode.entries()].sort((a, b) => b[1] - a[1])[0]![0]
          expect(perNode.get(victim)).toBeGreaterThanOrEqual(2)

          // The budget's minimum, checked at every pod event the informer delivers.
          const live = new Map<string, Json>()
          for (const p of c.informers.for(PodRef).list() as ReadonlyArray<Json>) live.set(p.metadata.name, p)
          let lowest = Infinity
          const unsubscribe = c.informers.for(PodRef).subscribe((change) => {
            const p = change.object as Json
            if (change.type === "DELETED") live.delete(p.metadata.name)
            else live.set(p.metadata.name, p)
            lowest = Math.min(lowest, [...live.values()].filter(healthy).length)
          })
          yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))

          const lines: Array<string> = []
          const result = yield* Drain.drain(c.client, victim, { retryDelayMs: 100, pollMs: 50, timeoutMs: 60_000, onProgress: (l) => lines.push(l) })
          expect(result.evicted).toHaveLength(perNode.get(victim)!)
          expect(lines.filter((l) => l.includes("will retry")).length).toBeGreaterThan(0)
          expect(lines.filter((l) => l.endsWith("evicted"))).toHaveLength(perNode.get(victim)!)
          expect(lowest).toBeGreaterThanOrEqual(replicas - 1)

          const node = (yield* c.client.get(NodeRef, undefined, victim)) as Json
          expect(node.spec.unschedulable).toBe(true)
          const after = yield* c.eventually(
            Effect.flatMap(TestCluster.pods(c, ns, "app=web"), (ps) => check(ps.filter(healthy).length === replicas, () => "replacements not ready").pipe(Effect.as(ps))),
            { timeoutMs: 30_000 }
          )
          expect(after.filter((p) => nodeOf(p) === victim && !Metadata.isTerminating(p))).toEqual([])
          expect(lowest).toBeGreaterThanOrEqual(replicas - 1)
        })
      ),
    120_000
  )
})
