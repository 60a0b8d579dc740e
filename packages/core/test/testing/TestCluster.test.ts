import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Pods from "../../src/object/Pods.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const NodeRef = { apiVersion: "v1", kind: "Node" } as const

const pod = (name: string, extra: Record<string, unknown> = {}, annotations: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", annotations },
  spec: { containers: [{ name: "app", image: "nginx:1" }], ...extra }
})

describe("TestCluster", () => {
  it.live("schedules a pod onto a node and reports it Running and Ready", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2 })
        const nodes = yield* cluster.client.list(NodeRef)
        expect((nodes["items"] as Array<unknown>).length).toBe(2)
        yield* cluster.client.create(pod("web"))
        const running = yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(PodRef, "default", "web"), (p) =>
            Pods.isReady(p) ? Effect.succeed(p) : Effect.fail(new Error(`not ready: ${JSON.stringify(p["status"])}`))
          )
        )
        expect(Pods.phase(running)).toBe("Running")
        expect(["node-0", "node-1"]).toContain((running["spec"] as Record<string, unknown>)["nodeName"])
        expect(Pods.condition(running, "PodScheduled")?.["status"]).toBe("True")
        expect(String((running["status"] as Record<string, unknown>)["podIP"])).toMatch(/^10\.244\./)
      })
    )
  )

  it.live("runs a pod to completion and fails one that exits non-zero", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1 })
        yield* cluster.client.create(pod("ok", { restartPolicy: "Never" }, { "sim.fleet.koder.dev/exit-code": "0", "sim.fleet.koder.dev/run-ms": "10" }))
        yield* cluster.client.create(pod("bad", { restartPolicy: "Never" }, { "sim.fleet.koder.dev/exit-code": "1" }))
        const phaseOf = (name: string, want: string) =>
          cluster.eventually(Effect.flatMap(cluster.client.get(PodRef, "default", name), (p) => (Pods.phase(p) === want ? Effect.void : Effect.fail(new Error(Pods.phase(p))))))
        yield* phaseOf("ok", "Succeeded")
        yield* phaseOf("bad", "Failed")
      })
    )
  )

  it.live("restarts a crashed container, and deletes pods gracefully through the node", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1 })
        yield* cluster.client.create(pod("web"))
        yield* cluster.eventually(Effect.flatMap(cluster.client.get(PodRef, "default", "web"), (p) => (Pods.isReady(p) ? Effect.void : Effect.fail(new Error("not ready")))))
        cluster.crashContainer("default", "web")
        yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(PodRef, "default", "web"), (p) => {
            const statuses = ((p["status"] as Record<string, unknown>)["containerStatuses"] ?? []) as Array<Record<string, unknown>>
            return statuses[0]?.["restartCount"] === 1 ? Effect.void : Effect.fail(new Error("no restart"))
          })
        )
        cluster.setReady("default", "web", false)
        yield* cluster.eventually(Effect.flatMap(cluster.client.get(PodRef, "default", "web"), (p) => (!Pods.isReady(p) ? Effect.void : Effect.fail(new Error("still ready")))))
        yield* cluster.client.delete(PodRef, "default", "web")
        yield* cluster.eventually(Effect.flatMap(Effect.flip(cluster.client.get(PodRef, "default", "web")), (e) => (e.status.code === 404 ? Effect.void : Effect.fail(new Error("still there")))))
      })
    )
  )

  it.live("a node whose heartbeats stop leaves its pods alone and no longer renews its lease", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, heartbeatMs: 50 })
        const LeaseRef = { apiVersion: "coordination.k8s.io/v1", kind: "Lease" }
        const renew = () => Effect.map(cluster.client.get(LeaseRef, "kube-node-lease", "node-0"), (l) => String((l["spec"] as Record<string, unknown>)["renewTime"]))
        const first = yield* cluster.eventually(renew())
        yield* cluster.eventually(Effect.flatMap(renew(), (t) => (t !== first ? Effect.void : Effect.fail(new Error("not renewed")))))
        cluster.stopHeartbeats("node-0")
        yield* Effect.sleep(100)
        const stopped = yield* renew()
        yield* Effect.sleep(300)
        expect(yield* renew()).toBe(stopped)
        yield* cluster.client.create(pod("late"))
        yield* Effect.sleep(300)
        const late = yield* cluster.client.get(PodRef, "default", "late")
        expect(Pods.phase(late)).toBe("Pending")
      })
    )
  )
})
