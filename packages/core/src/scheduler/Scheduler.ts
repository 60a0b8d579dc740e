/**
 * The scheduler at run time: the Effect edge around the pure pipeline, in the shape of
 * kube-scheduler's `scheduleOne`. Informers feed the node-info cache and the scheduling queue; one
 * loop pops the best pending pod, takes a snapshot (with the pods nominated by earlier preemptions
 * counted on their nodes), runs `Schedule.schedule` for the pod's profile, and then either reserves
 * and assumes the pod on the chosen node and binds it in the background (volumes first, then the
 * Bind plugins; many bindings in flight, which the store's group commit turns into few
 * transactions), or records why it fits nowhere — the `PodScheduled=False` condition and a
 * FailedScheduling Event in kube-scheduler's words, preemption of the victims PostFilter chose —
 * and parks it until a cluster event that could help (never on a blind timer).
 *
 *   informers ─▶ Cache (nodes, bound pods) ─▶ snapshot + nominated ┐
 *             └▶ Queue (pending pods) ─▶ pop ──────────────────────┴▶ schedule ─▶ reserve ─▶ assume ─▶ bind volumes, bind (async)
 *                  ▲                                                    │ unschedulable             │ failed
 *                  └──── moveOnEvent ◀── cluster events                 └▶ preempt, park, report    └▶ forget, unreserve, back off
 *
 * What the plugins read beyond the snapshot comes from the shared informers: namespace labels
 * (InterPodAffinity's `namespaceSelector`), the Services and controllers selecting a pod
 * (PodTopologySpread's system default spreading), claims and volumes (VolumeBinding), budgets and
 * a filter runner (DefaultPreemption).
 *
 * Volumes — the runtime's choice, a departure from upstream: Fleet has neither a
 * PersistentVolume controller nor a provisioner nor a StorageClass kind, so an unbound claim that
 * does not wait for its first consumer would never be bound by anyone (upstream keeps such a pod
 * Pending with `pod has unbound immediate PersistentVolumeClaims` until the PV controller binds
 * it). The scheduler therefore binds only the claims whose class the VolumeBinding arguments list
 * in `waitForFirstConsumer` (local-volume classes): for those VolumeBinding is strict (a pod waits
 * for a fitting volume). Unbound claims of any other class, or of none, are not the scheduler's
 * concern: the pod is placed as if it did not have them and the claim stays Pending, visibly. A
 * bound claim is always honoured (its volume's node affinity), a missing claim always stops the
 * pod. After Reserve the runtime writes the binding itself, as upstream's PreBind and the PV
 * controller together would: the volume's `spec.claimRef` (a compare-and-swap on the volume the
 * decision saw), then the claim's `spec.volumeName`, then both `status.phase: Bound`; a failed
 * write releases the volumes claimed so far and the pod backs off. A pod binding that fails after
 * its volumes were bound keeps them bound (as upstream), so the retry goes to the volume's node.
 *
 * Other departures: `status.nominatedNodeName` is cleared by the scheduler after a successful
 * binding (upstream ≥ 1.34 clears it in the apiserver's binding); nominated pods are added to
 * their nodes for the Filter pass only (upstream also filters once without them, which matters
 * only for affinity to a nominated pod); a Permit plugin answering Wait is taken as a rejection
 * (no waiting pods); no `Scheduled` Event is recorded on success (one more write per pod).
 */
import { Clock, Effect, Fiber, type Scope } from "effect"
import type * as Client from "../client/Client.js"
import * as Conditions from "../object/Conditions.js"
import * as EventRecorder from "../client/EventRecorder.js"
import * as Informer from "../informer/Informer.js"
import * as Pods from "../object/Pods.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import { MetricRegistry } from "../observability/MetricRegistry.js"
import type * as LabelSelector from "../model/LabelSelector.js"
import {
  type CycleState,
  type Factory,
  type Framework,
  isSuccess,
  type Plugin,
  type PreFilterPlugin,
  type Profile,
  type QueuedPodInfo,
  type Registry,
  type Status,
  status,
  success
} from "./Framework.js"
import * as Batch from "./OpportunisticBatching.js"
import * as DefaultPreemption from "./plugins/DefaultPreemption.js"
import * as Plugins from "./plugins/index.js"
import type * as InterPodAffinity from "./plugins/InterPodAffinity.js"
import * as PodTopologySpread from "./plugins/PodTopologySpread.js"
import * as VolumeBinding from "./plugins/VolumeBinding.js"
import * as Profiles from "./Profiles.js"
import * as Queue from "./Queue.js"
import * as Schedule from "./Schedule.js"
import * as Snapshot from "./Snapshot.js"
import { type JsonObject, asArray, asObject, asString } from "../object/Json.js"
import { metadataOf, rfc3339 } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"




