/**
 * The in-process cluster the scheduler benchmark runs against: the real API pipeline
 * (authentication, the built-in admission chain, validation, watch caches) over the real SQLite
 * store, reached through the in-memory client, with shared informers — and simulated nodes that
 * are only Node objects (Ready, with allocatable resources), as kube-scheduler's scheduler_perf
 * simulates them: no kubelets, no heartbeats, no pod lifecycle.
 *
 * Why not `TestCluster`: `@koder/fleet-core/testing` imports vitest (the Store contract suite), which
 * refuses to load outside the vitest runner, and `TestCluster` always runs the simulated kubelet
 * reconciler, which reads every pod on every change (a GET per pod created and per pod bound)
 * during the very window the benchmark times.
 */
import { AdmissionPlugins, ApiError, ApiServer, Binding, Client, Eviction, Informer, InProcess, Placement, Status } from "@koder/fleet-core"
import { SqliteStore } from "@koder/fleet-store-sqlite"
import { Effect, type Scope } from "effect"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** A simulated node: a name, labels and allocatable resources (scheduler_perf's node-default). */
export interface NodeSpec {
  readonly name: string
  readonly labels?: Readonly<Record<string, string>>
  /** Allocatable cpu (default "4"). */
  readonly cpu?: string
  /** Allocatable memory (default "32Gi"). */
  readonly memory?: string
  /** Allocatable pods (default "110"). */
  readonly pods?: string
}

/** A running benchmark cluster. */
export interface BenchCluster {
  /** A client authenticated as the cluster admin. */
  readonly client: Client.Client
  /** Shared informers over `client`. */
  readonly informers: Informer.Informers
  /** The SQLite store (its write statistics). */
  readonly store: SqliteStore.SqliteStoreService
  /** Where the store file lives. */
  readonly dir: string
  /** The scheduler's explanations, once a benchmark installs one (served at pods/placement). */
  explain: Placement.Explain | undefined
}

const NodeRef: Client.ResourceRef = { apiVersion: "v1", kind: "Node" }

/** The Node object of a spec, status included (a node registers itself with its status, as a kubelet does). */
export const nodeObject = (spec: NodeSpec, now: string): Client.JsonObject => {
  const allocatable = { cpu: spec.cpu ?? "4", memory: spec.memory ?? "32Gi", pods: spec.pods ?? "110" }
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: spec.name, labels: { "kubernetes.io/hostname": spec.name, "kubernetes.io/os": "linux", ...(spec.labels ?? {}) } },
    spec: {},
    status: {
      capacity: allocatable,
      allocatable,
      conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", message: "kubelet is posting ready status", lastHeartbeatTime: now, lastTransitionTime: now }]
    }
  }
}

/**
 * Open a SQLite store in a fresh temp dir (on tmpfs when `/dev/shm` exists: the benchmark measures
 * the scheduler, not the disk; the store keeps its durable settings) and serve the API over it.
 * Everything, the directory included, goes with the scope.
 */
export const make = (): Effect.Effect<BenchCluster, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    // Removed with the scope, or at process exit when a signal or a failure cuts the scope short.
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const d = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "fleet-sched-bench-"))
        const remove = () => rmSync(d, { recursive: true, force: true })
        process.once("exit", remove)
        return { d, remove }
      }),
      ({ d, remove }) =>
        Effect.sync(() => {
          process.removeListener("exit", remove)
          rmSync(d, { recursive: true, force: true })
        })
    ).pipe(Effect.map(({ d }) => d))
    const store = yield* SqliteStore.make({ filename: join(dir, "store.db") })
    const token = "scheduler-bench-admin"
    const admin = { name: "fleet:bench-admin", uid: "bench-admin", groups: ["system:masters", "system:authenticated"] }
    const admission = yield* AdmissionPlugins.make({ store, region: "local" })
    const cluster: { -readonly [K in keyof BenchCluster]: BenchCluster[K] } = {
      client: undefined as unknown as Client.Client,
      informers: undefined as unknown as Informer.Informers,
      store,
      dir,
      explain: undefined
    }
    const server = yield* ApiServer.make({
      store,
      authenticate: (headers) =>
        headers["authorization"] === `Bearer ${token}` ? Effect.succeed(admin) : Effect.fail(ApiError.of(Status.unauthorized())),
      admission,
      subresources: [Binding.handler, Eviction.subresource, Placement.handler(() => cluster.explain)],
      waitForRevision: "10 seconds"
    })
    cluster.client = Client.make({ server: "http://fleet.bench", token, transport: InProcess.transport(server.handle, { client: "scheduler-bench" }) })
    cluster.informers = yield* Informer.makeShared(cluster.client)
    for (const name of ["default", "kube-system"]) {
      yield* Effect.ignore(cluster.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name } }))
    }
    return cluster
  })

/** Register `specs` as Ready nodes, `concurrency` creates in flight; resolves once the node informer holds them all. */
export const addNodes = (cluster: BenchCluster, specs: ReadonlyArray<NodeSpec>, concurrency = 16): Effect.Effect<void, unknown> =>
  Effect.gen(function* () {
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, "Z")
    yield* Effect.forEach(specs, (spec) => cluster.client.create(nodeObject(spec, now)), { concurrency, discard: true })
    // Counted as they arrive: listing on every event would be quadratic in the node count.
    const nodes = cluster.informers.for(NodeRef)
    const names = new Set<string>()
    const unsubscribe = nodes.subscribe((c) => void (c.type === "DELETED" ? names.delete(Informer.keyOf(c.object)) : names.add(Informer.keyOf(c.object))))
    const all = yield* Effect.ensuring(nodes.waitUntil(() => names.size >= specs.length, 120_000), Effect.sync(unsubscribe))
    if (!all) return yield* Effect.fail(new Error(`the node informer saw ${names.size} of ${specs.length} nodes`))
  })
