/**
 * The DaemonSet controller: one pod of the set on every eligible node (nodeSelector, required node
 * affinity, taints against the template's tolerations plus the ones a DaemonSet adds; see
 * `internal/NodeEligibility.ts`). Follows upstream `daemon_controller.go` and `update.go`:
 * - pods are created unbound with required node affinity `metadata.name In [node]` (since 1.12)
 *   so the scheduler binds them, labelled `controller-revision-hash` and `pod-template-generation`;
 * - pods on nodes that no longer qualify are deleted (a node failing only on NoSchedule taints
 *   keeps a pod that tolerates its NoExecute ones), extra pods on a node are deleted keeping the
 *   oldest, failed pods are deleted (and so recreated) with a per-node exponential backoff;
 * - RollingUpdate deletes old pods within `maxUnavailable`, or with `maxSurge` starts the new pod
 *   first and deletes the old one once the new is available; OnDelete only replaces what users
 *   delete; revisions are ControllerRevisions (`History.ts`) pruned to `revisionHistoryLimit`;
 * - node join, leave and label/taint/condition changes requeue every DaemonSet.
 * Departures: pods bound to a Node that no longer exists are deleted here with grace 0 (upstream
 * leaves them to the pod garbage collector); no adoption of orphaned pods or revisions; duplicate
 * revisions with equal data are not merged (the newest wins); `burstReplicas` slow-start batching
 * is not needed with a write-observing runner.
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import * as IntOrString from "../model/IntOrString.js"
import * as Controller from "./Controller.js"
import * as History from "./History.js"
import * as Informer from "../informer/Informer.js"
import * as NodeEligibility from "./internal/NodeEligibility.js"
import * as Pods from "../object/Pods.js"
import { type JsonObject, asObject, asString, stableJson } from "../object/Json.js"
import { isTerminating, labelsOf, metadataOf, nameOf, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"



/** The DaemonSet resource. */
export const DaemonSetRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "DaemonSet" }

/** Label carrying the template generation a pod was made from (upstream, deprecated but still set). */
export const TemplateGenerationLabel = "pod-template-generation"
/** The annotation upstream's API server keeps the template generation in; used when present. */
export const TemplateGenerationAnnotation = "deprecated.daemonset.template.generation"

/** The template generation of a DaemonSet: the upstream annotation, else `metadata.generation`. */
export const templateGeneration = (ds: JsonObject): string => {
  const annotated = asObject(metadataOf(ds)["annotations"])[TemplateGenerationAnnotation]
  return typeof annotated === "string" && annotated !== "" ? annotated : String(metadataOf(ds)["generation"] ?? 0)
}

/** Whether a pod runs the DaemonSet's present template: its hash or its template generation matches. */
export const isUpdated = (pod: JsonObject, hash: string, generation: string): boolean => {
  const labels = labelsOf(pod)
  return (hash !== "" && labels[History.HashLabel] === hash) || labels[TemplateGenerationLabel] === generation
}

/** The pod the DaemonSet runs on `node`: its template with the daemon tolerations, pinned to the node. */
export const newPod = (ds: JsonObject, node: string, hash: string): JsonObject => {
  const template = asObject(asObject(ds["spec"])["template"])
  const pod = Pods.fromTemplate(template, ds, {
    extraLabels: { [History.HashLabel]: hash, [TemplateGenerationLabel]: templateGeneration(ds) }
  })
  const spec = NodeEligibility.withDaemonTolerations(asObject(pod["spec"]))
  return { ...pod, spec: { ...spec, affinity: NodeEligibility.withNodeNameAffinity(asObject(spec["affinity"]), node) } }
}

/** The failed-pod backoff of one node: the last time a failed pod was deleted and the current delay. */
export interface Backoff {
  readonly lastMs: number
  readonly delayMs: number
}

/** Bounds of the failed-pod backoff (upstream: 1 s doubling to 15 min). */
export interface BackoffPolicy {
  readonly initialMs: number
  readonly maxMs: number
}