/** How to run the scheduler. */
export interface Options {
  readonly client: Client.Client
  /** Informers to share (default: its own). */
  readonly informers?: Informer.Informers
  /** Profiles, each answering for its `schedulerName` (default: `default-scheduler` with the default plugins). */
  readonly profiles?: ReadonlyArray<Profile>
  /** Plugin factories (default: every built-in plugin). */
  readonly registry?: Registry
  /** Cluster-wide percentageOfNodesToScore (a profile's own value wins). */
  readonly percentageOfNodesToScore?: number
  /** Bindings in flight at once (default 64). */
  readonly bindConcurrency?: number
  /** Queue timings (tests shrink them). */
  readonly queue?: Queue.Options
  /** The component name on Events (default `default-scheduler`). */
  readonly component?: string
  /** How many pods' last decisions are kept for `explain` (default 1,000, most recent). */
  readonly decisionsKept?: number
  /** Reuse a cycle's scores for the next pods with the same signature (default true; see `Batch.ts`). */
  readonly batching?: boolean
}

/** Counters of a running scheduler. */
export interface Metrics {
  /** Scheduling cycles run (one per pod popped from the queue). */
  readonly attempts: number
  /** Pods bound. */
  readonly scheduled: number
  /** Cycles that found no node. */
  readonly unschedulable: number
  /** Cycles or bindings that failed (retried with backoff). */
  readonly errors: number
  /** Pods placed from an earlier cycle's scores (opportunistic batching). */
  readonly batched: number
  /** Preemptions started (victims evicted, node nominated). */
  readonly preemptions: number
  readonly bindingsInFlight: number
  readonly queue: Queue.Lengths
}

/** A running scheduler. */
export interface Running {
  /** The last placement decision of a pod (by uid), explained node by node. */
  readonly explain: (uid: string) => Schedule.Explanation | undefined
  readonly metrics: () => Metrics
  /** Where a pending pod (by uid) waits in the queue, if it does. */
  readonly queued: (uid: string) => "active" | "backoff" | "unschedulable" | "inFlight" | undefined
}

/** Everything the built-in plugins read from their handle. */
type PluginHandles = DefaultPreemption.PreemptionHandle & InterPodAffinity.AffinityHandle & PodTopologySpread.SpreadHandle & VolumeBinding.VolumeHandle

/** The handle `start` builds per profile (writable: `runFilter` is bound after the framework is built). */
type RuntimeHandle = { -readonly [K in keyof PluginHandles]: PluginHandles[K] }

const isBound = (pod: JsonObject): boolean => asString(asObject(pod["spec"])["nodeName"]) !== ""

const isFinished = (pod: JsonObject): boolean => {
  const phase = Pods.phase(pod)
  return phase === "Succeeded" || phase === "Failed"
}

/** Answers whether a pod is this scheduler's to place (unbound, not finished or deleting, one of its profiles). */
const isPending = (pod: JsonObject, names: ReadonlySet<string>) =>
  !isBound(pod) && Pods.isActive(pod) && names.has(asString(asObject(pod["spec"])["schedulerName"]) || Profiles.DefaultSchedulerName)

const nominatedNodeOf = (pod: JsonObject): string => asString(asObject(pod["status"])["nominatedNodeName"])

/** PodDisruptionBudgets as preemption reads them. */
const budgets = (informers: Informer.Informers, namespace: string): ReadonlyArray<DefaultPreemption.Budget> =>
  informers
    .for(ResourceRefs.PodDisruptionBudget)
    .list(namespace)
    .map((pdb) => {
      const selector = asObject(pdb["spec"])["selector"] as LabelSelector.LabelSelector | undefined
      const st = asObject(pdb["status"])
      return { selector, disruptionsAllowed: Number(st["disruptionsAllowed"] ?? 0), disruptedPods: asObject(st["disruptedPods"]) }
    })

/** Run every Filter plugin of `framework` on one node (what preemption re-checks). */
const runFilter = (framework: Framework) => (state: CycleState, pod: Snapshot.PodInfo, node: Snapshot.NodeInfo): Status => {
  for (const p of framework.filter) {
    if (state.skipFilter.has(p.name)) continue
    const s = p.filter(state, pod, node)
    if (!isSuccess(s)) return { ...s, plugin: p.name }
  }
  return success
}

