/**
 * The StatefulSet controller: keeps pods `<set>-<ordinal>` for ordinals `[start, start+replicas)`,
 * each with a stable identity (labels `statefulset.kubernetes.io/pod-name`,
 * `apps.kubernetes.io/pod-index`, `spec.hostname`, `spec.subdomain` = serviceName) and its own
 * PersistentVolumeClaims `<template>-<set>-<ordinal>` made from `volumeClaimTemplates` before the
 * pod, kept across scale-down and pod replacement so that a returning ordinal gets its old claims.
 * Follows upstream `stateful_set_control.go`:
 * - OrderedReady creates ordinal i only when every lower one is Running, Ready and available, and
 *   scales down from the highest ordinal one at a time, waiting for each to terminate; Parallel
 *   creates and deletes all at once;
 * - failed or succeeded pods are deleted and recreated;
 * - RollingUpdate replaces pods with ordinal >= start+partition from the highest down, one at a
 *   time waiting for each to be available (or up to `maxUnavailable` at once when set, upstream's
 *   MaxUnavailableStatefulSet behaviour); OnDelete gives only new pods the new revision;
 * - revisions are ControllerRevisions (`History.ts`), `status.currentRevision` moves to the update
 *   revision when every replica is updated and ready; `revisionHistoryLimit` prunes old ones;
 * - `persistentVolumeClaimRetentionPolicy` puts owner references on claims: `whenDeleted: Delete`
 *   → to the set, `whenScaled: Delete` → to the pod once condemned; the garbage collector deletes.
 * Departures: no adoption or release of orphaned pods or revisions (only pods this set controls
 * are managed); a claim being deleted or still owned by a previous pod is waited for by a timed
 * requeue rather than an error; the simulated cluster has no volume provisioner, so claims stay
 * Pending and pods still run (the scheduler does not check volume binding).
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import * as IntOrString from "../model/IntOrString.js"
import * as Controller from "./Controller.js"
import * as History from "./History.js"
import * as Informer from "../informer/Informer.js"
import * as Pods from "../object/Pods.js"
import { type JsonObject, asArray, asObject, asString, stableJson } from "../object/Json.js"
import { isTerminating, labelsOf, metadataOf, nameOf, ownerReference, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"



/** The StatefulSet resource. */
export const StatefulSetRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "StatefulSet" }
/** The PersistentVolumeClaim resource. */
export const ClaimRef: Client.ResourceRef = { apiVersion: "v1", kind: "PersistentVolumeClaim" }

/** Label carrying the pod's own name, so a Service can select one replica. */
export const PodNameLabel = "statefulset.kubernetes.io/pod-name"
/** Label carrying the pod's ordinal. */
export const PodIndexLabel = "apps.kubernetes.io/pod-index"

/** The parts of a StatefulSet's spec the controller reads, with upstream's defaults. */
export interface Spec {
  readonly name: string
  readonly namespace: string
  readonly uid: string
  readonly replicas: number
  readonly start: number
  readonly serviceName: string
  readonly parallel: boolean
  readonly strategy: "RollingUpdate" | "OnDelete"
  readonly partition: number
  readonly maxUnavailable: IntOrString.IntOrString | undefined
  readonly minReadySeconds: number
  readonly revisionHistoryLimit: number
  readonly claimTemplates: ReadonlyArray<JsonObject>
  readonly whenDeleted: "Retain" | "Delete"
  readonly whenScaled: "Retain" | "Delete"
  readonly selectorLabels: Record<string, string>
}