const defaultBackoff: BackoffPolicy = { initialMs: 1000, maxMs: 15 * 60 * 1000 }

/** What the controller observed, besides the DaemonSet. */
export interface Observed {
  readonly nodes: ReadonlyArray<JsonObject>
  /** The pods this DaemonSet controls. */
  readonly pods: ReadonlyArray<JsonObject>
  /** The `controller-revision-hash` of the revision holding the present template. */
  readonly hash: string
  readonly collisionCount: number
  /** Failed-pod backoff by node name. */
  readonly backoff: ReadonlyMap<string, Backoff>
  readonly backoffPolicy?: BackoffPolicy
}

/** Why a daemon pod is deleted. */
export type DeleteReason = "Failed" | "Succeeded" | "Duplicate" | "Ineligible" | "NodeGone" | "Update"

/** What `decide` asks to be done. */
export interface Actions {
  /** Nodes to create a daemon pod for. */
  readonly createOn: ReadonlyArray<string>
  readonly deletePods: ReadonlyArray<{ readonly name: string; readonly uid: string; readonly node: string; readonly reason: DeleteReason }>
  /** The backoff entries to record (nodes whose failed pod is deleted now). */
  readonly backoff: ReadonlyMap<string, Backoff>
  readonly status: JsonObject
  readonly requeueAfterMs?: number
}

// Oldest first; on a tie, a running pod before a pending one (upstream podByCreationTimestampAndPhase).
const byAge = (a: JsonObject, b: JsonObject) => {
  const ta = String(metadataOf(a)["creationTimestamp"] ?? "")
  const tb = String(metadataOf(b)["creationTimestamp"] ?? "")
  if (ta !== tb) return ta < tb ? -1 : 1
  const ra = Pods.phase(a) === "Running" ? 0 : 1
  const rb = Pods.phase(b) === "Running" ? 0 : 1
  if (ra !== rb) return ra - rb
  return nameOf(a).localeCompare(nameOf(b))
}

/** The pods by the node they run on or are pinned to; pods with neither are left out. */
const byNode = (pods: ReadonlyArray<JsonObject>, include: (pod: JsonObject) => boolean): Map<string, Array<JsonObject>> => {
  const map = new Map<string, Array<JsonObject>>()
  for (const pod of pods) {
    if (!include(pod)) continue
    const node = NodeEligibility.targetNodeName(pod)
    if (node === undefined) continue
    const list = map.get(node)
    if (list === undefined) map.set(node, [pod])
    else list.push(pod)
  }
  return map
}

/**
 * Resolve `maxUnavailable` (default 1) and `maxSurge` (default 0) against the desired count
 * (upstream rounds both up); both are 0 under OnDelete.
 */
export const rolloutBounds = (ds: JsonObject, desired: number): { readonly maxUnavailable: number; readonly maxSurge: number } => {
  const strategy = asObject(asObject(ds["spec"])["updateStrategy"])
  if (strategy["type"] === "OnDelete") return { maxUnavailable: 0, maxSurge: 0 }
  const rolling = asObject(strategy["rollingUpdate"])
  const scaled = (v: unknown, fallback: number) => {
    if (typeof v !== "number" && typeof v !== "string") return fallback
    const r = IntOrString.scaledValue(v, desired, true)
    return r._tag === "Right" ? r.right : fallback
  }
  const maxSurge = scaled(rolling["maxSurge"], 0)
  let maxUnavailable = scaled(rolling["maxUnavailable"], 1)
  // An impossible configuration (both zero) falls back to one unavailable, as upstream.
  if (desired > 0 && maxUnavailable === 0 && maxSurge === 0) maxUnavailable = 1
  return { maxUnavailable, maxSurge }
}

