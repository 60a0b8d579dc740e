/**
 * The HorizontalPodAutoscaler through the real API with the Deployment and ReplicaSet
 * controllers, the scheduler and simulated nodes. Usage is fed into the cluster's memory
 * MetricsSource the way agents will report it (per node, every 100 ms, for the pods running
 * there); the controller reads it back through `metrics.k8s.io` like upstream's metrics client.
 * Short sync period (200 ms) and scale-down window (2 s) keep the test quick.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Deployment from "../../src/controllers/Deployment.js"
import * as Hpa from "../../src/controllers/HorizontalPodAutoscaler.js"
import * as Pods from "../../src/object/Pods.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, any>

const ns = "default"
const DeployRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "Deployment" }
const HpaRef = Hpa.HorizontalPodAutoscalerRef
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const EventRef: Client.ResourceRef = { apiVersion: "v1", kind: "Event" }

const deployment = (name: string, replicas: number): Json => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: ns },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: "img", resources: { requests: { cpu: "100m", memory: "64Mi" } } }] } }
  }
})

const autoscaler = (name: string, spec: Json = {}): Json => ({
  apiVersion: "autoscaling/v2",
  kind: "HorizontalPodAutoscaler",
  metadata: { name, namespace: ns },
  spec: {
    scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
    minReplicas: 1,
    maxReplicas: 5,
    metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } }],
    behavior: { scaleDown: { stabilizationWindowSeconds: 2 } },
    ...spec
  }
})

const cluster = () =>
  TestCluster.make({
    nodes: 3,
    podStartupMs: 20,
    controllers: [
      Deployment.reconciler(),
      ReplicaSet.reconciler(),
      // Samples of pods that just became Ready count at once (upstream waits up to 5 min).
      Hpa.reconciler({ syncPeriodMs: 200, cpuInitializationPeriodMs: 0 })
    ]
  })

const check = (ok: boolean, why: () => string) => (ok ? Effect.void : Effect.fail(new Error(why())))

/**
 * Report, every 100 ms and per node, `usage()` millicores for every running pod of `app`: what
 * the agents will do with the box's stats.
 */
const feed = (c: TestCluster.TestCluster, app: string, usage: () => number) =>
  Effect.forever(
    Effect.gen(function* () {
      const pods = c.informers.for(PodRef).list(ns).filter((p) => (Metadata.metadataOf(p)["labels"] as Record<string, string> | undefined)?.["app"] === app && Pods.phase(p) === "Running")
      for (const node of c.nodeNames()) {
        yield* c.metricsSource.record(node, {
          windowMs: 100,
          node: { usageNanoCores: 0, workingSetBytes: 0 },
          pods: pods
            .filter((p) => (p["spec"] as Json)["nodeName"] === node)
            .map((p) => ({ namespace: ns, name: String(Metadata.metadataOf(p)["name"]), containers: [{ name: "app", usage: { usageNanoCores: usage() * 1e6, workingSetBytes: 32 * 1024 * 1024 } }] }))
        })
      }
      yield* Effect.sleep(100)
    })
  )

const specReplicas = (c: TestCluster.TestCluster, name: string) => Effect.map(c.client.get(DeployRef, ns, name), (d) => Number((d as Json)["spec"]["replicas"]))

