/**
 * Simulated node agents for the test cluster: each node renews its Lease in `kube-node-lease` and
 * keeps its Ready condition True while its heartbeat runs; the pods bound to it start, run,
 * become ready, exit, restart and terminate as a kubelet would report them — without running
 * anything. A node whose heartbeats are stopped goes silent altogether (no lease, no pod status,
 * no deletion confirmations), which is what a partitioned or dead host looks like to the control
 * plane.
 *
 * Pod behaviour is steered by annotations on the pod (usually its template):
 *   sim.fleet.koder.dev/exit-code  the containers exit with this code (else they run forever)
 *   sim.fleet.koder.dev/run-ms     …after running this long (default 0)
 *   sim.fleet.koder.dev/ready      "false": the pod runs but never becomes Ready
 */
import { Clock, Effect, Fiber, type Scope } from "effect"
import type * as Client from "../client/Client.js"
import type * as Controller from "../controllers/Controller.js"
import * as Informer from "../informer/Informer.js"
import * as Pods from "../object/Pods.js"
import { type JsonObject, asArray, asObject } from "../object/Json.js"
import { isTerminating, metadataOf, rfc3339 } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"



/** The annotation giving the simulated containers' exit code. */
export const exitCodeAnnotation = "sim.fleet.koder.dev/exit-code"
/** The annotation giving how long simulated containers run before exiting. */
export const runMsAnnotation = "sim.fleet.koder.dev/run-ms"
/** The annotation that keeps a simulated pod unready (`"false"`). */
export const readyAnnotation = "sim.fleet.koder.dev/ready"


/** A node of the test cluster. */
export interface NodeSpec {
  readonly name: string
  readonly labels?: Readonly<Record<string, string>>
  readonly taints?: ReadonlyArray<{ readonly key: string; readonly value?: string; readonly effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute" }>
  /** Allocatable resources (default cpu 8, memory 32Gi, pods 110). */
  readonly capacity?: Readonly<{ cpu?: string; memory?: string; pods?: string }>
}

interface PodState {
  boundAt: number
  runningAt: number | undefined
  restarts: number
  crash: boolean
  readyOverride: boolean | undefined
}

interface NodeState {
  readonly index: number
  alive: boolean
  nextIp: number
  heartbeat: Fiber.RuntimeFiber<void> | undefined
}

/** MicroTime (`2024-01-02T03:04:05.123456Z`), as Leases carry. */
const microTime = (ms: number) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z")

/** The node object the cluster creates for `spec`. */
export const nodeObject = (spec: NodeSpec): JsonObject => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: spec.name, labels: { "kubernetes.io/hostname": spec.name, "kubernetes.io/os": "linux", ...(spec.labels ?? {}) } },
  spec: spec.taints === undefined || spec.taints.length === 0 ? {} : { taints: spec.taints }
})

const readyConditions = (now: string) => [
  { type: "MemoryPressure", status: "False", reason: "KubeletHasSufficientMemory", message: "kubelet has sufficient memory available", lastHeartbeatTime: now, lastTransitionTime: now },
  { type: "DiskPressure", status: "False", reason: "KubeletHasNoDiskPressure", message: "kubelet has no disk pressure", lastHeartbeatTime: now, lastTransitionTime: now },
  { type: "PIDPressure", status: "False", reason: "KubeletHasSufficientPID", message: "kubelet has sufficient PID available", lastHeartbeatTime: now, lastTransitionTime: now },
  { type: "Ready", status: "True", reason: "KubeletReady", message: "kubelet is posting ready status", lastHeartbeatTime: now, lastTransitionTime: now }
]

/** Options of the simulation. */
export interface Options {
  /** How long a bound pod takes to be Running (default 20 ms). */
  readonly podStartupMs?: number
  /** How often nodes renew their lease (default 200 ms). */
  readonly heartbeatMs?: number
}

