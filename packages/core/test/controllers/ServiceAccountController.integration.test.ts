import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ServiceAccount from "../../src/controllers/ServiceAccountController.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

const SA = { apiVersion: "v1", kind: "ServiceAccount" } as const

const present = (cluster: TestCluster.TestCluster, namespace: string, name: string) =>
  cluster.eventually(Effect.flatMap(TestCluster.find(cluster, SA, namespace, name), (o) => (o !== undefined ? Effect.succeed(o) : Effect.fail(new Error(`${namespace}/${name} missing`)))))

describe("ServiceAccount controller through the API", () => {
  it.live("every active namespace has a default ServiceAccount, re-created when deleted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, controllers: [ServiceAccount.reconciler()] })
        // The namespaces the cluster started with, and a new one.
        yield* present(cluster, "default", "default")
        yield* present(cluster, "kube-system", "default")
        yield* cluster.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "team" } })
        const first = yield* present(cluster, "team", "default")
        yield* cluster.client.delete(SA, "team", "default")
        const again = yield* cluster.eventually(
          Effect.flatMap(present(cluster, "team", "default"), (o) => (Metadata.metadataOf(o)["uid"] !== Metadata.metadataOf(first)["uid"] ? Effect.succeed(o) : Effect.fail(new Error("not re-created"))))
        )
        expect(Metadata.metadataOf(again)["name"]).toBe("default")
        // Other accounts are not its business.
        yield* cluster.client.create({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "robot", namespace: "team" } })
        yield* cluster.client.delete(SA, "team", "robot")
        yield* cluster.idle
        expect(yield* TestCluster.find(cluster, SA, "team", "robot")).toBeUndefined()
      })
    ),
    60_000
  )
})
