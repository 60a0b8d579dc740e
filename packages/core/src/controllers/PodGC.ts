/**
 * Pod garbage collection, as kube-controller-manager's podgc does on every pass (default every
 * 20 s, through the runner's resync): it
 * - deletes terminated pods (Succeeded/Failed) beyond `terminatedPodThreshold` (default 12500),
 *   evicted ones first, then oldest first by creation (name breaks ties);
 * - force-deletes (grace 0) pods bound to a node that no longer exists, after the node has been
 *   missing for a quarantine (default 40 s) and a live GET confirmed it is gone (the informer
 *   may lag a node's creation), marking them Failed with a `DisruptionTarget` condition first;
 * - force-deletes terminating pods on a node that is not Ready and has the
 *   `node.kubernetes.io/out-of-service` taint (non-graceful node shutdown);
 * - force-deletes terminating pods that were never scheduled (no kubelet will confirm them).
 * Pods not yet terminal are first patched to phase Failed, as upstream's markFailedAndDeletePod.
 */
import { Clock, Effect } from "effect"
import * as Conditions from "../object/Conditions.js"
import type * as Controller from "./Controller.js"
import { isTerminating, metadataOf, rfc3339, timeMs } from "../object/Metadata.js"
import { condition, phase } from "../object/Pods.js"
import { type JsonObject, asObject } from "../object/Json.js"
import { nameOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"



/** The taint an operator puts on a node that is shut down for good (non-graceful shutdown). */
export const outOfServiceTaint = "node.kubernetes.io/out-of-service"

/** Why a pod is collected. */
export type Reason = "Terminated" | "Orphaned" | "OutOfService" | "UnscheduledTerminating"

/** One pod to delete with grace 0. */
export interface Deletion {
  readonly pod: JsonObject
  readonly reason: Reason
  /** Set the pod's phase to Failed first (with this condition, if any). */
  readonly markFailed: boolean
  readonly condition?: Omit<Conditions.Condition, "lastTransitionTime" | "lastUpdateTime">
}

/** What one pass looks at. */
export interface Observed {
  readonly pods: ReadonlyArray<JsonObject>
  readonly nodes: ReadonlyArray<JsonObject>
  /** Nodes that pods are bound to and a live GET confirmed do not exist. */
  readonly deletedNodes: ReadonlySet<string>
  /** Keep at most this many terminated pods (0 or less: keep all). */
  readonly terminatedPodThreshold: number
}

const nodeNameOf = (pod: JsonObject) => {
  const n = asObject(pod["spec"])["nodeName"]
  return typeof n === "string" && n !== "" ? n : undefined
}
const keyOf = (pod: JsonObject) => `${String(metadataOf(pod)["namespace"] ?? "")}/${nameOf(pod)}`

/** Whether a pod has finished (upstream's isPodTerminated: not Pending, Running or Unknown). */
export const isTerminated = (pod: JsonObject): boolean => {
  const p = phase(pod)
  return p !== "Pending" && p !== "Running" && p !== "Unknown"
}

/** Whether the kubelet evicted the pod (phase Failed, reason Evicted). */
const isEvicted = (pod: JsonObject) => phase(pod) === "Failed" && asObject(pod["status"])["reason"] === "Evicted"

const isNodeReady = (node: JsonObject) => condition(node, "Ready")?.["status"] === "True"

const hasTaint = (node: JsonObject, key: string) =>
  (Array.isArray(asObject(node["spec"])["taints"]) ? (asObject(node["spec"])["taints"] as ReadonlyArray<unknown>) : []).some((t) => asObject(t)["key"] === key)

/** Upstream's byEvictionAndCreationTimestamp: evicted first, then oldest, then by name. */
const collectionOrder = (a: JsonObject, b: JsonObject) => {
  const ea = isEvicted(a)
  const eb = isEvicted(b)
  if (ea !== eb) return ea ? -1 : 1
  const ta = timeMs(metadataOf(a)["creationTimestamp"]) ?? 0
  const tb = timeMs(metadataOf(b)["creationTimestamp"]) ?? 0
  if (ta !== tb) return ta - tb
  return nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0
}

/** The pods one pass deletes (pure; upstream's gcTerminated, gcTerminating, gcOrphaned, gcUnscheduledTerminating). */
export const decide = (observed: Observed): ReadonlyArray<Deletion> => {
  const out = new Map<string, Deletion>()
  const add = (d: Deletion) => {
    if (!out.has(keyOf(d.pod))) out.set(keyOf(d.pod), d)
  }
  if (observed.terminatedPodThreshold > 0) {
    const terminated = observed.pods.filter(isTerminated)
    const excess = terminated.length - observed.terminatedPodThreshold
    if (excess > 0) [...terminated].sort(collectionOrder).slice(0, excess).forEach((pod) => add({ pod, reason: "Terminated", markFailed: false }))
  }
  const nodes = new Map(observed.nodes.map((n) => [nameOf(n), n]))
  for (const pod of observed.pods) {
    const nodeName = nodeNameOf(pod)
    if (!isTerminating(pod) || nodeName === undefined) continue
    const node = nodes.get(nodeName)
    if (node !== undefined && !isNodeReady(node) && hasTaint(node, outOfServiceTaint)) add({ pod, reason: "OutOfService", markFailed: !isTerminated(pod) })
  }
  for (const pod of observed.pods) {
    const nodeName = nodeNameOf(pod)
    if (nodeName === undefined || !observed.deletedNodes.has(nodeName)) continue
    add({
      pod,
      reason: "Orphaned",
      markFailed: !isTerminated(pod),
      condition: { type: "DisruptionTarget", status: "True", reason: "DeletionByPodGC", message: "PodGC: node no longer exists" }
    })
  }
  for (const pod of observed.pods) {
    if (isTerminating(pod) && nodeNameOf(pod) === undefined) add({ pod, reason: "UnscheduledTerminating", markFailed: !isTerminated(pod) })
  }
  return [...out.values()]
}

/** The quarantine of nodes that pods name but the informer does not know. */
export interface Quarantine {
  /** Missing nodes by the time they were first seen missing (those no pod names any more are dropped). */
  readonly missingSince: ReadonlyMap<string, number>
  /** Nodes missing for at least the quarantine: verify with a live GET. */
  readonly due: ReadonlyArray<string>
  /** When the next missing node comes due, if any (ms from now). */
  readonly nextInMs: number | undefined
}

/** Track nodes that bound pods name but the node informer lacks (pure; upstream's nodeQueue with its delay). */
export const quarantine = (
  pods: ReadonlyArray<JsonObject>,
  nodes: ReadonlyArray<JsonObject>,
  missingSince: ReadonlyMap<string, number>,
  now: number,
  quarantineMs: number
): Quarantine => {
  const known = new Set(nodes.map(nameOf))
  const next = new Map<string, number>()
  for (const pod of pods) {
    const n = nodeNameOf(pod)
    if (n === undefined || known.has(n) || next.has(n)) continue
    next.set(n, missingSince.get(n) ?? now)
  }
  const due: Array<string> = []
  let nextInMs: number | undefined
  for (const [n, since] of next) {
    const left = since + quarantineMs - now
    if (left <= 0) due.push(n)
    else nextInMs = nextInMs === undefined ? left : Math.min(nextInMs, left)
  }
  return { missingSince: next, due, nextInMs }
}

/** Options of the pod garbage collector. */
export interface Options {
  /** Terminated pods kept before the oldest are deleted (default 12500; 0 disables). */
  readonly terminatedPodThreshold?: number
  /** How often a pass runs (default 20 s). */
  readonly periodMs?: number
  /** How long a node must be missing before its pods are deleted (default 40 s). */
  readonly quarantineMs?: number
}

/** The single key a pass runs under. */
const passKey = "pod-gc"

/** The pod garbage collector. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const threshold = options.terminatedPodThreshold ?? 12_500
  const quarantineMs = options.quarantineMs ?? 40_000
  let missingSince: ReadonlyMap<string, number> = new Map()

  const collect = (ctx: Controller.Context, d: Deletion, now: number) =>
    Effect.gen(function* () {
      const m = metadataOf(d.pod)
      const ns = m["namespace"] as string
      const name = nameOf(d.pod)
      if (d.markFailed) {
        const status = asObject(d.pod["status"])
        const conditions = d.condition === undefined ? undefined : Conditions.set(status["conditions"] as ReadonlyArray<Conditions.Condition> | undefined, d.condition, rfc3339(now))
        yield* ctx.client.patch(ResourceRefs.Pod, ns, name, "merge", { status: { phase: "Failed", ...(conditions === undefined ? {} : { conditions }) } }, "status")
      }
      yield* ctx.client.delete(ResourceRefs.Pod, ns, name, { gracePeriodSeconds: 0, preconditions: { uid: m["uid"] } })
      const what = d.reason === "Orphaned" ? `node ${String(nodeNameOf(d.pod))} no longer exists` : d.reason === "OutOfService" ? "its node is out of service" : d.reason === "UnscheduledTerminating" ? "it is terminating and unscheduled" : "too many terminated pods"
      yield* Effect.logDebug(`pod-gc: deleted ${ns}/${name}: ${what}`)
    }).pipe(Effect.catchIf((e) => e.status.code === 404 || e.status.code === 409, () => Effect.void))

  return {
    name: "pod-garbage-collector",
    primary: ResourceRefs.Pod,
    reactToPrimary: false,
    reads: [ResourceRefs.Node],
    workers: 1,
    resync: { everyMs: options.periodMs ?? 20_000, keys: () => [passKey] },
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        if (key !== passKey) return
        const now = yield* Clock.currentTimeMillis
        const pods = ctx.informers.for(ResourceRefs.Pod).list()
        const nodes = ctx.informers.for(ResourceRefs.Node).list()
        const q = quarantine(pods, nodes, missingSince, now, quarantineMs)
        missingSince = q.missingSince
        const deletedNodes = new Set<string>()
        for (const n of q.due) {
          const live = yield* Effect.either(ctx.client.get(ResourceRefs.Node, undefined, n))
          if (live._tag === "Left" && live.left.status.code === 404) deletedNodes.add(n)
          else if (live._tag === "Right") {
            // It exists after all (the informer lagged): forget it.
            const rest = new Map(missingSince)
            rest.delete(n)
            missingSince = rest
          } else return yield* Effect.fail(live.left)
        }
        const deletions = decide({ pods, nodes, deletedNodes, terminatedPodThreshold: threshold })
        // One at a time, in decision order: the oldest terminated pods go first.
        yield* Effect.forEach(deletions, (d) => collect(ctx, d, now), { discard: true })
        return q.nextInMs === undefined ? undefined : { requeueAfterMs: q.nextInMs }
      })
  }
}