/** Read a StatefulSet's spec with defaults applied. */
export const specOf = (set: JsonObject): Spec => {
  const m = metadataOf(set)
  const spec = asObject(set["spec"])
  const strategy = asObject(spec["updateStrategy"])
  const rolling = asObject(strategy["rollingUpdate"])
  const policy = asObject(spec["persistentVolumeClaimRetentionPolicy"])
  return {
    name: asString(m["name"]),
    namespace: asString(m["namespace"]),
    uid: asString(m["uid"]),
    replicas: typeof spec["replicas"] === "number" ? spec["replicas"] : 1,
    start: Number(asObject(spec["ordinals"])["start"] ?? 0),
    serviceName: asString(spec["serviceName"]),
    parallel: spec["podManagementPolicy"] === "Parallel",
    strategy: strategy["type"] === "OnDelete" ? "OnDelete" : "RollingUpdate",
    partition: strategy["type"] === "OnDelete" ? 0 : Number(rolling["partition"] ?? 0),
    maxUnavailable: rolling["maxUnavailable"] as IntOrString.IntOrString | undefined,
    minReadySeconds: Number(spec["minReadySeconds"] ?? 0),
    revisionHistoryLimit: typeof spec["revisionHistoryLimit"] === "number" ? spec["revisionHistoryLimit"] : History.defaultHistoryLimit,
    claimTemplates: asArray(spec["volumeClaimTemplates"]).map(asObject),
    whenDeleted: policy["whenDeleted"] === "Delete" ? "Delete" : "Retain",
    whenScaled: policy["whenScaled"] === "Delete" ? "Delete" : "Retain",
    selectorLabels: asObject(asObject(spec["selector"])["matchLabels"]) as Record<string, string>
  }
}

const ordinalRe = /^(.*)-([0-9]+)$/

/** The set name and ordinal a pod name encodes (`web-2` → web, 2), or ordinal -1. */
export const parentAndOrdinal = (podName: string): { readonly parent: string; readonly ordinal: number } => {
  const m = ordinalRe.exec(podName)
  if (m === null) return { parent: "", ordinal: -1 }
  const n = Number(m[2])
  return { parent: m[1]!, ordinal: Number.isSafeInteger(n) && n <= 2147483647 ? n : -1 }
}

/** `<set>-<ordinal>`. */
export const podName = (set: string, ordinal: number): string => `${set}-${ordinal}`

/** `<template>-<set>-<ordinal>`: the claim a template gives one replica. */
export const claimName = (template: string, set: string, ordinal: number): string => `${template}-${set}-${ordinal}`

const revisionLabel = (pod: JsonObject) => labelsOf(pod)[History.HashLabel] ?? ""
const isRunningAndReady = (pod: JsonObject) => Pods.phase(pod) === "Running" && Pods.isReady(pod)
const isFinished = (pod: JsonObject) => Pods.phase(pod) === "Failed" || Pods.phase(pod) === "Succeeded"

/** A new claim for `ordinal` from one of the set's `volumeClaimTemplates`. */
export const newClaim = (set: JsonObject, spec: Spec, template: JsonObject, ordinal: number): JsonObject => {
  const tm = asObject(template["metadata"])
  const labels = { ...(asObject(tm["labels"]) as Record<string, string>), ...spec.selectorLabels }
  const annotations = asObject(tm["annotations"])
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: claimName(asString(tm["name"]), spec.name, ordinal),
      namespace: spec.namespace,
      ...(Object.keys(labels).length > 0 ? { labels } : {}),
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      // A claim for an in-range replica belongs to the set only when the set's deletion deletes it.
      ...(spec.whenDeleted === "Delete" ? { ownerReferences: [ownerReference(set)] } : {})
    },
    spec: structuredClone(asObject(template["spec"]))
  }
}

/**
 * The pod for `ordinal` at a revision: the revision's template, the identity labels and fields,
 * and volumes pointing at the replica's claims (replacing template volumes of the same names).
 */
export const newPod = (set: JsonObject, spec: Spec, template: JsonObject, revisionName: string, ordinal: number): JsonObject => {
  const name = podName(spec.name, ordinal)
  const pod = Pods.fromTemplate(template, set, {
    name,
    extraLabels: { [PodNameLabel]: name, [PodIndexLabel]: String(ordinal), [History.HashLabel]: revisionName }
  })
  const podSpec = asObject(pod["spec"])
  const claimVolumes = spec.claimTemplates.map((t) => {
    const volume = asString(asObject(t["metadata"])["name"])
    return { name: volume, persistentVolumeClaim: { claimName: claimName(volume, spec.name, ordinal) } }
  })
  const claimed = new Set(claimVolumes.map((v) => v.name))
  const volumes = [...claimVolumes, ...asArray(podSpec["volumes"]).filter((v) => !claimed.has(asString(asObject(v)["name"])))]
  return {
    ...pod,
    spec: {
      ...podSpec,
      hostname: name,
      ...(spec.serviceName !== "" ? { subdomain: spec.serviceName } : {}),
      ...(volumes.length > 0 ? { volumes } : {})
    }
  }
}

