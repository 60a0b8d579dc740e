/**
 * `GET .../pods/{name}/placement` through the test cluster's API: for a scheduled pod the selected
 * node with every scored node's per-plugin scores and weights (totals are Σ weight × score); for
 * an unschedulable pod every node's filter verdict, the plugin that rejected it and its reasons;
 * 404 saying why when no decision is recorded (the scheduler is off, or the pod does not exist);
 * the subresource is read-only.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Pods from "../../src/object/Pods.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const ns = "default"
const PodRef = { apiVersion: "v1", kind: "Pod" } as const

const pod = (name: string, cpu: string, spec: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns },
  spec: { containers: [{ name: "app", image: "nginx:1", resources: { requests: { cpu } } }], ...spec }
})

/** The placement subresource as a client would request it: status code and JSON body. */
const placement = (cluster: TestCluster.TestCluster, name: string, method = "GET") =>
  Effect.promise(async () => {
    const response = await cluster.fetch(`http://fleet.test/api/v1/namespaces/${ns}/pods/${name}/placement`, {
      method,
      headers: { authorization: `Bearer ${cluster.adminToken}`, accept: "application/json" }
    })
    return { code: response.status, body: (await response.json()) as Json }
  })

const fail = (why: string) => Effect.fail(new Error(why))

describe("pods/placement", () => {
  it.live("a scheduled pod: the selected node first, every scored node with per-plugin scores and weights", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({
          nodes: [
            { name: "roomy", capacity: { cpu: "16" } },
            { name: "tight", capacity: { cpu: "2" } },
            { name: "tainted", taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }] }
          ]
        })
        const created = (yield* cluster.client.create(pod("web", "1"))) as Json
        const scheduled = yield* cluster.eventually(
          Effect.flatMap(cluster.client.get(PodRef, ns, "web"), (p) => (Pods.phase(p) === "Running" ? Effect.succeed(p as Json) : fail("not running")))
        )
        const { code, body } = yield* placement(cluster, "web")
        expect(code).toBe(200)
        expect(body).toMatchObject({
          apiVersion: "fleet.koder.dev/v1",
          kind: "Placement",
          metadata: { name: "web", namespace: ns, uid: created["metadata"]["uid"] },
          nodeName: scheduled["spec"]["nodeName"],
          result: "Scheduled",
          node: scheduled["spec"]["nodeName"],
          evaluatedNodes: 3,
          feasibleNodes: 2
        })
        // LeastAllocated prefers the roomy node.
        expect(body["node"]).toBe("roomy")
        const nodes = body["nodes"] as Array<Json>
        expect(nodes.map((n) => [n["node"], n["verdict"]])).toEqual([
          ["roomy", "Selected"],
          ["tight", "Feasible"],
          ["tainted", "UnschedulableAndUnresolvable"]
        ])
        for (const n of nodes.slice(0, 2)) {
          const scores = n["scores"] as Record<string, { score: number; weight: number }>
          // The default profile's score plugins with upstream's weights; those whose PreScore had
          // nothing to do for this pod (no preferred affinity, no spreading) are skipped, as upstream.
          expect(Object.fromEntries(Object.entries(scores).map(([k, v]) => [k, v.weight]))).toEqual({
            TaintToleration: 3,
            NodeResourcesFit: 1,
            NodeResourcesBalancedAllocation: 1
          })
          for (const s of Object.values(scores)) expect(s.score >= 0 && s.score <= 100).toBe(true)
          expect(n["total"]).toBeCloseTo(Object.values(scores).reduce((t, s) => t + s.weight * s.score, 0), 6)
        }
        expect(nodes[0]!["scores"]["NodeResourcesFit"]["score"]).toBeGreaterThan(nodes[1]!["scores"]["NodeResourcesFit"]["score"])
        expect(nodes[0]!["total"]).toBeGreaterThan(nodes[1]!["total"])
        expect(nodes[2]).toMatchObject({ plugin: "TaintToleration", reasons: ["node(s) had untolerated taint {dedicated: gpu}"] })

        // A pod with a preference is scored by NodeAffinity too (weight 2): 100 where preferred, 0 elsewhere.
        const prefersTight = { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 10, preference: { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["tight"] }] } }] }
        yield* cluster.client.create(pod("picky", "100m", { affinity: { nodeAffinity: prefersTight } }))
        const picky = yield* cluster.eventually(
          Effect.flatMap(placement(cluster, "picky"), (r) => (r.code === 200 ? Effect.succeed(r.body) : fail(`status ${r.code}`)))
        )
        const byNode = Object.fromEntries((picky["nodes"] as Array<Json>).map((n) => [n["node"], n["scores"]?.["NodeAffinity"]]))
        expect(byNode).toEqual({ tight: { score: 100, weight: 2 }, roomy: { score: 0, weight: 2 }, tainted: undefined })
      })
    )
  )

  it.live("an unschedulable pod: every node's verdict, the rejecting plugin and its reasons, and the FitError message", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({
          nodes: [
            { name: "small-0", capacity: { cpu: "1" } },
            { name: "small-1", capacity: { cpu: "1" } },
            { name: "tainted", taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }] }
          ]
        })
        yield* cluster.client.create(pod("huge", "4"))
        const { code, body } = yield* cluster.eventually(
          Effect.flatMap(placement(cluster, "huge"), (r) => (r.code === 200 ? Effect.succeed(r) : fail(`status ${r.code}`)))
        )
        expect(code).toBe(200)
        expect(body).toMatchObject({
          result: "Unschedulable",
          message:
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. " +
            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
          postFilterMessage:
            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
        })
        expect(body["nodeName"]).toBeUndefined()
        expect(body["nodes"]).toEqual([
          { node: "small-0", verdict: "Unschedulable", plugin: "NodeResourcesFit", reasons: ["Insufficient cpu"] },
          { node: "small-1", verdict: "Unschedulable", plugin: "NodeResourcesFit", reasons: ["Insufficient cpu"] },
          { node: "tainted", verdict: "UnschedulableAndUnresolvable", plugin: "TaintToleration", reasons: ["node(s) had untolerated taint {dedicated: gpu}"] }
        ])
      })
    )
  )

  it.live("404 with a clear message when no decision is recorded (scheduler off) or the pod does not exist; writes are refused", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 1, scheduler: false })
        yield* cluster.client.create(pod("waiting", "100m"))
        const never = yield* placement(cluster, "waiting")
        expect(never.code).toBe(404)
        expect(never.body).toMatchObject({ kind: "Status", reason: "NotFound", code: 404 })
        expect(never.body["message"]).toBe(
          `no placement decision is recorded for pod "waiting" on this server (it is not the scheduling leader, or the pod has not been attempted since the scheduler started)`
        )
        const missing = yield* placement(cluster, "nobody")
        expect(missing.code).toBe(404)
        expect(missing.body["message"]).toBe(`pods "nobody" not found`)
        const post = yield* placement(cluster, "waiting", "POST")
        expect(post.code).toBe(405)
      })
    )
  )
})