/** Decide one sync of a DaemonSet (pure): pods to create and delete, status, backoff. */
export const decide = (ds: JsonObject, observed: Observed, now: number): Actions => {
  const spec = asObject(ds["spec"])
  const template = asObject(spec["template"])
  const minReadySeconds = Number(spec["minReadySeconds"] ?? 0)
  const generation = templateGeneration(ds)
  const policy = observed.backoffPolicy ?? defaultBackoff
  const nodes = [...observed.nodes].sort((a, b) => nameOf(a).localeCompare(nameOf(b)))
  const verdicts = new Map(nodes.map((n) => [nameOf(n), NodeEligibility.shouldRunDaemonPod(template, n)] as const))
  const createOn: Array<string> = []
  const deletePods: Array<{ name: string; uid: string; node: string; reason: DeleteReason }> = []
  const backoff = new Map<string, Backoff>()
  const waits: Array<number> = []
  const remove = (pod: JsonObject, node: string, reason: DeleteReason) => deletePods.push({ name: nameOf(pod), uid: uidOf(pod), node, reason })
  const status = statusOf(ds, nodes, verdicts, observed, now)
  const done = (): Actions => {
    if (minReadySeconds > 0) {
      for (const pod of observed.pods) {
        const ms = Pods.msUntilAvailable(pod, minReadySeconds, now)
        if (ms !== undefined) waits.push(ms + 1)
      }
    }
    return { createOn, deletePods, backoff, status, ...(waits.length > 0 ? { requeueAfterMs: Math.min(...waits) } : {}) }
  }
  if (isTerminating(ds)) return done()

  // 1. Manage: every node that should run a pod has exactly one; no other node has any.
  const all = byNode(observed.pods, () => true)
  for (const node of nodes) {
    const name = nameOf(node)
    const verdict = verdicts.get(name)!
    const pods = all.get(name) ?? []
    if (verdict.shouldRun && pods.length === 0) {
      createOn.push(name)
    } else if (verdict.shouldContinueRunning) {
      const running: Array<JsonObject> = []
      for (const pod of pods) {
        if (isTerminating(pod)) continue
        if (Pods.phase(pod) === "Failed") {
          // Kubelets may keep rejecting a pod: back off per node instead of hot-looping.
          const entry = observed.backoff.get(name)
          if (entry !== undefined && now - entry.lastMs < entry.delayMs) {
            waits.push(entry.lastMs + entry.delayMs - now)
            continue
          }
          const expired = entry !== undefined && now - entry.lastMs > 2 * policy.maxMs
          backoff.set(name, { lastMs: now, delayMs: entry === undefined || expired ? policy.initialMs : Math.min(entry.delayMs * 2, policy.maxMs) })
          remove(pod, name, "Failed")
        } else if (Pods.phase(pod) === "Succeeded") {
          remove(pod, name, "Succeeded")
        } else {
          running.push(pod)
        }
      }
      running.sort(byAge)
      if (rolloutBounds(ds, 1).maxSurge === 0) {
        // Without surge, one pod per node: keep the oldest.
        for (const extra of running.slice(1)) remove(extra, name, "Duplicate")
      } else if (running.length >= 2) {
        // With surge a node may hold one old and one new pod while the new one becomes available.
        let oldestNew: JsonObject | undefined
        let oldestOld: JsonObject | undefined
        for (const pod of running) {
          if (labelsOf(pod)[History.HashLabel] === observed.hash) {
            if (oldestNew === undefined) oldestNew = pod
            else remove(pod, name, "Duplicate")
          } else if (oldestOld === undefined) oldestOld = pod
          else remove(pod, name, "Duplicate")
        }
        if (oldestNew !== undefined && oldestOld !== undefined && (!Pods.isReady(oldestOld) || Pods.isAvailable(oldestNew, minReadySeconds, now))) {
          remove(oldestOld, name, "Update")
        }
      }
    } else {
      for (const pod of pods) if (!isTerminating(pod)) remove(pod, name, "Ineligible")
    }
  }
  // Pods pinned or bound to nodes that no longer exist.
  for (const [name, pods] of all) {
    if (verdicts.has(name)) continue
    for (const pod of pods) if (!isTerminating(pod)) remove(pod, name, "NodeGone")
  }

  // Like upstream's expectations: a rollout step waits until this sync's own writes are observed.
  if (createOn.length > 0 || deletePods.length > 0) return done()
  if (asObject(spec["updateStrategy"])["type"] === "OnDelete") return done()

  // 2. Rolling update over the nodes that run or should run a pod.
  const live = byNode(observed.pods, (p) => !isTerminating(p) && Pods.phase(p) !== "Failed" && Pods.phase(p) !== "Succeeded")
  let desired = 0
  for (const node of nodes) {
    if (!verdicts.get(nameOf(node))!.shouldRun) continue
    desired++
    if (!live.has(nameOf(node))) live.set(nameOf(node), [])
  }
  const { maxUnavailable, maxSurge } = rolloutBounds(ds, desired)
  const names = [...live.keys()].sort()
  // One new and one old pod at most per node; otherwise the manage step has work to do first.
  const split = (pods: ReadonlyArray<JsonObject>): { readonly ok: boolean; readonly fresh?: JsonObject; readonly old?: JsonObject } => {
    let fresh: JsonObject | undefined
    let old: JsonObject | undefined
    for (const pod of pods) {
      if (isUpdated(pod, observed.hash, generation)) {
        if (fresh !== undefined) return { ok: false }
        fresh = pod
      } else {
        if (old !== undefined) return { ok: false }
        old = pod
      }
    }
    return { ok: true, ...(fresh !== undefined ? { fresh } : {}), ...(old !== undefined ? { old } : {}) }
  }
  const available = (pod: JsonObject) => Pods.isAvailable(pod, minReadySeconds, now)

  if (maxSurge === 0) {
    let unavailable = 0
    const replace: Array<[string, JsonObject]> = []
    const candidates: Array<[string, JsonObject]> = []
    for (const name of names) {
      const { ok, fresh, old } = split(live.get(name)!)
      if (!ok || (fresh === undefined) === (old === undefined)) {
        unavailable++
        continue
      }
      if (fresh !== undefined) {
        if (!available(fresh)) unavailable++
        continue
      }
      if (!available(old!)) {
        // An old pod that is not available anyway may be replaced at once.
        replace.push([name, old!])
        unavailable++
      } else if (unavailable < maxUnavailable) candidates.push([name, old!])
    }
    const room = Math.min(Math.max(0, maxUnavailable - unavailable), candidates.length)
    for (const [name, pod] of [...replace, ...candidates.slice(0, room)]) remove(pod, name, "Update")
    return done()
  }

  let surging = 0
  const allowed: Array<string> = []
  const candidates: Array<string> = []
  for (const name of names) {
    const { ok, fresh, old } = split(live.get(name)!)
    if (!ok) {
      surging++
      continue
    }
    if (old === undefined) continue
    if (fresh === undefined) {
      if (!available(old)) {
        const verdict = verdicts.get(name)
        if (verdict === undefined || !verdict.shouldRun) remove(old, name, "Update")
        else allowed.push(name)
      } else if (surging < maxSurge) candidates.push(name)
      continue
    }
    if (!available(fresh)) surging++
    else remove(old, name, "Update")
  }
  const room = Math.min(Math.max(0, maxSurge - surging), candidates.length)
  createOn.push(...allowed, ...candidates.slice(0, room))
  return done()
}