/** What the controller observed, besides the set itself. */
export interface Observed {
  /** The pods this set controls. */
  readonly pods: ReadonlyArray<JsonObject>
  /** The claims of the set's namespace, by name. */
  readonly claims: ReadonlyMap<string, JsonObject>
  /** The revision `status.currentRevision` names (or the update revision when none). */
  readonly currentRevision: JsonObject
  /** The revision holding the set's present template. */
  readonly updateRevision: JsonObject
  /** The collision count the revisions were named with. */
  readonly collisionCount: number
}

/** Why a pod is deleted. */
export type DeleteReason = "Finished" | "ScaleDown" | "Update"

/** What `decide` asks to be done, in this order. */
export interface Actions {
  /** Claims to create (before the pods that use them). */
  readonly createClaims: ReadonlyArray<JsonObject>
  readonly createPods: ReadonlyArray<JsonObject>
  /** Pods whose identity labels to restore. */
  readonly labelPods: ReadonlyArray<{ readonly name: string; readonly labels: Record<string, string> }>
  /** Claims whose owner references to rewrite for the retention policy. */
  readonly ownClaims: ReadonlyArray<{ readonly name: string; readonly ownerReferences: ReadonlyArray<Record<string, unknown>> }>
  readonly deletePods: ReadonlyArray<{ readonly name: string; readonly uid: string; readonly reason: DeleteReason }>
  /** The status to record. */
  readonly status: JsonObject
  /** Something only time mends (a claim being deleted); look again after `requeueAfterMs`. */
  readonly waiting?: string
  readonly requeueAfterMs?: number
}

const claimRefMatches = (ref: Record<string, unknown>, kind: string, name: string) => ref["kind"] === kind && ref["name"] === name

/**
 * The owner references a replica's claim should carry under the retention policy, or undefined
 * when they already do (or when the claim is left alone: references to a previous set or pod of
 * the same name, or another controller, as upstream's `isClaimOwnerUpToDate`).
 */
export const claimOwners = (
  claim: JsonObject,
  set: JsonObject,
  spec: Spec,
  pod: JsonObject,
  condemned: boolean
): ReadonlyArray<Record<string, unknown>> | undefined => {
  const refs = asArray(metadataOf(claim)["ownerReferences"]).map(asObject)
  const ownerPod = nameOf(pod)
  const isSetRef = (r: Record<string, unknown>) => claimRefMatches(r, "StatefulSet", spec.name)
  const isPodRef = (r: Record<string, unknown>) => claimRefMatches(r, "Pod", ownerPod)
  if (refs.some((r) => (isSetRef(r) && r["uid"] !== spec.uid) || (isPodRef(r) && r["uid"] !== uidOf(pod)))) return undefined
  const others = refs.filter((r) => !isSetRef(r) && !isPodRef(r))
  const foreignController = spec.whenDeleted === "Delete" || spec.whenScaled === "Delete" ? others.some((r) => r["controller"] === true) : false
  const wantSet = !foreignController && spec.whenDeleted === "Delete" && !(condemned && spec.whenScaled === "Delete")
  const wantPod = !foreignController && spec.whenScaled === "Delete" && condemned
  const next = [...others, ...(wantSet ? [ownerReference(set)] : []), ...(wantPod ? [ownerReference(pod)] : [])]
  const same = (a: ReadonlyArray<Record<string, unknown>>) => a.map((r) => stableJson(r)).sort().join("|")
  return same(next) === same(refs) ? undefined : next
}

/**
 * Decide one sync of a StatefulSet (pure): which claims and pods to create, which pods to delete,
 * what status to record. `now` is the time in milliseconds.
 */
