/**
 * The scheduler runtime through the test cluster: the real API (admission with Priority, the
 * binding subresource, Events), informers, simulated kubelets and, where a workload needs them,
 * the Deployment and ReplicaSet controllers. Each case states a behaviour of kube-scheduler and
 * fails if Fleet's scheduler breaks it: taints keep pods off, required anti-affinity spreads
 * replicas and leaves the extra one Pending with upstream's message, topology spread holds its
 * skew against a scorer that would crowd one zone, preemption evicts exactly the lowest-priority
 * victim and nominates the node, a parked pod waits for an event rather than a timer and runs as
 * soon as a fitting node joins, FailedScheduling reads as kube-scheduler's, and a pod for another
 * scheduler is left alone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Deployment from "../../src/controllers/Deployment.js"
import * as Pods from "../../src/object/Pods.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import { type BindPlugin, type Handle, status } from "../../src/scheduler/Framework.js"
import * as Plugins from "../../src/scheduler/plugins/index.js"
import * as Scheduler from "../../src/scheduler/Scheduler.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import { ApiClient } from "../../src/client/ApiClient.js"

type Json = Record<string, any>

const ns = "default"
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const EventRef: Client.ResourceRef = { apiVersion: "v1", kind: "Event" }
const DeployRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "Deployment" }
const PriorityClassRef: Client.ResourceRef = { apiVersion: "scheduling.k8s.io/v1", kind: "PriorityClass" }
const VolumeRef: Client.ResourceRef = { apiVersion: "v1", kind: "PersistentVolume" }
const ClaimRef: Client.ResourceRef = { apiVersion: "v1", kind: "PersistentVolumeClaim" }

const fail = (why: string) => Effect.fail(new Error(why))

/** A bare pod asking for `cpu`, with extra spec fields and labels. */
const pod = (name: string, cpu: string | undefined, spec: Json = {}, labels: Record<string, string> = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns, labels },
  spec: {
    containers: [{ name: "app", image: "nginx:1", ...(cpu === undefined ? {} : { resources: { requests: { cpu } } }) }],
    ...spec
  }
})

const nodeOf = (p: Json): string | undefined => p["spec"]?.["nodeName"]
const uidOf = (o: Json): string => String(o["metadata"]?.["uid"])
const get = (cluster: TestCluster.TestCluster, name: string) => cluster.client.get(PodRef, ns, name) as Effect.Effect<Json, unknown>

/** Wait until the pod runs; answers it. */
const running = (cluster: TestCluster.TestCluster, name: string, timeoutMs = 15_000) =>
  cluster.eventually(
    Effect.flatMap(get(cluster, name), (p) => (Pods.phase(p) === "Running" && nodeOf(p) !== undefined ? Effect.succeed(p) : fail(`${name} is ${Pods.phase(p)}`))),
    { timeoutMs }
  )

/** The FailedScheduling Events of a pod. */
const failedScheduling = (cluster: TestCluster.TestCluster, name: string) =>
  Effect.map(cluster.client.list(EventRef, { namespace: ns }), (l) =>
    ((l["items"] ?? []) as Array<Json>).filter((e) => e["involvedObject"]?.["name"] === name && e["reason"] === "FailedScheduling")
  )

/** Wait for the pod's first FailedScheduling Event; answers it. */
const firstFailure = (cluster: TestCluster.TestCluster, name: string) =>
  cluster.eventually(Effect.flatMap(failedScheduling(cluster, name), (es) => (es.length > 0 ? Effect.succeed(es[0]!) : fail(`no FailedScheduling for ${name}`))))

const metrics = (cluster: TestCluster.TestCluster) => cluster.scheduler()!.metrics()