/** The status counts (upstream `updateDaemonSetStatus`), over pods neither deleted nor finished. */
const statusOf = (
  ds: JsonObject,
  nodes: ReadonlyArray<JsonObject>,
  verdicts: ReadonlyMap<string, NodeEligibility.DaemonVerdict>,
  observed: Observed,
  now: number
): JsonObject => {
  const minReadySeconds = Number(asObject(ds["spec"])["minReadySeconds"] ?? 0)
  const generation = templateGeneration(ds)
  const live = byNode(observed.pods, (p) => !isTerminating(p) && Pods.phase(p) !== "Failed" && Pods.phase(p) !== "Succeeded")
  let desired = 0
  let current = 0
  let misscheduled = 0
  let ready = 0
  let available = 0
  let updated = 0
  for (const node of nodes) {
    const pods = live.get(nameOf(node)) ?? []
    if (!verdicts.get(nameOf(node))!.shouldRun) {
      if (pods.length > 0) misscheduled++
      continue
    }
    desired++
    if (pods.length === 0) continue
    current++
    const pod = [...pods].sort(byAge)[0]!
    if (Pods.isReady(pod)) {
      ready++
      if (Pods.isAvailable(pod, minReadySeconds, now)) available++
    }
    if (isUpdated(pod, observed.hash, generation)) updated++
  }
  return {
    desiredNumberScheduled: desired,
    currentNumberScheduled: current,
    numberMisscheduled: misscheduled,
    numberReady: ready,
    numberAvailable: available,
    numberUnavailable: desired - available,
    updatedNumberScheduled: updated,
    observedGeneration: metadataOf(ds)["generation"] ?? 0,
    collisionCount: observed.collisionCount
  }
}