export const decide = (set: JsonObject, observed: Observed, now: number): Actions => {
  const spec = specOf(set)
  const currentName = nameOf(observed.currentRevision)
  const updateName = nameOf(observed.updateRevision)
  const createClaims: Array<JsonObject> = []
  const createPods: Array<JsonObject> = []
  const labelPods: Array<{ name: string; labels: Record<string, string> }> = []
  const ownClaims: Array<{ name: string; ownerReferences: ReadonlyArray<Record<string, unknown>> }> = []
  const deletePods: Array<{ name: string; uid: string; reason: DeleteReason }> = []
  let waiting: string | undefined
  const isUnavailable = (pod: JsonObject) => !Pods.isAvailable(pod, spec.minReadySeconds, now) || isTerminating(pod)

  // Partition the pods into replicas (by slot) and condemned (out of range, highest first).
  const slots: Array<JsonObject | undefined> = Array.from({ length: spec.replicas }, () => undefined)
  const condemned: Array<JsonObject> = []
  for (const pod of observed.pods) {
    const { parent, ordinal } = parentAndOrdinal(nameOf(pod))
    if (parent !== spec.name || ordinal < 0) continue
    if (ordinal >= spec.start && ordinal < spec.start + spec.replicas) slots[ordinal - spec.start] = pod
    else condemned.push(pod)
  }
  condemned.sort((a, b) => parentAndOrdinal(nameOf(b)).ordinal - parentAndOrdinal(nameOf(a)).ordinal)

  const status = statusOf(set, spec, [...slots.filter((p): p is JsonObject => p !== undefined), ...condemned], observed, now)
  const done = (): Actions => ({
    createClaims,
    createPods,
    labelPods,
    ownClaims,
    deletePods,
    status: completeRollingUpdate(spec, status),
    ...(waiting !== undefined ? { waiting, requeueAfterMs: 1000 } : minReadyRequeue(spec, observed.pods, now))
  })
  if (isTerminating(set)) return done()

  const currentTemplate = History.templateOf(observed.currentRevision)
  const updateTemplate = History.templateOf(observed.updateRevision)
  // Upstream `newVersionedStatefulSetPod`: under RollingUpdate, ordinals below the partition are
  // (re)created at the current revision; everything else at the update revision.
  const placeholder = (ordinal: number) =>
    spec.strategy === "RollingUpdate" && ordinal < spec.start + spec.partition
      ? newPod(set, spec, currentTemplate, currentName, ordinal)
      : newPod(set, spec, updateTemplate, updateName, ordinal)

  const missingClaims = (ordinal: number): { readonly create: ReadonlyArray<JsonObject>; readonly blocked?: string } => {
    const create: Array<JsonObject> = []
    for (const t of spec.claimTemplates) {
      const wanted = newClaim(set, spec, t, ordinal)
      const existing = observed.claims.get(nameOf(wanted))
      if (existing === undefined) create.push(wanted)
      else if (isTerminating(existing)) return { create: [], blocked: `pvc ${nameOf(wanted)} is being deleted` }
    }
    return { create }
  }
  // A claim still owned by a previous pod of this name (whenScaled: Delete) awaits the collector.
  const staleClaim = (ordinal: number): string | undefined => {
    if (spec.whenScaled !== "Delete") return undefined
    const pod = podName(spec.name, ordinal)
    for (const t of spec.claimTemplates) {
      const name = claimName(asString(asObject(t["metadata"])["name"]), spec.name, ordinal)
      const claim = observed.claims.get(name)
      if (claim !== undefined && asArray(metadataOf(claim)["ownerReferences"]).map(asObject).some((r) => claimRefMatches(r, "Pod", pod))) {
        return `pvc ${name} still belongs to a previous ${pod}`
      }
    }
    return undefined
  }
  const fixClaims = (pod: JsonObject, ordinal: number, isCondemned: boolean) => {
    for (const t of spec.claimTemplates) {
      const claim = observed.claims.get(claimName(asString(asObject(t["metadata"])["name"]), spec.name, ordinal))
      if (claim === undefined) continue
      const next = claimOwners(claim, set, spec, pod, isCondemned)
      if (next !== undefined) ownClaims.push({ name: nameOf(claim), ownerReferences: next })
    }
  }

  // 1. Each replica in ordinal order. In OrderedReady mode the first one not yet Running, Ready
  //    and available stops the pass; Parallel goes on.
  const monotonic = !spec.parallel
  let blocked = false
  for (let i = 0; i < slots.length; i++) {
    const ordinal = spec.start + i
    const pod = slots[i]
    if (pod !== undefined && isFinished(pod)) {
      if (!isTerminating(pod)) deletePods.push({ name: nameOf(pod), uid: uidOf(pod), reason: "Finished" })
      // The replacement is created once the old pod is gone.
      if (monotonic) {
        blocked = true
        break
      }
      continue
    }
    if (pod === undefined) {
      const stale = staleClaim(ordinal)
      const claims = missingClaims(ordinal)
      const why = stale ?? claims.blocked
      if (why !== undefined) {
        waiting ??= why
      } else {
        const fresh = placeholder(ordinal)
        createClaims.push(...claims.create)
        createPods.push(fresh)
        // What upstream's later passes see in this slot: a pod of that revision, not available.
        slots[i] = fresh
      }
      if (monotonic) {
        blocked = true
        break
      }
      continue
    }
    if (Pods.phase(pod) === "Pending") {
      const claims = missingClaims(ordinal)
      createClaims.push(...claims.create)
    }
    if (monotonic && (isTerminating(pod) || !isRunningAndReady(pod) || !Pods.isAvailable(pod, spec.minReadySeconds, now))) {
      blocked = true
      break
    }
    const labels = labelsOf(pod)
    if (labels[PodNameLabel] !== nameOf(pod) || labels[PodIndexLabel] !== String(ordinal)) {
      labelPods.push({ name: nameOf(pod), labels: { [PodNameLabel]: nameOf(pod), [PodIndexLabel]: String(ordinal) } })
    }
    fixClaims(pod, ordinal, false)
  }
  if (blocked) return done()

  // 2. Condemned pods: their claims first get the owners the policy asks for, then the pods go,
  //    highest ordinal first, one at a time in OrderedReady mode.
  for (const pod of condemned) fixClaims(pod, parentAndOrdinal(nameOf(pod)).ordinal, true)
  const firstUnavailable =
    slots.find((p) => p === undefined || isUnavailable(p)) ?? [...condemned].reverse().find((p) => isUnavailable(p))
  for (const pod of condemned) {
    if (isTerminating(pod)) {
      if (monotonic) return done()
      continue
    }
    if (monotonic && pod !== firstUnavailable && (!isRunningAndReady(pod) || !Pods.isAvailable(pod, spec.minReadySeconds, now))) return done()
    deletePods.push({ name: nameOf(pod), uid: uidOf(pod), reason: "ScaleDown" })
    if (monotonic) return done()
  }

  // 3. Rolling update of ordinals >= start + partition, highest first.
  if (spec.strategy === "OnDelete") return done()
  const updateMin = Math.min(spec.partition, slots.length)
  const outdated = (p: JsonObject) => revisionLabel(p) !== updateName && !isTerminating(p)
  if (spec.maxUnavailable !== undefined) {
    const scaled = IntOrString.scaledValue(spec.maxUnavailable, spec.replicas, false)
    const maxUnavailable = Math.max(1, scaled._tag === "Right" ? scaled.right : 1)
    const unavailable = slots.filter((p) => p === undefined || isUnavailable(p)).length
    if (unavailable > maxUnavailable) return done()
    let budget = maxUnavailable - unavailable
    for (let i = slots.length - 1; i >= updateMin && budget > 0; i--) {
      const pod = slots[i]
      if (pod === undefined || !outdated(pod)) continue
      deletePods.push({ name: nameOf(pod), uid: uidOf(pod), reason: "Update" })
      budget--
    }
    return done()
  }
  for (let i = slots.length - 1; i >= updateMin; i--) {
    const pod = slots[i]
    if (pod === undefined) return done()
    if (outdated(pod)) {
      deletePods.push({ name: nameOf(pod), uid: uidOf(pod), reason: "Update" })
      return done()
    }
    if (isUnavailable(pod)) return done()
  }
  return done()
}