describe("Scheduler through the test cluster", () => {
  it.live("taints keep pods off a node; a toleration lets a pod on; FailedScheduling names the taint", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({
          nodes: [{ name: "gpu-0", taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }] }, { name: "node-1" }, { name: "node-2" }]
        })
        for (let i = 0; i < 6; i++) yield* cluster.client.create(pod(`plain-${i}`, "100m"))
        const placed = yield* Effect.forEach([0, 1, 2, 3, 4, 5], (i) => Effect.map(running(cluster, `plain-${i}`), nodeOf))
        expect(placed.filter((n) => n === "gpu-0")).toEqual([])
        expect(new Set(placed)).toEqual(new Set(["node-1", "node-2"]))

        const onGpu = { nodeSelector: { "kubernetes.io/hostname": "gpu-0" } }
        yield* cluster.client.create(pod("tolerant", "100m", { ...onGpu, tolerations: [{ key: "dedicated", operator: "Equal", value: "gpu", effect: "NoSchedule" }] }))
        expect(nodeOf(yield* running(cluster, "tolerant"))).toBe("gpu-0")

        // Without the toleration the same pod fits nowhere, and says why in kube-scheduler's words.
        yield* cluster.client.create(pod("intolerant", "100m", onGpu))
        const event = yield* firstFailure(cluster, "intolerant")
        const expected =
          "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 node(s) didn't match Pod's node affinity/selector. " +
          "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        expect(event["message"]).toBe(expected)
        expect(event["type"]).toBe("Warning")
        expect(event["source"]?.["component"]).toBe("default-scheduler")
        const intolerant = yield* cluster.eventually(
          Effect.flatMap(get(cluster, "intolerant"), (p) => (Pods.condition(p, "PodScheduled")?.["message"] === expected ? Effect.succeed(p) : fail("no condition yet")))
        )
        expect(Pods.condition(intolerant, "PodScheduled")).toMatchObject({ status: "False", reason: "Unschedulable" })
        expect(nodeOf(intolerant)).toBeUndefined()
      })
    )
  )

  it.live("the issue's example message: resources and taints over five nodes, histogram sorted as upstream", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const small = { cpu: "1" }
        const cluster = yield* TestCluster.make({
          nodes: [
            { name: "n-0", capacity: small },
            { name: "n-1", capacity: small },
            { name: "n-2", capacity: small },
            { name: "gpu-0", taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }] },
            { name: "gpu-1", taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }] }
          ]
        })
        yield* cluster.client.create(pod("big", "2"))
        const event = yield* firstFailure(cluster, "big")
        expect(event["message"]).toBe(
          "0/5 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}, 3 Insufficient cpu. " +
            "preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod."
        )
      })
    )
  )

  it.live("required anti-affinity on hostname spreads a 3-replica Deployment over 3 nodes; a 4th replica stays Pending with upstream's message", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 3, controllers: [Deployment.reconciler(), ReplicaSet.reconciler()] })
        const antiAffinity = {
          podAntiAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: { app: "web" } }, topologyKey: "kubernetes.io/hostname" }]
          }
        }
        const deployment = (replicas: number): Json => ({
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: "web", namespace: ns },
          spec: {
            replicas,
            selector: { matchLabels: { app: "web" } },
            template: { metadata: { labels: { app: "web" } }, spec: { affinity: antiAffinity, containers: [{ name: "app", image: "nginx:1" }] } }
          }
        })
        yield* cluster.client.create(deployment(3))
        const webPods = Effect.map(TestCluster.pods(cluster, ns, "app=web"), (ps) => ps as ReadonlyArray<Json>)
        const three = yield* cluster.eventually(
          Effect.flatMap(webPods, (ps) => {
            const up = ps.filter((p) => Pods.phase(p) === "Running")
            return up.length === 3 ? Effect.succeed(up) : fail(`${up.length} running`)
          })
        )
        expect(new Set(three.map(nodeOf))).toEqual(new Set(["node-0", "node-1", "node-2"]))

        yield* cluster.client.patch(DeployRef, ns, "web", "merge", { spec: { replicas: 4 } })
        const extra = yield* cluster.eventually(
          Effect.flatMap(webPods, (ps) => {
            const pending = ps.filter((p) => nodeOf(p) === undefined)
            return ps.length === 4 && pending.length === 1 ? Effect.succeed(pending[0]!) : fail(`${ps.length} pods, ${pending.length} pending`)
          })
        )
        const name = String(extra["metadata"]["name"])
        const event = yield* firstFailure(cluster, name)
        expect(event["message"]).toBe(
          "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
        )
        // Still Pending, and the three keep their nodes.
        const after = yield* webPods
        expect(after.filter((p) => nodeOf(p) === undefined).map((p) => p["metadata"]["name"])).toEqual([name])
        expect(new Set(after.flatMap((p) => nodeOf(p) ?? []))).toEqual(new Set(["node-0", "node-1", "node-2"]))
      })
    )
  )

  it.live("topology spread (maxSkew 1 over zones) holds 4/4 for 8 pods though the scorer prefers the larger zone", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const zone = (z: string) => ({ "topology.kubernetes.io/zone": z })
        // Zone a is sixteen times larger: LeastAllocated and BalancedAllocation alone would fill it first.
        const cluster = yield* TestCluster.make({
          nodes: [
            { name: "a-0", labels: zone("a"), capacity: { cpu: "64" } },
            { name: "a-1", labels: zone("a"), capacity: { cpu: "64" } },
            { name: "b-0", labels: zone("b"), capacity: { cpu: "4" } },
            { name: "b-1", labels: zone("b"), capacity: { cpu: "4" } }
          ]
        })
        const spread = {
          topologySpreadConstraints: [{ maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "DoNotSchedule", labelSelector: { matchLabels: { app: "spread" } } }]
        }
        for (let i = 0; i < 8; i++) yield* cluster.client.create(pod(`s-${i}`, "500m", spread, { app: "spread" }))
        const nodes = yield* Effect.forEach([0, 1, 2, 3, 4, 5, 6, 7], (i) => Effect.map(running(cluster, `s-${i}`), (p) => nodeOf(p)!))
        const perZone = (z: string) => nodes.filter((n) => n.startsWith(`${z}-`)).length
        expect([perZone("a"), perZone("b")]).toEqual([4, 4])

        // Control: the same pods without the constraint crowd the large zone.
        for (let i = 0; i < 8; i++) yield* cluster.client.create(pod(`c-${i}`, "500m", {}, { app: "control" }))
        const control = yield* Effect.forEach([0, 1, 2, 3, 4, 5, 6, 7], (i) => Effect.map(running(cluster, `c-${i}`), (p) => nodeOf(p)!))
        expect(control.filter((n) => n.startsWith("a-")).length).toBeGreaterThan(5)
      })
    )
  )

  it.live("preemption: a high-priority pod evicts exactly the lowest-priority victim, is nominated, then runs there", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: [{ name: "low-node", capacity: { cpu: "2" } }, { name: "mid-node", capacity: { cpu: "2" } }] })
        for (const [name, value] of [["low", 100], ["mid", 500], ["high", 1000]] as const) {
          yield* cluster.client.create({ apiVersion: "scheduling.k8s.io/v1", kind: "PriorityClass", metadata: { name }, value })
        }
        expect(((yield* cluster.client.list(PriorityClassRef))["items"] as Array<unknown>).length).toBeGreaterThanOrEqual(3)
        const on = (node: string) => ({ nodeSelector: { "kubernetes.io/hostname": node } })
        // Started one after the other: among equals, the later started is the less important.
        for (const [name, cls, node] of [
          ["low-a", "low", "low-node"],
          ["low-b", "low", "low-node"],
          ["mid-a", "mid", "mid-node"],
          ["mid-b", "mid", "mid-node"]
        ] as const) {
          yield* cluster.client.create(pod(name, "1", { ...on(node), priorityClassName: cls }))
          yield* running(cluster, name)
          yield* Effect.sleep(1_100) // startTime has second precision
        }
        expect((yield* get(cluster, "low-a"))["spec"]["priority"]).toBe(100)

        // Watch the preemptor's nomination and who leaves.
        const nominations: Array<string> = []
        const deleted: Array<string> = []
        cluster.informers.for(PodRef).subscribe((c) => {
          const name = String((c.object["metadata"] as Json | undefined)?.["name"])
          const nnn = (c.object["status"] as Json | undefined)?.["nominatedNodeName"]
          if (name === "high" && typeof nnn === "string" && nnn !== "" && nominations.at(-1) !== nnn) nominations.push(nnn)
          if (c.type === "DELETED") deleted.push(name)
        })

        // A low-priority pod already waiting for room: when the victim goes it is woken with the
        // preemptor (and sooner, its backoff being older), but the room is the nominated pod's.
        yield* cluster.client.create(pod("low-c", "1", { priorityClassName: "low" }))
        yield* firstFailure(cluster, "low-c")

        yield* cluster.client.create(pod("high", "1", { priorityClassName: "high" }))
        const high = yield* running(cluster, "high")
        expect(nodeOf(high)).toBe("low-node")
        expect(high["spec"]["priority"]).toBe(1000)
        expect(nominations).toEqual(["low-node"])
        expect(deleted).toEqual(["low-b"])
        for (const name of ["low-a", "mid-a", "mid-b"]) expect(Pods.phase(yield* get(cluster, name))).toBe("Running")
        expect(nodeOf(yield* get(cluster, "low-c"))).toBeUndefined()
        expect(metrics(cluster).preemptions).toBe(1)

        // The victim was told why, and the nomination is cleared once the pod is bound.
        const events = (yield* cluster.client.list(EventRef, { namespace: ns }))["items"] as Array<Json>
        const preempted = events.filter((e) => e["reason"] === "Preempted")
        expect(preempted.map((e) => [e["involvedObject"]["name"], e["message"]])).toEqual([["low-b", `Preempted by pod ${uidOf(high)} on node low-node`]])
        yield* cluster.eventually(Effect.flatMap(get(cluster, "high"), (p) => (p["status"]?.["nominatedNodeName"] ? fail("still nominated") : Effect.void)))
      })
    )
  )

  it.live("an unschedulable pod waits for an event, not a timer, and runs as soon as a fitting node joins", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2 })
        const created = yield* cluster.client.create(pod("huge", "16"))
        const uid = uidOf(created)
        const event = yield* firstFailure(cluster, "huge")
        expect(event["message"]).toBe("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
        yield* cluster.eventually(Effect.suspend(() => (cluster.scheduler()!.queued(uid) === "unschedulable" ? Effect.void : fail(`queued ${cluster.scheduler()!.queued(uid)}`))))

        // Nothing relevant changes for 1.5 s (heartbeats keep arriving): no attempt, no new Event.
        const before = metrics(cluster).attempts
        yield* Effect.sleep(1_500)
        expect(metrics(cluster).attempts).toBe(before)
        expect(cluster.scheduler()!.queued(uid)).toBe("unschedulable")
        const events = yield* failedScheduling(cluster, "huge")
        expect(events.map((e) => e["count"])).toEqual([event["count"]])

        // A pod elsewhere that cannot help (a new pod scheduled) does not wake it either.
        yield* cluster.client.create(pod("small", "100m"))
        yield* running(cluster, "small")
        expect(cluster.scheduler()!.queued(uid)).toBe("unschedulable")

        yield* cluster.addNode({ name: "big", capacity: { cpu: "32" } })
        const huge = yield* running(cluster, "huge", 5_000)
        expect(nodeOf(huge)).toBe("big")
        // Woken by the node's arrival (and its allocatable): a couple of attempts, not a retry loop.
        expect(metrics(cluster).attempts - before).toBeLessThanOrEqual(4)
        expect(Pods.condition(huge, "PodScheduled")?.["status"]).toBe("True")
      })
    )
  )

  it.live("a pod naming an unknown scheduler is left alone: no attempt, no condition, no Event", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2 })
        const before = metrics(cluster).attempts
        const created = yield* cluster.client.create(pod("other", "100m", { schedulerName: "other-scheduler" }))
        yield* cluster.client.create(pod("mine", "100m"))
        yield* running(cluster, "mine")
        yield* Effect.sleep(300)
        const other = yield* get(cluster, "other")
        expect(nodeOf(other)).toBeUndefined()
        expect(Pods.condition(other, "PodScheduled")).toBeUndefined()
        expect(yield* failedScheduling(cluster, "other")).toEqual([])
        expect(cluster.scheduler()!.queued(uidOf(created))).toBeUndefined()
        expect(cluster.scheduler()!.explain(uidOf(created))).toBeUndefined()
        expect(metrics(cluster).attempts - before).toBe(1)
      })
    )
  )

  it.live("required pod affinity waits for its peer and follows it once the peer is bound (an assigned pod's arrival wakes it)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 3 })
        const follow = {
          affinity: {
            podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: { app: "leader" } }, topologyKey: "kubernetes.io/hostname" }] }
          }
        }
        yield* cluster.client.create(pod("follower", "100m", follow, { app: "follower" }))
        const event = yield* firstFailure(cluster, "follower")
        expect(event["message"]).toBe("0/3 nodes are available: 3 node(s) didn't match pod affinity rules. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
        yield* cluster.client.create(pod("leader", "100m", { nodeSelector: { "kubernetes.io/hostname": "node-2" } }, { app: "leader" }))
        expect(nodeOf(yield* running(cluster, "follower", 5_000))).toBe("node-2")
      })
    )
  )

  it.live("namespaceSelector in an affinity term reads namespace labels through the informers", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 3 })
        yield* cluster.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "team-a", labels: { team: "a" } } })
        yield* cluster.client.create({ ...pod("db", "100m", { nodeSelector: { "kubernetes.io/hostname": "node-1" } }, { app: "db" }), metadata: { name: "db", namespace: "team-a", labels: { app: "db" } } })
        const near = {
          affinity: {
            podAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [
                { labelSelector: { matchLabels: { app: "db" } }, namespaceSelector: { matchLabels: { team: "a" } }, topologyKey: "kubernetes.io/hostname" }
              ]
            }
          }
        }
        yield* cluster.client.create(pod("client", "100m", near))
        expect(nodeOf(yield* running(cluster, "client"))).toBe("node-1")
      })
    )
  )

  it.live("local volumes: a WaitForFirstConsumer claim waits for a volume, binds to it on its node; an unbound claim of no such class is not the scheduler's concern", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({
          nodes: 2,
          schedulerProfiles: [{ schedulerName: "default-scheduler", pluginConfig: [{ name: "VolumeBinding", args: { waitForFirstConsumer: ["local-storage"] } }] }]
        })
        const claim = (name: string, storageClassName?: string): Json => ({
          apiVersion: "v1",
          kind: "PersistentVolumeClaim",
          metadata: { name, namespace: ns },
          spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "5Gi" } }, ...(storageClassName === undefined ? {} : { storageClassName }) }
        })
        const mounting = (claimName: string) => ({ volumes: [{ name: "data", persistentVolumeClaim: { claimName } }] })

        // No class, no volume anywhere: placed as if it had no claim; the claim stays Pending.
        yield* cluster.client.create(claim("scratch"))
        yield* cluster.client.create(pod("plain", "100m", mounting("scratch")))
        yield* running(cluster, "plain")
        const scratch = (yield* cluster.client.get(ClaimRef, ns, "scratch")) as Json
        expect(scratch["spec"]["volumeName"]).toBeUndefined()
        expect(scratch["status"]["phase"]).toBe("Pending")

        // A local-storage claim with no volume yet: Pending, with VolumeBinding's reason.
        yield* cluster.client.create(claim("data", "local-storage"))
        yield* cluster.client.create(pod("db", "100m", mounting("data")))
        const event = yield* firstFailure(cluster, "db")
        expect(event["message"]).toBe(
          "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        )

        // A volume on node-1 appears: the pod goes there, and the claim and the volume are bound to each other.
        yield* cluster.client.create({
          apiVersion: "v1",
          kind: "PersistentVolume",
          metadata: { name: "local-1" },
          spec: {
            capacity: { storage: "10Gi" },
            accessModes: ["ReadWriteOnce"],
            storageClassName: "local-storage",
            local: { path: "/mnt/disk1" },
            nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["node-1"] }] }] } }
          }
        })
        const db = yield* running(cluster, "db", 5_000)
        expect(nodeOf(db)).toBe("node-1")
        const pv = (yield* cluster.client.get(VolumeRef, undefined, "local-1")) as Json
        const pvc = (yield* cluster.client.get(ClaimRef, ns, "data")) as Json
        expect(pv["spec"]["claimRef"]).toMatchObject({ kind: "PersistentVolumeClaim", namespace: ns, name: "data", uid: pvc["metadata"]["uid"] })
        expect(pvc["spec"]["volumeName"]).toBe("local-1")
        expect([pv["status"]["phase"], pvc["status"]["phase"]]).toEqual(["Bound", "Bound"])

        // The volume is taken: a second claim of the class finds none.
        yield* cluster.client.create(claim("data-2", "local-storage"))
        yield* cluster.client.create(pod("db-2", "100m", mounting("data-2")))
        expect((yield* firstFailure(cluster, "db-2"))["message"]).toContain("2 node(s) didn't find available persistent volumes to bind")
        // A replacement pod for the bound claim goes to the volume's node.
        yield* cluster.client.create(pod("db-again", "100m", mounting("data")))
        expect(nodeOf(yield* running(cluster, "db-again"))).toBe("node-1")
      })
    )
  )

  it.live("a failed binding forgets the assumed pod, reports Binding rejected, backs off and retries against a fresh snapshot", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // The cluster's own scheduler is off; this one binds through a binder that loses twice.
        const cluster = yield* TestCluster.make({ nodes: [{ name: "only", capacity: { cpu: "1" } }], scheduler: false })
        let losses = 2
        const attempts: Array<string> = []
        const flaky = (handle: Handle): BindPlugin => ({
          name: "FlakyBinder",
          bind: (_state, pod, node) =>
            Effect.suspend(() => {
              attempts.push(`${pod.name}@${node}`)
              return losses-- > 0 ? Effect.succeed(status("Unschedulable", "Operation cannot be fulfilled on pods: the object has been modified")) : handle.bindPod!(pod.pod, node)
            })
        })
        const scheduler = yield* Effect.orDie(
          Scheduler.start({
            informers: cluster.informers,
            registry: { ...Plugins.registry, FlakyBinder: (_args, handle) => flaky(handle) },
            profiles: [{ schedulerName: "default-scheduler", plugins: { bind: { enabled: [{ name: "FlakyBinder" }], disabled: [{ name: "*" }] } } }],
            queue: { initialBackoffMs: 50, maxBackoffMs: 200 }
          }).pipe(Effect.provideService(ApiClient, cluster.client))
        )
        // The pod takes the whole node: had a lost binding stayed assumed, the retry would not fit.
        yield* cluster.client.create(pod("whole", "1"))
        expect(nodeOf(yield* running(cluster, "whole"))).toBe("only")
        expect(attempts).toEqual(["whole@only", "whole@only", "whole@only"])
        const m = scheduler.metrics()
        expect([m.attempts, m.errors, m.scheduled, m.bindingsInFlight]).toEqual([3, 2, 1, 0])
        const events = yield* failedScheduling(cluster, "whole")
        expect(events.map((e) => e["message"])).toEqual(["Binding rejected: Operation cannot be fulfilled on pods: the object has been modified"])
      })
    )
  )
})
