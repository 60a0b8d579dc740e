/**
 * An in-process Fleet cluster for tests — Fleet's own and those of services built on it. One call
 * gives the real API pipeline (validation, defaulting, admission, watch caches) over a memory
 * store (or a store you pass), the controllers you choose, the scheduler and simulated
 * nodes whose pods start, become ready, exit and terminate as a kubelet would report them, with
 * failures you can inject: crash a container, fail readiness, silence a node.
 *
 *   const cluster = yield* TestCluster.make({ nodes: 3, controllers: Controllers.all() })
 *   yield* cluster.client.create(deployment)
 *   yield* cluster.eventually(checkAllReady)
 *
 * Everything lives in the surrounding Scope and stops with it. The client talks to the API handler
 * in memory (no sockets), authenticated as the cluster admin.
 */
import { Duration, Effect, Option, type Scope } from "effect"
import * as Admission from "../admission/index.js"
import type * as AdmissionApi from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import * as ApiServer from "../api/ApiServer.js"
import * as Binding from "../api/Binding.js"
import * as Eviction from "../policy/Eviction.js"
import * as MetricsApi from "../api/MetricsApi.js"
import * as MetricsSource from "../api/MetricsSource.js"
import type { UserInfo } from "../api/Http.js"
import { ApiClient } from "../client/ApiClient.js"
import * as Client from "../client/Client.js"
import * as InProcess from "../client/InProcess.js"
import * as Controller from "../controllers/Controller.js"
import type * as Informer from "../informer/Informer.js"
import * as Status from "../model/Status.js"
import { nameOf, namespaceOf } from "../object/Metadata.js"
import * as Views from "../object/Views.js"
import * as Placement from "../scheduler/Placement.js"
import type { Profile } from "../scheduler/Framework.js"
import * as Scheduler from "../scheduler/Scheduler.js"
import { makeMemory, type StoreService } from "../store/Store.js"
import * as SimulatedKubelet from "./SimulatedKubelet.js"

/** A node of the test cluster. */
export type NodeSpec = SimulatedKubelet.NodeSpec

/** How to build a test cluster. */
export interface Options {
  /** Nodes to start with: a count (`node-0`, `node-1`, …) or specs (default 1). */
  readonly nodes?: number | ReadonlyArray<NodeSpec>
  /** The controllers to run (default none: the scheduler and simulated nodes only). */
  readonly controllers?: ReadonlyArray<Controller.Reconciler>
  /**
   * CustomResourceDefinitions created before the controllers start: a controller of a custom
   * resource needs its CRD served before its informer can list (`make` waits for every informer).
   */
  readonly crds?: ReadonlyArray<Client.JsonObject>
  /** Run the scheduler (default true). */
  readonly scheduler?: boolean
  /** Scheduler profiles (default: `default-scheduler` with the default plugins). */
  readonly schedulerProfiles?: ReadonlyArray<Profile>
  /** The store (default: a new memory store, closed with the cluster). */
  readonly store?: StoreService
  /** Admission plugins added after the built-in chain. */
  readonly admission?: ReadonlyArray<AdmissionApi.Plugin>
  /** Extra subresources; `pods/binding` and `pods/eviction` are always served. */
  readonly subresources?: ReadonlyArray<ApiServer.SubresourceHandler>
  /** How long a bound pod takes to run (default 20 ms). */
  readonly podStartupMs?: number
  /** How often nodes renew their lease (default 200 ms). */
  readonly heartbeatMs?: number
  /** Seconds pods tolerate a not-ready or unreachable node before eviction (default 300). */
  readonly tolerationSeconds?: number
  /** The Service cluster IP range (default `10.96.0.0/12`). */
  readonly serviceClusterIpRange?: string
  /** Where `metrics.k8s.io` reads usage (default: a new memory source, fed with `metricsSource.record`). */
  readonly metricsSource?: MetricsSource.MetricsSourceService
}

