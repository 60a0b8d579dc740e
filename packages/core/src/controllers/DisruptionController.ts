/**
 * The disruption controller: keeps each PodDisruptionBudget's status — `expectedPods`,
 * `currentHealthy`, `desiredHealthy`, `disruptionsAllowed`, the `DisruptionAllowed` condition
 * (SufficientPods / InsufficientPods / SyncFailed) and the `disruptedPods` the eviction
 * subresource recorded — as kube-controller-manager's disruption controller does. The arithmetic
 * lives in `policy/Disruption.ts`; this file finds the budget's pods and their controllers' scale
 * (Deployment through its ReplicaSet, ReplicaSet, StatefulSet, ReplicationController) in the
 * informers and writes the status when it changes. A budget whose pods' controllers cannot be
 * found gets the fail-safe status (no disruption allowed, SyncFailed), as upstream.
 *
 * Departures: controllers of other kinds are not looked up through their `scale` subresource
 * (such pods make the budget fail safe unless `minAvailable` is an integer); a budget with an
 * empty selector is refreshed by pod changes too (upstream only on resync); approvals overdue for
 * deletion are dropped with a warning Event on the pod, as upstream.
 */
import { Clock, Effect, Either, Option } from "effect"
import type * as Client from "../client/Client.js"
import * as Kinds from "../model/Kinds.js"
import * as Disruption from "../policy/DisruptionBudget.js"
import type * as Controller from "./Controller.js"
import type * as Informer from "../informer/Informer.js"
import { type JsonObject, asObject, stableJson } from "../object/Json.js"
import { controllerRefOf, metadataOf, nameOf, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The PodDisruptionBudget resource. */
export const PodDisruptionBudgetRef: Client.ResourceRef = { apiVersion: "policy/v1", kind: "PodDisruptionBudget" }


// The scale owners, watched only when the server serves them (an informer of an unknown kind never syncs).
const registered = (ref: Client.ResourceRef) => Option.isSome(Kinds.kindFor(ref.apiVersion, ref.kind ?? ""))
const scaleRefs = () => [ResourceRefs.ReplicaSet, ResourceRefs.Deployment, ResourceRefs.StatefulSet, ResourceRefs.ReplicationController].filter(registered)

const replicasOf = (o: JsonObject) => {
  const n = asObject(o["spec"])["replicas"]
  return typeof n === "number" ? n : 1
}
const groupOf = (apiVersion: unknown) => {
  const s = String(apiVersion ?? "")
  return s.includes("/") ? s.slice(0, s.indexOf("/")) : ""
}

/** Looks objects up by kind, namespace and name (the informers, in the controller). */
export type Lookup = (ref: Client.ResourceRef, namespace: string, name: string) => JsonObject | undefined

/**
 * The scale of a pod's controller (upstream's finders): a ReplicaSet controlled by a Deployment
 * answers the Deployment's replicas; a ReplicaSet, StatefulSet or ReplicationController its own;
 * anything else, or an owner that is gone or has another uid, nothing.
 */
export const scaleOf =
  (lookup: Lookup) =>
  (ref: Record<string, unknown>, namespace: string): Disruption.ControllerScale | undefined => {
    const find = (r: Client.ResourceRef, name: unknown, uid: unknown) => {
      const o = lookup(r, namespace, String(name ?? ""))
      return o !== undefined && uidOf(o) === uid ? o : undefined
    }
    const group = groupOf(ref["apiVersion"])
    switch (ref["kind"]) {
      case "ReplicaSet": {
        if (group !== "apps" && group !== "extensions") return undefined
        const rs = find(ResourceRefs.ReplicaSet, ref["name"], ref["uid"])
        if (rs === undefined) return undefined
        const owner = controllerRefOf(rs)
        if (owner === undefined || owner["kind"] !== "Deployment") return { uid: uidOf(rs), replicas: replicasOf(rs) }
        const d = find(ResourceRefs.Deployment, owner["name"], owner["uid"])
        return d === undefined ? undefined : { uid: uidOf(d), replicas: replicasOf(d) }
      }
      case "StatefulSet": {
        if (group !== "apps") return undefined
        const ss = find(ResourceRefs.StatefulSet, ref["name"], ref["uid"])
        return ss === undefined ? undefined : { uid: uidOf(ss), replicas: replicasOf(ss) }
      }
      case "ReplicationController": {
        if (group !== "") return undefined
        const rc = find(ResourceRefs.ReplicationController, ref["name"], ref["uid"])
        return rc === undefined ? undefined : { uid: uidOf(rc), replicas: replicasOf(rc) }
      }
      default:
        return undefined
    }
  }

/** An Event to record. */
export interface EventToRecord {
  /** The budget itself, or the pod of this name. */
  readonly about: "budget" | { readonly pod: JsonObject }
  readonly type: "Normal" | "Warning"
  readonly reason: string
  readonly message: string
}

/** What to do about one budget. */
export interface Decision {
  /** The new status, when it differs from the stored one. */
  readonly status: JsonObject | undefined
  readonly events: ReadonlyArray<EventToRecord>
  /** Look again then (an approved eviction expires). */
  readonly requeueAfterMs: number | undefined
}

/** Decide a budget's status from its namespace's pods (pure; upstream's trySync and failSafe). */
export const decide = (pdb: JsonObject, namespacePods: ReadonlyArray<JsonObject>, lookup: Lookup, nowMs: number): Decision => {
  const pods = namespacePods.filter((p) => Disruption.covers(pdb, p))
  const events: Array<EventToRecord> = []
  const stored = asObject(pdb["status"])
  const changed = (next: JsonObject) => (stableJson(next) === stableJson(stored) ? undefined : next)
  if (pods.length === 0) events.push({ about: "budget", type: "Normal", reason: "NoPods", message: "No matching pods found" })
  const expected = Disruption.expected(pdb, pods, scaleOf(lookup))
  if (Either.isLeft(expected)) {
    events.push({ about: "budget", type: "Warning", reason: "CalculateExpectedPodCountFailed", message: `Failed to calculate the number of expected pods: ${expected.left}` })
    return { status: changed(Disruption.failSafe(pdb, expected.left, nowMs)), events, requeueAfterMs: undefined }
  }
  if (expected.right.unmanaged.length > 0) {
    const selector = JSON.stringify(asObject(pdb["spec"])["selector"] ?? null)
    events.push({
      about: "budget",
      type: "Warning",
      reason: "UnmanagedPods",
      message: `Pods selected by this PodDisruptionBudget (selector: ${selector}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set ".spec.minAvailable" field of the PDB to an integer value.`
    })
  }
  const disrupted = Disruption.disrupted(pdb, pods, nowMs)
  for (const name of disrupted.notDeleted) {
    const pod = pods.find((p) => nameOf(p) === name)!
    events.push({ about: { pod }, type: "Warning", reason: "NotDeleted", message: `Pod was expected by PDB ${String(metadataOf(pdb)["namespace"])}/${nameOf(pdb)} to be deleted but it wasn't` })
  }
  const next = Disruption.status(
    pdb,
    {
      currentHealthy: Disruption.currentHealthy(pods, disrupted.pods, nowMs),
      desiredHealthy: expected.right.desiredHealthy,
      expectedPods: expected.right.expectedPods,
      disruptedPods: disrupted.pods
    },
    nowMs
  )
  return { status: changed(next), events, requeueAfterMs: disrupted.recheckAtMs === undefined ? undefined : Math.max(1, disrupted.recheckAtMs - nowMs + 1) }
}

const budgetsIn = (informers: Informer.Informers, namespace: unknown) =>
  typeof namespace === "string" ? informers.for(PodDisruptionBudgetRef).list(namespace) : []

/** The disruption (PodDisruptionBudget status) reconciler. */
export const reconciler = (): Controller.Reconciler => {
  const scales = scaleRefs()
  return {
    name: "disruption",
    primary: PodDisruptionBudgetRef,
    watches: [
      {
        ref: ResourceRefs.Pod,
        // The budgets covering the pod now or before the change (its labels may have moved).
        keys: (c, informers) => {
          const keys = new Set<string>()
          for (const o of [c.object, c.old]) {
            if (o === undefined) continue
            for (const pdb of budgetsIn(informers, metadataOf(o)["namespace"])) if (Disruption.covers(pdb, o)) keys.add(`${String(metadataOf(pdb)["namespace"])}/${nameOf(pdb)}`)
          }
          return [...keys]
        }
      },
      ...scales.map(
        (ref): Controller.Watch => ({
          ref,
          // A controller's scale is the budgets' denominator: only its creation, deletion and replicas matter.
          keys: (c, informers) =>
            c.type === "MODIFIED" && c.old !== undefined && replicasOf(c.old) === replicasOf(c.object)
              ? []
              : budgetsIn(informers, metadataOf(c.object)["namespace"]).map((pdb) => `${String(metadataOf(pdb)["namespace"])}/${nameOf(pdb)}`)
        })
      )
    ],
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const [namespace, name] = [key.slice(0, key.indexOf("/")), key.slice(key.indexOf("/") + 1)]
        const pdb = ctx.informers.for(PodDisruptionBudgetRef).get(namespace, name)
        if (pdb === undefined) return
        const nowMs = yield* Clock.currentTimeMillis
        const lookup: Lookup = (ref, ns, n) => (scales.includes(ref) ? ctx.informers.for(ref).get(ns, n) : undefined)
        const d = decide(pdb, ctx.informers.for(ResourceRefs.Pod).list(namespace), lookup, nowMs)
        for (const e of d.events) yield* ctx.events.record(e.about === "budget" ? pdb : e.about.pod, e.type, e.reason, e.message)
        // A compare-and-swap on the budget as read: an eviction that decremented it meanwhile wins,
        // and the next reconcile counts again.
        if (d.status !== undefined) yield* ctx.client.update({ ...pdb, status: d.status }, "status")
        return d.requeueAfterMs === undefined ? undefined : { requeueAfterMs: d.requeueAfterMs }
      })
  }
}