const statusChanged = (ds: JsonObject, next: JsonObject): boolean => {
  const old = asObject(ds["status"])
  return Object.keys(next).some((k) => stableJson(old[k] ?? 0) !== stableJson(next[k]))
}

// A node change that can change a DaemonSet's decision: membership, labels, taints, cordoning,
// condition statuses. Heartbeats (condition times, leases) change nothing.
const nodeFacts = (node: JsonObject | undefined) =>
  node === undefined
    ? ""
    : stableJson({
        labels: metadataOf(node)["labels"],
        taints: asObject(node["spec"])["taints"],
        unschedulable: asObject(node["spec"])["unschedulable"],
        conditions: ((asObject(node["status"])["conditions"] as ReadonlyArray<Record<string, unknown>> | undefined) ?? []).map((c) => `${String(c["type"])}=${String(c["status"])}`)
      })

/** Key mapper: a relevant node change queues every DaemonSet. */
export const nodeKeys: Controller.KeyMapper = (change, informers) => {
  if (change.type === "MODIFIED" && nodeFacts(change.old) === nodeFacts(change.object)) return []
  return informers.for(DaemonSetRef).list().map(Informer.keyOf)
}

/** Options of the DaemonSet reconciler. */
export interface Options {
  readonly workers?: number
  /** Backoff between recreations of a failed daemon pod on one node. */
  readonly failedPodBackoff?: BackoffPolicy
}