/** A claim's class: `spec.storageClassName`, else the beta annotation (upstream's GetPersistentVolumeClaimClass). */
const claimClass = (claim: JsonObject): string =>
  asString(asObject(claim["spec"])["storageClassName"]) || asString(asObject(asObject(claim["metadata"])["annotations"])["volume.beta.kubernetes.io/storage-class"])

/**
 * VolumeBinding as the runtime registers it (see the header): its PreFilter sees the pod without
 * the unbound claims whose class is not listed in `waitForFirstConsumer`, which nobody in Fleet
 * would ever bind. A pod left with no claim is skipped by the plugin as one that has none. The
 * plugin is otherwise the one built (its other points reached through the prototype).
 */
const scopedVolumeBinding = (factory: Factory, claim: (namespace: string, name: string) => JsonObject | undefined): Factory => (args, handle) => {
  const built = factory(args, handle)
  if (typeof built === "string" || typeof (built as Partial<PreFilterPlugin>).preFilter !== "function") return built
  const plugin = built as PreFilterPlugin
  const waiting = new Set(asArray(asObject(args)["waitForFirstConsumer"]).map(asString))
  const concerns = (pod: Snapshot.PodInfo, volume: Record<string, unknown>): boolean => {
    const named = asString(asObject(volume["persistentVolumeClaim"])["claimName"])
    const name = named !== "" ? named : volume["ephemeral"] !== undefined && volume["ephemeral"] !== null ? `${pod.name}-${asString(volume["name"])}` : ""
    if (name === "") return true
    const c = claim(pod.namespace, name)
    // Missing, deleting or bound claims are the plugin's to judge.
    if (c === undefined || asObject(c["metadata"])["deletionTimestamp"] != null || asString(asObject(c["spec"])["volumeName"]) !== "") return true
    return waiting.has(claimClass(c))
  }
  const preFilter: PreFilterPlugin["preFilter"] = (state, pod, snapshot) => {
    const spec = asObject(pod.pod["spec"])
    const volumes = asArray(spec["volumes"])
    let kept: Array<unknown> | undefined
    for (let i = 0; i < volumes.length; i++) {
      const keep = concerns(pod, asObject(volumes[i]))
      if (!keep && kept === undefined) kept = volumes.slice(0, i)
      else if (keep && kept !== undefined) kept.push(volumes[i])
    }
    if (kept === undefined) return plugin.preFilter(state, pod, snapshot)
    return plugin.preFilter(state, { ...pod, pod: { ...pod.pod, spec: { ...spec, volumes: kept } } }, snapshot)
  }
  return Object.create(plugin, { preFilter: { value: preFilter, enumerable: true } }) as Plugin
}

/**
 * Upstream's DefaultSelector for system default spreading: the selectors of the Services in the
 * pod's namespace that select it, merged with its controlling ReplicaSet's, ReplicationController's
 * or StatefulSet's (read from the pod's own labels, as PodTopologySpread's fallback does).
 */
const defaultSelector = (services: Informer.Informer) => (pod: Snapshot.PodInfo): LabelSelector.LabelSelector | undefined => {
  const owner = PodTopologySpread.ownerLabelsSelector(pod)
  let matchLabels: Record<string, string> | undefined
  for (const svc of services.list(pod.namespace)) {
    const selector = asObject(asObject(svc["spec"])["selector"])
    const keys = Object.keys(selector)
    // A Service without a selector selects no pod.
    if (keys.length === 0 || !keys.every((k) => pod.labels[k] === selector[k])) continue
    matchLabels = { ...matchLabels, ...(selector as Record<string, string>) }
  }
  if (matchLabels === undefined) return owner
  return { ...owner, matchLabels: { ...matchLabels, ...owner?.matchLabels } }
}

