// The resource metrics API (metrics.k8s.io/v1beta1) through the in-process API: discovery as
// `kubectl top` finds it, PodMetrics and NodeMetrics from samples recorded in the memory source,
// selectors, 404s and 405s, staleness (with TestClock), and who may read it.
import { BootstrapPolicy, RbacRules as Rbac } from "@koder/fleet-core"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import * as Metrics from "../../src/api/MetricsApi.js"
import * as MetricsSource from "../../src/api/MetricsSource.js"
import * as MetricsModel from "../../src/model/Metrics.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const ns = "default"

const pod = (name: string, labels: Record<string, string>): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns, labels },
  spec: { containers: [{ name: "app", image: "img" }, { name: "sidecar", image: "img" }] }
})

const usage = (cores: number, mib: number): MetricsSource.Usage => ({ usageNanoCores: cores * 1e9, workingSetBytes: mib * 1024 * 1024 })

const get = (c: TestCluster.TestCluster, path: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await c.fetch(`http://fleet.test${path}`, { ...init, headers: { authorization: `Bearer ${c.adminToken}`, ...(init.headers as Record<string, string> | undefined) } })
    return { status: response.status, body: (await response.json()) as Json }
  })

/** A cluster with pods web-1, web-2 (app=web) and db-1 (app=db), and samples for web-1, web-2 and a pod that does not exist. */
const setup = Effect.gen(function* () {
  const c = yield* TestCluster.make({ nodes: 2 })
  yield* c.client.create(pod("web-1", { app: "web" }))
  yield* c.client.create(pod("web-2", { app: "web" }))
  yield* c.client.create(pod("db-1", { app: "db" }))
  yield* c.metricsSource.record("node-0", {
    windowMs: 15_000,
    node: usage(1.5, 2048),
    pods: [
      { namespace: ns, name: "web-1", containers: [{ name: "app", usage: usage(0.25, 64) }, { name: "sidecar", usage: { usageNanoCores: 1_234_567, workingSetBytes: 1000 } }] },
      { namespace: ns, name: "ghost", containers: [{ name: "app", usage: usage(1, 1) }] }
    ]
  })
  yield* c.metricsSource.record("node-1", { windowMs: 10_500, node: usage(0.5, 512), pods: [{ namespace: ns, name: "web-2", containers: [{ name: "app", usage: usage(0.5, 128) }] }] })
  return c
})

