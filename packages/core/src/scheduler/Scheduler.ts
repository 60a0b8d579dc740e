/**
 * The scheduler at run time: the Effect edge around the pure pipeline. Informers feed the
 * node-info cache and the scheduling queue; one loop pops the best pending pod, takes a snapshot,
 * runs `Schedule.schedule` for the pod's profile, and then either assumes the pod on the chosen
 * node and binds it in the background (many bindings in flight; the store's group commit turns
 * them into few transactions), or records why it fits nowhere — the `PodScheduled=False`
 * condition, a FailedScheduling Event in kube-scheduler's words, preemption of the victims
 * PostFilter chose — and parks it until a cluster event that could help.
 *
 *   informers ─▶ Cache (nodes, bound pods) ─▶ snapshot ┐
 *             └▶ Queue (pending pods) ─▶ pop ──────────┴▶ schedule ─▶ assume ─▶ bind (async, N in flight)
 *                  ▲                                        │ unschedulable      │ failed
 *                  └──── moveOnEvent ◀── cluster events     └▶ park + event      └▶ forget + back off
 */
import { Clock, Effect, Fiber, type Scope } from "effect"
import type * as Client from "../client/Client.js"
import * as Conditions from "../controllers/Conditions.js"
import * as EventRecorder from "../controllers/EventRecorder.js"
import * as Informer from "../controllers/Informer.js"
import * as Pods from "../controllers/Pods.js"
import type * as LabelSelector from "../model/LabelSelector.js"
import { CycleState, isSuccess, status, success, type Framework, type Profile, type Registry, type Status } from "./Framework.js"
import * as DefaultPreemption from "./plugins/DefaultPreemption.js"
import * as Plugins from "./plugins/index.js"
import * as Profiles from "./Profiles.js"
import * as Queue from "./Queue.js"
import * as Schedule from "./Schedule.js"
import * as Snapshot from "./Snapshot.js"

type JsonObject = Client.JsonObject

const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const NodeRef: Client.ResourceRef = { apiVersion: "v1", kind: "Node" }
const PdbRef: Client.ResourceRef = { apiVersion: "policy/v1", kind: "PodDisruptionBudget" }

const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

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
}

/** Counters of a running scheduler. */
export interface Metrics {
  readonly attempts: number
  readonly scheduled: number
  readonly unschedulable: number
  readonly errors: number
  readonly preemptions: number
  readonly bindingsInFlight: number
  readonly queue: Queue.Lengths
}

/** A running scheduler. */
export interface Running {
  /** The last placement decision of a pod (by uid), explained node by node. */
  readonly explain: (uid: string) => Schedule.Explanation | undefined
  readonly metrics: () => Metrics
}

/** Answers whether a pod is this scheduler's to place (pending, not finished, one of its profiles). */
const isPending = (pod: JsonObject, names: ReadonlySet<string>) => {
  const spec = obj(pod["spec"])
  const node = spec["nodeName"]
  return (node === undefined || node === "") && Pods.isActive(pod) && names.has(String(spec["schedulerName"] ?? "default-scheduler"))
}

