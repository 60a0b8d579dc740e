/**
 * The node agent (DESIGN §8): registers its Node, heartbeats its Lease, and runs the pods bound to
 * it through the Runtime port, as the kubelet does. Decisions are the pure modules beside this one
 * (`PodSync`, `NodeAdmission`, `PodStatus`, `Probes`, `VolumePlan`, `ContainerEnv`, `HostPorts`,
 * `NodeStatus`); this module is the Effect around them: watches, the work queue, timers, I/O.
 *
 *   API ── watch pods (spec.nodeName=<node>) ─▶ pods by uid ─┐
 *   Runtime ── relist every second (the kubelet's PLEG) ─────┼─▶ WorkQueue(uid) ─▶ workers: sync(uid)
 *   probe workers ── a verdict changed ──────────────────────┘
 *
 *   sync(uid): admit ▸ host ports ▸ sandbox ▸ volumes ▸ PodSync.decide ▸ apply (kills concurrently)
 *              ▸ PodStatus.compute ▸ patch the status when it changed ▸ probe workers ▸ requeue
 *   heartbeat: the Lease every 10 s; the Node status when it changed, else every minute
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
import { Cause, Clock, Duration, Effect, Either, FiberMap, Option, type Scope } from "effect"
import * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import type * as Conditions from "../object/Conditions.js"
import * as EventRecorder from "../client/EventRecorder.js"
import * as Informer from "../informer/Informer.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import { MetricRegistry } from "../observability/MetricRegistry.js"
import * as WorkQueue from "../informer/WorkQueue.js"
import type * as Config from "../model/Config.js"
import type * as Pod from "../model/Pod.js"
import type * as Volume from "../model/Volume.js"
import * as Quantity from "../model/Quantity.js"
import * as NodeRoutes from "../network/NodeRoutes.js"
import * as PodCidr from "../network/PodCidr.js"
import * as PodDns from "../network/PodDns.js"
import * as Runtime from "../runtime/Runtime.js"
import * as ContainerEnv from "./ContainerEnv.js"
import * as ContainerIdentity from "./ContainerIdentity.js"
import * as ContainerSecurity from "./ContainerSecurity.js"
import type * as CrashLoopBackoff from "./CrashLoopBackoff.js"
import * as HostPortAllocator from "./HostPortAllocator.js"
import * as HostPorts from "./HostPorts.js"
import * as NodeAdmission from "./NodeAdmission.js"
import * as NodeStatus from "./NodeStatus.js"
import * as PodStatus from "./PodStatus.js"
import * as PodSync from "./PodSync.js"
import * as PolicySync from "./PolicySync.js"
import * as Prober from "./Prober.js"
import * as PolicyEnforcement from "./PolicyEnforcement.js"
import * as Probes from "./Probes.js"
import * as VolumePlan from "./VolumePlan.js"
import * as VolumeWriter from "./VolumeWriter.js"
import { type JsonObject, stableJson } from "../object/Json.js"
import { metadataOf, rfc3339, timeMs, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"



/** The PATH a container gets when the pod sets none (containerd's default). */
export const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/** How to run an agent. */
export interface Options {
  /** A client authenticated as the node (`system:node:<name>`) or an administrator. */
  readonly client: Client.Client
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

interface PodState {
  pod: Pod.Pod | undefined
  admitted: boolean
  fail: { readonly reason: string; readonly message: string } | undefined
  backoff: ReadonlyMap<string, CrashLoopBackoff.Entry>
  startTime: string | undefined
  startTimeMs: number | undefined
  hostPorts: ReadonlyArray<HostPorts.Assignment> | undefined
  sandbox: Runtime.Sandbox | undefined
  /** Why containers could not be created, by name. */
  readonly waiting: Map<string, PodSync.Waiting>
  volumesReady: boolean
  lastStatus: unknown
}

interface ProbeWorker {
  readonly uid: string
  verdict: Probes.Verdict
}

const asPod = (o: JsonObject): Pod.Pod => o as unknown as Pod.Pod

const milli = (q: string | undefined): number | undefined => {
  if (q === undefined) return undefined
  const parsed = Quantity.parse(q)
  return parsed._tag === "Right" ? Quantity.toMilli(parsed.right) : undefined
}
const units = (q: string | undefined): number | undefined => {
  if (q === undefined) return undefined
  const parsed = Quantity.parse(q)
  return parsed._tag === "Right" ? Quantity.toUnits(parsed.right) : undefined
}

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

/**
 * The pod with the kubelet-owned conditions the agent last wrote (the informer's copy may not
 * have caught up with its own write yet, and transition times must not move because of that) and
 * everyone else's conditions as the API has them.
 */
const withOwnConditions = (pod: Pod.Pod, written: Pod.PodStatus | undefined): Pod.Pod => {
  if (written === undefined) return pod
  const others = (pod.status?.conditions ?? []).filter((c) => !PodStatus.kubeletConditions.has(c.type))
  const own = (written.conditions ?? []).filter((c) => PodStatus.kubeletConditions.has(c.type))
  return { ...pod, status: { ...pod.status, conditions: [...others, ...own] } }
}

// Whether two versions of a pod differ only in status and resourceVersion. Asked of every status
// write the agent makes: the plain encoding answers when the API kept the keys' order (it does),
// the key-sorted one only when that differs.
const sameButStatus = (a: JsonObject, b: JsonObject): boolean => {
  const strip = (o: JsonObject) => {
    const { resourceVersion: _rv, managedFields: _mf, ...meta } = metadataOf(o)
    return { metadata: meta, spec: o["spec"] }
  }
  const sa = strip(a)
  const sb = strip(b)
  return JSON.stringify(sa) === JSON.stringify(sb) || stableJson(sa) === stableJson(sb)
}

/** Start an agent in the current scope: it registers the node and runs until the scope closes. */
export const make = (
  options: Options
): Effect.Effect<Agent, never, Scope.Scope | Runtime.Runtime | Prober.Prober | VolumeWriter.VolumeWriter | HostPortAllocator.HostPortAllocator> =>
  Effect.gen(function* () {
    const runtime = yield* Runtime.Runtime
    const prober = yield* Prober.Prober
    const writer = yield* VolumeWriter.VolumeWriter
    const allocator = yield* HostPortAllocator.HostPortAllocator
    const scope = yield* Effect.scope
    const { client, facts } = options
    const nodeName = facts.nodeName
    const network = options.network ?? "host"
    const relistMs = options.relistMs ?? 1_000
    const resyncMs = options.resyncMs ?? 60_000
    const leaseRenewMs = options.leaseRenewMs ?? NodeStatus.renewIntervalMs
    const nodeStatusReportMs = options.nodeStatusReportMs ?? 60_000
    const objectTtlMs = options.objectTtlMs ?? 5_000
    const runtimeName = options.runtimeName ?? "kbox"
    const defaultEnv = options.defaultEnv ?? { PATH: defaultPath }
    const podStart = FleetMetrics.agent(yield* MetricRegistry).podStart

    const states = new Map<string, PodState>()
    const podsByUid = new Map<string, Pod.Pod>()
    const workers = new Map<string, ProbeWorker>()
    const probeFibers = yield* FiberMap.make<string>()
    const queue = WorkQueue.make({ backoff: { baseMs: 200, maxMs: 30_000 } })
    yield* Effect.addFinalizer(() => Effect.sync(() => queue.shutdown()))
    // Events wait for the pod work they report (see EventRecorder's `whenIdle`): until no pod has
    // been synced for a quarter of a second (pods arriving in a burst leave shorter gaps), and never
    // longer than `eventDelayMs`, so a node busy for minutes still writes them, late.
    const eventDelayMs = options.eventDelayMs ?? 5_000
    const events = EventRecorder.make(client, { component: "kubelet", host: nodeName }, {
      serial: true,
      whenIdle: (recordedAt) => queue.idle(recordedAt + eventDelayMs, 250)
    })
    let syncs = 0
    let failures = 0
    let lastError: string | undefined
    let capabilities: Runtime.Capabilities | undefined

    const emit = (pod: Pod.Pod | JsonObject, type: "Normal" | "Warning", reason: string, message: string) =>
      Effect.asVoid(Effect.forkIn(events.record({ apiVersion: "v1", kind: "Pod", ...(pod as object) } as JsonObject, type, reason, message), scope))

    // NetworkPolicy: pods' rules resolved and sent to the runtime; applied before a container starts.
    const policy = yield* PolicyEnforcement.make({ client, nodeName, strict: options.networkPolicyStrict ?? false, emit })

    const stateOf = (uid: string): PodState => {
      let s = states.get(uid)
      if (s === undefined) {
        s = {
          pod: undefined,
          admitted: false,
          fail: undefined,
          backoff: new Map(),
          startTime: undefined,
          startTimeMs: undefined,
          hostPorts: undefined,
          sandbox: undefined,
          waiting: new Map(),
          volumesReady: false,
          lastStatus: undefined
        }
        states.set(uid, s)
      }
      return s
    }

    const capabilitiesOf = Effect.gen(function* () {
      if (capabilities === undefined) capabilities = (yield* runtime.info).capabilities
      return capabilities
    })

    // ---- objects a pod refers to ---------------------------------------------------------

    const cache = new Map<string, { readonly at: number; readonly value: JsonObject | undefined }>()
    const fetchObject = (ref: Client.ResourceRef, namespace: string | undefined, name: string) =>
      Effect.gen(function* () {
        const key = `${ref.kind}/${namespace ?? ""}/${name}`
        const now = yield* Clock.currentTimeMillis
        const hit = cache.get(key)
        if (hit !== undefined && now - hit.at < objectTtlMs) return hit.value
        const value = yield* client.get(ref, namespace, name).pipe(
          Effect.map((o): JsonObject | undefined => o),
          Effect.catchIf(isNotFound, () => Effect.succeed(undefined))
        )
        cache.set(key, { at: now, value })
        return value
      })

    const tokens = new Map<string, { readonly expiresAtMs: number; readonly refreshAtMs: number; readonly token: string }>()
    const fetchToken = (pod: Pod.Pod, request: VolumePlan.TokenRequest) =>
      Effect.gen(function* () {
        const key = `${pod.metadata.uid ?? ""}/${request.serviceAccountName}/${request.audience}/${request.expirationSeconds}`
        const now = yield* Clock.currentTimeMillis
        const hit = tokens.get(key)
        if (hit !== undefined && now < hit.refreshAtMs) return hit.token
        const answer = yield* Effect.either(
          client.createSubresource(ResourceRefs.ServiceAccount, pod.metadata.namespace, request.serviceAccountName, "token", {
            apiVersion: "authentication.k8s.io/v1",
            kind: "TokenRequest",
            spec: {
              ...(request.audience === "" ? {} : { audiences: [request.audience] }),
              expirationSeconds: request.expirationSeconds,
              boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod.metadata.name, uid: pod.metadata.uid }
            }
          })
        )
        if (answer._tag === "Left") return hit !== undefined && now < hit.expiresAtMs ? hit.token : undefined
        const token = String((answer.right["status"] as Record<string, unknown> | undefined)?.["token"] ?? "")
        if (token === "") return undefined
        // The kubelet refreshes a projected token at 80% of its life.
        tokens.set(key, { token, expiresAtMs: now + request.expirationSeconds * 1000, refreshAtMs: now + request.expirationSeconds * 800 })
        return token
      })

    const lookupFor = (pod: Pod.Pod) =>
      Effect.gen(function* () {
        const ns = pod.metadata.namespace
        const refs = VolumePlan.references(pod)
        const fetchAll = (ref: Client.ResourceRef, names: ReadonlyArray<string>, namespace: string | undefined) =>
          Effect.map(
            Effect.forEach(names, (n) => Effect.map(fetchObject(ref, namespace, n), (o) => [n, o] as const), { concurrency: "unbounded" }),
            (pairs) => new Map(pairs)
          )
        const [configMaps, secrets, claims] = yield* Effect.all(
          [fetchAll(ResourceRefs.ConfigMap, refs.configMaps, ns), fetchAll(ResourceRefs.Secret, refs.secrets, ns), fetchAll(ResourceRefs.PersistentVolumeClaim, refs.claims, ns)],
          { concurrency: "unbounded" }
        )
        const volumeNames = [...claims.values()].flatMap((c) => {
          const v = (c?.["spec"] as Record<string, unknown> | undefined)?.["volumeName"]
          return typeof v === "string" && v !== "" ? [v] : []
        })
        const volumes = yield* fetchAll(ResourceRefs.PersistentVolume, volumeNames, undefined)
        const tokenValues = new Map<string, string | undefined>()
        for (const t of refs.tokens) tokenValues.set(`${t.serviceAccountName}/${t.audience}/${t.expirationSeconds}`, yield* fetchToken(pod, t))
        const lookup: VolumePlan.Lookup = {
          configMap: (n) => configMaps.get(n) as Config.ConfigMap | undefined,
          secret: (n) => secrets.get(n) as Config.Secret | undefined,
          claim: (n) => claims.get(n) as Volume.PersistentVolumeClaim | undefined,
          volume: (n) => volumes.get(n) as Volume.PersistentVolume | undefined,
          token: (t) => tokenValues.get(`${t.serviceAccountName}/${t.audience}/${t.expirationSeconds}`)
        }
        return lookup
      })

    // ---- runtime reads ---------------------------------------------------------------------

    // The runtime relist's view (the kubelet's PLEG): container id → `uid|state|exit code`, and
    // the pods that had containers at the last relist.
    const seen = new Map<string, string>()
    let relistedUids = new Set<string>()
    const signature = (uid: string, c: Runtime.Container) => `${uid}|${c.status.state}|${c.status.exitCode ?? ""}`
    // A sync records what it saw, so the next relist does not queue the pod again for its own changes.
    const noteSeen = (uid: string, raw: ReadonlyArray<Runtime.Container>) => {
      for (const c of raw) seen.set(c.id, signature(uid, c))
      if (raw.length > 0) relistedUids.add(uid)
    }

    const containersOf = (uid: string) =>
      Effect.map(runtime.containers.list({ labels: { [ContainerIdentity.Labels.podUid]: uid } }), (list) => ({
        raw: list,
        observed: list.map(ContainerIdentity.observe)
      }))

    const podIPOf = (state: PodState): string | undefined => (network === "pod" ? state.sandbox?.ip : facts.internalIP)

    // ---- admission ---------------------------------------------------------------------------

    const admittedRunning = (except: string): ReadonlyArray<JsonObject> => {
      const out: Array<JsonObject> = []
      for (const [uid, s] of states) {
        if (uid === except || !s.admitted || s.fail !== undefined || s.pod === undefined) continue
        const phase = s.pod.status?.phase
        if (phase === "Succeeded" || phase === "Failed") continue
        out.push(s.pod as unknown as JsonObject)
      }
      return out
    }

    // Synchronous, so two workers can never admit against the same free room. Answers the Warning
    // Event to record about the pod's limits (refused, or admitted unenforced), if any.
    const admit = (uid: string, state: PodState, pod: Pod.Pod, hasContainers: boolean, nowMs: number, enforced: NodeAdmission.Enforced | undefined) => {
      if (state.admitted || state.fail !== undefined) return undefined
      const phase = pod.status?.phase
      // Admitted before (by this agent before a restart): adopt without a second check.
      const known = hasContainers || pod.status?.startTime !== undefined || phase === "Running"
      let verdict: NodeAdmission.Verdict = known ? { admit: true } : NodeAdmission.decide(pod as unknown as JsonObject, facts.allocatable, admittedRunning(uid))
      let event: { readonly reason: string; readonly message: string } | undefined
      if (!known && verdict.admit && enforced !== undefined) {
        verdict = NodeAdmission.limits(pod as unknown as JsonObject, enforced, options.allowUnenforcedLimits === true)
        const missing = NodeAdmission.unenforced(pod as unknown as JsonObject, enforced)
        if (!verdict.admit) event = { reason: verdict.reason, message: verdict.message }
        else if (missing.length > 0) event = { reason: NodeAdmission.notEnforcedReason, message: NodeAdmission.notEnforcedMessage(missing) }
      }
      if (verdict.admit) state.admitted = true
      else state.fail = { reason: verdict.reason, message: verdict.message }
      state.startTime = pod.status?.startTime ?? rfc3339(nowMs)
      state.startTimeMs = timeMs(state.startTime) ?? nowMs
      return event
    }

    // ---- preparing a pod: host ports, sandbox, volumes -------------------------------------

    const ensureHostPorts = (state: PodState, pod: Pod.Pod, raw: ReadonlyArray<Runtime.Container>) =>
      Effect.gen(function* () {
        const requests = HostPorts.requests(pod)
        if (state.hostPorts !== undefined && HostPorts.matches(requests, state.hostPorts)) return state.hostPorts
        if (network === "pod") {
          state.hostPorts = requests.map((r) => ({ containerName: r.containerName, ...(r.name === undefined ? {} : { name: r.name }), containerPort: r.containerPort, protocol: r.protocol, hostPort: r.fixed ?? r.containerPort }))
          return state.hostPorts
        }
        // Re-adoption: the assignment written on the pod's containers.
        for (const c of raw) {
          const stored = HostPorts.decode(c.spec.labels?.[ContainerIdentity.Labels.hostPorts])
          if (stored.length > 0 && HostPorts.matches(requests, stored)) return (state.hostPorts = stored)
        }
        const reported = ((pod.status as Record<string, unknown> | undefined)?.["hostPorts"] ?? []) as ReadonlyArray<HostPorts.Assignment>
        if (reported.length > 0 && HostPorts.matches(requests, reported)) return (state.hostPorts = reported)
        const taken = new Set<number>()
        for (const s of states.values()) for (const a of s.hostPorts ?? []) taken.add(a.hostPort)
        const free = requests.filter((r) => r.fixed === undefined)
        const allocated = free.length === 0 ? [] : yield* allocator.allocate(free.map((r) => r.protocol), taken)
        const assigned = HostPorts.assign(requests, allocated) ?? []
        state.hostPorts = assigned
        return assigned
      })

    // The node's pod CIDR (isolated mode), assigned by the server's node IPAM after registration
    // and immutable from then on: read once it is there.
    let podCidr: string | undefined
    const nodePodCidr = Effect.gen(function* () {
      if (podCidr !== undefined) return podCidr
      const cidr = NodeRoutes.podCidrsOf(yield* client.get(ResourceRefs.Node, undefined, nodeName))[0]
      if (cidr === undefined) return yield* Effect.fail(new Runtime.Invalid({ message: `node ${nodeName} has no pod CIDR yet (spec.podCIDR, assigned by the server's node IPAM)` }))
      return (podCidr = cidr)
    })

    const ensureSandbox = (state: PodState, pod: Pod.Pod, hostPorts: ReadonlyArray<HostPorts.Assignment>) =>
      Effect.gen(function* () {
        if (state.sandbox !== undefined && state.sandbox.state === "ready") return state.sandbox
        const uid = pod.metadata.uid ?? ""
        const own = network === "pod" && pod.spec.hostNetwork !== true
        const cidr = own ? yield* nodePodCidr : undefined
        // The pod's DNS is its gateway (the node sends gateway:53 to its DNS server).
        const gateway = cidr === undefined ? undefined : Either.getOrUndefined(PodCidr.block(cidr))?.gateway
        const dns = gateway === undefined ? undefined : PodDns.config(pod as unknown as JsonObject, gateway)
        const spec: Runtime.SandboxSpec = {
          podUid: uid,
          name: pod.metadata.name ?? "",
          namespace: pod.metadata.namespace ?? "",
          hostname: pod.spec.hostname ?? pod.metadata.name ?? "",
          network: own ? "pod" : "host",
          ...(cidr === undefined ? {} : { podCidr: cidr }),
          ...(dns === undefined ? {} : { dns }),
          ports: hostPorts.map((a) => ({ ...(a.name === undefined ? {} : { name: a.name }), containerPort: a.containerPort, hostPort: a.hostPort, protocol: a.protocol })),
          labels: ContainerIdentity.sandboxLabels(pod)
        }
        // Create first (one call on the hot path); an existing one is adopted, a dead one replaced.
        const create = runtime.sandboxes.create(spec).pipe(Effect.catchTag("RuntimeAlreadyExists", (e) => runtime.sandboxes.get(e.id)))
        let sandbox = yield* create
        if (sandbox.state !== "ready") {
          yield* runtime.sandboxes.remove(sandbox.id)
          sandbox = yield* create
        }
        return (state.sandbox = sandbox)
      })

    // A pod's directories: its own under the data dir, and its Secrets' in the memory directory.
    const removePodDirs = (uid: string) =>
      Effect.all(
        [options.dataDir, ...(options.memoryDir === undefined ? [] : [options.memoryDir])].map((d) => writer.removePod(VolumePlan.podDir(d, uid)).pipe(Effect.ignore)),
        { discard: true }
      )

    const prepareVolumes = (state: PodState, pod: Pod.Pod, lookup: VolumePlan.Lookup) =>
      Effect.gen(function* () {
        const plan = VolumePlan.plan(
          pod,
          lookup,
          VolumePlan.podDir(options.dataDir, pod.metadata.uid ?? ""),
          { hostIP: facts.internalIP, podIP: podIPOf(state) ?? "", nodeAllocatable: facts.allocatable },
          { ...(options.memoryDir === undefined ? {} : { memoryDir: options.memoryDir }), identity: VolumePlan.identityOf(pod, state.sandbox?.uid) }
        )
        if (Either.isLeft(plan)) return Either.left(plan.left)
        for (const source of plan.right.sources) {
          const done = yield* Effect.either(writer.prepare(source))
          if (done._tag === "Left") return Either.left(`MountVolume.SetUp failed for volume "${done.left.volume}" : ${done.left.message}`)
        }
        return Either.right(plan.right)
      })

    // ---- hooks and probes --------------------------------------------------------------------

    const runHandler = (
      pod: Pod.Pod,
      state: PodState,
      containerName: string,
      containerId: string,
      handler: typeof Pod.LifecycleHandler.Type & { readonly grpc?: { readonly port: number } },
      timeoutMs: number
    ): Effect.Effect<Prober.Outcome> =>
      Effect.gen(function* () {
        const host = podIPOf(state) ?? facts.internalIP
        const port = (p: number | string) => HostPorts.resolve(pod, state.hostPorts ?? [], containerName, p)
        if (handler.exec !== undefined) {
          const r = yield* Effect.either(runtime.containers.exec(containerId, { command: handler.exec.command ?? [], timeoutMs }))
          if (r._tag === "Left") return { result: "failure" as const, message: r.left.message }
          if (r.right.timedOut) return { result: "failure" as const, message: `command timed out after ${timeoutMs} ms` }
          return r.right.exitCode === 0 ? { result: "success" as const, message: "" } : { result: "failure" as const, message: `command exited with ${r.right.exitCode}: ${(r.right.stdout + r.right.stderr).slice(0, 200)}` }
        }
        if (handler.httpGet !== undefined) {
          const p = port(handler.httpGet.port)
          if (p === undefined) return { result: "failure" as const, message: `unknown port ${String(handler.httpGet.port)}` }
          return yield* prober.probe(
            { _tag: "HttpGet", scheme: handler.httpGet.scheme ?? "HTTP", host: handler.httpGet.host ?? host, port: p, path: handler.httpGet.path ?? "/", headers: handler.httpGet.httpHeaders ?? [] },
            timeoutMs
          )
        }
        if (handler.tcpSocket !== undefined || handler.grpc !== undefined) {
          const p = handler.tcpSocket !== undefined ? port(handler.tcpSocket.port) : port(handler.grpc!.port)
          if (p === undefined) return { result: "failure" as const, message: "unknown port" }
          return yield* prober.probe({ _tag: "TcpSocket", host: handler.tcpSocket?.host ?? host, port: p }, timeoutMs)
        }
        if (handler.sleep !== undefined) {
          yield* Effect.sleep(Duration.millis(Math.min(timeoutMs, handler.sleep.seconds * 1000)))
          return { result: "success" as const, message: "" }
        }
        return { result: "failure" as const, message: "missing probe handler" }
      })

    const probeWorker = (uid: string, pod: Pod.Pod, state: PodState, container: Pod.Container, observed: PodSync.ObservedContainer) =>
      Effect.gen(function* () {
        let probes = Probes.start(observed.id, container, observed.startedAtMs ?? (yield* Clock.currentTimeMillis))
        for (;;) {
          const next = Probes.nextDueMs(probes)
          if (next === undefined) return
          const now = yield* Clock.currentTimeMillis
          if (next > now) yield* Effect.sleep(Duration.millis(next - now))
          const at = yield* Clock.currentTimeMillis
          for (const kind of Probes.due(probes, at)) {
            const worker = probes.workers.find((w) => w.kind === kind)!
            const outcome = yield* runHandler(pod, state, container.name, observed.id, worker.probe, worker.settings.timeoutMs)
            const after = yield* Clock.currentTimeMillis
            probes = Probes.record(probes, kind, outcome.result, after)
            if (outcome.result === "failure") {
              const label = kind[0]!.toUpperCase() + kind.slice(1)
              yield* emit(pod, "Warning", "Unhealthy", `${label} probe failed: ${outcome.message}`)
            }
          }
          const w = workers.get(observed.id)
          const verdict = Probes.verdict(probes)
          if (w !== undefined && Probes.changed(w.verdict, verdict)) {
            w.verdict = verdict
            queue.add(uid)
          }
        }
      })

    const syncProbes = (uid: string, pod: Pod.Pod | undefined, state: PodState, observed: ReadonlyArray<PodSync.ObservedContainer>) =>
      Effect.gen(function* () {
        const wanted = new Map<string, { readonly container: Pod.Container; readonly observed: PodSync.ObservedContainer }>()
        if (pod !== undefined && pod.metadata.deletionTimestamp === undefined) {
          for (const o of observed) {
            if (o.state !== "running" || o.init) continue
            const container = pod.spec.containers.find((c) => c.name === o.name)
            if (container !== undefined && (container.livenessProbe || container.readinessProbe || container.startupProbe)) wanted.set(o.id, { container, observed: o })
          }
        }
        for (const [id, w] of [...workers]) {
          if (w.uid !== uid || wanted.has(id)) continue
          workers.delete(id)
          yield* FiberMap.remove(probeFibers, id)
        }
        for (const [id, want] of wanted) {
          if (workers.has(id)) continue
          workers.set(id, { uid, verdict: Probes.verdict(Probes.start(id, want.container, 0)) })
          yield* FiberMap.run(probeFibers, id, probeWorker(uid, pod!, state, want.container, want.observed))
        }
      })

    const verdicts = (uid: string): ReadonlyMap<string, Probes.Verdict> => {
      const out = new Map<string, Probes.Verdict>()
      for (const [id, w] of workers) if (w.uid === uid) out.set(id, w.verdict)
      return out
    }

    // ---- applying actions --------------------------------------------------------------------

    const kill = (pod: Pod.Pod | undefined, state: PodState, action: Extract<PodSync.Action, { _tag: "Kill" }>) =>
      Effect.gen(function* () {
        const start = yield* Clock.currentTimeMillis
        if (pod !== undefined) yield* emit(pod, "Normal", "Killing", action.message)
        const container = pod === undefined ? undefined : [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((c) => c.name === action.name)
        const preStop = container?.lifecycle?.preStop
        if (action.preStop && preStop !== undefined && pod !== undefined) {
          const outcome = yield* runHandler(pod, state, action.name, action.containerId, preStop, action.gracePeriodSeconds * 1000).pipe(
            Effect.timeoutTo({ duration: Duration.seconds(action.gracePeriodSeconds), onSuccess: (o) => o, onTimeout: () => ({ result: "failure" as const, message: "timed out" }) })
          )
          if (outcome.result === "failure") yield* emit(pod, "Warning", "FailedPreStopHook", `PreStopHook failed: ${outcome.message}`)
        }
        const elapsed = (yield* Clock.currentTimeMillis) - start
        const graceMs = Math.max(PodSync.minimumGracePeriodSeconds * 1000, action.gracePeriodSeconds * 1000 - elapsed)
        yield* runtime.containers.stop(action.containerId, { gracePeriodMs: graceMs }).pipe(Effect.catchTag("RuntimeNotFound", () => Effect.void))
      })

    const containerSpec = (
      pod: Pod.Pod,
      state: PodState,
      container: Pod.Container,
      attempt: number,
      init: boolean,
      lookup: VolumePlan.Lookup,
      plan: VolumePlan.Plan,
      caps: Runtime.Capabilities
    ): Either.Either<Runtime.ContainerSpec, string> => {
      const hostPorts = state.hostPorts ?? []
      const initial = [...HostPorts.env(hostPorts, container.name), ...(caps.bindMounts ? [] : VolumePlan.mountEnv(container, plan))]
      const env = ContainerEnv.resolve(pod, container, lookup, { hostIP: facts.internalIP, podIP: podIPOf(state) ?? "", nodeAllocatable: facts.allocatable, initial })
      if (Either.isLeft(env)) return Either.left(env.left)
      const vars: Record<string, string> = { ...defaultEnv, HOSTNAME: pod.spec.hostname ?? pod.metadata.name ?? "" }
      for (const v of env.right) vars[v.name] = v.value
      const line = ContainerEnv.commandLine(container, env.right)
      const oci = caps.isolation === "oci"
      // Without an image there is no entrypoint: the args are the command.
      const command = line.command.length > 0 || oci ? line.command : line.args
      const args = line.command.length > 0 || oci ? line.args : []
      if (command.length === 0 && !oci) return Either.left(`container "${container.name}" has no command to run on this runtime (${caps.drivers.join(", ") || "no image support"})`)
      const security = ContainerSecurity.resolve(pod, container)
      if (Either.isLeft(security)) return Either.left(security.left)
      const limits = container.resources?.limits ?? {}
      const requests = container.resources?.requests ?? {}
      const cpuMillis = milli(limits["cpu"])
      const cpuRequestMillis = milli(requests["cpu"])
      const memoryBytes = units(limits["memory"])
      const resources: Runtime.Resources = {
        ...(cpuMillis === undefined ? {} : { cpuMillis }),
        ...(cpuRequestMillis === undefined ? {} : { cpuRequestMillis }),
        ...(memoryBytes === undefined ? {} : { memoryBytes })
      }
      return Either.right({
        sandboxId: state.sandbox?.id ?? "",
        name: container.name,
        attempt,
        ...(oci ? { image: container.image } : {}),
        command,
        ...(args.length > 0 ? { args } : {}),
        env: vars,
        ...(container.workingDir === undefined ? {} : { workingDir: container.workingDir }),
        ...(security.right.user !== undefined && caps.runAsUser ? { user: security.right.user } : {}),
        security: security.right.security,
        mounts: plan.mounts.get(container.name) ?? [],
        ...(Object.keys(resources).length > 0 ? { resources } : {}),
        labels: ContainerIdentity.labelsFor(pod, container, attempt, init, network === "host" ? HostPorts.encode(hostPorts) : "")
      })
    }

    const start = (
      pod: Pod.Pod,
      state: PodState,
      action: Extract<PodSync.Action, { _tag: "Start" }>,
      lookup: VolumePlan.Lookup,
      plan: VolumePlan.Plan
    ) =>
      Effect.gen(function* () {
        const caps = yield* capabilitiesOf
        const spec = containerSpec(pod, state, action.container, action.attempt, action.init, lookup, plan, caps)
        if (Either.isLeft(spec)) {
          state.waiting.set(action.container.name, { reason: "CreateContainerConfigError", message: spec.left })
          yield* emit(pod, "Warning", "Failed", `Error: ${spec.left}`)
          return false
        }
        const id = yield* runtime.containers.create(spec.right).pipe(
          Effect.catchTag("RuntimeAlreadyExists", (e) => Effect.succeed(e.id)),
          Effect.map(Option.some),
          Effect.catchTags({
            RuntimeInvalid: (e) => Effect.as(Effect.sync(() => state.waiting.set(action.container.name, { reason: "CreateContainerError", message: e.message })), Option.none()),
            RuntimeNotFound: (e) => Effect.as(Effect.sync(() => state.waiting.set(action.container.name, { reason: "CreateContainerError", message: e.message })), Option.none())
          })
        )
        if (Option.isNone(id)) return false
        state.waiting.delete(action.container.name)
        yield* startCreated(pod, state, action.container.name, id.value)
        return true
      })

    const startCreated = (pod: Pod.Pod, state: PodState, name: string, id: string) =>
      Effect.gen(function* () {
        const allowed = yield* policy.beforeStart(pod, id)
        if (!allowed.run) return void state.waiting.set(name, { reason: allowed.reason, message: allowed.message })
        if (state.waiting.get(name)?.reason === PolicySync.NotEnforcedReason) state.waiting.delete(name)
        const started = yield* Effect.either(runtime.containers.start(id))
        if (started._tag === "Left") {
          if (started.left._tag === "RuntimeUnavailable") return yield* Effect.fail(started.left)
          state.waiting.set(name, { reason: "RunContainerError", message: started.left.message })
          return
        }
        yield* emit(pod, "Normal", "Started", `Started container ${name}`)
        const container = pod.spec.containers.find((c) => c.name === name)
        const postStart = container?.lifecycle?.postStart
        if (postStart !== undefined) {
          const outcome = yield* runHandler(pod, state, name, id, postStart, 30_000)
          if (outcome.result === "failure") {
            yield* emit(pod, "Warning", "FailedPostStartHook", `PostStartHook failed: ${outcome.message}`)
            yield* runtime.containers.stop(id, { gracePeriodMs: PodSync.minimumGracePeriodSeconds * 1000 }).pipe(Effect.catchTag("RuntimeNotFound", () => Effect.void))
          }
        }
      })

    const writeStatus = (state: PodState, pod: Pod.Pod, status: Pod.PodStatus) =>
      Effect.gen(function* () {
        if (PodStatus.same(status, state.lastStatus) || PodStatus.same(status, pod.status)) return
        // A merge patch keeps what it does not name: clear the kubelet's fields that went away.
        const cleared: Record<string, null> = {}
        for (const k of ["reason", "message", "podIP", "podIPs", "initContainerStatuses", "hostPorts"]) if (!(k in status)) cleared[k] = null
        yield* client.patch(ResourceRefs.Pod, pod.metadata.namespace, pod.metadata.name ?? "", "merge", { status: { ...cleared, ...status } }, "status").pipe(
          Effect.catchIf(isNotFound, () => Effect.void)
        )
        // The first Running this agent reports (not one it adopted after a restart): pod start latency.
        const wasRunning = pod.status?.phase === "Running" || (state.lastStatus as Pod.PodStatus | undefined)?.phase === "Running"
        if (status.phase === "Running" && !wasRunning && state.startTimeMs !== undefined) {
          podStart.observe(Math.max(0, (yield* Clock.currentTimeMillis) - state.startTimeMs) / 1000)
        }
        state.lastStatus = status
      })

    // ---- one pod's sync ----------------------------------------------------------------------

    const sync = (uid: string) =>
      Effect.gen(function* () {
        syncs++
        const pod = podsByUid.get(uid)
        // A pod the agent has never handled and the last relist saw no container of has none:
        // only the agent creates them. This saves a runtime call on every new pod's first sync.
        const fresh = !states.has(uid) && !relistedUids.has(uid)
        const state = stateOf(uid)
        state.pod = pod
        const nowMs = yield* Clock.currentTimeMillis
        let { raw, observed } = fresh ? { raw: [] as ReadonlyArray<Runtime.Container>, observed: [] as ReadonlyArray<PodSync.ObservedContainer> } : yield* containersOf(uid)
        if (pod === undefined && observed.length === 0 && state.sandbox === undefined && state.hostPorts === undefined) {
          // Never known or already cleaned up: only a stale sandbox may be left.
          for (const s of yield* runtime.sandboxes.list({ podUid: uid })) yield* runtime.sandboxes.remove(s.id)
          yield* removePodDirs(uid)
          states.delete(uid)
          return undefined
        }
        let lookup: VolumePlan.Lookup | undefined
        let plan: VolumePlan.Plan | undefined
        let blocked: string | undefined
        const live = pod !== undefined && pod.metadata.deletionTimestamp === undefined
        if (pod !== undefined) {
          // The runtime's limits (asked once) only for a pod not admitted yet.
          const enforced = state.admitted || state.fail !== undefined ? undefined : (yield* capabilitiesOf).limits
          const event = admit(uid, state, pod, observed.length > 0, nowMs, enforced)
          if (event !== undefined) yield* emit(pod, "Warning", event.reason, event.message)
        }
        const apiPhase = pod?.status?.phase
        const terminal = state.fail !== undefined || apiPhase === "Succeeded" || apiPhase === "Failed"
        if (live && !terminal) {
          const prepared = yield* Effect.either(
            Effect.gen(function* () {
              const ports = yield* ensureHostPorts(state, pod, raw)
              yield* ensureSandbox(state, pod, ports)
              lookup = yield* lookupFor(pod)
              return yield* prepareVolumes(state, pod, lookup)
            })
          )
          if (prepared._tag === "Left") blocked = prepared.left instanceof ApiError.ApiError ? prepared.left.status.message : prepared.left.message
          else if (prepared.right._tag === "Left") blocked = prepared.right.left
          else plan = prepared.right.right
          state.volumesReady = blocked === undefined
          if (blocked !== undefined) yield* emit(pod, "Warning", "FailedMount", blocked)
        }

        const decision = PodSync.decide({
          pod,
          containers: observed,
          probes: verdicts(uid),
          backoff: state.backoff,
          terminal,
          ...(state.startTimeMs === undefined ? {} : { startTimeMs: state.startTimeMs }),
          hashOf: ContainerIdentity.hashOf,
          nowMs
        })
        state.backoff = decision.backoff
        if (decision.fail !== undefined && state.fail === undefined) {
          state.fail = decision.fail
          if (pod !== undefined) yield* emit(pod, "Warning", decision.fail.reason, decision.fail.message)
        }
        for (const [name, w] of decision.waiting) {
          if (w.reason === "CrashLoopBackOff" && pod !== undefined && !state.waiting.has(name)) {
            yield* emit(pod, "Warning", "BackOff", `Back-off restarting failed container ${name} in pod ${pod.metadata.name ?? ""}_${pod.metadata.namespace ?? ""}(${uid})`)
          }
        }

        let changed = false
        let retry = false
        const kills = decision.actions.filter((a): a is Extract<PodSync.Action, { _tag: "Kill" }> => a._tag === "Kill")
        if (kills.length > 0) {
          yield* Effect.forEach(kills, (a) => kill(pod, state, a), { concurrency: "unbounded", discard: true })
          changed = true
        }
        let confirmed = false
        let cleanup = false
        for (const action of decision.actions) {
          switch (action._tag) {
            case "Kill":
              break
            case "Start":
              if (plan === undefined || lookup === undefined || pod === undefined) {
                retry = true
                break
              }
              if (!(yield* start(pod, state, action, lookup, plan))) retry = true
              changed = true
              break
            case "StartCreated":
              if (plan === undefined || pod === undefined) {
                retry = true
                break
              }
              yield* startCreated(pod, state, action.name, action.containerId)
              changed = true
              break
            case "Remove":
              yield* runtime.containers.remove(action.containerId)
              changed = true
              break
            case "ConfirmDeletion":
              confirmed = true
              break
            case "Cleanup":
              cleanup = true
              break
          }
        }
        if (changed) ({ raw, observed } = yield* containersOf(uid))

        if (cleanup) {
          yield* syncProbes(uid, undefined, state, [])
          for (const s of yield* runtime.sandboxes.list({ podUid: uid })) yield* runtime.sandboxes.remove(s.id)
          yield* removePodDirs(uid)
          states.delete(uid)
          return undefined
        }

        noteSeen(uid, raw)
        // Probe workers first, so a container that just started shows its probes' initial verdict.
        yield* syncProbes(uid, pod, state, observed)
        if (pod !== undefined) {
          const waiting = new Map(state.waiting)
          for (const [k, w] of decision.waiting) waiting.set(k, w)
          const podIP = podIPOf(state)
          const status = PodStatus.compute({
            pod: withOwnConditions(pod, state.lastStatus as Pod.PodStatus | undefined),
            containers: observed,
            probes: verdicts(uid),
            waiting,
            ...(state.fail === undefined ? {} : { fail: state.fail }),
            sandboxReady: state.sandbox !== undefined && state.volumesReady,
            hostIP: facts.internalIP,
            ...(podIP === undefined || state.sandbox === undefined ? {} : { podIP }),
            hostPorts: network === "host" ? (state.hostPorts ?? []) : [],
            ...(state.startTime === undefined ? {} : { startTime: state.startTime }),
            runtimeName,
            nowMs: yield* Clock.currentTimeMillis
          })
          yield* writeStatus(state, pod, status)
          if (confirmed) {
            yield* client
              .delete(ResourceRefs.Pod, pod.metadata.namespace, pod.metadata.name ?? "", { gracePeriodSeconds: 0, preconditions: { uid } })
              .pipe(Effect.catchIf((e) => e.status.code === 404 || e.status.code === 409, () => Effect.void))
          }
        }
        if (blocked !== undefined || retry) return 2_000
        return decision.requeueAfterMs
      })

    // ---- the loops ---------------------------------------------------------------------------

    const worker = Effect.forever(
      Effect.gen(function* () {
        const uid = yield* queue.take
        const result = yield* Effect.exit(sync(uid))
        queue.done(uid)
        if (result._tag === "Failure") {
          if (Cause.isInterruptedOnly(result.cause)) return yield* Effect.interrupt
          failures++
          lastError = `sync ${uid}: ${Cause.pretty(result.cause)}`
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
    informer.subscribe((change) => {
      const uid = uidOf(change.object)
      if (uid === "") return
      if (change.type === "DELETED") podsByUid.delete(uid)
      else podsByUid.set(uid, asPod(change.object))
      // A pod replaced under the same name (a re-list after missed events) is gone for the agent.
      if (change.old !== undefined && uidOf(change.old) !== uid) podsByUid.delete(uidOf(change.old))
      // A change of status only (mostly the agent's own writes) needs no sync; resyncs catch the rest.
      if (change.type === "MODIFIED" && change.old !== undefined && sameButStatus(change.old, change.object)) return
      if (change.old !== undefined && uidOf(change.old) !== uid) queue.add(uidOf(change.old))
      queue.add(uid)
    })

    // The runtime relist (PLEG): a container that appeared, changed state or went queues its pod.
    let relisted = false
    const relist = Effect.gen(function* () {
      const list = yield* Effect.either(runtime.containers.list())
      if (list._tag === "Left") return
      const now = new Set<string>()
      const uids = new Set<string>()
      for (const c of list.right) {
        const uid = ContainerIdentity.podUidOf(c)
        if (uid === undefined) continue
        now.add(c.id)
        uids.add(uid)
        const sig = signature(uid, c)
        if (seen.get(c.id) !== sig) {
          seen.set(c.id, sig)
          queue.add(uid)
        }
      }
      for (const [id, sig] of seen) {
        if (now.has(id)) continue
        seen.delete(id)
        queue.add(sig.slice(0, sig.indexOf("|")))
      }
      relistedUids = uids
      relisted = true
    })

    // ---- node registration and heartbeat ---------------------------------------------------

    let nodeUid: string | undefined
    let lastReportMs = 0
    let reported: JsonObject | undefined

    const health = Effect.map(Effect.either(runtime.info), (info): NodeStatus.Health => {
      // The LimitsEnforced condition: from the runtime's answer, or what it said before it went down.
      const caps = info._tag === "Right" ? info.right.capabilities : capabilities
      const limits = caps === undefined ? {} : { limits: { cpu: caps.limits.cpu, memory: caps.limits.memory, allowUnenforced: options.allowUnenforcedLimits === true } }
      return info._tag === "Right" ? { runtimeReady: true, ...limits } : { runtimeReady: false, message: `container runtime is down: ${info.left.message}`, ...limits }
    })

    const register = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const h = yield* health
      const object = NodeStatus.nodeObject(facts, h, now)
      const { status: _status, ...withoutStatus } = object
      const created = yield* Effect.either(client.create(withoutStatus))
      let node: JsonObject
      if (created._tag === "Right") node = created.right
      else if (created.left.status.code === 409) {
        node = yield* client.patch(ResourceRefs.Node, undefined, nodeName, "merge", { metadata: { labels: NodeStatus.labelsOf(facts) } })
      } else return yield* Effect.fail(created.left)
      nodeUid = String(metadataOf(node)["uid"] ?? "")
      const previous = (node["status"] as Record<string, unknown> | undefined)?.["conditions"] as ReadonlyArray<Conditions.Condition> | undefined
      const status = NodeStatus.statusOf(facts, h, previous, now)
      yield* client.patch(ResourceRefs.Node, undefined, nodeName, "merge", { status }, "status")
      reported = status
      lastReportMs = now
    })

    const reportStatus = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const next = NodeStatus.statusOf(facts, yield* health, reported?.["conditions"] as ReadonlyArray<Conditions.Condition> | undefined, now)
      if (!NodeStatus.reportDue(reported, next, lastReportMs, now, nodeStatusReportMs)) return
      const result = yield* Effect.either(client.patch(ResourceRefs.Node, undefined, nodeName, "merge", { status: next }, "status"))
      if (result._tag === "Left") {
        // The node object is gone (deleted by an administrator): register again, as the kubelet does.
        if (isNotFound(result.left)) yield* Effect.ignore(register)
        return
      }
      reported = next
      lastReportMs = now
    })

    const renewLease = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const lease = NodeStatus.leaseObject(nodeName, nodeUid, now)
      const renewed = yield* Effect.either(client.patch(ResourceRefs.Lease, NodeStatus.leaseNamespace, nodeName, "merge", { spec: lease["spec"] }))
      if (renewed._tag === "Left" && isNotFound(renewed.left)) yield* Effect.ignore(client.create(lease))
    })

