import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as Agent from "../../src/agent/Agent.js"
import * as HostPortAllocator from "../../src/agent/HostPortAllocator.js"
import type * as NodeStatus from "../../src/agent/NodeStatus.js"
import * as Prober from "../../src/agent/Prober.js"
import * as VolumeWriter from "../../src/agent/VolumeWriter.js"
import * as Pods from "../../src/object/Pods.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import * as Runtime from "../../src/runtime/Runtime.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import { ApiClient } from "../../src/client/ApiClient.js"

type Json = Record<string, any>

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const NodeRef = { apiVersion: "v1", kind: "Node" } as const
const LeaseRef = { apiVersion: "coordination.k8s.io/v1", kind: "Lease" } as const
const ConfigMapRef = { apiVersion: "v1", kind: "ConfigMap" } as const

const facts: NodeStatus.Facts = {
  nodeName: "agent-0",
  hostname: "agent-0",
  os: "linux",
  arch: "amd64",
  region: "local",
  capacity: { cpu: "4", memory: "8Gi", pods: "110" },
  allocatable: { cpu: "2", memory: "4Gi", pods: "110" },
  internalIP: "127.0.0.1",
  port: 9301,
  nodeInfo: { machineID: "m", systemUUID: "s", bootID: "b", kernelVersion: "6.1", osImage: "test", containerRuntimeVersion: "memory://0.1.0", kubeletVersion: "v1.31.0-fleet" }
}

const pod = (name: string, spec: Json = {}, meta: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", ...meta },
  spec: { containers: [{ name: "app", image: "node:20", command: ["node", "server.js"] }], ...spec }
})

interface World {
  readonly cluster: TestCluster.TestCluster
  readonly runtime: Runtime.RuntimeService
  readonly control: MemoryRuntime.ControlService
  readonly prober: Prober.MemoryProber
  readonly writer: VolumeWriter.MemoryWriter
  /** Start an agent in its own scope; closing it stops the agent (not the containers). */
  readonly startAgent: Effect.Effect<{ readonly agent: Agent.Agent; readonly scope: Scope.CloseableScope }>
}

const world = (behavior: (spec: Runtime.ContainerSpec) => MemoryRuntime.Behavior = () => ({})) =>
  Effect.gen(function* () {
    const cluster = yield* TestCluster.make({ nodes: [] })
    const { runtime, control } = yield* MemoryRuntime.make({ behavior })
    const prober = Prober.makeMemory()
    const writer = VolumeWriter.makeMemory()
    const allocator = HostPortAllocator.makeMemory(31_000)
    const startAgent = Effect.gen(function* () {
      const scope = yield* Scope.make()
      const agent = yield* Agent.make({
        facts,
        dataDir: "/var/lib/fleet",
        relistMs: 50,
        resyncMs: 300,
        leaseRenewMs: 100,
        nodeStatusReportMs: 1_000,
        objectTtlMs: 0,
        runtimeName: "memory"
      }).pipe(
        Effect.provideService(ApiClient, cluster.client),
        Effect.provideService(Runtime.Runtime, runtime),
        Effect.provideService(Prober.Prober, prober.service),
        Effect.provideService(VolumeWriter.VolumeWriter, writer.service),
        Effect.provideService(HostPortAllocator.HostPortAllocator, allocator),
        Scope.extend(scope)
      )
      yield* agent.synced
      return { agent, scope }
    })
    return { cluster, runtime, control, prober, writer, startAgent } satisfies World
  })

const get = (w: World, name: string) => Effect.map(w.cluster.client.get(PodRef, "default", name), (p) => p as Json)

const until = <A>(w: World, name: string, check: (pod: Json) => A | undefined, timeoutMs = 10_000) =>
  w.cluster.eventually(
    Effect.flatMap(get(w, name), (p) => {
      const a = check(p)
      return a === undefined || a === false ? Effect.fail(new Error(`${name}: ${JSON.stringify(p["status"])}`)) : Effect.succeed(a)
    }),
    { timeoutMs }
  )

