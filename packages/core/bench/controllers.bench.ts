// Controller throughput through the whole in-process pipeline (API, admission, watch caches,
// informers, Deployment + ReplicaSet controllers, scheduler, simulated kubelets): how long a
// Deployment of N replicas takes to be fully ready, and to roll over to a new image. One JSON
// line per result. FLEET_BENCH_REPLICAS (default 500) and FLEET_BENCH_NODES (default 20).
import { Effect } from "effect"
import { Controllers, Metadata, Pods } from "../src/index.js"
import * as TestCluster from "../src/testing/TestCluster.js"

const replicas = Number(process.env["FLEET_BENCH_REPLICAS"] ?? 500)
const nodes = Number(process.env["FLEET_BENCH_NODES"] ?? 20)
const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const DeploymentRef = { apiVersion: "apps/v1", kind: "Deployment" } as const

const deployment = (image: string) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "bench", namespace: "default" },
  spec: {
    replicas,
    selector: { matchLabels: { app: "bench" } },
    strategy: { rollingUpdate: { maxSurge: "25%", maxUnavailable: "25%" } },
    template: { metadata: { labels: { app: "bench" } }, spec: { containers: [{ name: "app", image }] } }
  }
})

const imageOf = (pod: Record<string, unknown>) => ((pod["spec"] as { containers: Array<{ image: string }> }).containers[0]!.image)

const line = (result: Record<string, unknown>) => console.log(JSON.stringify(result))

await Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const cluster = yield* TestCluster.make({
        nodes,
        heartbeatMs: 2_000,
        podStartupMs: 10,
        controllers: [Controllers.Deployment.reconciler(), Controllers.ReplicaSet.reconciler()]
      })
      const pods = cluster.informers.for(PodRef)
      const readyWith = (image: string) => () => {
        const live = pods.list("default").filter((p) => !Metadata.isTerminating(p))
        return live.length === replicas && live.every((p) => Pods.isReady(p) && imageOf(p) === image)
      }

      let t0 = performance.now()
      yield* cluster.client.create(deployment("app:1"))
      const up = yield* pods.waitUntil(readyWith("app:1"), 600_000)
      const upMs = performance.now() - t0
      line({ bench: "controllers.deployment.scale-up", replicas, nodes, ok: up, ms: Math.round(upMs), podsPerSecond: Math.round((replicas / upMs) * 1000) })

      t0 = performance.now()
      yield* cluster.client.patch(DeploymentRef, "default", "bench", "merge", { spec: { template: { spec: { containers: [{ name: "app", image: "app:2" }] } } } })
      const rolled = yield* pods.waitUntil(readyWith("app:2"), 600_000)
      const rollMs = performance.now() - t0
      line({ bench: "controllers.deployment.rolling-update", replicas, nodes, ok: rolled, ms: Math.round(rollMs), podsPerSecond: Math.round((replicas / rollMs) * 1000) })

      for (const m of cluster.metrics()) {
        if (m.reconciles === 0) continue
        line({ bench: "controllers.reconcile", controller: m.name, reconciles: m.reconciles, retries: m.retries, meanMs: Math.round((m.latency.sumMs / m.latency.count) * 100) / 100 })
      }
    })
  )
)