/** The status counts over the pods, as upstream's `computeReplicaStatus`. */
const statusOf = (set: JsonObject, spec: Spec, pods: ReadonlyArray<JsonObject>, observed: Observed, now: number): JsonObject => {
  const currentName = nameOf(observed.currentRevision)
  const updateName = nameOf(observed.updateRevision)
  let ready = 0
  let available = 0
  let current = 0
  let updated = 0
  for (const pod of pods) {
    if (isRunningAndReady(pod)) {
      ready++
      if (Pods.isAvailable(pod, spec.minReadySeconds, now)) available++
    }
    if (!isTerminating(pod)) {
      if (revisionLabel(pod) === currentName) current++
      if (revisionLabel(pod) === updateName) updated++
    }
  }
  return {
    observedGeneration: metadataOf(set)["generation"] ?? 0,
    replicas: pods.length,
    readyReplicas: ready,
    currentReplicas: current,
    updatedReplicas: updated,
    availableReplicas: available,
    currentRevision: currentName,
    updateRevision: updateName,
    collisionCount: observed.collisionCount
  }
}

// Upstream `completeRollingUpdate`: once every replica runs the update revision and is ready, it
// becomes the current one.
const completeRollingUpdate = (spec: Spec, status: JsonObject): JsonObject =>
  spec.strategy === "RollingUpdate" &&
  status["updatedReplicas"] === spec.replicas &&
  status["readyReplicas"] === spec.replicas &&
  status["replicas"] === spec.replicas
    ? { ...status, currentReplicas: status["updatedReplicas"], currentRevision: status["updateRevision"] }
    : status

