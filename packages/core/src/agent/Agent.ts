/**
 * The node agent (DESIGN §8): registers its Node, heartbeats its Lease, and runs the pods bound to
 * it through the Runtime port, as the kubelet does. Decisions are the pure modules beside this one
 * (`PodSync`, `NodeAdmission`, `PodStatus`, `Probes`, `VolumePlan`, `ContainerEnv`, `HostPorts`,
 * `NodeStatus`); the Effects around them are each a module with its own state, and this one
 * composes them: the pod informer, the work queue and its workers, the periodic loops.
 *
 *   API ── watch pods (spec.nodeName=<node>) ─▶ pods by uid ─┐
 *   Relist ── the runtime every second (PLEG) ───────────────┼─▶ WorkQueue(uid) ─▶ workers: PodWorker.sync(uid)
 *   ProbeManager ── a verdict changed ───────────────────────┘
 *
 *   PodWorker.sync(uid): PodStates.admit ▸ PodSetup (host ports, sandbox, volumes through
 *     ObjectCache and TokenCache) ▸ PodSync.decide ▸ ContainerActions (kills concurrently)
 *     ▸ ProbeManager ▸ PodStatus.compute ▸ PodStatusWriter (patch when changed) ▸ requeue
 *   NodeHeartbeat: the Lease every 10 s; the Node status when it changed, else every minute
 *
 * A pod is keyed by its uid, so a pod deleted and recreated under the same name never shares
 * containers with its predecessor; the queue never syncs one uid twice at once. The agent keeps
 * no durable state: after a restart it lists the runtime's containers (labelled with their pod,
 * container and attempt) and adopts them, so nothing is duplicated or restarted. Only the
 * crash-loop backoff timers are in memory, as in the kubelet.
 *
 * Departures: ConfigMaps and Secrets are read with GET (what a node identity may do) through a
 * short cache and re-read on each periodic resync (default every 60 s), so projected files follow
 * changes within about a minute, as the kubelet's TTL cache strategy; grpc probes are TCP checks.
 */