/** PodDisruptionBudgets as preemption reads them. */
const budgets = (informers: Informer.Informers, namespace: string): ReadonlyArray<DefaultPreemption.Budget> =>
  informers
    .for(PdbRef)
    .list(namespace)
    .map((pdb) => {
      const selector = obj(pdb["spec"])["selector"] as LabelSelector.LabelSelector | undefined
      const st = obj(pdb["status"])
      return { selector, disruptionsAllowed: Number(st["disruptionsAllowed"] ?? 0), disruptedPods: obj(st["disruptedPods"]) }
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

/** Start the scheduler in the current scope. */
export const start = (options: Options): Effect.Effect<Running, string, Scope.Scope> =>
  Effect.gen(function* () {
    const client = options.client
    const informers = options.informers ?? (yield* Informer.makeShared(client))
    const events = EventRecorder.make(client, { component: options.component ?? "default-scheduler" })
    const registry = options.registry ?? Plugins.registry

    const bindPod = (pod: JsonObject, node: string): Effect.Effect<Status> =>
      client
        .createSubresource(PodRef, Pods.meta(pod)["namespace"] as string, String(Pods.meta(pod)["name"]), "binding", {
          apiVersion: "v1",
          kind: "Binding",
          metadata: { name: Pods.meta(pod)["name"], namespace: Pods.meta(pod)["namespace"], uid: Pods.meta(pod)["uid"] },
          target: { apiVersion: "v1", kind: "Node", name: node }
        })
        .pipe(
          Effect.as(success),
          Effect.catchAll((e) => Effect.succeed(status(e.status.code === 409 ? "Unschedulable" : "Error", e.status.message ?? "binding failed")))
        )

    // One framework per profile; preemption's handle reads the filters and budgets at PostFilter time.
    const frameworks = new Map<string, Framework>()
    for (const profile of options.profiles ?? [Profiles.defaultProfile]) {
      const handle: { -readonly [K in keyof DefaultPreemption.PreemptionHandle]: DefaultPreemption.PreemptionHandle[K] } = {
        schedulerName: profile.schedulerName,
        bindPod,
        pdbs: (namespace) => budgets(informers, namespace)
      }
      const built = Profiles.build(profile, registry, handle)
      if (built._tag === "Left") return yield* Effect.fail(`scheduler profile ${profile.schedulerName}: ${built.left}`)
      handle.runFilter = runFilter(built.right)
      frameworks.set(profile.schedulerName, built.right)
    }
    const names = new Set(frameworks.keys())
    const first = [...frameworks.values()][0]!
    const queue = Queue.make({ ...options.queue, ...(first.queueSort === undefined ? {} : { less: first.queueSort.less }) })
    yield* Effect.addFinalizer(() => Effect.sync(() => queue.close()))
    const cache = Snapshot.Cache.make()
    // The last decisions (bounded: explanations are for people asking about a few pods, and a
    // decision over thousands of nodes is not small); explained only when asked.
    const decisions = new Map<string, Schedule.Decision>()
    const remember = (uid: string, decision: Schedule.Decision) => {
      decisions.delete(uid)
      decisions.set(uid, decision)
      if (decisions.size > (options.decisionsKept ?? 1_000)) decisions.delete(decisions.keys().next().value!)
    }
    const counts = { attempts: 0, scheduled: 0, unschedulable: 0, errors: 0, preemptions: 0, inFlight: 0 }

    // Nodes and bound pods feed the cache; pending pods the queue; changes move parked pods.
    const nodes = informers.for(NodeRef)
    const pods = informers.for(PodRef)
    informers.for(PdbRef)
    const unsubscribeNodes = nodes.subscribe((c) => {
      if (c.type === "ADDED") {
        cache.addNode(c.object)
        queue.moveOnEvent({ resource: "Node", action: "Add" })
      } else if (c.type === "MODIFIED") {
        cache.updateNode(c.object)
        queue.moveOnEvent(c.old === undefined ? [{ resource: "Node", action: "Update" }] : Queue.nodeUpdateEvents(c.old, c.object))
      } else cache.removeNode(c.object)
    })
    const unsubscribePods = pods.subscribe((c) => {
      const uid = String(Pods.meta(c.object)["uid"] ?? "")
      if (c.type === "DELETED") {
        cache.removePod(c.object)
        queue.delete(uid)
        decisions.delete(uid)
        queue.moveOnEvent({ resource: "Pod", action: "Delete" })
        return
      }
      const bound = typeof obj(c.object["spec"])["nodeName"] === "string" && obj(c.object["spec"])["nodeName"] !== ""
      if (bound || c.old !== undefined) {
        if (c.type === "ADDED") cache.addPod(c.object)
        else cache.updatePod(c.object)
      }
      if (isPending(c.object, names)) {
        const info = Snapshot.podInfo(c.object)
        if (c.type === "ADDED") queue.add(info)
        else queue.update(info)
      } else {
        queue.delete(uid)
        if (c.old !== undefined && c.type === "MODIFIED") {
          const events = Queue.podUpdateEvents(c.old, c.object)
          if (events.length > 0) queue.moveOnEvent(events)
        }
      }
    })
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribeNodes()
        unsubscribePods()
      })
    )
    yield* Effect.all([nodes.synced, pods.synced], { discard: true })

    const semaphore = yield* Effect.makeSemaphore(options.bindConcurrency ?? 64)
    let startIndex = 0

    /** Record why a pod fits nowhere: its condition and a FailedScheduling Event. */
    const reportUnschedulable = (pod: JsonObject, message: string) =>
      Effect.gen(function* () {
        const now = Pods.rfc3339(yield* Clock.currentTimeMillis)
        const conditions = arr(obj(pod["status"])["conditions"]) as ReadonlyArray<Conditions.Condition>
        const next = Conditions.set(conditions, { type: "PodScheduled", status: "False", reason: "Unschedulable", message }, now)
        if (next !== conditions) {
          yield* Effect.ignore(client.patch(PodRef, Pods.meta(pod)["namespace"] as string, String(Pods.meta(pod)["name"]), "merge", { status: { conditions: next } }, "status"))
        }
        yield* events.record(pod, "Warning", "FailedScheduling", message)
      })

    /** Evict what preemption chose and nominate the node. */
    const preempt = (pod: Snapshot.PodInfo, framework: Framework, node: string, victims: ReadonlyArray<Snapshot.PodInfo>) =>
      Effect.gen(function* () {
        counts.preemptions++
        queue.nominate(pod, node)
        yield* Effect.ignore(client.patch(PodRef, pod.namespace, pod.name, "merge", { status: { nominatedNodeName: node } }, "status"))
        const condition = DefaultPreemption.victimCondition(framework.profile.schedulerName)
        yield* Effect.forEach(
          victims,
          (v) =>
            Effect.gen(function* () {
              const conditions = arr(obj(v.pod["status"])["conditions"]) as ReadonlyArray<Conditions.Condition>
              const now = Pods.rfc3339(yield* Clock.currentTimeMillis)
              const next = Conditions.set(conditions, { type: String(condition["type"]), status: "True", reason: String(condition["reason"]), message: String(condition["message"]) }, now)
              yield* Effect.ignore(client.patch(PodRef, v.namespace, v.name, "merge", { status: { conditions: next } }, "status"))
              yield* Effect.ignore(client.delete(PodRef, v.namespace, v.name, { preconditions: { uid: v.uid } }))
              yield* events.record(v.pod, "Normal", "Preempted", `Preempted by pod ${pod.uid} on node ${node}`)
            }),
          { concurrency: 8, discard: true }
        )
      })

    /** One scheduling cycle. */
    const cycle = Effect.gen(function* () {
      const qpi = yield* queue.pop
      const pod = qpi.pod
      counts.attempts++
      const framework = frameworks.get(String(obj(pod.pod["spec"])["schedulerName"] ?? "default-scheduler")) ?? first
      const state = new CycleState()
      const decision = Schedule.schedule(framework, state, pod, cache.snapshot(), {
        startIndex,
        ...(options.percentageOfNodesToScore === undefined ? {} : { percentageOfNodesToScore: options.percentageOfNodesToScore }),
        random: Math.random
      })
      startIndex = decision.nextStartIndex
      remember(pod.uid, decision)
      if (decision._tag === "Error") {
        counts.errors++
        queue.addUnschedulable(qpi, [])
        yield* events.record(pod.pod, "Warning", "FailedScheduling", decision.message)
        return
      }
      if (decision._tag === "Unschedulable") {
        counts.unschedulable++
        const pf = decision.postFilter
        if (pf !== undefined && pf.nominatedNode !== undefined && pf.nominatedNode !== "" && (pf.victims?.length ?? 0) > 0) {
          yield* preempt(pod, framework, pf.nominatedNode, pf.victims ?? [])
        }
        queue.addUnschedulable(qpi, decision.unschedulablePlugins)
        yield* reportUnschedulable(pod.pod, decision.message)
        return
      }
      // Reserve and permit, then count the pod on its node before the API confirms it, so the next
      // cycle (which starts now, not after the write) sees the room it takes.
      const node = decision.node
      for (const r of framework.reserve) {
        const s = r.reserve(state, pod, node)
        if (!isSuccess(s)) {
          framework.reserve.forEach((x) => x.unreserve(state, pod, node))
          queue.addUnschedulable(qpi, [r.name])
          return
        }
      }
      for (const p of framework.permit) {
        const verdict = p.permit(state, pod, node)
        if (!isSuccess(verdict.status)) {
          framework.reserve.forEach((x) => x.unreserve(state, pod, node))
          queue.addUnschedulable(qpi, [p.name])
          return
        }
      }
      cache.assume(pod, node)
      counts.inFlight++
      yield* semaphore.take(1)
      yield* Effect.forkDaemon(
        Effect.gen(function* () {
          let result: Status = status("Error", "no Bind plugin")
          for (const b of framework.bind) {
            result = yield* b.bind(state, pod, node)
            if (result.code !== "Skip") break
          }
          if (isSuccess(result)) {
            counts.scheduled++
            queue.done(pod.uid)
            queue.nominate(pod, undefined)
            return
          }
          // Lost a race (bound elsewhere, deleted) or failed: undo and retry against a fresh snapshot.
          cache.forget(Snapshot.podKey(pod))
          framework.reserve.forEach((x) => x.unreserve(state, pod, node))
          counts.errors++
          queue.addUnschedulable(qpi, [])
        }).pipe(Effect.ensuring(Effect.sync(() => counts.inFlight--)), Effect.ensuring(semaphore.release(1)))
      )
    })

    const loop = yield* Effect.forkScoped(Effect.forever(cycle))
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
        preemptions: counts.preemptions,
        bindingsInFlight: counts.inFlight,
        queue: queue.lengths()
      })
    }
  })
