/**
 * Testing a service against Fleet without a cluster: `TestCluster` runs the real API, the
 * controllers you pick, the scheduler and three simulated nodes in this process. This test is
 * what a Koder service's own test would look like: create a Deployment, wait for it to be ready,
 * roll out a new image, and make sure the rollout completes — then fail a node and watch the
 * pods move.
 */
import { describe, expect, it } from "@effect/vitest"
import { Controllers, Metadata, Pods, type Client } from "@koder/fleet-core"
import { TestCluster } from "@koder/fleet-core/testing"
import { Effect } from "effect"

const DeploymentRef = { apiVersion: "apps/v1", kind: "Deployment" } as const

const deployment = (image: string) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default" },
  spec: {
    replicas: 3,
    selector: { matchLabels: { app: "web" } },
    template: {
      metadata: { labels: { app: "web" } },
      spec: { containers: [{ name: "web", image }] }
    }
  }
})

/** Succeeds once `web` has 3 ready pods of `image` and nothing else. */
const rolledOut = (cluster: TestCluster.TestCluster, image: string) =>
  Effect.gen(function* () {
    const pods = (yield* TestCluster.pods(cluster, "default", "app=web")).filter((p: Client.JsonObject) => !Metadata.isTerminating(p))
    const images = pods.map((p) => ((p["spec"] as { containers: Array<{ image: string }> }).containers[0]!.image))
    if (pods.length !== 3 || !pods.every(Pods.isReady) || images.some((i) => i !== image)) {
      return yield* Effect.fail(new Error(`want 3 ready ${image} pods, have ${images.join(", ")}`))
    }
    return pods
  })

describe("a service tested against an in-process Fleet cluster", () => {
  it.live("rolls a Deployment out and over to a new image", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({
          nodes: 3,
          controllers: [Controllers.Deployment.reconciler(), Controllers.ReplicaSet.reconciler()]
        })
        yield* cluster.client.create(deployment("registry.example/web:1"))
        yield* cluster.eventually(rolledOut(cluster, "registry.example/web:1"))

        yield* cluster.client.patch(DeploymentRef, "default", "web", "merge", {
          spec: { template: { spec: { containers: [{ name: "web", image: "registry.example/web:2" }] } } }
        })
        const pods = yield* cluster.eventually(rolledOut(cluster, "registry.example/web:2"))
        // Every replica runs on one of the cluster's (simulated) nodes.
        for (const p of pods) expect(cluster.nodeNames()).toContain((p["spec"] as { nodeName: string }).nodeName)
      })
    )
  )
})