/** Start the scheduler in the current scope. */
export const start = (options: Options): Effect.Effect<Running, string, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const client = options.client
    const informers = options.informers ?? (yield* Informer.makeShared(client))
    const events = EventRecorder.make(client, { component: options.component ?? Profiles.DefaultSchedulerName })
    const nodes = informers.for(ResourceRefs.Node)
    const pods = informers.for(ResourceRefs.Pod)
    const namespaces = informers.for(ResourceRefs.Namespace)
    const services = informers.for(ResourceRefs.Service)
    const volumes = informers.for(ResourceRefs.PersistentVolume)
    const claims = informers.for(ResourceRefs.PersistentVolumeClaim)

    const base = options.registry ?? Plugins.registry
    const claimOf = (namespace: string, name: string) => claims.get(namespace, name)
    // The claim scoping is the cluster's policy (no PV controller), so it applies to whatever the
    // registry builds under VolumeBinding's name.
    const volumeBinding = Object.prototype.hasOwnProperty.call(base, VolumeBinding.name) ? base[VolumeBinding.name] : undefined
    const registry: Registry = volumeBinding === undefined ? base : { ...base, [VolumeBinding.name]: scopedVolumeBinding(volumeBinding, claimOf) }

    const bindPod = (pod: JsonObject, node: string): Effect.Effect<Status> =>
      client
        .createSubresource(ResourceRefs.Pod, asString(metadataOf(pod)["namespace"]), asString(metadataOf(pod)["name"]), "binding", {
          apiVersion: "v1",
          kind: "Binding",
          metadata: { name: metadataOf(pod)["name"], namespace: metadataOf(pod)["namespace"], uid: metadataOf(pod)["uid"] },
          target: { apiVersion: "v1", kind: "Node", name: node }
        })
        .pipe(
          Effect.as(success),
          Effect.catchAll((e) => Effect.succeed(status(e.status.code === 409 ? "Unschedulable" : "Error", e.status.message ?? "binding failed")))
        )

    // One framework per profile; preemption's filter runner is bound once its framework is built
    // (it is only called at PostFilter time).
    const frameworks = new Map<string, Framework>()
    for (const profile of options.profiles ?? [Profiles.defaultProfile]) {
      if (frameworks.has(profile.schedulerName)) return yield* Effect.fail(`duplicate profile with scheduler name "${profile.schedulerName}"`)
      const handle: RuntimeHandle = {
        schedulerName: profile.schedulerName,
        bindPod,
        pdbs: (namespace) => budgets(informers, namespace),
        namespaceLabels: (namespace) => {
          const ns = namespaces.get(undefined, namespace)
          return ns === undefined ? undefined : (asObject(asObject(ns["metadata"])["labels"]) as Readonly<Record<string, string>>)
        },
        defaultSelector: defaultSelector(services),
        volumes: { claim: claimOf, volumes: () => volumes.list() }
      }
      const built = Profiles.build(profile, registry, handle)
      if (built._tag === "Left") return yield* Effect.fail(`scheduler profile ${profile.schedulerName}: ${built.left}`)
      handle.runFilter = runFilter(built.right)
      frameworks.set(profile.schedulerName, built.right)
    }
    const names = new Set(frameworks.keys())
    const first = [...frameworks.values()][0]
    if (first === undefined) return yield* Effect.fail("no scheduler profile")
    const plugins = new Set<Plugin>()
    for (const f of frameworks.values()) {
      for (const p of [...f.preFilter, ...f.filter, ...f.postFilter, ...f.reserve, ...f.permit]) plugins.add(p)
    }
    const queue = Queue.make({
      ...options.queue,
      ...(first.queueSort === undefined ? {} : { less: first.queueSort.less }),
      pluginEvents: { ...Queue.eventsOf(plugins), ...options.queue?.pluginEvents }
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => queue.close()))
    const cache = Snapshot.Cache.make()
    const batch = options.batching === false ? Batch.unbatched : Batch.make()
    // The last decisions (bounded: explanations are for people asking about a few pods, and a
    // decision over thousands of nodes is not small); explained only when asked.
    const decisions = new Map<string, Schedule.Decision>()
    const remember = (uid: string, decision: Schedule.Decision) => {
      decisions.delete(uid)
      decisions.set(uid, decision)
      if (decisions.size > (options.decisionsKept ?? 1_000)) decisions.delete(decisions.keys().next().value!)
    }
    const counts = { attempts: 0, scheduled: 0, unschedulable: 0, errors: 0, preemptions: 0, inFlight: 0 }
    const exported = FleetMetrics.scheduler(yield* MetricRegistry)
    // Nodes that may have nominated pods (a superset, pruned as nominations go), so a cycle looks
    // at a handful of nodes for nominations rather than at all of them.
    const nominatedNodes = new Set<string>()

    // Nodes and bound pods feed the cache; pending pods the queue; changes move parked pods.
    const unsubscribeNodes = nodes.subscribe((c) => {
      if (c.type === "ADDED") {
        cache.addNode(c.object)
        queue.moveOnEvent({ resource: "Node", action: "Add" })
      } else if (c.type === "MODIFIED") {
        cache.updateNode(c.object)
        queue.moveOnEvent(c.old === undefined ? [{ resource: "Node", action: "Update" }] : Queue.nodeUpdateEvents(c.old, c.object))
      } else {
        cache.removeNode(c.object)
        queue.moveOnEvent({ resource: "Node", action: "Delete" })
      }
    })
    const unsubscribePods = pods.subscribe((c) => {
      const pod = c.object
      const uid = asString(metadataOf(pod)["uid"])
      const bound = isBound(pod)
      // What an assigned pod's change means to parked pods (upstream's AssignedPod* events): one
      // that appears, or becomes assigned, is an Add; one that goes or finishes frees its room.
      const wasAssigned = c.old !== undefined && isBound(c.old) && !isFinished(c.old)
      if (c.type === "DELETED") {
        cache.removePod(pod)
        queue.delete(uid)
        decisions.delete(uid)
        if (bound && !isFinished(pod)) queue.moveOnEvent({ resource: "Pod", action: "Delete" })
        return
      }
      if (bound || c.old !== undefined) {
        if (c.type === "ADDED") cache.addPod(pod)
        else cache.updatePod(pod)
      }
      if (isPending(pod, names)) {
        const info = Snapshot.podInfo(pod)
        const nominated = nominatedNodeOf(pod)
        if (nominated !== "") nominatedNodes.add(nominated)
        if (c.type === "ADDED") queue.add(info)
        else queue.update(info)
        return
      }
      queue.delete(uid)
      if (!bound) return
      if (isFinished(pod)) {
        if (wasAssigned) queue.moveOnEvent({ resource: "Pod", action: "Delete" })
      } else if (!wasAssigned) {
        queue.moveOnEvent({ resource: "Pod", action: "Add" })
      } else {
        const changes = Queue.podUpdateEvents(c.old!, pod)
        if (changes.length > 0) queue.moveOnEvent(changes)
      }
    })
    // Storage changes can make a pod waiting for a volume schedulable (VolumeBinding's interest).
    const storageEvents = (resource: "PersistentVolume" | "PersistentVolumeClaim") => (c: Informer.Change) => {
      queue.moveOnEvent({ resource, action: c.type === "ADDED" ? "Add" : c.type === "MODIFIED" ? "Update" : "Delete" })
    }
    const unsubscribeVolumes = volumes.subscribe(storageEvents("PersistentVolume"))
    const unsubscribeClaims = claims.subscribe(storageEvents("PersistentVolumeClaim"))
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribeNodes()
        unsubscribePods()
        unsubscribeVolumes()
        unsubscribeClaims()
      })
    )
    yield* Effect.all(
      [nodes, pods, namespaces, services, volumes, claims, informers.for(ResourceRefs.PodDisruptionBudget)].map((i) => i.synced),
      { discard: true }
    )

    const binding = yield* Effect.makeSemaphore(options.bindConcurrency ?? 64)
    // Failure reports are written in the background, a few at a time, so a burst of unschedulable
    // pods does not hold the loop on API writes.
    const reporting = yield* Effect.makeSemaphore(16)
    const background = <A>(effect: Effect.Effect<A>) => Effect.asVoid(Effect.forkIn(effect, scope))
    let startIndex = 0

    /** The pod as the informer has it now, if it is still the same pending pod. */
    const current = (pod: Snapshot.PodInfo): JsonObject | undefined => {
      const now = pods.get(pod.namespace, pod.name)
      return now !== undefined && asString(metadataOf(now)["uid"]) === pod.uid && !isBound(now) ? now : undefined
    }

    /**
     * Record a failed attempt as kube-scheduler's handleSchedulingFailure does: `PodScheduled=False`
     * (reason `Unschedulable`, or `SchedulerError` for errors), `status.nominatedNodeName` when it
     * changes (`null` clears it), and a FailedScheduling Warning. Skipped for a pod that is gone or
     * bound meanwhile.
     */
    const reportFailure = (pod: Snapshot.PodInfo, reason: "Unschedulable" | "SchedulerError", message: string, nominate?: string | null) =>
      background(
        reporting.withPermits(1)(
          Effect.gen(function* () {
            const latest = current(pod)
            if (latest === undefined) return
            const now = rfc3339(yield* Clock.currentTimeMillis)
            const conditions = asArray(asObject(latest["status"])["conditions"]) as ReadonlyArray<Conditions.Condition>
            const next = Conditions.set(conditions, { type: "PodScheduled", status: "False", reason, message }, now)
            const patch: Record<string, unknown> = {}
            if (next !== conditions) patch["conditions"] = [Conditions.get(next, "PodScheduled")]
            if (nominate !== undefined && (nominate ?? "") !== nominatedNodeOf(latest)) patch["nominatedNodeName"] = nominate
            if (Object.keys(patch).length > 0) {
              // Strategic merge: conditions merge by type, so a concurrent writer's other conditions stay.
              yield* Effect.ignore(client.patch(ResourceRefs.Pod, pod.namespace, pod.name, "strategic", { status: patch }, "status"))
            }
            yield* events.record(latest, "Warning", "FailedScheduling", message)
          })
        )
      )

    /** Clear a pod's `status.nominatedNodeName` (the nomination no longer holds). */
    const clearNomination = (namespace: string, name: string) =>
      background(Effect.ignore(client.patch(ResourceRefs.Pod, namespace, name, "merge", { status: { nominatedNodeName: null } }, "status")))

    /**
     * The snapshot with the pods nominated to a node (of at least `pod`'s priority, not `pod`)
     * counted there, as upstream's RunFilterPluginsWithNominatedPods: the room a preemption made is
     * kept for the preemptor. Costs nothing without nominations.
     */
    const withNominated = (snapshot: Snapshot.Snapshot, pod: Snapshot.PodInfo): Snapshot.Snapshot => {
      if (nominatedNodes.size === 0) return snapshot
      let views: Map<string, Snapshot.NodeInfo> | undefined
      for (const name of nominatedNodes) {
        const list = queue.nominated(name)
        if (list.length === 0) {
          nominatedNodes.delete(name)
          continue
        }
        const original = snapshot.get(name)
        if (original === undefined) continue
        let view = original
        for (const p of list) if (p.uid !== pod.uid && p.priority >= pod.priority) view = Snapshot.withPod(view, p)
        if (view !== original) (views ??= new Map()).set(name, view)
      }
      if (views === undefined) return snapshot
      const replaced = views
      const listed = new Set<string>()
      const withAffinityPods = snapshot.withAffinityPods.map((n) => {
        const v = replaced.get(n.name)
        if (v === undefined) return n
        listed.add(n.name)
        return v
      })
      for (const [name, v] of replaced) if (!listed.has(name) && Snapshot.hasAffinityPods(v)) withAffinityPods.push(v)
      return { nodes: snapshot.nodes.map((n) => replaced.get(n.name) ?? n), get: (name) => replaced.get(name) ?? snapshot.get(name), withAffinityPods }
    }

    /** Evict what preemption chose and nominate the node (upstream's prepareCandidate). */
    const preempt = (pod: Snapshot.PodInfo, framework: Framework, node: string, victims: ReadonlyArray<Snapshot.PodInfo>) =>
      Effect.gen(function* () {
        counts.preemptions++
        // Lower-priority pods nominated to this node lose their claim on it.
        for (const p of DefaultPreemption.nominationsToClear(pod, queue.nominated(node))) {
          queue.nominate(p, undefined)
          yield* clearNomination(p.namespace, p.name)
        }
        queue.nominate(pod, node)
        nominatedNodes.add(node)
        const condition = DefaultPreemption.victimCondition(framework.profile.schedulerName)
        yield* Effect.forEach(
          victims,
          (v) =>
            Effect.gen(function* () {
              const now = rfc3339(yield* Clock.currentTimeMillis)
              const target = Conditions.get(
                Conditions.set(
                  asArray(asObject(v.pod["status"])["conditions"]) as ReadonlyArray<Conditions.Condition>,
                  { type: asString(condition["type"]), status: "True", reason: asString(condition["reason"]), message: asString(condition["message"]) },
                  now
                ),
                asString(condition["type"])
              )
              yield* Effect.ignore(client.patch(ResourceRefs.Pod, v.namespace, v.name, "strategic", { status: { conditions: [target] } }, "status"))
              yield* Effect.ignore(client.delete(ResourceRefs.Pod, v.namespace, v.name, { preconditions: { uid: v.uid } }))
              yield* events.record(v.pod, "Normal", "Preempted", `Preempted by pod ${pod.uid} on node ${node}`)
            }),
          { concurrency: 8, discard: true }
        )
      })

    /**
     * Write the claim → volume bindings Reserve chose (upstream's VolumeBinding PreBind plus the
     * PV controller's part): the volume's claimRef as a compare-and-swap on the version the
     * decision saw, then the claim's volumeName, then both phases. On a failed write, the volumes
     * claimed so far are released.
     */
    const bindVolumes = (list: ReadonlyArray<VolumeBinding.Binding>): Effect.Effect<Status> =>
      Effect.gen(function* () {
        const claimed: Array<{ readonly volume: string; readonly resourceVersion: unknown }> = []
        const fail = (s: Status) =>
          Effect.as(
            Effect.forEach(
              claimed,
              (c) => Effect.ignore(client.patch(ResourceRefs.PersistentVolume, undefined, c.volume, "merge", { metadata: { resourceVersion: c.resourceVersion }, spec: { claimRef: null } })),
              { discard: true }
            ),
            s
          )
        const failure = (e: { readonly status: { readonly code?: number; readonly message?: string } }, what: string) =>
          status(e.status.code === 409 ? "Unschedulable" : "Error", `binding volumes: ${what}: ${e.status.message ?? "failed"}`)
        for (const b of list) {
          const pv = volumes.get(undefined, b.volume)
          if (pv === undefined) return yield* fail(status("Error", `binding volumes: persistentvolume "${b.volume}" not found`))
          const claimRef = { apiVersion: "v1", kind: "PersistentVolumeClaim", namespace: b.namespace, name: b.claim, uid: b.claimUid }
          const written = yield* Effect.either(
            client.patch(ResourceRefs.PersistentVolume, undefined, b.volume, "merge", { metadata: { resourceVersion: metadataOf(pv)["resourceVersion"] }, spec: { claimRef } })
          )
          if (written._tag === "Left") return yield* fail(failure(written.left, `persistentvolume "${b.volume}"`))
          claimed.push({ volume: b.volume, resourceVersion: metadataOf(written.right)["resourceVersion"] })
          const pvc = claims.get(b.namespace, b.claim)
          if (pvc === undefined) return yield* fail(status("Error", `binding volumes: persistentvolumeclaim "${b.claim}" not found`))
          const bound = yield* Effect.either(
            client.patch(ResourceRefs.PersistentVolumeClaim, b.namespace, b.claim, "merge", { metadata: { resourceVersion: metadataOf(pvc)["resourceVersion"] }, spec: { volumeName: b.volume } })
          )
          if (bound._tag === "Left") return yield* fail(failure(bound.left, `persistentvolumeclaim "${b.claim}"`))
          const pvSpec = asObject(pv["spec"])
          // The phases are reporting only (the scheduler reads claimRef and volumeName): best effort.
          yield* Effect.ignore(client.patch(ResourceRefs.PersistentVolume, undefined, b.volume, "merge", { status: { phase: "Bound" } }, "status"))
          yield* Effect.ignore(
            client.patch(ResourceRefs.PersistentVolumeClaim, b.namespace, b.claim, "merge", { status: { phase: "Bound", accessModes: pvSpec["accessModes"], capacity: pvSpec["capacity"] } }, "status")
          )
        }
        return success
      })

    /** Undo Reserve (every plugin, in reverse order, as upstream's RunReservePluginsUnreserve). */
    const unreserve = (framework: Framework, state: CycleState, pod: Snapshot.PodInfo, node: string) => {
      for (let i = framework.reserve.length - 1; i >= 0; i--) framework.reserve[i]!.unreserve(state, pod, node)
    }

    /** The binding cycle of an assumed pod, in the background. */
    const bindCycle = (framework: Framework, state: CycleState, qpi: QueuedPodInfo, node: string, nominated: boolean) =>
      Effect.gen(function* () {
        const pod = qpi.pod
        const volumeBindings = VolumeBinding.bindings(state)
        let result = volumeBindings.length === 0 ? success : yield* bindVolumes(volumeBindings)
        if (isSuccess(result)) {
          result = status("Error", "no Bind plugin")
          for (const b of framework.bind) {
            result = yield* b.bind(state, pod, node)
            if (result.code !== "Skip") break
          }
        }
        if (isSuccess(result)) {
          counts.scheduled++
          queue.done(pod.uid)
          const latest = pods.get(pod.namespace, pod.name)
          if (nominated || (latest !== undefined && nominatedNodeOf(latest) !== "")) yield* clearNomination(pod.namespace, pod.name)
          return
        }
        // Lost a race (bound elsewhere, a volume taken) or failed: undo and retry against a fresh snapshot.
        cache.forget(Snapshot.podKey(pod))
        unreserve(framework, state, pod, node)
        counts.errors++
        queue.addUnschedulable(qpi, [])
        yield* reportFailure(pod, "SchedulerError", `Binding rejected: ${Schedule.statusMessage(result)}`)
      }).pipe(
        Effect.ensuring(
          Effect.zipRight(
            Effect.sync(() => counts.inFlight--),
            binding.release(1)
          )
        )
      )

    /** One scheduling cycle of a popped pod; answers its result, as the attempt metrics count it. */
    const attempt = (qpi: QueuedPodInfo): Effect.Effect<"scheduled" | "unschedulable" | "error"> =>
      Effect.gen(function* () {
        const pod = qpi.pod
        counts.attempts++
        const framework = frameworks.get(asString(asObject(pod.pod["spec"])["schedulerName"]) || Profiles.DefaultSchedulerName) ?? first
        const snapshot = withNominated(cache.snapshot(), pod)
        const scheduleOptions: Schedule.Options = {
          startIndex,
          ...(options.percentageOfNodesToScore === undefined ? {} : { percentageOfNodesToScore: options.percentageOfNodesToScore }),
          random: Math.random
        }
        const { decision, state } = batch.schedule(framework, pod, snapshot, scheduleOptions, yield* Clock.currentTimeMillis)
        startIndex = decision.nextStartIndex
        remember(pod.uid, decision)
        if (decision._tag === "Error") {
          counts.errors++
          queue.addUnschedulable(qpi, [])
          yield* reportFailure(pod, "SchedulerError", decision.message)
          return "error" as const
        }
        if (decision._tag === "Unschedulable") {
          counts.unschedulable++
          const pf = decision.postFilter
          let nominate: string | null | undefined
          if (pf?.nominatedNode !== undefined && pf.nominatedNode !== "" && (pf.victims?.length ?? 0) > 0) {
            yield* preempt(pod, framework, pf.nominatedNode, pf.victims ?? [])
            nominate = pf.nominatedNode
          } else if (pf?.nominatedNode === "") {
            // Preemption found nothing: an earlier nomination did not help (upstream clears it).
            queue.nominate(pod, undefined)
            nominate = null
          }
          queue.addUnschedulable(qpi, decision.unschedulablePlugins)
          yield* reportFailure(pod, "Unschedulable", decision.message, nominate)
          return "unschedulable" as const
        }
        // Reserve and Permit on the chosen node; a rejection reads as upstream's one-node FitError.
        const node = decision.node
        const reject = (s: Status, plugin: string) =>
          Effect.gen(function* () {
            unreserve(framework, state, pod, node)
            counts.unschedulable++
            const rejected = s.code === "Unschedulable" || s.code === "UnschedulableAndUnresolvable" || s.code === "Wait"
            queue.addUnschedulable(qpi, rejected ? [plugin] : [])
            yield* reportFailure(
              pod,
              rejected ? "Unschedulable" : "SchedulerError",
              rejected ? Schedule.fitErrorMessage(1, [s]) : `running ${plugin} plugin: ${Schedule.statusMessage(s)}`
            )
            return rejected ? ("unschedulable" as const) : ("error" as const)
          })
        for (const r of framework.reserve) {
          const s = r.reserve(state, pod, node)
          if (!isSuccess(s)) return yield* reject(s, r.name)
        }
        for (const p of framework.permit) {
          const verdict = p.permit(state, pod, node)
          if (!isSuccess(verdict.status)) return yield* reject(verdict.status, p.name)
        }
        // Count the pod on its node before the API confirms it, so the next cycle (which starts now,
        // not after the write) sees the room it takes; its nomination, if any, is now that assumption.
        const nominated = queue.nominatedNode(pod.uid) !== undefined || nominatedNodeOf(pod.pod) !== ""
        cache.assume(pod, node)
        queue.nominate(pod, undefined)
        counts.inFlight++
        yield* binding.take(1)
        yield* Effect.forkIn(bindCycle(framework, state, qpi, node, nominated), scope)
        return "scheduled" as const
      })

    // A defect in a cycle (a bug) must not stop scheduling: the pod backs off and the loop goes on.
    const next = Effect.flatMap(queue.pop, (qpi) => {
      const t0 = performance.now()
      // Only configured profiles become label values (a pod may name any scheduler).
      const named = asString(asObject(qpi.pod.pod["spec"])["schedulerName"])
      const profile = frameworks.has(named) ? named : Profiles.DefaultSchedulerName
      const record = (result: string) =>
        Effect.sync(() => {
          exported.attempts.labels(result, profile).inc()
          exported.duration.labels(result, profile).observe((performance.now() - t0) / 1000)
        })
      return attempt(qpi).pipe(
        Effect.flatMap(record),
        Effect.catchAllDefect(() =>
          Effect.sync(() => {
            counts.errors++
            queue.addUnschedulable(qpi, [])
          }).pipe(Effect.zipRight(record("error")))
        )
      )
    })

    const loop = yield* Effect.forkIn(Effect.forever(next), scope)
    yield* Effect.addFinalizer(() => Fiber.interrupt(loop))

    return {
      explain: (uid) => {
        const decision = decisions.get(uid)
        return decision === undefined ? undefined : Schedule.explain(decision)
      },
      metrics: () => ({
        attempts: counts.attempts,
        scheduled: counts.scheduled,
        unschedulable: counts.unschedulable,
        errors: counts.errors,
        batched: batch.batched(),
        preemptions: counts.preemptions,
        bindingsInFlight: counts.inFlight,
        queue: queue.lengths()
      }),
      queued: (uid) => queue.where(uid)
    }
  })
