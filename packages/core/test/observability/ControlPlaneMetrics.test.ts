// The control plane's series (work queues, scheduling attempts, leadership, store batches) from a
// real in-process cluster, recorded into a registry of the test's own.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as ControllerManager from "../../src/controllers/ControllerManager.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import * as Exposition from "../../src/observability/Exposition.js"
import * as MetricRegistry from "../../src/observability/MetricRegistry.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Store from "../../src/store/Store.js"
import { ApiClient } from "../../src/client/ApiClient.js"

const replicaSet = {
  apiVersion: "apps/v1",
  kind: "ReplicaSet",
  metadata: { name: "web", namespace: "default" },
  spec: { replicas: 2, selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "app", image: "nginx:1" }] } } }
}

describe("control-plane metrics", () => {
  it.live("work queues count adds and reconciles per controller; the scheduler counts attempts by result", () => {
    const registry = MetricRegistry.make()
    return Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [ReplicaSet.reconciler()] })
        yield* cluster.client.create(replicaSet)
        yield* cluster.eventually(
          Effect.gen(function* () {
            const text = Exposition.render(registry.snapshot())
            if (!/scheduler_schedule_attempts_total\{result="scheduled",profile="default-scheduler"\} 2/.test(text)) return yield* Effect.fail(new Error(text))
          })
        )
        // A pod that fits nowhere is an unschedulable attempt.
        yield* cluster.client.create({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "huge", namespace: "default" },
          spec: { containers: [{ name: "app", image: "nginx:1", resources: { requests: { cpu: "1000" } } }] }
        })
        const text = yield* cluster.eventually(
          Effect.gen(function* () {
            const text = Exposition.render(registry.snapshot())
            if (!text.includes('scheduler_schedule_attempts_total{result="unschedulable",profile="default-scheduler"}')) return yield* Effect.fail(new Error(text))
            return text
          })
        )
        expect(text).toMatch(/workqueue_adds_total\{name="replicaset"\} [1-9]/)
        expect(text).toMatch(/workqueue_work_duration_seconds_count\{name="replicaset"\} [1-9]/)
        expect(text).toContain('workqueue_depth{name="replicaset"}')
        expect(text).toMatch(/scheduler_scheduling_attempt_duration_seconds_count\{result="scheduled",profile="default-scheduler"\} 2/)
      })
    ).pipe(Effect.provideService(MetricRegistry.MetricRegistry, registry))
  })

  it.live("the controller manager reports leadership for the length of its term", () => {
    const registry = MetricRegistry.make()
    const status = () => Exposition.render(registry.snapshot()).match(/leader_election_master_status\{name="fleet-controller-manager"\} (\d)/)?.[1]
    return Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 0, scheduler: false })
        const manager = yield* Effect.fork(
          ControllerManager.run({ reconcilers: [ReplicaSet.reconciler()], component: "fleet-controller-manager" }).pipe(
            Effect.provideService(ApiClient, cluster.client),
            Effect.provideService(Store.Store, Store.makeMemory())
          )
        )
        yield* cluster.eventually(Effect.suspend(() => (status() === "1" ? Effect.void : Effect.fail(new Error(`status ${status()}`)))))
        yield* Fiber.interrupt(manager)
        expect(status()).toBe("0")
      })
    ).pipe(Effect.provideService(MetricRegistry.MetricRegistry, registry))
  })
})