/** The DaemonSet reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  // Backoff state lives with the controller, as upstream's `failedPodsBackoff`; keyed `ds-uid/node`.
  const backoffs = new Map<string, Backoff>()
  return {
    name: "daemonset",
    primary: DaemonSetRef,
    watches: [
      { ref: ResourceRefs.Pod, keys: Controller.controllerOf("DaemonSet") },
      { ref: History.ControllerRevisionRef, keys: Controller.controllerOf("DaemonSet") },
      { ref: ResourceRefs.Node, keys: nodeKeys }
    ],
    ...(options.workers !== undefined ? { workers: options.workers } : {}),
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const { namespace, name } = Informer.splitKey(key)
        const ds = ctx.informers.for(DaemonSetRef).get(namespace, name)
        if (ds === undefined) {
          for (const k of backoffs.keys()) if (k.startsWith(`${key}/`)) backoffs.delete(k)
          return
        }
        // A DaemonSet being deleted is left to the garbage collector.
        if (isTerminating(ds)) return
        const uid = uidOf(ds)
        const now = yield* Clock.currentTimeMillis
        const pods = ctx.informers.for(ResourceRefs.Pod).controlledBy(uid)
        const nodes = ctx.informers.for(ResourceRefs.Node).list()
        const revisions = ctx.informers.for(History.ControllerRevisionRef).controlledBy(uid)

        const data = History.patchOf(ds)
        const template = asObject(asObject(ds["spec"])["template"])
        const collisionCount = Number(asObject(ds["status"])["collisionCount"] ?? 0)
        const resolved = yield* History.ensure(
          ctx.client,
          ds,
          History.resolve(revisions, data),
          (cc) => History.make(ds, { data, revision: History.nextRevision(revisions), hash: Pods.templateHash(template, cc) }),
          collisionCount
        )
        const hash = History.hashOf(resolved.revision)

        const prefix = `${key}/`
        const backoff = new Map([...backoffs].filter(([k]) => k.startsWith(prefix)).map(([k, v]) => [k.slice(prefix.length), v] as const))
        const actions = decide(
          ds,
          { nodes, pods, hash, collisionCount: resolved.collisionCount, backoff, ...(options.failedPodBackoff ? { backoffPolicy: options.failedPodBackoff } : {}) },
          now
        )
        for (const [node, entry] of actions.backoff) backoffs.set(`${prefix}${node}`, entry)

        const ns = asString(metadataOf(ds)["namespace"])
        for (const d of actions.deletePods) {
          if (d.reason === "Failed") {
            yield* ctx.events.record(ds, "Warning", "FailedDaemonPod", `Found failed daemon pod ${ns}/${d.name} on node ${d.node}, will try to kill it`)
          }
          // A pod whose node is gone has no kubelet to finish a graceful deletion.
          const deleteOptions = { preconditions: { uid: d.uid }, ...(d.reason === "NodeGone" ? { gracePeriodSeconds: 0 } : {}) }
          const deleted = yield* Effect.either(ctx.client.delete(ResourceRefs.Pod, ns, d.name, deleteOptions))
          if (deleted._tag === "Left") {
            if (deleted.left.status.code === 404 || deleted.left.status.code === 409) continue
            yield* ctx.events.record(ds, "Warning", "FailedDelete", `Error deleting: ${deleted.left.message}`)
            return yield* Effect.fail(deleted.left)
          }
          yield* ctx.events.record(ds, "Normal", "SuccessfulDelete", `Deleted pod: ${d.name}`)
        }
        for (const node of actions.createOn) {
          const created = yield* Effect.either(ctx.client.create(newPod(ds, node, hash)))
          if (created._tag === "Left") {
            yield* ctx.events.record(ds, "Warning", "FailedCreate", `Error creating: ${created.left.message}`)
            return yield* Effect.fail(created.left)
          }
          yield* ctx.events.record(ds, "Normal", "SuccessfulCreate", `Created pod: ${nameOf(created.right)}`)
        }

        if (statusChanged(ds, actions.status)) {
          yield* ignoreGone(ctx.client.patch(DaemonSetRef, ns, name, "merge", { status: actions.status }, "status"))
        }

        // Keep at most revisionHistoryLimit revisions no pod runs.
        const limit = asObject(ds["spec"])["revisionHistoryLimit"]
        const podHashes = new Set(pods.map((p) => labelsOf(p)[History.HashLabel] ?? ""))
        const live = new Set([nameOf(resolved.revision), ...revisions.filter((r) => podHashes.has(History.hashOf(r))).map(nameOf)])
        for (const r of History.toTruncate(revisions, live, typeof limit === "number" ? limit : History.defaultHistoryLimit)) {
          yield* ignoreGone(ctx.client.delete(History.ControllerRevisionRef, ns, nameOf(r), { preconditions: { uid: uidOf(r) } }))
        }
        return actions.requeueAfterMs !== undefined ? { requeueAfterMs: actions.requeueAfterMs } : undefined
      })
  }
}

// Writes racing a deletion or another writer: the next sync decides again on the new state.
const ignoreGone = <A, R>(effect: Effect.Effect<A, ApiError.ApiError, R>) =>
  Effect.catchIf(Effect.asVoid(effect), (e) => e.status.code === 404 || e.status.code === 409, () => Effect.void)