/** A running test cluster. */
export interface TestCluster {
  /** A client authenticated as the cluster admin. */
  readonly client: Client.Client
  /** The API handler (for raw requests). */
  readonly handle: InProcess.Handle
  /** The admin bearer token (for clients you build yourself over `fetch`). */
  readonly adminToken: string
  /** A `fetch` that reaches the API in memory. */
  readonly fetch: typeof globalThis.fetch
  /** The controllers' shared informers. */
  readonly informers: Informer.Informers
  /** The controllers' metrics. */
  readonly metrics: () => ReadonlyArray<Controller.Metrics>
  /** The source the `metrics.k8s.io` API answers from: record node and pod usage here. */
  readonly metricsSource: MetricsSource.MetricsSourceService
  /** Waits until informers have synced and no controller has work queued or in flight. */
  readonly idle: Effect.Effect<void>
  /** The running scheduler (its metrics and placement explanations), unless turned off. */
  readonly scheduler: () => Scheduler.Running | undefined
  /** Names of the nodes added so far (and not removed). */
  readonly nodeNames: () => ReadonlyArray<string>
  readonly addNode: (spec: NodeSpec) => Effect.Effect<void, unknown>
  readonly removeNode: (name: string) => Effect.Effect<void, unknown>
  /** Silence a node (its lease and status stop being renewed; its pods are left as they are). */
  readonly stopHeartbeats: (node: string) => void
  readonly resumeHeartbeats: (node: string) => void
  /** Make a pod's containers exit with code 1. */
  readonly crashContainer: (namespace: string, pod: string) => void
  /** Force a pod's readiness. */
  readonly setReady: (namespace: string, pod: string, ready: boolean) => void
  /** Retry `check` until it succeeds or `timeoutMs` passes (default 20 s); fails with its last error. */
  readonly eventually: <A, E, R>(check: Effect.Effect<A, E, R>, options?: { readonly timeoutMs?: number; readonly intervalMs?: number }) => Effect.Effect<A, E | Error, R>
}

const adminUser: UserInfo = { name: "fleet:test-admin", uid: "test-admin", groups: ["system:masters", "system:authenticated"] }
const controllerUser: UserInfo = { name: "system:kube-controller-manager", uid: "kube-controller-manager", groups: ["system:masters", "system:authenticated"] }

const randomToken = () => {
  const bytes = new Uint8Array(24)
  crypto.getRandomValues(bytes)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")
}

/** Poll `check` until it succeeds (a poll with a deadline, never a fixed sleep). */
export const eventually = <A, E, R>(
  check: Effect.Effect<A, E, R>,
  options: { readonly timeoutMs?: number; readonly intervalMs?: number } = {}
): Effect.Effect<A, E | Error, R> =>
  Effect.gen(function* () {
    const deadline = Date.now() + (options.timeoutMs ?? 20_000)
    for (;;) {
      const result = yield* Effect.either(check)
      if (result._tag === "Right") return result.right
      if (Date.now() >= deadline) return yield* Effect.fail(result.left)
      yield* Effect.sleep(Duration.millis(options.intervalMs ?? 25))
    }
  })