describe("HorizontalPodAutoscaler (integration)", () => {
  it.live(
    "scales a busy Deployment up to maxReplicas, then down after the stabilization window",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* cluster()
          // Follow every size the Deployment is given.
          const sizes: Array<{ readonly replicas: number; readonly at: number }> = []
          c.informers.for(DeployRef).subscribe((change) => {
            if (Metadata.metadataOf(change.object)["name"] !== "web") return
            const replicas = Number((change.object as Json)["spec"]["replicas"])
            if (sizes.at(-1)?.replicas !== replicas) sizes.push({ replicas, at: Date.now() })
          })
          yield* c.client.create(deployment("web", 2))
          let usage = 200 // millicores per pod: 200% of the request, 4× the 50% target
          yield* Effect.forkScoped(feed(c, "web", () => usage))
          yield* c.eventually(Effect.flatMap(TestCluster.pods(c, ns, "app=web"), (pods) => check(pods.filter(Pods.isReady).length === 2, () => "2 ready pods")))

          // The metrics API answers the in-process client.
          const metrics = yield* c.eventually(
            Effect.flatMap(c.client.list(Hpa.PodMetricsRef, { namespace: ns, labelSelector: "app=web" }), (l) =>
              (l["items"] as Array<Json>).length === 2 ? Effect.succeed(l["items"] as Array<Json>) : Effect.fail(new Error("2 PodMetrics"))
            )
          )
          expect(metrics[0]).toMatchObject({ kind: "PodMetrics", containers: [{ name: "app", usage: { cpu: "200m", memory: "32Mi" } }] })

          const created = yield* c.client.create(autoscaler("web"))
          // Defaults the API filled in: scale-up rules, and the scale-down rules around the given window.
          expect((created as Json)["spec"]["behavior"]["scaleUp"]["policies"]).toEqual([
            { type: "Pods", value: 4, periodSeconds: 15 },
            { type: "Percent", value: 100, periodSeconds: 15 }
          ])

          // Up: 2 → min(2 + 4, 2 × 2, maxReplicas 5) = 5 in one step.
          const up = yield* c.eventually(
            Effect.gen(function* () {
              const hpa = (yield* c.client.get(HpaRef, ns, "web")) as Json
              const s = hpa["status"] ?? {}
              yield* check(s.currentReplicas === 5 && s.desiredReplicas === 5, () => `status ${JSON.stringify(s)}`)
              const pods = (yield* TestCluster.pods(c, ns, "app=web")).filter((p) => Pods.isReady(p) && !Metadata.isTerminating(p))
              yield* check(pods.length === 5, () => `${pods.length} ready pods`)
              return hpa
            }),
            { timeoutMs: 20_000 }
          )
          expect(yield* specReplicas(c, "web")).toBe(5)
          const condition = (hpa: Json, type: string) => (hpa["status"]["conditions"] as Array<Json>).find((x) => x["type"] === type)
          expect(condition(up, "ScalingActive")).toMatchObject({ status: "True", reason: "ValidMetricFound" })
          const limited = yield* c.eventually(
            Effect.flatMap(c.client.get(HpaRef, ns, "web"), (h) => {
              const cond = condition(h as Json, "ScalingLimited")
              return cond?.["reason"] === "TooManyReplicas" ? Effect.succeed(cond) : Effect.fail(new Error(JSON.stringify(cond)))
            })
          )
          expect(limited).toMatchObject({ status: "True", message: "the desired replica count is more than the maximum replica count" })
          expect(up["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"]).toBe(200)
          const events = (yield* c.client.list(EventRef, { namespace: ns, fieldSelector: "involvedObject.name=web" }))["items"] as Array<Json>
          expect(events.filter((e) => e["reason"] === "SuccessfulRescale").map((e) => e["message"])).toEqual([
            "New size: 5; reason: cpu resource utilization (percentage of request) above target"
          ])

          // `kubectl get hpa`.
          const table = yield* Effect.promise(() =>
            c.fetch(`http://fleet.test/apis/autoscaling/v2/namespaces/${ns}/horizontalpodautoscalers`, {
              headers: { authorization: `Bearer ${c.adminToken}`, accept: "application/json;as=Table;v=v1;g=meta.k8s.io" }
            }).then((r) => r.json() as Promise<Json>)
          )
          expect(table["rows"][0]["cells"].slice(0, 6)).toEqual(["web", "Deployment/web", "cpu: 200%/50%", "1", 5, 5])

          // Down: usage drops to 10% of the request; the 2 s window holds the size, then 5 → 1.
          usage = 10
          const dropped = Date.now()
          yield* c.eventually(
            Effect.flatMap(specReplicas(c, "web"), (n) => check(n === 1, () => `spec.replicas ${n}`)),
            { timeoutMs: 20_000 }
          )
          const firstDown = sizes.find((s) => s.at >= dropped && s.replicas < 5)
          expect(firstDown?.replicas).toBe(1)
          // The last high recommendation can be one sync (200 ms) older than the drop.
          expect(firstDown!.at - dropped).toBeGreaterThanOrEqual(1_700)
          expect(Math.max(...sizes.map((s) => s.replicas))).toBe(5)
          yield* c.eventually(
            Effect.flatMap(c.client.get(HpaRef, ns, "web"), (h) => {
              const s = (h as Json)["status"]
              return check(s.currentReplicas === 1 && s.lastScaleTime !== undefined, () => JSON.stringify(s))
            })
          )
        })
      ),
    30_000
  )

  it.live(
    "says why it cannot scale: a missing target, missing metrics, an invalid spec",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* cluster()
          yield* c.client.create(autoscaler("nothing"))
          const condition = (name: string, type: string, reason: string) =>
            c.eventually(
              Effect.flatMap(c.client.get(HpaRef, ns, name), (h) => {
                const cond = ((h as Json)["status"]?.["conditions"] as Array<Json> | undefined)?.find((x) => x["type"] === type)
                return cond?.["reason"] === reason ? Effect.succeed(cond) : Effect.fail(new Error(JSON.stringify(cond)))
              })
            )
          expect(yield* condition("nothing", "AbleToScale", "FailedGetScale")).toMatchObject({
            status: "False",
            message: `the HPA controller was unable to get the target's current scale: deployments.apps "nothing" not found`
          })

          // A Deployment whose pods report nothing.
          yield* c.client.create(deployment("quiet", 1))
          yield* c.client.create(autoscaler("quiet"))
          expect(yield* condition("quiet", "ScalingActive", "FailedGetResourceMetric")).toMatchObject({
            status: "False",
            message: "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
          })
          expect(yield* specReplicas(c, "quiet")).toBe(1)

          // Discovery as `kubectl get hpa` and `kubectl get all` use it.
          const discovery = yield* Effect.promise(() =>
            c.fetch("http://fleet.test/apis/autoscaling/v2", { headers: { authorization: `Bearer ${c.adminToken}` } }).then((r) => r.json() as Promise<Json>)
          )
          expect(discovery["resources"]).toEqual([
            { name: "horizontalpodautoscalers", singularName: "horizontalpodautoscaler", namespaced: true, kind: "HorizontalPodAutoscaler", verbs: expect.arrayContaining(["create", "get", "list", "watch"]), shortNames: ["hpa"], categories: ["all"] },
            { name: "horizontalpodautoscalers/status", singularName: "", namespaced: true, kind: "HorizontalPodAutoscaler", verbs: ["get", "patch", "update"] }
          ])

          const invalid = yield* Effect.flip(c.client.create(autoscaler("bad", { minReplicas: 3, maxReplicas: 2 })))
          expect(invalid.status.code).toBe(422)
          expect(invalid.status.message).toContain("spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`")
        })
      ),
    30_000
  )
})
