/**
 * The node lifecycle controller through the real API, with the test cluster's simulated nodes,
 * the Deployment and ReplicaSet controllers, and the built-in DefaultTolerationSeconds admission
 * set to give every pod a 2 s toleration of the unreachable / not-ready NoExecute taints.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Deployment from "../../src/controllers/Deployment.js"
import * as NodeLifecycle from "../../src/controllers/NodeLifecycle.js"
import * as Pods from "../../src/object/Pods.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, any>

const ns = "default"
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const NodeRef: Client.ResourceRef = { apiVersion: "v1", kind: "Node" }
const toleranceMs = 2_000

const deployment = (name: string, replicas: number): Json => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: ns },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    // Requests make the scheduler spread the pods over the nodes.
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: "web:1", resources: { requests: { cpu: "500m" } } }] } }
  }
})

const cluster = () =>
  TestCluster.make({
    nodes: 3,
    heartbeatMs: 100,
    podStartupMs: 20,
    // DefaultTolerationSeconds admission (in the built-in chain) gives every pod this toleration.
    tolerationSeconds: toleranceMs / 1000,
    controllers: [NodeLifecycle.reconciler({ nodeMonitorGracePeriodMs: 1_500, nodeMonitorPeriodMs: 200 }), Deployment.reconciler(), ReplicaSet.reconciler()]
  })

const check = (ok: boolean, why: () => string) => (ok ? Effect.void : Effect.fail(new Error(why())))
const podsOf = (c: TestCluster.TestCluster) => Effect.map(TestCluster.pods(c, ns, "app=web"), (ps) => ps as ReadonlyArray<Json>)
const nodeOf = (pod: Json) => String(pod["spec"]?.["nodeName"] ?? "")
const readyOf = (node: Json) => Pods.condition(node, "Ready")

/** Wait until `n` pods of the Deployment are Ready (and none is terminating). */
const allReady = (c: TestCluster.TestCluster, n: number, notOn?: string) =>
  c.eventually(
    Effect.flatMap(podsOf(c), (ps) => {
      const ready = ps.filter((p) => Pods.isReady(p) && !Metadata.isTerminating(p) && nodeOf(p) !== notOn)
      return check(ready.length === n, () => `${ready.length}/${n} ready: ${ps.map((p) => `${p.metadata.name}@${nodeOf(p)}:${Pods.isReady(p)}`).join(" ")}`).pipe(Effect.as(ready))
    }),
    { timeoutMs: 30_000 }
  )