/** Start a cluster in the current scope. */
export const make = (options: Options = {}): Effect.Effect<TestCluster, never, Scope.Scope> =>
  Effect.gen(function* () {
    const store = options.store ?? (yield* Effect.acquireRelease(Effect.sync(makeMemory), (s) => Effect.sync(s.close)))
    const adminToken = randomToken()
    const controllerToken = randomToken()
    const users = new Map([
      [adminToken, adminUser],
      [controllerToken, controllerUser]
    ])
    // The scheduler starts after the API it serves explanations through.
    const current: { scheduler?: Scheduler.Running } = {}
    const builtIn = yield* Admission.make({
      store,
      region: "local",
      ...(options.tolerationSeconds === undefined
        ? {}
        : { tolerations: { defaultNotReadyTolerationSeconds: options.tolerationSeconds, defaultUnreachableTolerationSeconds: options.tolerationSeconds } }),
      ...(options.serviceClusterIpRange === undefined ? {} : { serviceClusterIpRange: options.serviceClusterIpRange })
    })
    const server = yield* ApiServer.make({
      store,
      authenticate: (headers) => {
        const m = /^Bearer (.+)$/.exec(headers["authorization"] ?? "")
        const user = m === null ? undefined : users.get(m[1]!)
        return user === undefined ? Effect.fail(ApiError.of(Status.unauthorized())) : Effect.succeed(user)
      },
      admission: [...builtIn, ...(options.admission ?? [])],
      subresources: [Binding.handler, Eviction.subresource, Placement.handler(() => current.scheduler?.explain), ...(options.subresources ?? [])],
      waitForRevision: "10 seconds"
    })
    const metricsSource = options.metricsSource ?? MetricsSource.makeMemory()
    MetricsApi.install(server.registry, metricsSource, store)
    const fetch = InProcess.fetch(server.handle, { client: "test-cluster" })
    const client = Client.make({ server: "http://fleet.test", token: adminToken, fetch })
    const controllerClient = Client.make({ server: "http://fleet.test", token: controllerToken, transport: InProcess.transport(server.handle, { client: "controllers" }) })

    // The namespaces every cluster has.
    for (const name of ["default", "kube-system", "kube-public", "kube-node-lease"]) {
      yield* Effect.ignore(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name } }))
    }
    for (const crd of options.crds ?? []) yield* Effect.orDie(client.create(crd))

    const kubelets = yield* SimulatedKubelet.make(controllerClient, {
      ...(options.podStartupMs === undefined ? {} : { podStartupMs: options.podStartupMs }),
      ...(options.heartbeatMs === undefined ? {} : { heartbeatMs: options.heartbeatMs })
    })
    const running = yield* Controller.start({
      reconcilers: [...(options.controllers ?? []), kubelets.reconciler]
    }).pipe(Effect.provideService(ApiClient, controllerClient))
    kubelets.bindQueue((key) => running.enqueue(kubelets.reconciler.name, key))
    const scheduler =
      options.scheduler === false
        ? undefined
        : yield* Effect.orDie(
            Scheduler.start({
              informers: running.informers,
              // Short backoffs: a test should not wait the production 1–10 s after a lost race.
              queue: { initialBackoffMs: 50, maxBackoffMs: 1_000 },
              ...(options.schedulerProfiles === undefined ? {} : { profiles: options.schedulerProfiles })
            }).pipe(Effect.provideService(ApiClient, controllerClient))
          )
    if (scheduler !== undefined) current.scheduler = scheduler
    const idle = Effect.gen(function* () {
      for (;;) {
        yield* running.idle
        const m = scheduler?.metrics()
        if (m === undefined || (m.queue.active === 0 && m.queue.inFlight === 0 && m.bindingsInFlight === 0)) return
        yield* Effect.sleep(20)
      }
    })

    const names: Array<string> = []
    const addNode = (spec: NodeSpec) =>
      Effect.tap(kubelets.addNode(spec), () => Effect.sync(() => names.push(spec.name)))
    const specs: ReadonlyArray<NodeSpec> =
      typeof options.nodes === "number" || options.nodes === undefined
        ? Array.from({ length: typeof options.nodes === "number" ? options.nodes : 1 }, (_, i) => ({ name: `node-${i}` }))
        : options.nodes
    for (const spec of specs) yield* Effect.orDie(addNode(spec))
    yield* idle

    const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
    return {
      client,
      handle: server.handle,
      adminToken,
      fetch,
      informers: running.informers,
      metrics: running.metrics,
      metricsSource,
      idle,
      scheduler: () => scheduler,
      nodeNames: () => [...names],
      addNode,
      removeNode: (name) =>
        Effect.tap(kubelets.removeNode(name), () =>
          Effect.sync(() => {
            const i = names.indexOf(name)
            if (i >= 0) names.splice(i, 1)
          })
        ),
      stopHeartbeats: kubelets.stopHeartbeats,
      resumeHeartbeats: (node) => {
        kubelets.resumeHeartbeats(node)
        for (const pod of running.informers.for(PodRef).list()) {
          if (Views.pod(pod).spec?.nodeName === node) running.enqueue(kubelets.reconciler.name, `${namespaceOf(pod)}/${nameOf(pod)}`)
        }
      },
      crashContainer: kubelets.crashContainer,
      setReady: kubelets.setReady,
      eventually
    }
  })

/** The pods of `namespace` matching a label selector, as the API lists them now. */
export const pods = (cluster: Pick<TestCluster, "client">, namespace: string, labelSelector?: string) =>
  Effect.map(
    cluster.client.list({ apiVersion: "v1", kind: "Pod" }, { namespace, ...(labelSelector === undefined ? {} : { labelSelector }) }),
    (list) => (list["items"] as ReadonlyArray<Client.JsonObject> | undefined) ?? []
  )

/** The object if it exists now. */
export const find = (cluster: Pick<TestCluster, "client">, ref: Client.ResourceRef, namespace: string | undefined, name: string) =>
  Effect.map(Effect.option(cluster.client.get(ref, namespace, name)), Option.getOrUndefined)
