/**
 * The resource quota controller through the real API: `status.used` follows creates and deletes,
 * including deletions admission never sees (an object removed when its last finalizer goes).
 * The test cluster runs admission without its periodic recount, so only this controller recounts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as ResourceQuota from "../../src/controllers/ResourceQuotaController.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const ns = "default"
const QuotaRef: Client.ResourceRef = { apiVersion: "v1", kind: "ResourceQuota" }
const ConfigMapRef: Client.ResourceRef = { apiVersion: "v1", kind: "ConfigMap" }
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }

const check = (ok: boolean, why: () => string) => (ok ? Effect.void : Effect.fail(new Error(why())))

describe("ResourceQuota (integration)", () => {
  it.live(
    "status.used follows creates and deletes, and hard follows the spec",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* TestCluster.make({ nodes: 1, podStartupMs: 10, controllers: [ResourceQuota.reconciler()] })
          const used = (want: Record<string, string>) =>
            c.eventually(
              Effect.flatMap(c.client.get(QuotaRef, ns, "q"), (q: Json) =>
                check(Object.entries(want).every(([k, v]) => q.status?.used?.[k] === v), () => JSON.stringify(q.status)).pipe(Effect.as(q))
              ),
              { timeoutMs: 30_000 }
            )
          yield* c.client.create({ apiVersion: "v1", kind: "ResourceQuota", metadata: { name: "q", namespace: ns }, spec: { hard: { "count/configmaps": "5", pods: "4", "requests.cpu": "2" } } })
          yield* used({ "count/configmaps": "0", pods: "0", "requests.cpu": "0" })

          yield* c.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "held", namespace: ns, finalizers: ["test.fleet.koder.dev/hold"] } })
          yield* c.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "plain", namespace: ns } })
          const pod = (name: string) => ({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: ns }, spec: { containers: [{ name: "c", image: "x", resources: { requests: { cpu: "500m" }, limits: { cpu: "500m" } } }] } })
          yield* c.client.create(pod("p1"))
          yield* c.client.create(pod("p2"))
          yield* used({ "count/configmaps": "2", pods: "2", "requests.cpu": "1" })

          // A pod deleted (gracefully, confirmed by its node) and a configmap that goes when its
          // finalizer is removed — an update admission does not see as a delete.
          yield* c.client.delete(PodRef, ns, "p1")
          yield* c.client.delete(ConfigMapRef, ns, "held")
          const held = (yield* c.client.get(ConfigMapRef, ns, "held")) as Json
          yield* c.client.update({ ...held, metadata: { ...held.metadata, finalizers: [] } })
          yield* c.eventually(Effect.flip(c.client.get(ConfigMapRef, ns, "held")))
          yield* used({ "count/configmaps": "1", pods: "1", "requests.cpu": "500m" })

          // A new cap is counted at once, and status.hard follows spec.hard.
          const q = (yield* c.client.get(QuotaRef, ns, "q")) as Json
          yield* c.client.update({ ...q, spec: { hard: { ...q.spec.hard, secrets: "3" } } })
          const after = yield* used({ secrets: "0", "count/configmaps": "1" })
          expect(after.status.hard).toEqual({ "count/configmaps": "5", pods: "4", "requests.cpu": "2", secrets: "3" })
        })
      ),
    60_000
  )
})