describe("metrics.k8s.io", () => {
  it.scopedLive("is in discovery with get and list, as kubectl top looks for it", () =>
    Effect.gen(function* () {
      const c = yield* setup
      const groups = yield* get(c, "/apis")
      expect(groups.body["groups"].find((g: Json) => g["name"] === "metrics.k8s.io")?.["preferredVersion"]).toEqual({ groupVersion: "metrics.k8s.io/v1beta1", version: "v1beta1" })
      const list = yield* get(c, "/apis/metrics.k8s.io/v1beta1")
      expect(list.body["resources"]).toEqual([
        { name: "nodes", singularName: "nodemetrics", namespaced: false, kind: "NodeMetrics", verbs: ["get", "list"] },
        { name: "pods", singularName: "podmetrics", namespaced: true, kind: "PodMetrics", verbs: ["get", "list"] }
      ])
      const aggregated = yield* get(c, "/apis", { headers: { accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" } })
      const group = aggregated.body["items"].find((g: Json) => g["metadata"]["name"] === "metrics.k8s.io")
      expect(group["versions"][0]["resources"].map((r: Json) => `${r["resource"]}:${r["scope"]}:${r["verbs"].join(",")}`)).toEqual(["nodes:Cluster:get,list", "pods:Namespaced:get,list"])
    })
  )

  it.scopedLive("lists PodMetrics of existing pods with samples, with their labels, as metrics-server writes them", () =>
    Effect.gen(function* () {
      const c = yield* setup
      const list = yield* c.client.list({ apiVersion: "metrics.k8s.io/v1beta1", plural: "pods", namespaced: true }, { namespace: ns })
      expect(list["kind"]).toBe("PodMetricsList")
      const items = list["items"] as Array<Json>
      expect(items.map((i) => i["metadata"]["name"])).toEqual(["web-1", "web-2"])
      expect(items[0]).toMatchObject({
        apiVersion: "metrics.k8s.io/v1beta1",
        kind: "PodMetrics",
        metadata: { name: "web-1", namespace: ns, labels: { app: "web" } },
        window: "15s",
        containers: [
          { name: "app", usage: { cpu: "250m", memory: "64Mi" } },
          { name: "sidecar", usage: { cpu: "1234567n", memory: "1k" } }
        ]
      })
      expect(items[1]).toMatchObject({ window: "10.5s", containers: [{ name: "app", usage: { cpu: "500m", memory: "128Mi" } }] })
      expect(Date.parse(items[0]!["timestamp"])).toBeGreaterThan(Date.now() - 60_000)
      // Across all namespaces too.
      const all = yield* get(c, "/apis/metrics.k8s.io/v1beta1/pods")
      expect(all.body["items"].map((i: Json) => i["metadata"]["name"])).toEqual(["web-1", "web-2"])
    })
  )

  it.scopedLive("selects by label and by name, and answers 404 for a pod without a sample", () =>
    Effect.gen(function* () {
      const c = yield* setup
      const web = yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods?labelSelector=app%3Dweb,app!%3Ddb`)
      expect(web.body["items"].map((i: Json) => i["metadata"]["name"])).toEqual(["web-1", "web-2"])
      const byField = yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods?fieldSelector=metadata.name%3Dweb-2`)
      expect(byField.body["items"].map((i: Json) => i["metadata"]["name"])).toEqual(["web-2"])
      const one = yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods/web-2`)
      expect(one.status).toBe(200)
      expect(one.body["containers"]).toEqual([{ name: "app", usage: { cpu: "500m", memory: "128Mi" } }])
      const db = yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods/db-1`)
      expect(db.status).toBe(404)
      expect(db.body["message"]).toBe('pods.metrics.k8s.io "default/db-1" not found')
      const ghost = yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods/ghost`)
      expect(ghost.status).toBe(404)
      const bad = yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods?labelSelector=app%20in%20(`)
      expect(bad.status).toBe(400)
    })
  )

  it.scopedLive("serves NodeMetrics of registered nodes", () =>
    Effect.gen(function* () {
      const c = yield* setup
      const nodes = yield* get(c, "/apis/metrics.k8s.io/v1beta1/nodes")
      expect(nodes.body["items"].map((n: Json) => [n["metadata"]["name"], n["usage"]])).toEqual([
        ["node-0", { cpu: "1500m", memory: "2Gi" }],
        ["node-1", { cpu: "500m", memory: "512Mi" }]
      ])
      const one = yield* get(c, "/apis/metrics.k8s.io/v1beta1/nodes/node-1")
      expect(one.body).toMatchObject({ kind: "NodeMetrics", window: "10.5s", usage: { cpu: "500m" } })
      yield* c.metricsSource.forget("node-1")
      expect((yield* get(c, "/apis/metrics.k8s.io/v1beta1/nodes/node-1")).status).toBe(404)
      expect((yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods/web-2`)).status).toBe(404)
    })
  )

  it.scopedLive("is read-only: writes and watches answer 405", () =>
    Effect.gen(function* () {
      const c = yield* setup
      const post = yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } })
      expect(post.status).toBe(405)
      const watch = yield* get(c, `/apis/metrics.k8s.io/v1beta1/namespaces/${ns}/pods?watch=true`)
      expect(watch.status).toBe(405)
      const del = yield* get(c, "/apis/metrics.k8s.io/v1beta1/nodes/node-0", { method: "DELETE" })
      expect(del.status).toBe(405)
    })
  )

  it("is readable by view, edit and admin (as metrics-server's aggregated reader role)", () => {
    const roles = BootstrapPolicy.clusterRoles.map((o) => Rbac.roleFromJson(o)!)
    const p = Rbac.make(roles, [])
    const may = (role: string, verb: string, resource: string) =>
      (p.roles.get(`ClusterRole/${role}`) ?? []).some((r) =>
        Rbac.ruleAllows(r, { verb, resourceRequest: true, apiGroup: "metrics.k8s.io", resource, subresource: "", namespace: "", name: "", path: "" })
      )
    for (const role of ["view", "edit", "admin"]) {
      expect(may(role, "list", "pods")).toBe(true)
      expect(may(role, "get", "nodes")).toBe(true)
    }
    expect(may("view", "create", "pods")).toBe(false)
  })
})

describe("MetricsSource (memory)", () => {
  it.effect("keeps the newest report per node and drops stale ones", () =>
    Effect.gen(function* () {
      const source = MetricsSource.makeMemory({ staleAfterMs: 30_000 })
      yield* source.record("a", { windowMs: 15_000, node: usage(1, 1), pods: [{ namespace: "x", name: "p", containers: [] }] })
      yield* TestClock.adjust(Duration.seconds(20))
      yield* source.record("b", { windowMs: 15_000, node: usage(2, 2), pods: [{ namespace: "y", name: "q", containers: [] }] })
      expect((yield* source.nodes).map((n) => n.name)).toEqual(["a", "b"])
      expect((yield* source.pods("y")).map((p) => `${p.node}:${p.name}`)).toEqual(["b:q"])
      yield* TestClock.adjust(Duration.seconds(15))
      // a's report is 35 s old now.
      expect((yield* source.nodes).map((n) => n.name)).toEqual(["b"])
      expect((yield* source.pods()).map((p) => p.name)).toEqual(["q"])
      // A new report replaces the node's old pods; a pod that moved is served from its newest sample.
      yield* source.record("a", { windowMs: 15_000, node: usage(1, 1), pods: [{ namespace: "y", name: "q", containers: [{ name: "c", usage: usage(3, 3) }] }] })
      expect((yield* source.pods()).map((p) => `${p.node}:${p.name}`)).toEqual(["a:q"])
    })
  )

  it("formats durations as Go does", () => {
    expect([0, 250, 15_000, 10_500, 60_000, 61_250, 3_723_000].map(MetricsModel.formatDuration)).toEqual(["0s", "250ms", "15s", "10.5s", "1m0s", "1m1.25s", "1h2m3s"])
    expect(["15s", "1m0s", "10.5s", "250ms", "1h2m3s", "x"].map(MetricsModel.parseDuration)).toEqual([15_000, 60_000, 10_500, 250, 3_723_000, undefined])
    expect(Metrics.cpuQuantity(2.5e9)).toBe("2500m")
    expect(Metrics.memoryQuantity(1536 * 1024)).toBe("1536Ki")
  })
})
