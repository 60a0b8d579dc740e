import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as DaemonSet from "../../src/controllers/DaemonSet.js"
import * as History from "../../src/controllers/History.js"
import * as Pods from "../../src/object/Pods.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, unknown>

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const NodeRef = { apiVersion: "v1", kind: "Node" } as const
const DsRef = DaemonSet.DaemonSetRef

const agent = (templateSpec: Json = {}, spec: Json = {}, image = "agent:1"): Json => ({
  apiVersion: "apps/v1",
  kind: "DaemonSet",
  metadata: { name: "agent", namespace: "kube-system" },
  spec: {
    selector: { matchLabels: { app: "agent" } },
    template: { metadata: { labels: { app: "agent" } }, spec: { containers: [{ name: "agent", image }], ...templateSpec } },
    ...spec
  }
})

const fail = (why: string) => Effect.fail(new Error(why))
const nodeOf = (p: Json) => String((p["spec"] as Json)["nodeName"] ?? "")
const imageOf = (p: Json) => String(((p["spec"] as any).containers[0] as Json)["image"])

/** The DaemonSet's live pods by node, as the API lists them. */
const podsByNode = (cluster: TestCluster.TestCluster) =>
  Effect.map(TestCluster.pods(cluster, "kube-system", "app=agent"), (ps) => {
    const live = ps.filter((p) => !Metadata.isTerminating(p))
    return new Map(live.map((p) => [nodeOf(p), p] as const))
  })

/** Wait until exactly `nodes` run one Ready pod each (at `image`), and the status agrees. */
const runningOn = (cluster: TestCluster.TestCluster, nodes: ReadonlyArray<string>, image = "agent:1") =>
  cluster.eventually(
    Effect.gen(function* () {
      const all = yield* TestCluster.pods(cluster, "kube-system", "app=agent")
      const byNode = new Map(all.map((p) => [nodeOf(p), p] as const))
      const where = [...byNode.keys()].sort()
      if (all.length !== nodes.length || where.join() !== [...nodes].sort().join()) return yield* fail(`pods on ${all.map(nodeOf).join()}`)
      if (!all.every((p) => Pods.isReady(p) && !Metadata.isTerminating(p) && imageOf(p) === image)) return yield* fail("not all ready and updated")
      const status = ((yield* cluster.client.get(DsRef, "kube-system", "agent"))["status"] ?? {}) as any
      if (status.desiredNumberScheduled !== nodes.length || status.numberReady !== nodes.length || status.updatedNumberScheduled !== nodes.length) {
        return yield* fail(`status ${JSON.stringify(status)}`)
      }
      return { pods: byNode, status }
    }),
    { timeoutMs: 25_000 }
  )