describe("NodeLifecycle (integration)", () => {
  it.live(
    "a silent node goes Unknown, is tainted, and its pods are evicted after their toleration and replaced elsewhere",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* cluster()
          yield* c.client.create(deployment("web", 6))
          const ready = yield* allReady(c, 6)
          expect(ready[0]!.spec.tolerations).toEqual(
            expect.arrayContaining([{ key: NodeLifecycle.unreachableTaint, operator: "Exists", effect: "NoExecute", tolerationSeconds: 2 }])
          )
          const perNode = new Map<string, number>()
          for (const p of ready) perNode.set(nodeOf(p), (perNode.get(nodeOf(p)) ?? 0) + 1)
          expect(perNode.size).toBeGreaterThan(1)
          const victim = [...perNode.entries()].sort((a, b) => b[1] - a[1])[0]![0]
          const victims = ready.filter((p) => nodeOf(p) === victim).map((p) => p.metadata.uid as string)

          const stoppedAt = Date.now()
          c.stopHeartbeats(victim)
          const node = yield* c.eventually(
            Effect.flatMap(c.client.get(NodeRef, undefined, victim), (n: Json) => {
              const keys = (n.spec?.taints ?? []).map((t: Json) => `${t.key}:${t.effect}`)
              return check(
                readyOf(n)?.["status"] === "Unknown" && keys.includes(`${NodeLifecycle.unreachableTaint}:NoExecute`) && keys.includes(`${NodeLifecycle.unreachableTaint}:NoSchedule`),
                () => `node: ${JSON.stringify({ ready: readyOf(n), taints: n.spec?.taints })}`
              ).pipe(Effect.as(n))
            }),
            { timeoutMs: 30_000 }
          )
          expect(readyOf(node)).toMatchObject({ reason: "NodeStatusUnknown", message: "Kubelet stopped posting node status." })
          expect(Pods.condition(node, "MemoryPressure")?.["status"]).toBe("Unknown")

          // The victims are deleted (they stay Terminating: their kubelet cannot confirm), not before the toleration.
          yield* c.eventually(
            Effect.flatMap(podsOf(c), (ps) => {
              const left = ps.filter((p) => victims.includes(p.metadata.uid) && !Metadata.isTerminating(p))
              return check(left.length === 0, () => `${left.length} victims not deleted yet`)
            }),
            { timeoutMs: 30_000 }
          )
          // Grace period (1.5 s, counted from when the controller saw the last heartbeat: up to a
          // heartbeat period, 100 ms, before stoppedAt; 200 allows one late beat) plus the
          // toleration (2 s, counted from a timeAdded truncated to the second).
          expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(1_500 - 200 + 1_000)
          const evicted = (yield* podsOf(c)).filter((p) => victims.includes(p.metadata.uid))
          for (const p of evicted) expect(Pods.condition(p, "DisruptionTarget")).toMatchObject({ status: "True", reason: "DeletionByTaintManager" })
          // …and replaced on the other nodes.
          const after = yield* allReady(c, 6, victim)
          expect(after.every((p) => nodeOf(p) !== victim)).toBe(true)

          // The node comes back: Ready again, the controller's taints are gone.
          c.resumeHeartbeats(victim)
          yield* c.eventually(
            Effect.flatMap(c.client.get(NodeRef, undefined, victim), (n: Json) =>
              check(readyOf(n)?.["status"] === "True" && (n.spec?.taints ?? []).length === 0, () => `node: ${JSON.stringify({ ready: readyOf(n), taints: n.spec?.taints })}`)
            ),
            { timeoutMs: 30_000 }
          )
        })
      ),
    90_000
  )

  it.live(
    "taints the silent nodes of a zone no faster than the eviction rate",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* TestCluster.make({
            nodes: 4,
            heartbeatMs: 100,
            scheduler: false,
            controllers: [NodeLifecycle.reconciler({ nodeMonitorGracePeriodMs: 1_000, nodeMonitorPeriodMs: 200, evictionRate: 0.25 })]
          })
          yield* c.idle
          const [a, b] = c.nodeNames()
          c.stopHeartbeats(a!)
          c.stopHeartbeats(b!)
          const addedAt = (name: string) =>
            Effect.flatMap(c.client.get(NodeRef, undefined, name), (n: Json) => {
              const t = (n.spec?.taints ?? []).find((x: Json) => x.key === NodeLifecycle.unreachableTaint && x.effect === "NoExecute")
              return t === undefined ? Effect.fail(new Error(`${name} not tainted`)) : Effect.succeed(Date.parse(t.timeAdded))
            })
          // Two of four nodes down is a Normal zone: both are tainted, one token (4 s) apart.
          const both = yield* c.eventually(Effect.all([addedAt(a!), addedAt(b!)]), { timeoutMs: 30_000 })
          expect(Math.abs(both[0] - both[1])).toBeGreaterThanOrEqual(3_000)
        })
      ),
    90_000
  )

  it.live(
    "when every node goes silent, they are marked Unknown but no pod is evicted (full disruption)",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* cluster()
          yield* c.client.create(deployment("web", 6))
          const ready = yield* allReady(c, 6)
          const uids = ready.map((p) => p.metadata.uid as string).sort()
          // Watch every pod event from now on: none may delete or terminate a pod.
          const violations: Array<string> = []
          const unsubscribe = c.informers.for(PodRef).subscribe((change) => {
            const p = change.object as Json
            if (change.type === "DELETED" || Metadata.isTerminating(p)) violations.push(`${change.type} ${p.metadata.name}`)
          })
          yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))

          for (const n of c.nodeNames()) c.stopHeartbeats(n)
          yield* c.eventually(
            Effect.flatMap(c.client.list(NodeRef), (l) => {
              const nodes = l["items"] as ReadonlyArray<Json>
              return check(nodes.every((n) => readyOf(n)?.["status"] === "Unknown"), () => nodes.map((n) => `${n.metadata.name}:${readyOf(n)?.["status"]}`).join(" "))
            }),
            { timeoutMs: 30_000 }
          )
          // Several toleration periods: the pods must all still be there, none terminating.
          yield* Effect.sleep(3 * toleranceMs)
          const nodes = (yield* c.client.list(NodeRef))["items"] as ReadonlyArray<Json>
          for (const n of nodes) {
            expect(readyOf(n)?.["status"]).toBe("Unknown")
            expect((n.spec?.taints ?? []).filter((t: Json) => t.effect === "NoExecute")).toEqual([])
            expect((n.spec?.taints ?? []).map((t: Json) => t.key)).toContain(NodeLifecycle.unreachableTaint)
          }
          const now = yield* podsOf(c)
          expect(now.map((p) => p.metadata.uid as string).sort()).toEqual(uids)
          expect(now.filter(Metadata.isTerminating)).toEqual([])
          expect(violations).toEqual([])
        })
      ),
    90_000
  )
})
