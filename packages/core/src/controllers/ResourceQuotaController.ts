/**
 * The resource quota controller: keeps each ResourceQuota's `status.hard` (a copy of
 * `spec.hard`) and `status.used` (the namespace's current usage of exactly those resources:
 * `pods`, `count/<resource>[.<group>]`, `requests.cpu|memory`, `limits.cpu|memory`, `cpu`,
 * `memory`, `services`, `services.loadbalancers|nodeports`, `configmaps`, `secrets`,
 * `persistentvolumeclaims`, …), as kube-controller-manager's resourcequota controller does. It is
 * the recount source: admission (admission/ResourceQuota.ts) reserves usage atomically with each
 * write, and this controller corrects whatever admission could not see (the final removal of a
 * pod after its grace period, objects deleted by finalization, a quota whose `hard` changed).
 * Usage is counted with admission's own rules (`ResourceQuota.usage`, `inScope`), so the two
 * never disagree about what an object costs.
 *
 * Counting reads the API with consistent lists, not informers, and writes the status as a
 * compare-and-swap on the quota as read: a reservation committed between the two makes the write
 * fail and the next reconcile count again, so a recount can never hide a reservation.
 * Departures: replenishment is triggered by pods, services, configmaps, secrets and
 * persistentvolumeclaims (the resources upstream replenishes eagerly); other `count/*`
 * resources are recounted on the periodic resync (`resyncMs`, default 5 minutes as
 * upstream's `--resource-quota-sync-period`).
 */