// With minReadySeconds, a ready pod becomes available later without any event: look again then.
const minReadyRequeue = (spec: Spec, pods: ReadonlyArray<JsonObject>, now: number): { readonly requeueAfterMs?: number } => {
  const waits = pods.map((p) => Pods.msUntilAvailable(p, spec.minReadySeconds, now)).filter((ms): ms is number => ms !== undefined)
  return waits.length === 0 ? {} : { requeueAfterMs: Math.min(...waits) + 1 }
}

/** Whether the recorded status differs from `next` in a field the controller owns. */
const statusChanged = (set: JsonObject, next: JsonObject): boolean => {
  const old = asObject(set["status"])
  return Object.keys(next).some((k) => stableJson(old[k] ?? (k === "currentRevision" || k === "updateRevision" ? "" : 0)) !== stableJson(next[k]))
}

/** The revisions a set's pods or status still use; never pruned. */
const liveRevisions = (pods: ReadonlyArray<JsonObject>, names: ReadonlyArray<string>): ReadonlySet<string> =>
  new Set([...names, ...pods.map(revisionLabel)])

/** Options of the StatefulSet reconciler. */
export interface Options {
  readonly workers?: number
}

/** The StatefulSet reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => ({
  name: "statefulset",
  primary: StatefulSetRef,
  watches: [
    { ref: ResourceRefs.Pod, keys: Controller.controllerOf("StatefulSet") },
    { ref: History.ControllerRevisionRef, keys: Controller.controllerOf("StatefulSet") }
  ],
  reads: [ClaimRef],
  ...(options.workers !== undefined ? { workers: options.workers } : {}),
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const set = ctx.informers.for(StatefulSetRef).get(namespace, name)
      // A set being deleted is left to the garbage collector (upstream only refreshes its status).
      if (set === undefined || isTerminating(set)) return
      const spec = specOf(set)
      const now = yield* Clock.currentTimeMillis
      const pods = ctx.informers.for(ResourceRefs.Pod).controlledBy(spec.uid)
      const revisions = ctx.informers.for(History.ControllerRevisionRef).controlledBy(spec.uid)

      // The revision of the present template: found, rolled back to, or created.
      const data = History.patchOf(set)
      const collisionCount = Number(asObject(set["status"])["collisionCount"] ?? 0)
      const resolved = yield* History.ensure(
        ctx.client,
        set,
        History.resolve(revisions, data),
        (cc) => History.make(set, { data, revision: History.nextRevision(revisions), hash: Pods.templateHash(data, cc) }),
        collisionCount
      )
      const updateRevision = resolved.revision
      const statusCurrent = asString(asObject(set["status"])["currentRevision"])
      // Upstream: the revision the status names as current, or (first sync, or pruned) the update one.
      const currentRevision =
        statusCurrent === nameOf(updateRevision) ? updateRevision : (revisions.find((r) => nameOf(r) === statusCurrent) ?? updateRevision)

      const claims = new Map(ctx.informers.for(ClaimRef).list(spec.namespace).map((c) => [nameOf(c), c] as const))
      const actions = decide(set, { pods, claims, currentRevision, updateRevision, collisionCount: resolved.collisionCount }, now)

      for (const claim of actions.createClaims) {
        const created = yield* Effect.either(ctx.client.create(claim))
        if (created._tag === "Left" && created.left.status.reason !== "AlreadyExists") {
          yield* ctx.events.record(set, "Warning", "FailedCreate", `create Claim ${nameOf(claim)} for StatefulSet ${spec.name} failed error: ${created.left.message}`)
          return yield* Effect.fail(created.left)
        }
        if (created._tag === "Right") yield* ctx.events.record(set, "Normal", "SuccessfulCreate", `create Claim ${nameOf(claim)} in StatefulSet ${spec.name} success`)
      }
      for (const pod of actions.createPods) {
        const created = yield* Effect.either(ctx.client.create(pod))
        if (created._tag === "Left") {
          if (created.left.status.reason === "AlreadyExists") continue
          yield* ctx.events.record(set, "Warning", "FailedCreate", `create Pod ${nameOf(pod)} in StatefulSet ${spec.name} failed error: ${created.left.message}`)
          return yield* Effect.fail(created.left)
        }
        yield* ctx.events.record(set, "Normal", "SuccessfulCreate", `create Pod ${nameOf(pod)} in StatefulSet ${spec.name} successful`)
      }
      for (const fix of actions.labelPods) {
        yield* ignoreNotFound(ctx.client.patch(ResourceRefs.Pod, spec.namespace, fix.name, "merge", { metadata: { labels: fix.labels } }))
      }
      for (const fix of actions.ownClaims) {
        yield* ignoreNotFound(ctx.client.patch(ClaimRef, spec.namespace, fix.name, "merge", { metadata: { ownerReferences: fix.ownerReferences } }))
      }
      for (const d of actions.deletePods) {
        const deleted = yield* Effect.either(ctx.client.delete(ResourceRefs.Pod, spec.namespace, d.name, { preconditions: { uid: d.uid } }))
        if (deleted._tag === "Left") {
          if (deleted.left.status.code === 404 || deleted.left.status.code === 409) continue
          yield* ctx.events.record(set, "Warning", "FailedDelete", `delete Pod ${d.name} in StatefulSet ${spec.name} failed error: ${deleted.left.message}`)
          return yield* Effect.fail(deleted.left)
        }
        yield* ctx.events.record(set, "Normal", "SuccessfulDelete", `delete Pod ${d.name} in StatefulSet ${spec.name} successful`)
      }

      if (statusChanged(set, actions.status)) {
        yield* ignoreNotFound(ctx.client.patch(StatefulSetRef, spec.namespace, spec.name, "merge", { status: actions.status }, "status"))
      }

      // Keep at most revisionHistoryLimit revisions nobody uses.
      const live = liveRevisions(pods, [nameOf(currentRevision), nameOf(updateRevision)])
      const known = revisions.some((r) => nameOf(r) === nameOf(updateRevision)) ? revisions : [...revisions, updateRevision]
      for (const r of History.toTruncate(known, live, spec.revisionHistoryLimit)) {
        yield* ignoreNotFound(ctx.client.delete(History.ControllerRevisionRef, spec.namespace, nameOf(r), { preconditions: { uid: uidOf(r) } }))
      }
      return actions.requeueAfterMs !== undefined ? { requeueAfterMs: actions.requeueAfterMs } : undefined
    })
})

// Writes racing a deletion or another writer: the next sync sees the new state and decides again.
const ignoreNotFound = <A, R>(effect: Effect.Effect<A, ApiError.ApiError, R>) =>
  Effect.catchIf(Effect.asVoid(effect), (e) => e.status.code === 404 || e.status.code === 409, () => Effect.void)