const containersOf = (w: World, podName: string) =>
  Effect.map(w.runtime.containers.list({ labels: { [Runtime.Labels.podName]: podName } }), (list) => [...list].sort((a, b) => a.spec.attempt - b.spec.attempt))

const ready = (p: Json) => Pods.isReady(p) || undefined

describe("Agent against the memory runtime", () => {
  it.live("registers its Node (labels, allocatable, Ready) and renews its Lease", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        yield* w.startAgent
        const node = (yield* w.cluster.eventually(w.cluster.client.get(NodeRef, undefined, "agent-0"))) as Json
        expect(node.metadata.labels).toMatchObject({ "kubernetes.io/hostname": "agent-0", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "fleet.koder.dev/region": "local" })
        const withStatus = (yield* w.cluster.eventually(
          Effect.flatMap(w.cluster.client.get(NodeRef, undefined, "agent-0"), (n) => (Pods.condition(n, "Ready")?.["status"] === "True" ? Effect.succeed(n) : Effect.fail(new Error("not ready"))))
        )) as Json
        expect(withStatus.status.allocatable).toEqual({ cpu: "2", memory: "4Gi", pods: "110" })
        const lease = (yield* w.cluster.eventually(w.cluster.client.get(LeaseRef, "kube-node-lease", "agent-0"))) as Json
        expect(lease.spec.holderIdentity).toBe("agent-0")
        yield* w.cluster.eventually(
          Effect.flatMap(w.cluster.client.get(LeaseRef, "kube-node-lease", "agent-0"), (l: Json) => (l.spec.renewTime !== lease.spec.renewTime ? Effect.void : Effect.fail(new Error("not renewed"))))
        )
      })
    )
  )

  it.live("runs a scheduled pod: Running and Ready, with a host port in PORT and the status the kubelet writes", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        yield* w.startAgent
        yield* w.cluster.client.create(pod("web", { containers: [{ name: "app", image: "node:20", command: ["node", "server.js", "--port=$(PORT)"], ports: [{ name: "http", containerPort: 8080 }] }] }))
        const running = yield* until(w, "web", ready)
        expect(running).toBe(true)
        const p = yield* get(w, "web")
        expect(p.spec.nodeName).toBe("agent-0")
        expect(p.status).toMatchObject({ phase: "Running", hostIP: "127.0.0.1", podIP: "127.0.0.1", qosClass: "BestEffort" })
        expect(p.status.containerStatuses[0]).toMatchObject({ name: "app", ready: true, started: true, restartCount: 0, state: { running: {} } })
        expect(p.status.containerStatuses[0].containerID).toMatch(/^memory:\/\//)
        const [c] = yield* containersOf(w, "web")
        expect(c!.spec.env).toMatchObject({ PORT: "31000", FLEET_PORT_HTTP: "31000", HOSTNAME: "web", PATH: Agent.defaultPath })
        expect(c!.spec.command).toEqual(["node", "server.js", "--port=31000"])
      })
    )
  )

  it.live("restarts a crashed container (restartCount 1, lastState), then backs off", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        yield* w.startAgent
        yield* w.cluster.client.create(pod("crashy"))
        yield* until(w, "crashy", ready)
        const [first] = yield* containersOf(w, "crashy")
        yield* w.control.exit(first!.id, 1)
        const restarted = yield* until(w, "crashy", (p) => (p.status.containerStatuses?.[0]?.restartCount === 1 && p.status.containerStatuses[0].state.running ? p : undefined))
        expect(restarted.status.containerStatuses[0].lastState).toMatchObject({ terminated: { exitCode: 1, reason: "Error" } })
        // A second crash right away falls in the 10 s backoff.
        const [, second] = yield* containersOf(w, "crashy")
        yield* w.control.exit(second!.id, 2)
        const waiting = yield* until(w, "crashy", (p) => (p.status.containerStatuses?.[0]?.state?.waiting?.reason === "CrashLoopBackOff" ? p : undefined))
        expect(waiting.status.containerStatuses[0]).toMatchObject({ restartCount: 1, ready: false, lastState: { terminated: { exitCode: 2 } } })
        expect(waiting.status.containerStatuses[0].state.waiting.message).toMatch(/^back-off 10s restarting failed container=app pod=crashy_default\(/)
        expect(Pods.isReady(waiting)).toBe(false)
      })
    )
  )

  it.live("runs init containers strictly in order before the app", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world((spec) => (spec.name.startsWith("init") ? { exitAfterMs: 50, exitCode: 0 } : {}))
        yield* w.startAgent
        yield* w.cluster.client.create(
          pod("ordered", {
            initContainers: [
              { name: "init-a", image: "i", command: ["a"] },
              { name: "init-b", image: "i", command: ["b"] }
            ]
          })
        )
        const p = yield* until(w, "ordered", ready)
        expect(p).toBe(true)
        const starts = (yield* w.control.calls).filter((c) => c.op === "container.create").map((c) => c.detail)
        expect(starts).toEqual(["init-a#0", "init-b#0", "app#0"])
        const status = yield* get(w, "ordered")
        expect(status.status.initContainerStatuses.map((s: Json) => [s.name, s.state.terminated?.reason, s.ready])).toEqual([
          ["init-a", "Completed", true],
          ["init-b", "Completed", true]
        ])
      })
    )
  )

  it.live("a failing init container with restartPolicy Never fails the pod; the app never starts", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world((spec) => (spec.name === "init" ? { exitAfterMs: 20, exitCode: 3 } : {}))
        yield* w.startAgent
        yield* w.cluster.client.create(pod("broken", { restartPolicy: "Never", initContainers: [{ name: "init", image: "i", command: ["x"] }] }))
        const p = yield* until(w, "broken", (p) => (p.status?.phase === "Failed" ? p : undefined))
        expect(p.status.initContainerStatuses[0].state.terminated.exitCode).toBe(3)
        expect((yield* containersOf(w, "broken")).map((c) => c.spec.name)).toEqual(["init"])
      })
    )
  )

  it.live("a job-like pod (restartPolicy Never) succeeds when its container exits 0", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world(() => ({ exitAfterMs: 30, exitCode: 0 }))
        yield* w.startAgent
        yield* w.cluster.client.create(pod("once", { restartPolicy: "Never" }))
        const p = yield* until(w, "once", (p) => (p.status?.phase === "Succeeded" ? p : undefined))
        expect(p.status.containerStatuses[0].state.terminated).toMatchObject({ exitCode: 0, reason: "Completed" })
        expect(p.status.conditions.find((c: Json) => c.type === "Ready")).toMatchObject({ status: "False", reason: "PodCompleted" })
      })
    )
  )

  it.live("a failing exec liveness probe kills and restarts the container", () =>
    Effect.scoped(
      Effect.gen(function* () {
        let healthy = true
        const w = yield* world(() => ({ exec: () => ({ exitCode: healthy ? 0 : 1, stdout: "", stderr: healthy ? "" : "unhealthy", timedOut: false }) }))
        yield* w.startAgent
        yield* w.cluster.client.create(
          pod("live", {
            terminationGracePeriodSeconds: 2,
            containers: [{ name: "app", image: "i", command: ["x"], livenessProbe: { exec: { command: ["check"] }, periodSeconds: 1, failureThreshold: 1 } }]
          })
        )
        yield* until(w, "live", ready)
        healthy = false
        const p = yield* until(w, "live", (p) => (p.status.containerStatuses?.[0]?.restartCount === 1 ? p : undefined), 15_000)
        expect(p.status.containerStatuses[0].lastState.terminated).toBeDefined()
        const execs = (yield* w.control.calls).filter((c) => c.op === "container.exec")
        expect(execs.length).toBeGreaterThan(0)
      })
    )
  )

  it.live("an HTTP readiness probe (on the assigned host port) drives Ready both ways", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        yield* w.startAgent
        yield* w.cluster.client.create(
          pod("gated", {
            containers: [{ name: "app", image: "i", command: ["x"], ports: [{ name: "http", containerPort: 8080 }], readinessProbe: { httpGet: { path: "/ready", port: "http" }, periodSeconds: 1, failureThreshold: 1 } }]
          })
        )
        const notYet = yield* until(w, "gated", (p) => (p.status?.phase === "Running" ? p : undefined))
        expect(Pods.isReady(notYet)).toBe(false)
        const [c] = yield* containersOf(w, "gated")
        const port = Number(c!.spec.env!["PORT"])
        w.prober.set(port, "success")
        yield* until(w, "gated", ready)
        expect(w.prober.probed().some((t) => t._tag === "HttpGet" && t.port === port && t.path === "/ready")).toBe(true)
        w.prober.set(port, "failure")
        yield* until(w, "gated", (p) => !Pods.isReady(p) || undefined)
      })
    )
  )

  it.live("deleting a pod stops it gracefully (SIGTERM, then SIGKILL after the grace period) and removes it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world(() => ({ ignoreStopSignal: true }))
        yield* w.startAgent
        yield* w.cluster.client.create(pod("stubborn", { terminationGracePeriodSeconds: 2 }))
        yield* until(w, "stubborn", ready)
        const [c] = yield* containersOf(w, "stubborn")
        const started = Date.now()
        yield* w.cluster.client.delete(PodRef, "default", "stubborn")
        yield* w.cluster.eventually(Effect.flatMap(TestCluster.find(w.cluster, PodRef, "default", "stubborn"), (p) => (p === undefined ? Effect.void : Effect.fail(new Error("still there")))), { timeoutMs: 10_000 })
        const elapsed = Date.now() - started
        expect(elapsed).toBeGreaterThanOrEqual(1_900)
        const stop = (yield* w.control.calls).find((x) => x.op === "container.stop" && x.id === c!.id)
        expect(stop?.detail).toBe("2000")
        yield* w.cluster.eventually(Effect.flatMap(containersOf(w, "stubborn"), (list) => (list.length === 0 ? Effect.void : Effect.fail(new Error("containers left")))))
        expect(yield* w.runtime.sandboxes.list()).toEqual([])
      })
    )
  )

  it.live("refuses a pod that exceeds the node's allocatable: Failed, OutOfcpu, nothing started", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        yield* w.startAgent
        yield* w.cluster.client.create(pod("big", { nodeName: "agent-0", containers: [{ name: "app", image: "i", command: ["x"], resources: { requests: { cpu: "3" } } }] }))
        const p = yield* until(w, "big", (p) => (p.status?.phase === "Failed" ? p : undefined))
        expect(p.status).toMatchObject({ reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000" })
        expect(yield* containersOf(w, "big")).toEqual([])
      })
    )
  )

  it.live("a restarted agent re-adopts running containers without restarting or duplicating them", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        const first = yield* w.startAgent
        yield* w.cluster.client.create(pod("steady", { containers: [{ name: "app", image: "i", command: ["x"], ports: [{ containerPort: 8080 }] }] }))
        yield* until(w, "steady", ready)
        const before = yield* containersOf(w, "steady")
        yield* Scope.close(first.scope, Exit.void)
        const calls = (yield* w.control.calls).length
        const second = yield* w.startAgent
        // Give the new agent a few relists and resyncs.
        yield* Effect.sleep(800)
        const after = yield* containersOf(w, "steady")
        expect(after.map((c) => [c.id, c.status.state])).toEqual(before.map((c) => [c.id, "running"]))
        const since = (yield* w.control.calls).slice(calls).filter((c) => c.op !== "container.exec")
        expect(since).toEqual([])
        expect(after[0]!.spec.env!["PORT"]).toBe(before[0]!.spec.env!["PORT"])
        expect(second.agent.metrics().failures).toBe(0)
        expect(Pods.isReady(yield* get(w, "steady"))).toBe(true)
      })
    )
  )

  it.live("projects ConfigMap env and files, and rewrites the files when the ConfigMap changes", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        yield* w.startAgent
        yield* w.cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", namespace: "default" }, data: { MODE: "blue", "app.conf": "v=1" } })
        yield* w.cluster.client.create(
          pod("configured", {
            volumes: [{ name: "conf", configMap: { name: "cfg" } }],
            containers: [{ name: "app", image: "i", command: ["x"], envFrom: [{ configMapRef: { name: "cfg" } }], volumeMounts: [{ name: "conf", mountPath: "/etc/app" }] }]
          })
        )
        yield* until(w, "configured", ready)
        const p = yield* get(w, "configured")
        const [c] = yield* containersOf(w, "configured")
        expect(c!.spec.env).toMatchObject({ MODE: "blue" })
        const dir = `/var/lib/fleet/pods/${p.metadata.uid}/volumes/kubernetes.io~configmap/conf`
        expect(c!.spec.mounts).toEqual([{ hostPath: dir, containerPath: "/etc/app", readOnly: true }])
        expect(c!.spec.env!["FLEET_VOLUME_CONF"]).toBe(dir)
        expect(w.writer.files(dir)?.get("app.conf")?.data).toBe("v=1")
        yield* w.cluster.client.patch(ConfigMapRef, "default", "cfg", "merge", { data: { "app.conf": "v=2" } })
        yield* w.cluster.eventually(Effect.suspend(() => (w.writer.files(dir)?.get("app.conf")?.data === "v=2" ? Effect.void : Effect.fail(new Error("not updated")))), { timeoutMs: 5_000 })
      })
    )
  )

  it.live("a missing ConfigMap keeps the container waiting with the kubelet's reason until it appears", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        yield* w.startAgent
        yield* w.cluster.client.create(pod("early", { containers: [{ name: "app", image: "i", command: ["x"], env: [{ name: "K", valueFrom: { configMapKeyRef: { name: "later", key: "k" } } }] }] }))
        const p = yield* until(w, "early", (p) => (p.status?.containerStatuses?.[0]?.state?.waiting?.reason === "CreateContainerConfigError" ? p : undefined))
        expect(p.status.containerStatuses[0].state.waiting.message).toBe('configmap "later" not found')
        yield* w.cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "later", namespace: "default" }, data: { k: "v" } })
        yield* until(w, "early", ready)
      })
    )
  )

  it.live("stopAll stops every running container gracefully, removes the sandboxes and leaves the pods in the API", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        const { agent } = yield* w.startAgent
        yield* w.cluster.client.create(pod("a"))
        yield* w.cluster.client.create(pod("b", { terminationGracePeriodSeconds: 3 }))
        yield* until(w, "a", ready)
        yield* until(w, "b", ready)
        yield* agent.stopAll
        const list = yield* w.runtime.containers.list()
        expect(list.filter((c) => c.status.state === "running")).toEqual([])
        expect(yield* w.runtime.sandboxes.list()).toEqual([])
        const stops = (yield* w.control.calls).filter((c) => c.op === "container.stop").map((c) => c.detail).sort()
        expect(stops).toEqual(["3000", "30000"])
        expect(yield* TestCluster.find(w.cluster, PodRef, "default", "a")).toBeDefined()
      })
    )
  )

  it.live("removes containers of pods the API no longer has", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world()
        // A container left by a pod deleted while no agent ran.
        const sb = yield* w.runtime.sandboxes.create({ podUid: "gone-uid", name: "gone", namespace: "default", network: "host" })
        const id = yield* w.runtime.containers.create({
          sandboxId: sb.id,
          name: "app",
          attempt: 0,
          command: ["x"],
          labels: { [Runtime.Labels.podUid]: "gone-uid", [Runtime.Labels.podName]: "gone", [Runtime.Labels.containerName]: "app" }
        })
        yield* w.runtime.containers.start(id)
        yield* w.startAgent
        yield* w.cluster.eventually(Effect.flatMap(w.runtime.containers.list(), (list) => (list.length === 0 ? Effect.void : Effect.fail(new Error("orphan still there")))))
        expect(yield* w.runtime.sandboxes.list()).toEqual([])
      })
    )
  )
})