import { Cause, Duration, Effect, type Scope } from "effect"
import { ApiClient } from "../client/ApiClient.js"
import * as EventRecorder from "../client/EventRecorder.js"
import * as Informer from "../informer/Informer.js"
import * as WorkQueue from "../informer/WorkQueue.js"
import type * as Pod from "../model/Pod.js"
import { uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import { MetricRegistry } from "../observability/MetricRegistry.js"
import * as Runtime from "../runtime/Runtime.js"
import type * as ContainerActions from "./ContainerActions.js"
import * as ContainerIdentity from "./ContainerIdentity.js"
import * as HandlerRunner from "./HandlerRunner.js"
import * as HostPortAllocator from "./HostPortAllocator.js"
import * as NodeHeartbeat from "./NodeHeartbeat.js"
import * as NodeStatus from "./NodeStatus.js"
import * as ObjectCache from "./ObjectCache.js"
import * as PodSetup from "./PodSetup.js"
import * as PodStates from "./PodStates.js"
import * as PodStatusWriter from "./PodStatusWriter.js"
import * as PodSync from "./PodSync.js"
import * as PodWorker from "./PodWorker.js"
import * as PolicyEnforcement from "./PolicyEnforcement.js"
import * as ProbeManager from "./ProbeManager.js"
import * as Prober from "./Prober.js"
import * as Relist from "./Relist.js"
import * as RuntimeCapabilities from "./RuntimeCapabilities.js"
import * as TokenCache from "./TokenCache.js"
import * as VolumeWriter from "./VolumeWriter.js"

/** The PATH a container gets when the pod sets none (containerd's default). */
export const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/**
 * How to run an agent. It acts through the context's `ApiClient`: one authenticated as the node
 * (`system:node:<name>`) or an administrator.
 */
export interface Options {
  /** The host: name, labels, capacity and allocatable (computed by the caller), addresses. */
  readonly facts: NodeStatus.Facts
  /** Where pod directories (volumes) live: `<dataDir>/pods/<uid>`. */
  readonly dataDir: string
  /** A memory-backed directory (tmpfs) for Secret and projected volumes: `<memoryDir>/pods/<uid>` (default: under `dataDir`). */
  readonly memoryDir?: string
  /** `host` (default): pods share the host's network and get host ports; `pod`: a namespace and IP each. */
  readonly network?: "host" | "pod"
  /** Pods synced at once (default 16). */
  readonly workers?: number
  /** How often the runtime is relisted to notice exits (default 1000 ms). */
  readonly relistMs?: number
  /** How often every pod is synced anyway, re-reading ConfigMaps and Secrets (default 60 000 ms). */
  readonly resyncMs?: number
  /** How often the Lease is renewed (default 10 000 ms). */
  readonly leaseRenewMs?: number
  /** The Node status is written at least this often (default 60 000 ms), and when it changes. */
  readonly nodeStatusReportMs?: number
  /** How long a fetched ConfigMap, Secret, claim or volume is reused (default 5 000 ms). */
  readonly objectTtlMs?: number
  /** How long an Event waits for the pod syncs in flight before it is written anyway (default 5 000 ms). */
  readonly eventDelayMs?: number
  /** Environment every container starts with (default `PATH`); the pod's own variables win. */
  readonly defaultEnv?: Readonly<Record<string, string>>
  /** The prefix of `containerID`s in pod status (default `kbox`). */
  readonly runtimeName?: string
  /** `--network-policy-strict`: a pod whose NetworkPolicy cannot be enforced is not started (default: it runs, with a Warning). */
  readonly networkPolicyStrict?: boolean
  /**
   * `--allow-unenforced-limits`: a pod with cpu or memory limits the runtime cannot enforce runs
   * anyway, with a Warning Event (default: it fails, `UnenforceableLimits`; NodeAdmission.limits).
   */
  readonly allowUnenforcedLimits?: boolean
  /** The longest grace `stopAll` gives a pod (dev's `--shutdown-grace`, in seconds; default: each pod's own). */
  readonly stopGraceSeconds?: number
}

/** Counters of the agent, for tests and metrics. */
export interface Metrics {
  readonly syncs: number
  readonly failures: number
  readonly queueDepth: number
  readonly pods: number
  /** The last failure of a sync or a loop, for diagnosis. */
  readonly lastError?: string
}

/** A running agent. */
export interface Agent {
  readonly nodeName: string
  /** Waits until the agent has seen the API's pods and the runtime's containers once. */
  readonly synced: Effect.Effect<void>
  /**
   * The runtime container of a pod's container (the first container when unnamed): its newest
   * attempt, or with `previous` the one before it. For logs, exec and signal.
   */
  readonly containerOf: (
    namespace: string,
    pod: string,
    container: string | undefined,
    previous: boolean
  ) => Effect.Effect<Runtime.Container | undefined, Runtime.Unavailable>
  /**
   * Stop every container of every pod gracefully (dev mode's Ctrl-C) and remove the pods'
   * sandboxes, so no process outlives dev; pods stay in the API (and their volumes, unless the pod
   * was already deleted from it).
   */
  readonly stopAll: Effect.Effect<void>
  readonly metrics: () => Metrics
}

// ---------------------------------------------------------------------------------------------

// The pod informer's handler: keeps the pods by uid and queues the pods that need a sync.
const onPodChange = (podsByUid: Map<string, Pod.Pod>, queue: WorkQueue.WorkQueue) => (change: Informer.Change) => {
  const uid = uidOf(change.object)
  if (uid === "") return
  if (change.type === "DELETED") podsByUid.delete(uid)
  else podsByUid.set(uid, PodStates.asPod(change.object))
  // A pod replaced under the same name (a re-list after missed events) is gone for the agent.
  if (change.old !== undefined && uidOf(change.old) !== uid) podsByUid.delete(uidOf(change.old))
  // A change of status only (mostly the agent's own writes) needs no sync; resyncs catch the rest.
  if (change.type === "MODIFIED" && change.old !== undefined && PodStatusWriter.sameButStatus(change.old, change.object)) return
  if (change.old !== undefined && uidOf(change.old) !== uid) queue.add(uidOf(change.old))
  queue.add(uid)
}

// Stop every pod's containers, bounded by the shutdown's grace, and remove their sandboxes.
const stopPods = (
  runtime: Runtime.RuntimeService,
  setup: PodSetup.Deps,
  podsByUid: ReadonlyMap<string, Pod.Pod>,
  podsKnown: () => boolean,
  stopGraceSeconds: number | undefined
) =>
  Effect.gen(function* () {
    const list = yield* Effect.orElseSucceed(runtime.containers.list({ state: "running" }), () => [])
    yield* Effect.forEach(
      list.filter((c) => ContainerIdentity.podUidOf(c) !== undefined),
      (c) => {
        const pod = podsByUid.get(ContainerIdentity.podUidOf(c)!)
        // A pod's own grace, but never past the shutdown's: Ctrl-C is bounded whatever pods ask for
        // (and a container adopted from a crashed run, whose pod is not known yet, gets the default).
        const own = Math.max(PodSync.minimumGracePeriodSeconds, pod?.spec.terminationGracePeriodSeconds ?? PodSync.defaultGracePeriodSeconds)
        const grace = Math.max(0, Math.min(own, stopGraceSeconds ?? own))
        return Effect.ignore(runtime.containers.stop(c.id, { gracePeriodMs: grace * 1000 }))
      },
      { concurrency: "unbounded", discard: true }
    )
    // Every workload stops, the pods' sandboxes too: a sandbox's namespaces holder is a process
    // that would outlive dev (the next start makes new sandboxes for the pods still in the API).
    // The volumes of pods deleted from the API, whose cleanup had not run yet, go with them; only
    // once the pods are known: before that, every pod would look deleted.
    const sandboxes = yield* Effect.orElseSucceed(runtime.sandboxes.list(), () => [])
    yield* Effect.forEach(
      sandboxes,
      (s) =>
        Effect.zipRight(
          Effect.ignore(runtime.sandboxes.remove(s.id)),
          podsKnown() && !podsByUid.has(s.spec.podUid) ? PodSetup.removePodDirs(setup, s.spec.podUid) : Effect.void
        ),
      { concurrency: "unbounded", discard: true }
    )
  })

/** Start an agent in the current scope: it registers the node and runs until the scope closes. */
export const make = (
  options: Options
): Effect.Effect<Agent, never, Scope.Scope | ApiClient | Runtime.Runtime | Prober.Prober | VolumeWriter.VolumeWriter | HostPortAllocator.HostPortAllocator> =>
  Effect.gen(function* () {
    const client = yield* ApiClient
    const runtime = yield* Runtime.Runtime
    const prober = yield* Prober.Prober
    const writer = yield* VolumeWriter.VolumeWriter
    const allocator = yield* HostPortAllocator.HostPortAllocator
    const scope = yield* Effect.scope
    const { facts } = options
    const nodeName = facts.nodeName
    const network = options.network ?? "host"
    const podStart = FleetMetrics.agent(yield* MetricRegistry).podStart

    const states: PodStates.Table = new Map()
    const podsByUid = new Map<string, Pod.Pod>()
    const counters: { syncs: number; failures: number; lastError: string | undefined } = { syncs: 0, failures: 0, lastError: undefined }
    const queue = WorkQueue.make({ backoff: { baseMs: 200, maxMs: 30_000 } })
    // Events wait for the pod work they report (see EventRecorder's `whenIdle`): until no pod has
    // been synced for a quarter of a second (pods arriving in a burst leave shorter gaps), and never
    // longer than `eventDelayMs`, so a node busy for minutes still writes them, late.
    const eventDelayMs = options.eventDelayMs ?? 5_000
    const events = EventRecorder.make(client, { component: "kubelet", host: nodeName }, {
      serial: true,
      whenIdle: (recordedAt) => queue.idle(recordedAt + eventDelayMs, 250)
    })

    // Where a pod's handlers reach it, read when each handler runs.
    const run = (pod: Pod.Pod, state: PodStates.PodState, containerName: string, containerId: string, handler: HandlerRunner.Handler, timeoutMs: number) =>
      HandlerRunner.run(
        runtime,
        prober,
        pod,
        { host: PodStates.podIPOf(state, network, facts.internalIP) ?? facts.internalIP, hostPorts: state.hostPorts ?? [] },
        containerName,
        containerId,
        handler,
        timeoutMs
      )
    const emit: PodStates.Emit = (pod, type, reason, message) =>
      Effect.asVoid(Effect.forkIn(events.record({ apiVersion: "v1", kind: "Pod", ...PodStates.podObject(pod) }, type, reason, message), scope))
    const probes = yield* ProbeManager.make({ run, emit, onChange: (uid) => queue.add(uid) })
    yield* Effect.addFinalizer(() => Effect.sync(() => queue.shutdown()))

    // NetworkPolicy: pods' rules resolved and sent to the runtime; applied before a container starts.
    const policy = yield* PolicyEnforcement.make({ client, nodeName, strict: options.networkPolicyStrict ?? false, emit })
    const capabilities = RuntimeCapabilities.make(runtime)
    const relist = Relist.make(runtime, (uid) => queue.add(uid))
    const setup: PodSetup.Deps = {
      client,
      runtime,
      allocator,
      writer,
      nodeName,
      network,
      internalIP: facts.internalIP,
      nodeAllocatable: facts.allocatable,
      dataDir: options.dataDir,
      memoryDir: options.memoryDir
    }
    const defaultEnv = options.defaultEnv ?? { PATH: defaultPath }
    const actions: ContainerActions.Deps = {
      runtime,
      policy,
      capabilities,
      emit,
      run,
      specContext: (state, caps) => ({
        hostIP: facts.internalIP,
        podIP: PodStates.podIPOf(state, network, facts.internalIP) ?? "",
        nodeAllocatable: facts.allocatable,
        defaultEnv,
        network,
        sandboxId: state.sandbox?.id ?? "",
        hostPorts: state.hostPorts ?? [],
        capabilities: caps
      })
    }
    const worker: PodWorker.Deps = {
      client,
      runtime,
      setup,
      setupState: { podCidr: undefined },
      actions,
      status: { client, observeStart: (seconds) => podStart.observe(seconds) },
      objects: ObjectCache.make(client, options.objectTtlMs ?? 5_000),
      tokens: TokenCache.make(client),
      probes,
      relist,
      admission: { allocatable: facts.allocatable, allowUnenforcedLimits: options.allowUnenforcedLimits === true },
      pods: podsByUid,
      states,
      emit,
      runtimeName: options.runtimeName ?? "kbox"
    }

    // ---- the loops ---------------------------------------------------------------------------

    const work = Effect.forever(
      Effect.gen(function* () {
        const uid = yield* queue.take
        counters.syncs++
        const result = yield* Effect.exit(PodWorker.sync(worker, uid))
        queue.done(uid)
        if (result._tag === "Failure") {
          if (Cause.isInterruptedOnly(result.cause)) return yield* Effect.interrupt
          counters.failures++
          counters.lastError = `sync ${uid}: ${Cause.pretty(result.cause)}`
          queue.addRateLimited(uid)
          return
        }
        queue.forget(uid)
        const after = result.value
        if (after !== undefined) queue.addAfter(uid, after)
      })
    )

    // The pod informer: only the pods bound to this node.
    const informer = yield* Informer.make(client, ResourceRefs.Pod, { fieldSelector: `spec.nodeName=${nodeName}` })
    informer.subscribe(onPodChange(podsByUid, queue))

    const every = (ms: number, effect: Effect.Effect<unknown, unknown>) =>
      Effect.forkIn(
        Effect.forever(Effect.zipRight(Effect.catchAllCause(effect, (cause) => Effect.sync(() => void (counters.lastError = Cause.pretty(cause)))), Effect.sleep(Duration.millis(ms)))),
        scope
      )

    const heartbeat = NodeHeartbeat.make({
      client,
      runtime,
      capabilities,
      facts,
      allowUnenforcedLimits: options.allowUnenforcedLimits === true,
      nodeStatusReportMs: options.nodeStatusReportMs ?? 60_000
    })
    yield* Effect.forkIn(heartbeat.run(options.leaseRenewMs ?? NodeStatus.renewIntervalMs, every), scope)

    const synced = Effect.gen(function* () {
      yield* informer.synced
      while (!relist.state.done) yield* Effect.sleep(Duration.millis(20))
    })

    // Workers start once the API's pods and the runtime's containers are known, so that no
    // running container is mistaken for an orphan.
    let podsKnown = false
    yield* Effect.forkIn(
      Effect.gen(function* () {
        yield* informer.synced
        podsKnown = true
        // Sandboxes left without containers (a pod deleted while the agent was down) are cleaned up too.
        for (const sb of yield* Effect.orElseSucceed(runtime.sandboxes.list(), () => [])) queue.add(sb.spec.podUid)
        yield* relist.relist
        yield* every(options.relistMs ?? 1_000, relist.relist)
        for (let i = 0; i < (options.workers ?? 16); i++) yield* Effect.forkIn(work, scope)
        yield* every(options.resyncMs ?? 60_000, Effect.sync(() => {
          for (const uid of new Set([...podsByUid.keys(), ...states.keys()])) queue.add(uid)
        }))
      }),
      scope
    )

    const containerOf: Agent["containerOf"] = (namespace, name, container, previous) =>
      Effect.gen(function* () {
        const pod = informer.get(namespace, name)
        if (pod === undefined) return undefined
        const target = container ?? PodStates.asPod(pod).spec.containers[0]?.name
        const { raw } = yield* PodWorker.containersOf(runtime, uidOf(pod))
        const history = raw.filter((c) => c.spec.name === target).sort((a, b) => b.spec.attempt - a.spec.attempt)
        return previous ? history[1] : history[0]
      })

    const stopAll = Effect.zipRight(
      Effect.sync(() => queue.shutdown()),
      stopPods(runtime, setup, podsByUid, () => podsKnown, options.stopGraceSeconds)
    )

    return {
      nodeName,
      synced,
      containerOf,
      stopAll,
      metrics: () => ({
        syncs: counters.syncs,
        failures: counters.failures,
        queueDepth: queue.depth(),
        pods: states.size,
        ...(counters.lastError === undefined ? {} : { lastError: counters.lastError })
      })
    }
  })
