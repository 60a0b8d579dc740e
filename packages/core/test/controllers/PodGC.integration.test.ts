import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as PodGC from "../../src/controllers/PodGC.js"
import * as Pods from "../../src/object/Pods.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, unknown>

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const NodeRef = { apiVersion: "v1", kind: "Node" } as const

const pod = (name: string, spec: Json = {}, annotations: Record<string, string> = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", annotations },
  spec: { containers: [{ name: "app", image: "nginx:1" }], ...spec }
})

const names = (pods: ReadonlyArray<Json>) => pods.map((p) => String(Metadata.metadataOf(p)["name"])).sort()

/** Wait until the wall clock enters the next second (creation timestamps have second precision). */
const nextSecond = (cluster: TestCluster.TestCluster) => {
  const start = Math.floor(Date.now() / 1000)
  return cluster.eventually(Effect.suspend(() => (Math.floor(Date.now() / 1000) > start ? Effect.void : Effect.fail(new Error("same second")))), { intervalMs: 20 })
}

describe("PodGC through the API", () => {
  it.live("force-deletes the pods of a node that is gone, marking them Failed first", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2, controllers: [PodGC.reconciler({ periodMs: 100, quarantineMs: 200 })] })
        const last = new Map<string, Json>()
        cluster.informers.for(PodRef).subscribe((c) => {
          if (c.type !== "DELETED") last.set(String(Metadata.metadataOf(c.object)["name"]), c.object)
        })
        yield* cluster.client.create(pod("on-1a", { nodeName: "node-1" }))
        yield* cluster.client.create(pod("on-1b", { nodeName: "node-1" }))
        yield* cluster.client.create(pod("on-0", { nodeName: "node-0" }))
        yield* cluster.eventually(Effect.flatMap(TestCluster.pods(cluster, "default"), (ps) => (ps.every(Pods.isReady) ? Effect.void : Effect.fail(new Error("not ready")))))
        yield* cluster.removeNode("node-1")
        yield* cluster.eventually(
          Effect.flatMap(TestCluster.pods(cluster, "default"), (ps) => (names(ps).join() === "on-0" ? Effect.void : Effect.fail(new Error(names(ps).join())))),
          { timeoutMs: 30_000 }
        )
        for (const name of ["on-1a", "on-1b"]) {
          const seen = last.get(name)!
          expect(Pods.phase(seen)).toBe("Failed")
          expect(Pods.condition(seen, "DisruptionTarget")).toMatchObject({ status: "True", reason: "DeletionByPodGC", message: "PodGC: node no longer exists" })
        }
        expect(Pods.phase(yield* cluster.client.get(PodRef, "default", "on-0"))).toBe("Running")
      })
    ),
    60_000
  )

  it.live("deletes terminated pods over the threshold, oldest first", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [PodGC.reconciler({ periodMs: 100, terminatedPodThreshold: 2 })] })
        const deleted: Array<string> = []
        cluster.informers.for(PodRef).subscribe((c) => {
          if (c.type === "DELETED") deleted.push(String(Metadata.metadataOf(c.object)["name"]))
        })
        const exits = { "sim.fleet.koder.dev/exit-code": "0" }
        // Names out of age order, so only creation time can give the order.
        const byAge = ["c-oldest", "a-second", "d-third", "b-newest"]
        for (const name of byAge) {
          yield* cluster.client.create(pod(name, { restartPolicy: "Never" }, exits))
          yield* nextSecond(cluster)
        }
        yield* cluster.client.create(pod("running"))
        yield* cluster.eventually(
          Effect.flatMap(TestCluster.pods(cluster, "default"), (ps) =>
            names(ps).join() === "b-newest,d-third,running" ? Effect.void : Effect.fail(new Error(names(ps).join()))
          ),
          { timeoutMs: 30_000 }
        )
        expect(deleted).toEqual(["c-oldest", "a-second"])
      })
    ),
    60_000
  )

  it.live("force-deletes terminating pods on a NotReady node with the out-of-service taint", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2, controllers: [PodGC.reconciler({ periodMs: 100 })] })
        yield* cluster.client.create(pod("stuck", { nodeName: "node-1", terminationGracePeriodSeconds: 600 }))
        yield* cluster.eventually(Effect.flatMap(cluster.client.get(PodRef, "default", "stuck"), (p) => (Pods.isReady(p) ? Effect.void : Effect.fail(new Error("not ready")))))
        // The node shuts down: its agent goes silent, it is NotReady, and the operator taints it.
        cluster.stopHeartbeats("node-1")
        yield* cluster.client.patch(NodeRef, undefined, "node-1", "merge", { status: { conditions: [{ type: "Ready", status: "Unknown", reason: "NodeStatusUnknown" }] } }, "status")
        yield* cluster.client.delete(PodRef, "default", "stuck")
        yield* cluster.idle
        const terminating = yield* cluster.client.get(PodRef, "default", "stuck")
        expect(Metadata.isTerminating(terminating)).toBe(true)
        yield* cluster.client.patch(NodeRef, undefined, "node-1", "merge", { spec: { taints: [{ key: PodGC.outOfServiceTaint, value: "nodeshutdown", effect: "NoExecute" }] } })
        yield* cluster.eventually(
          Effect.flatMap(TestCluster.find(cluster, PodRef, "default", "stuck"), (p) => (p === undefined ? Effect.void : Effect.fail(new Error("still there")))),
          { timeoutMs: 30_000 }
        )
      })
    ),
    60_000
  )
})