/** The simulated agents of a cluster. */
export interface Kubelets {
  /** The reconciler that moves pods through their lives; run it with the other controllers. */
  readonly reconciler: Controller.Reconciler
  /** Register a node, create its Node object and start its heartbeat. */
  readonly addNode: (spec: NodeSpec) => Effect.Effect<void, unknown>
  /** Stop a node's agent and delete its Node object. */
  readonly removeNode: (name: string) => Effect.Effect<void, unknown>
  /** Silence a node: no heartbeats, no pod updates. */
  readonly stopHeartbeats: (name: string) => void
  /** Let a silenced node talk again. */
  readonly resumeHeartbeats: (name: string) => void
  /** Make the containers of a pod exit with code 1 (restarted or failed per restartPolicy). */
  readonly crashContainer: (namespace: string, name: string) => void
  /** Force a pod's readiness (overrides the annotation). */
  readonly setReady: (namespace: string, name: string, ready: boolean) => void
  /** Set by the cluster: queue a pod key on the reconciler. */
  bindQueue: (enqueue: (key: string) => void) => void
}

/** Make the simulation; heartbeats live in the current scope. */
export const make = (client: Client.Client, options: Options = {}): Effect.Effect<Kubelets, never, Scope.Scope> =>
  Effect.gen(function* () {
    const startupMs = options.podStartupMs ?? 20
    const heartbeatMs = options.heartbeatMs ?? 200
    const nodes = new Map<string, NodeState>()
    const pods = new Map<string, PodState>()
    let enqueue: (key: string) => void = () => undefined
    let nodeCount = 0

    const heartbeat = (name: string) =>
      Effect.gen(function* () {
        const state = nodes.get(name)
        if (state === undefined || !state.alive) return
        const now = yield* Clock.currentTimeMillis
        const renewed = yield* Effect.either(client.patch(ResourceRefs.Lease, "kube-node-lease", name, "merge", { spec: { renewTime: microTime(now), holderIdentity: name } }))
        if (renewed._tag === "Left") {
          yield* Effect.ignore(
            client.create({
              apiVersion: "coordination.k8s.io/v1",
              kind: "Lease",
              metadata: { name, namespace: "kube-node-lease" },
              spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: microTime(now) }
            })
          )
        }
        const node = yield* Effect.either(client.get(ResourceRefs.Node, undefined, name))
        if (node._tag === "Right" && Pods.condition(node.right, "Ready")?.["status"] !== "True") {
          yield* Effect.ignore(client.patch(ResourceRefs.Node, undefined, name, "merge", { status: { conditions: readyConditions(rfc3339(now)) } }, "status"))
        }
      }).pipe(Effect.ignore)

    const startHeartbeat = (name: string) => {
      const state = nodes.get(name)
      if (state === undefined || state.heartbeat !== undefined) return
      state.heartbeat = Effect.runFork(
        Effect.forever(heartbeat(name).pipe(Effect.zipRight(Effect.sleep(heartbeatMs)))).pipe(Effect.interruptible)
      )
    }
    const stopHeartbeat = (name: string) => {
      const state = nodes.get(name)
      if (state?.heartbeat === undefined) return
      Effect.runFork(Fiber.interrupt(state.heartbeat))
      state.heartbeat = undefined
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => [...nodes.keys()].forEach(stopHeartbeat)))

    const podKey = (namespace: string, name: string) => `${namespace}/${name}`

    const patchStatus = (pod: JsonObject, status: Record<string, unknown>) =>
      client.patch(ResourceRefs.Pod, metadataOf(pod)["namespace"] as string, String(metadataOf(pod)["name"]), "merge", { status }, "status")

    const containerStatuses = (pod: JsonObject, running: boolean, ready: boolean, restarts: number, startedAt: string, terminated?: { exitCode: number; at: string }) =>
      asArray(asObject(pod["spec"])["containers"]).map((c) => ({
        name: asObject(c)["name"],
        image: asObject(c)["image"],
        imageID: `sim://${String(asObject(c)["image"])}`,
        containerID: `sim://${String(metadataOf(pod)["uid"])}/${String(asObject(c)["name"])}`,
        ready: running && ready,
        started: running,
        restartCount: restarts,
        state: terminated
          ? { terminated: { exitCode: terminated.exitCode, reason: terminated.exitCode === 0 ? "Completed" : "Error", startedAt, finishedAt: terminated.at } }
          : { running: { startedAt } }
      }))

    const conditions = (ready: boolean, now: string) => [
      { type: "PodReadyToStartContainers", status: "True", lastTransitionTime: now },
      { type: "Initialized", status: "True", lastTransitionTime: now },
      { type: "ContainersReady", status: ready ? "True" : "False", lastTransitionTime: now },
      { type: "Ready", status: ready ? "True" : "False", lastTransitionTime: now },
      { type: "PodScheduled", status: "True", lastTransitionTime: now }
    ]

    const keepTransition = (pod: JsonObject, list: ReadonlyArray<Record<string, unknown>>) =>
      list.map((c) => {
        const old = Pods.condition(pod, String(c["type"]))
        return old !== undefined && old["status"] === c["status"] && old["lastTransitionTime"] !== undefined ? { ...c, lastTransitionTime: old["lastTransitionTime"] } : c
      })

    const reconcile = (key: string): Effect.Effect<Controller.Result | void, never> =>
      Effect.gen(function* () {
        const { namespace, name } = Informer.splitKey(key)
        const pod = (yield* Effect.either(client.get(ResourceRefs.Pod, namespace, name))).pipe((e) => (e._tag === "Right" ? e.right : undefined))
        if (pod === undefined) {
          pods.delete(key)
          return
        }
        const nodeName = asObject(pod["spec"])["nodeName"]
        if (typeof nodeName !== "string") return
        const node = nodes.get(nodeName)
        if (node === undefined || !node.alive) return
        const nowMs = yield* Clock.currentTimeMillis
        const now = rfc3339(nowMs)
        const m = metadataOf(pod)
        const phase = Pods.phase(pod)
        if (isTerminating(pod) || phase === "Succeeded" || phase === "Failed") {
          if (!isTerminating(pod)) return
          // Containers stop at once here; confirm the deletion as a kubelet does.
          yield* Effect.ignore(client.delete(ResourceRefs.Pod, namespace, name, { gracePeriodSeconds: 0, preconditions: { uid: m["uid"] } }))
          pods.delete(key)
          return
        }
        let state = pods.get(key)
        if (state === undefined || state.boundAt === 0) {
          state = { boundAt: nowMs, runningAt: undefined, restarts: 0, crash: state?.crash ?? false, readyOverride: state?.readyOverride }
          pods.set(key, state)
        }
        const annotations = asObject(m["annotations"]) as Record<string, string>
        const ready = state.readyOverride ?? annotations[readyAnnotation] !== "false"
        if (state.runningAt === undefined) {
          const left = state.boundAt + startupMs - nowMs
          if (left > 0) return { requeueAfterMs: left }
          state.runningAt = nowMs
          const ip = `10.244.${node.index}.${(node.nextIp++ % 250) + 2}`
          yield* patchStatus(pod, {
            phase: "Running",
            hostIP: `10.0.0.${node.index + 2}`,
            podIP: ip,
            podIPs: [{ ip }],
            startTime: now,
            qosClass: "BestEffort",
            conditions: keepTransition(pod, conditions(ready, now)),
            containerStatuses: containerStatuses(pod, true, ready, 0, now)
          }).pipe(Effect.ignore)
        }
        const exitCode = annotations[exitCodeAnnotation]
        const runMs = Number(annotations[runMsAnnotation] ?? 0)
        const exiting = state.crash || (exitCode !== undefined && nowMs >= state.runningAt + runMs)
        if (exiting) {
          const code = state.crash ? 1 : Number(exitCode)
          state.crash = false
          const policy = String(asObject(pod["spec"])["restartPolicy"] ?? "Always")
          const restart = policy === "Always" || (policy === "OnFailure" && code !== 0)
          const started = rfc3339(state.runningAt)
          if (restart) {
            state.restarts++
            state.runningAt = nowMs
            const statuses = containerStatuses(pod, true, ready, state.restarts, now).map((s) => ({
              ...s,
              lastState: { terminated: { exitCode: code, reason: code === 0 ? "Completed" : "Error", startedAt: started, finishedAt: now } }
            }))
            yield* patchStatus(pod, { conditions: keepTransition(pod, conditions(ready, now)), containerStatuses: statuses }).pipe(Effect.ignore)
            return exitCode === undefined ? undefined : { requeueAfterMs: Math.max(1, runMs) }
          }
          yield* patchStatus(pod, {
            phase: code === 0 ? "Succeeded" : "Failed",
            conditions: keepTransition(pod, conditions(false, now)),
            containerStatuses: containerStatuses(pod, false, false, state.restarts, started, { exitCode: code, at: now })
          }).pipe(Effect.ignore)
          return
        }
        if (Pods.isReady(pod) !== ready && Pods.phase(pod) === "Running") {
          yield* patchStatus(pod, {
            conditions: keepTransition(pod, conditions(ready, now)),
            containerStatuses: containerStatuses(pod, true, ready, state.restarts, rfc3339(state.runningAt))
          }).pipe(Effect.ignore)
        }
        if (exitCode !== undefined) return { requeueAfterMs: Math.max(1, state.runningAt + runMs - nowMs) }
      })

    const kubelets: Kubelets = {
      reconciler: {
        name: "simulated-kubelet",
        primary: ResourceRefs.Pod,
        workers: 4,
        reconcile: (key) => reconcile(key)
      },
      addNode: (spec) =>
        Effect.gen(function* () {
          nodes.set(spec.name, { index: nodeCount++, alive: true, nextIp: 0, heartbeat: undefined })
          yield* client.create(nodeObject(spec)).pipe(Effect.catchIf((e) => e.status.code === 409, () => Effect.void))
          const now = rfc3339(yield* Clock.currentTimeMillis)
          const allocatable = { cpu: spec.capacity?.cpu ?? "8", memory: spec.capacity?.memory ?? "32Gi", pods: spec.capacity?.pods ?? "110" }
          const index = nodes.get(spec.name)!.index
          yield* client.patch(ResourceRefs.Node, undefined, spec.name, "merge", {
            status: {
              capacity: allocatable,
              allocatable,
              conditions: readyConditions(now),
              addresses: [{ type: "InternalIP", address: `10.0.0.${index + 2}` }, { type: "Hostname", address: spec.name }],
              nodeInfo: {
                machineID: spec.name,
                systemUUID: spec.name,
                bootID: spec.name,
                kernelVersion: "6.1.0-sim",
                osImage: "Fleet simulated node",
                kubeletVersion: "v1.31.0-fleet-sim",
                kubeProxyVersion: "",
                operatingSystem: "linux",
                architecture: "amd64",
                containerRuntimeVersion: "sim://1"
              }
            }
          }, "status")
          startHeartbeat(spec.name)
        }),
      removeNode: (name) =>
        Effect.gen(function* () {
          stopHeartbeat(name)
          nodes.delete(name)
          yield* client.delete(ResourceRefs.Node, undefined, name).pipe(Effect.catchIf((e) => e.status.code === 404, () => Effect.void))
        }),
      stopHeartbeats: (name) => {
        const state = nodes.get(name)
        if (state === undefined) return
        state.alive = false
        stopHeartbeat(name)
      },
      resumeHeartbeats: (name) => {
        const state = nodes.get(name)
        if (state === undefined) return
        state.alive = true
        startHeartbeat(name)
        // Catch up on everything that happened to its pods while it was silent.
        for (const key of pods.keys()) enqueue(key)
      },
      crashContainer: (namespace, name) => {
        const key = podKey(namespace, name)
        const state = pods.get(key) ?? { boundAt: 0, runningAt: undefined, restarts: 0, crash: false, readyOverride: undefined }
        state.crash = true
        pods.set(key, state)
        enqueue(key)
      },
      setReady: (namespace, name, ready) => {
        const key = podKey(namespace, name)
        const state = pods.get(key) ?? { boundAt: 0, runningAt: undefined, restarts: 0, crash: false, readyOverride: undefined }
        state.readyOverride = ready
        pods.set(key, state)
        enqueue(key)
      },
      bindQueue: (f) => {
        enqueue = f
      }
    }
    return kubelets
  })