describe("DaemonSet through the API", () => {
  it.live("one pod per eligible node: taints, node join, label removal, node removal", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({
          nodes: [
            { name: "node-0", labels: { role: "agent" } },
            { name: "node-1", labels: { role: "agent" } },
            { name: "node-2", labels: { role: "agent" }, taints: [{ key: "dedicated", value: "db", effect: "NoSchedule" }] },
            { name: "node-3" }
          ],
          controllers: [DaemonSet.reconciler()],
          podStartupMs: 10
        })
        yield* cluster.client.create(agent({ nodeSelector: { role: "agent" } }))
        const first = yield* runningOn(cluster, ["node-0", "node-1"])
        // The tainted node (no toleration) and the unlabelled one get none.
        expect(first.status).toMatchObject({ desiredNumberScheduled: 2, currentNumberScheduled: 2, numberMisscheduled: 0, numberAvailable: 2, numberUnavailable: 0, observedGeneration: 1 })
        // The scheduler bound each pod, following the node pin the controller set, and the
        // daemon tolerations are there.
        for (const [node, pod] of first.pods) {
          const spec = pod["spec"] as any
          expect(spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms).toEqual([
            { matchFields: [{ key: "metadata.name", operator: "In", values: [node] }] }
          ])
          expect(spec.tolerations.map((t: any) => t.key)).toContain("node.kubernetes.io/unreachable")
          expect((Metadata.metadataOf(pod)["labels"] as any)[History.HashLabel]).toBeTruthy()
          expect((Metadata.metadataOf(pod)["labels"] as any)[DaemonSet.TemplateGenerationLabel]).toBe("1")
        }

        // A node joining gets a pod.
        yield* cluster.addNode({ name: "node-4", labels: { role: "agent" } })
        yield* runningOn(cluster, ["node-0", "node-1", "node-4"])

        // A node losing the selected label loses its pod.
        yield* cluster.client.patch(NodeRef, undefined, "node-1", "merge", { metadata: { labels: { role: null } } })
        yield* runningOn(cluster, ["node-0", "node-4"])

        // Tolerating the taint lets the DaemonSet onto node-2 (a template change: a rollout too).
        yield* cluster.client.patch(DsRef, "kube-system", "agent", "merge", {
          spec: { template: { spec: { tolerations: [{ key: "dedicated", operator: "Equal", value: "db", effect: "NoSchedule" }] } } }
        })
        yield* runningOn(cluster, ["node-0", "node-2", "node-4"])

        // A node that leaves takes its pod with it.
        yield* cluster.removeNode("node-4")
        const last = yield* runningOn(cluster, ["node-0", "node-2"])
        expect(last.status.observedGeneration).toBe(2)
      })
    ),
  120_000
  )

  it.live("a rolling update replaces every pod, never more than maxUnavailable 1 down at once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const nodes = ["node-0", "node-1", "node-2", "node-3"]
        const cluster = yield* TestCluster.make({ nodes: nodes.length, controllers: [DaemonSet.reconciler()], podStartupMs: 10 })
        yield* cluster.client.create(agent({}, { updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } } }))
        const before = yield* runningOn(cluster, nodes)
        const oldUids = new Set([...before.pods.values()].map((p) => String(Metadata.metadataOf(p)["uid"])))

        // At every watch event, count the nodes with a Ready daemon pod not being deleted.
        const informer = cluster.informers.for(PodRef)
        let fewest = nodes.length
        let events = 0
        informer.subscribe(() => {
          events++
          const up = new Set(
            informer
              .list("kube-system")
              .filter((p) => (Metadata.metadataOf(p)["labels"] as any)?.app === "agent" && Pods.isReady(p) && !Metadata.isTerminating(p))
              .map(nodeOf)
          )
          fewest = Math.min(fewest, up.size)
        })

        yield* cluster.client.patch(DsRef, "kube-system", "agent", "merge", {
          spec: { template: { spec: { containers: [{ name: "agent", image: "agent:2" }] } } }
        })
        const after = yield* runningOn(cluster, nodes, "agent:2")
        expect(fewest).toBe(nodes.length - 1)
        expect(events).toBeGreaterThan(nodes.length * 2)
        for (const pod of after.pods.values()) expect(oldUids.has(String(Metadata.metadataOf(pod)["uid"]))).toBe(false)
        expect(after.status).toMatchObject({ numberAvailable: 4, numberUnavailable: 0, updatedNumberScheduled: 4 })

        // Two revisions in history; the pods carry the newer one's hash.
        const revisions = (yield* cluster.client.listAll(History.ControllerRevisionRef, { namespace: "kube-system" })).items
        expect(revisions.map((r) => r["revision"]).sort()).toEqual([1, 2])
        const newest = revisions.find((r) => r["revision"] === 2)!
        for (const pod of after.pods.values()) expect((Metadata.metadataOf(pod)["labels"] as any)[History.HashLabel]).toBe(History.hashOf(newest))

        // Rolling back to the first template renumbers its revision instead of making a third.
        yield* cluster.client.patch(DsRef, "kube-system", "agent", "merge", {
          spec: { template: { spec: { containers: [{ name: "agent", image: "agent:1" }] } } }
        })
        yield* runningOn(cluster, nodes, "agent:1")
        const rolledBack = (yield* cluster.client.listAll(History.ControllerRevisionRef, { namespace: "kube-system" })).items
        expect(rolledBack.map((r) => r["revision"]).sort()).toEqual([2, 3])
      })
    ),
  120_000
  )

  it.live("a failed daemon pod is deleted and recreated", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [DaemonSet.reconciler({ failedPodBackoff: { initialMs: 50, maxMs: 1000 } })], podStartupMs: 10 })
        yield* cluster.client.create(agent())
        const first = yield* runningOn(cluster, ["node-0"])
        const pod = first.pods.get("node-0")!
        const uid = String(Metadata.metadataOf(pod)["uid"])
        // A kubelet rejecting a pod reports it Failed.
        yield* cluster.client.patch(PodRef, "kube-system", String(Metadata.metadataOf(pod)["name"]), "merge", { status: { phase: "Failed", reason: "NodeAffinity" } }, "status")
        yield* cluster.eventually(
          Effect.flatMap(podsByNode(cluster), (m) => {
            const now = m.get("node-0")
            return now !== undefined && String(Metadata.metadataOf(now)["uid"]) !== uid ? Effect.void : fail("not replaced")
          }),
          { timeoutMs: 25_000 }
        )
        yield* runningOn(cluster, ["node-0"])
        const events = (yield* cluster.client.listAll({ apiVersion: "v1", kind: "Event" }, { namespace: "kube-system" })).items
        expect(events.map((e) => e["reason"])).toContain("FailedDaemonPod")
      })
    ),
  120_000
  )
})