    const every = (ms: number, effect: Effect.Effect<unknown, unknown>) =>
      Effect.forkIn(
        Effect.forever(Effect.zipRight(Effect.catchAllCause(effect, (cause) => Effect.sync(() => void (lastError = Cause.pretty(cause)))), Effect.sleep(Duration.millis(ms)))),
        scope
      )

    // Registration retries until the API answers (it may start after the agent).
    yield* Effect.forkIn(
      Effect.gen(function* () {
        for (;;) {
          const ok = yield* Effect.either(register)
          if (ok._tag === "Right") break
          yield* Effect.sleep(Duration.millis(1_000))
        }
        yield* every(leaseRenewMs, renewLease)
        yield* every(Math.min(10_000, leaseRenewMs), reportStatus)
      }),
      scope
    )

    const synced = Effect.gen(function* () {
      yield* informer.synced
      while (!relisted) yield* Effect.sleep(Duration.millis(20))
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
        yield* relist
        yield* every(relistMs, relist)
        for (let i = 0; i < (options.workers ?? 16); i++) yield* Effect.forkIn(worker, scope)
        yield* every(resyncMs, Effect.sync(() => {
          for (const uid of new Set([...podsByUid.keys(), ...states.keys()])) queue.add(uid)
        }))
      }),
      scope
    )

    const containerOf: Agent["containerOf"] = (namespace, name, container, previous) =>
      Effect.gen(function* () {
        const pod = informer.get(namespace, name)
        if (pod === undefined) return undefined
        const p = asPod(pod)
        const target = container ?? p.spec.containers[0]?.name
        const { raw } = yield* containersOf(uidOf(pod))
        const history = raw.filter((c) => c.spec.name === target).sort((a, b) => b.spec.attempt - a.spec.attempt)
        return previous ? history[1] : history[0]
      })

    const stopAll = Effect.gen(function* () {
      queue.shutdown()
      const list = yield* Effect.orElseSucceed(runtime.containers.list({ state: "running" }), () => [])
      yield* Effect.forEach(
        list.filter((c) => ContainerIdentity.podUidOf(c) !== undefined),
        (c) => {
          const pod = podsByUid.get(ContainerIdentity.podUidOf(c)!)
          // A pod's own grace, but never past the shutdown's: Ctrl-C is bounded whatever pods ask for
          // (and a container adopted from a crashed run, whose pod is not known yet, gets the default).
          const own = Math.max(PodSync.minimumGracePeriodSeconds, pod?.spec.terminationGracePeriodSeconds ?? PodSync.defaultGracePeriodSeconds)
          const grace = Math.max(0, Math.min(own, options.stopGraceSeconds ?? own))
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
            podsKnown && !podsByUid.has(s.spec.podUid) ? removePodDirs(s.spec.podUid) : Effect.void
          ),
        { concurrency: "unbounded", discard: true }
      )
    })

    return {
      nodeName,
      synced,
      containerOf,
      stopAll,
      metrics: () => ({ syncs, failures, queueDepth: queue.depth(), pods: states.size, ...(lastError === undefined ? {} : { lastError }) })
    }
  })
