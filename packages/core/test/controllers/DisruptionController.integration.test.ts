/**
 * The disruption controller through the real API: a budget's status follows its pods and their
 * Deployment's scale.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Deployment from "../../src/controllers/Deployment.js"
import * as Disruption from "../../src/controllers/DisruptionController.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const ns = "default"
const PdbRef: Client.ResourceRef = { apiVersion: "policy/v1", kind: "PodDisruptionBudget" }
const DeployRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "Deployment" }

const check = (ok: boolean, why: () => string) => (ok ? Effect.void : Effect.fail(new Error(why())))

describe("Disruption (integration)", () => {
  it.live(
    "a budget's status follows its pods' readiness and the Deployment's scale",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* TestCluster.make({ nodes: 2, podStartupMs: 20, controllers: [Deployment.reconciler(), ReplicaSet.reconciler(), Disruption.reconciler()] })
          yield* c.client.create({
            apiVersion: "policy/v1",
            kind: "PodDisruptionBudget",
            metadata: { name: "web", namespace: ns },
            spec: { maxUnavailable: "25%", selector: { matchLabels: { app: "web" } } }
          })
          const status = (want: Json) =>
            c.eventually(
              Effect.flatMap(c.client.get(PdbRef, ns, "web"), (p: Json) =>
                check(
                  (p.status?.conditions ?? []).length > 0 && Object.entries(want).every(([k, v]) => JSON.stringify(p.status?.[k]) === JSON.stringify(v)),
                  () => JSON.stringify(p.status)
                ).pipe(Effect.as(p))
              ),
              { timeoutMs: 30_000 }
            )
          // No pods yet: nothing expected, nothing allowed.
          const empty = yield* status({ expectedPods: 0, currentHealthy: 0, disruptionsAllowed: 0 })
          expect(empty.status.conditions[0]).toMatchObject({ type: "DisruptionAllowed", status: "False", reason: "InsufficientPods" })

          yield* c.client.create({
            apiVersion: "apps/v1",
            kind: "Deployment",
            metadata: { name: "web", namespace: ns },
            spec: { replicas: 4, selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "app", image: "web:1" }] } } }
          })
          // 25% of 4 rounds up to 1 unavailable: 3 must stay healthy.
          const full = yield* status({ expectedPods: 4, currentHealthy: 4, desiredHealthy: 3, disruptionsAllowed: 1 })
          expect(full.status.conditions[0]).toMatchObject({ status: "True", reason: "SufficientPods" })

          // One pod turns unready: no disruption left.
          const pods = yield* TestCluster.pods(c, ns, "app=web")
          c.setReady(ns, (pods[0] as Json).metadata.name, false)
          yield* status({ currentHealthy: 3, disruptionsAllowed: 0 })

          // Scale to 8: 25% → 2 unavailable, 6 desired.
          const d = (yield* c.client.get(DeployRef, ns, "web")) as Json
          yield* c.client.update({ ...d, spec: { ...d.spec, replicas: 8 } })
          yield* status({ expectedPods: 8, currentHealthy: 7, desiredHealthy: 6, disruptionsAllowed: 1 })
        })
      ),
    90_000
  )
})