import { Effect, Option } from "effect"
import * as QuotaAdmission from "../admission/ResourceQuotaAdmission.js"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import * as Kinds from "../model/Kinds.js"
import * as Quantity from "../model/Quantity.js"
import type * as Controller from "./Controller.js"
import type * as Informer from "../informer/Informer.js"
import { type JsonObject, asObject, stableJson } from "../object/Json.js"
import { isTerminating, metadataOf, nameOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The ResourceQuota resource. */
export const ResourceQuotaRef: Client.ResourceRef = { apiVersion: "v1", kind: "ResourceQuota" }


// Resources whose creation and deletion queue their namespace's quotas at once (when served).
const replenished: ReadonlyArray<Client.ResourceRef> = [
  ResourceRefs.Pod,
  ResourceRefs.Service,
  { apiVersion: "v1", kind: "ConfigMap" },
  { apiVersion: "v1", kind: "Secret" },
  { apiVersion: "v1", kind: "PersistentVolumeClaim" }
].filter((ref) => Option.isSome(Kinds.kindFor(ref.apiVersion, ref.kind!)))



/** The resources a quota caps (the keys of `spec.hard`). */
export const hardKeys = (quota: JsonObject): ReadonlyArray<string> => Object.keys(asObject(asObject(quota["spec"])["hard"])).sort()

const isPodKey = (k: string) => k === "pods" || k === "count/pods" || k === "cpu" || k === "memory" || k.startsWith("requests.") || k.startsWith("limits.")
const isServiceKey = (k: string) => k === "services.loadbalancers" || k === "services.nodeports"

/** Which objects a key counts: a resource by group and plural, or nothing known. */
export const countTarget = (key: string): QuotaAdmission.Target | undefined => {
  if (key.startsWith("count/")) return QuotaAdmission.parseCountKey(key.slice("count/".length))
  return QuotaAdmission.legacyCounts.has(key) ? { group: "", plural: key } : undefined
}

/** What was counted in the quota's namespace. */
export interface Observed {
  /** The namespace's pods (for pod keys). */
  readonly pods: ReadonlyArray<JsonObject>
  /** The namespace's services (for service keys). */
  readonly services: ReadonlyArray<JsonObject>
  /** Object counts of other resources, by `group/plural`. */
  readonly counts: ReadonlyMap<string, number>
}

/** `group/plural`, the key of `Observed.counts`. */
export const countKey = (t: QuotaAdmission.Target): string => `${t.group}/${t.plural}`

/** The quota's usage of its hard resources (pure; admission's counting rules). */
export const usage = (quota: JsonObject, observed: Observed): ReadonlyMap<string, Quantity.Quantity> => {
  const keys = hardKeys(quota)
  const out = new Map<string, Quantity.Quantity>()
  const add = (k: string, v: Quantity.Quantity) => out.set(k, out.has(k) ? Quantity.add(out.get(k)!, v) : v)
  const podKeys = keys.filter(isPodKey)
  const serviceKeys = keys.filter(isServiceKey)
  // A quota with scopes tracks pods only (as admission).
  const scoped = !QuotaAdmission.inScope(quota, { group: "", plural: "configmaps" }, {})
  const podTarget = { group: "", plural: "pods" }
  if (podKeys.length > 0) {
    for (const pod of observed.pods) {
      if (!QuotaAdmission.inScope(quota, podTarget, pod)) continue
      for (const [k, v] of QuotaAdmission.usage(podTarget, pod, podKeys)) add(k, v)
    }
  }
  if (serviceKeys.length > 0 && !scoped) {
    for (const svc of observed.services) for (const [k, v] of QuotaAdmission.usage({ group: "", plural: "services" }, svc, serviceKeys)) add(k, v)
  }
  for (const k of keys) {
    if (isPodKey(k) || isServiceKey(k)) continue
    const t = countTarget(k)
    if (t === undefined) continue
    out.set(k, Quantity.fromUnits(scoped ? 0 : (observed.counts.get(countKey(t)) ?? 0)))
  }
  for (const k of keys) if (!out.has(k)) out.set(k, Quantity.zero)
  return out
}

/** The quota's new status, or undefined when the stored one is current (pure). */
export const decide = (quota: JsonObject, observed: Observed): JsonObject | undefined => {
  const next = QuotaAdmission.withStatus(quota, usage(quota, observed))
  return stableJson(next["status"]) === stableJson(quota["status"]) ? undefined : (next["status"] as JsonObject)
}

/** Options of the controller. */
export interface Options {
  /** Recount every quota this often (default 300 000 ms). */
  readonly resyncMs?: number
}

/** The API coordinates of a counted resource: built-in kinds from the table, custom ones from their CRD. */
const refFor = (client: Client.Client, t: QuotaAdmission.Target): Effect.Effect<Client.ResourceRef | undefined, ApiError.ApiError> => {
  const known = Kinds.all.find((k) => k.group === t.group && k.plural === t.plural)
  if (known !== undefined) return Effect.succeed({ apiVersion: known.apiVersion, plural: known.plural, namespaced: known.namespaced })
  if (t.group === "") return Effect.succeed(undefined)
  return client.get(ResourceRefs.CustomResourceDefinition, undefined, `${t.plural}.${t.group}`).pipe(
    Effect.map((crd) => {
      const versions = (asObject(crd["spec"])["versions"] as ReadonlyArray<Record<string, unknown>> | undefined) ?? []
      const served = versions.find((v) => v["storage"] === true) ?? versions.find((v) => v["served"] === true)
      return served === undefined ? undefined : { apiVersion: `${t.group}/${String(served["name"])}`, plural: t.plural, namespaced: true }
    }),
    Effect.catchIf((e) => e.status.code === 404, () => Effect.succeed(undefined))
  )
}

/** How many objects of `ref` the namespace has, from one small consistent page. */
const countObjects = (client: Client.Client, ref: Client.ResourceRef, namespace: string) =>
  Effect.map(client.list(ref, { namespace, limit: 1 }), (page) => {
    const items = (page["items"] as ReadonlyArray<unknown> | undefined) ?? []
    return items.length + Number(asObject(page["metadata"])["remainingItemCount"] ?? 0)
  })

const quotaKeys = (informers: Informer.Informers, namespace: unknown) =>
  typeof namespace === "string" ? informers.for(ResourceQuotaRef).list(namespace).map((q) => `${namespace}/${nameOf(q)}`) : []

/** The resource quota reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => ({
  name: "resourcequota",
  primary: ResourceQuotaRef,
  watches: replenished.map(
    (ref): Controller.Watch => ({
      ref,
      // Creation, deletion, and (for pods) finishing or starting to terminate change usage.
      keys: (c, informers) => {
        if (c.type === "MODIFIED" && c.old !== undefined) {
          if (ref !== ResourceRefs.Pod) return []
          const same = QuotaAdmission.terminal(c.old) === QuotaAdmission.terminal(c.object) && isTerminating(c.old) === isTerminating(c.object)
          if (same) return []
        }
        return quotaKeys(informers, metadataOf(c.object)["namespace"])
      }
    })
  ),
  resync: { everyMs: options.resyncMs ?? 300_000, keys: (informers) => informers.for(ResourceQuotaRef).list().map((q) => `${String(metadataOf(q)["namespace"])}/${nameOf(q)}`) },
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const namespace = key.slice(0, key.indexOf("/"))
      const name = key.slice(key.indexOf("/") + 1)
      // Read the quota fresh: its revision is the compare-and-swap token of the write below.
      const found = yield* Effect.option(ctx.client.get(ResourceQuotaRef, namespace, name).pipe(Effect.catchIf((e) => e.status.code !== 404, Effect.fail)))
      if (Option.isNone(found)) return
      const quota = found.value
      const keys = hardKeys(quota)
      const items = (list: JsonObject) => (list["items"] as ReadonlyArray<JsonObject> | undefined) ?? []
      const pods = keys.some(isPodKey) ? items(yield* ctx.client.list(ResourceRefs.Pod, { namespace })) : []
      const services = keys.some(isServiceKey) ? items(yield* ctx.client.list(ResourceRefs.Service, { namespace })) : []
      const counts = new Map<string, number>()
      for (const k of keys) {
        if (isPodKey(k) || isServiceKey(k)) continue
        const t = countTarget(k)
        if (t === undefined || counts.has(countKey(t))) continue
        const ref = yield* refFor(ctx.client, t)
        counts.set(countKey(t), ref === undefined ? 0 : yield* countObjects(ctx.client, ref, namespace))
      }
      const status = decide(quota, { pods, services, counts })
      if (status !== undefined) yield* ctx.client.update({ ...quota, status }, "status")
    })
})
