/**
 * ResourceQuota admission: the hard caps of a namespace's quotas (`pods`, `count/<resource>`,
 * `requests.cpu`, `requests.memory`, `limits.cpu`, `limits.memory`, `configmaps`, `secrets`,
 * `services`, …) hold under concurrency because usage is reserved in the write's own store
 * transaction: `validate` answers an `update` of every affected ResourceQuota with `status.used`
 * moved by the write's delta, compare-and-swapped on the quota's revision. When two writes race,
 * one loses the swap and Rest runs admission again on the fresh quota, so the sum can never pass
 * `hard`. Deletes (and pods turning Succeeded/Failed) release usage the same way; writes that
 * skip admission (a graceful delete's final removal) are caught up by the resourcequota
 * controller (controllers/ResourceQuota.ts). A quota's own writes get `status.hard = spec.hard`
 * and `status.used` recounted from the store, so no client can fake usage through `/status`
 * (a departure: kube-apiserver leaves quota writes alone).
 *
 *   write ─▶ usage(new) − usage(old) per quota ─▶ decide(hard, used, delta) ─▶ 403 | update(quota, used + delta)
 */
import { Effect, Either } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Quantity from "../model/Quantity.js"
import * as Status from "../model/Status.js"
import { asArray, asObject, isJsonObject, type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import type { StoreService, TxnOp } from "../store/Store.js"
import { countObjects, listObjects, type Stored } from "./internal/json.js"
import { amounts, containers, containerRequirements, podTotals, type Amounts } from "./internal/resources.js"

/** The plugin's name. */
export const name = "ResourceQuota"

/** What a write is about. */
export interface Target {
  readonly group: string
  readonly plural: string
}

/** Resources counted under their bare name (`pods`, `secrets`), as well as `count/<resource>`. */
/** Resources a quota also counts under their bare name (`pods` as well as `count/pods`). */
export const legacyCounts: ReadonlySet<string> = new Set(["pods", "services", "configmaps", "secrets", "replicationcontrollers", "resourcequotas", "persistentvolumeclaims"])

/** `count/<plural>` for the core group, `count/<plural>.<group>` otherwise. */
export const countKey = (t: Target): string => (t.group === "" ? `count/${t.plural}` : `count/${t.plural}.${t.group}`)

const isPods = (t: Target) => t.group === "" && t.plural === "pods"
const isServices = (t: Target) => t.group === "" && t.plural === "services"

/** Whether a pod has finished (its usage no longer counts). */
export const terminal = (pod: unknown): boolean => {
  const phase = asObject(asObject(pod)["status"])["phase"]
  return phase === "Succeeded" || phase === "Failed"
}

const bestEffort = (pod: unknown) => {
  const { main, init } = containers(pod)
  return [...main, ...init].every((c) => {
    const r = containerRequirements(c)
    return r.requests.size === 0 && r.limits.size === 0
  })
}

/** Whether a quota's `scopes` select this object (scoped quotas track pods only). */
export const inScope = (quota: unknown, t: Target, object: unknown): boolean => {
  const spec = asObject(asObject(quota)["spec"])
  const scopes = asArray(spec["scopes"]).map(String)
  const selector = asArray(asObject(spec["scopeSelector"])["matchExpressions"])
  if (scopes.length === 0 && selector.length === 0) return true
  if (!isPods(t) || selector.length > 0) return false
  const deadline = asObject(asObject(object)["spec"])["activeDeadlineSeconds"]
  return scopes.every((s) => {
    switch (s) {
      case "Terminating":
        return typeof deadline === "number"
      case "NotTerminating":
        return typeof deadline !== "number"
      case "BestEffort":
        return bestEffort(object)
      case "NotBestEffort":
        return !bestEffort(object)
      default:
        return false
    }
  })
}

const one = Quantity.fromUnits(1)

/** What one object uses of the given quota keys (pure; absent keys use nothing). */
export const usage = (t: Target, object: unknown, keys: ReadonlyArray<string>): Amounts => {
  const out = new Map<string, Quantity.Quantity>()
  if (isPods(t) && terminal(object)) return out
  const totals = isPods(t) ? podTotals(object) : undefined
  const spec = asObject(asObject(object)["spec"])
  for (const k of keys) {
    if (k === countKey(t) || (t.group === "" && k === t.plural && legacyCounts.has(k))) out.set(k, one)
    else if (totals !== undefined && (k.startsWith("requests.") || k === "cpu" || k === "memory")) {
      const v = totals.requests.get(k.startsWith("requests.") ? k.slice("requests.".length) : k)
      if (v !== undefined) out.set(k, v)
    } else if (totals !== undefined && k.startsWith("limits.")) {
      const v = totals.limits.get(k.slice("limits.".length))
      if (v !== undefined) out.set(k, v)
    } else if (isServices(t) && k === "services.loadbalancers" && spec["type"] === "LoadBalancer") out.set(k, one)
    else if (isServices(t) && k === "services.nodeports" && (spec["type"] === "NodePort" || spec["type"] === "LoadBalancer")) {
      out.set(k, Quantity.fromUnits(asArray(spec["ports"]).length))
    }
  }
  return out
}

/** The quota keys a pod must specify and does not: `limits.cpu` → containers without a cpu limit. */
export const unspecified = (pod: unknown, keys: ReadonlyArray<string>): ReadonlyArray<string> => {
  const { main, init } = containers(pod)
  const all = [...init, ...main]
  const out: Array<string> = []
  for (const k of [...keys].sort()) {
    const limit = k.startsWith("limits.")
    const resource = limit ? k.slice("limits.".length) : k.startsWith("requests.") ? k.slice("requests.".length) : k === "cpu" || k === "memory" ? k : undefined
    if (resource === undefined || (resource !== "cpu" && resource !== "memory")) continue
    const missing = all
      .filter((c) => {
        const r = containerRequirements(c)
        return limit ? !r.limits.has(resource) : !r.requests.has(resource) && !r.limits.has(resource)
      })
      .map((c) => String(asObject(c)["name"] ?? ""))
    if (missing.length > 0) out.push(`${k} for: ${missing.join(",")}`)
  }
  return out
}

/** A quota as the decision needs it. */
export interface QuotaState {
  readonly name: string
  readonly hard: Amounts
  readonly used: Amounts
}

const pretty = (m: ReadonlyMap<string, Quantity.Quantity>) =>
  [...m.keys()]
    .sort()
    .map((k) => `${k}=${Quantity.format(m.get(k)!)}`)
    .join(",")

/**
 * The quota's usage after a write that moves it by `delta` (pure): refused with kube's message
 * when an increase passes `hard`; decreases always pass (and never go below zero).
 */
export const decide = (quota: QuotaState, delta: Amounts): Either.Either<Amounts, string> => {
  const next = new Map(quota.used)
  const requested = new Map<string, Quantity.Quantity>()
  const used = new Map<string, Quantity.Quantity>()
  const limited = new Map<string, Quantity.Quantity>()
  for (const [k, d] of delta) {
    const hard = quota.hard.get(k)
    if (hard === undefined || Quantity.isZero(d)) continue
    const before = quota.used.get(k) ?? Quantity.zero
    const after = Quantity.add(before.nanos === 0n ? { ...before, format: d.format } : before, d)
    if (d.nanos > 0n && Quantity.compare(after, hard) > 0) {
      requested.set(k, d)
      used.set(k, before)
      limited.set(k, hard)
    }
    next.set(k, after.nanos < 0n ? Quantity.zero : after)
  }
  if (requested.size > 0) {
    return Either.left(`exceeded quota: ${quota.name}, requested: ${pretty(requested)}, used: ${pretty(used)}, limited: ${pretty(limited)}`)
  }
  return Either.right(next)
}

const subtract = (a: Amounts, b: Amounts): Amounts => {
  const out = new Map(a)
  for (const [k, v] of b) out.set(k, Quantity.sub(out.get(k) ?? { nanos: 0n, format: v.format }, v))
  return out
}

const format = (m: Amounts): Record<string, string> => Object.fromEntries([...m.keys()].sort().map((k) => [k, Quantity.format(m.get(k)!)]))

const hardOf = (quota: unknown): Amounts => amounts(asObject(asObject(quota)["spec"])["hard"])
const usedOf = (quota: unknown): Amounts => amounts(asObject(asObject(quota)["status"])["used"])

/** Where the plugin reads and writes. */
export interface Options {
  readonly store: StoreService
  readonly transformer?: Transformer
}

/** Count a namespace's current usage of a quota's keys from the store. */
export const count = (options: Options, namespace: string, quota: unknown, keys: ReadonlyArray<string>): Effect.Effect<Amounts, ApiError.ApiError> =>
  Effect.gen(function* () {
    const codec = options.transformer ?? identity
    const out = new Map<string, Quantity.Quantity>()
    const add = (k: string, v: Quantity.Quantity) => out.set(k, out.has(k) ? Quantity.add(out.get(k)!, v) : v)
    const podKeys: ReadonlyArray<string> = keys.filter((k) => k === "pods" || k === "count/pods" || k === "cpu" || k === "memory" || k.startsWith("requests.") || k.startsWith("limits."))
    const serviceKeys: ReadonlyArray<string> = keys.filter((k) => k === "services.loadbalancers" || k === "services.nodeports")
    const scoped = !inScope(quota, { group: "", plural: "configmaps" }, {})
    if (podKeys.length > 0) {
      for (const pod of yield* listObjects(options.store, codec, "", "pods", namespace)) {
        if (!inScope(quota, { group: "", plural: "pods" }, pod.object)) continue
        for (const [k, v] of usage({ group: "", plural: "pods" }, pod.object, podKeys)) add(k, v)
      }
    }
    if (serviceKeys.length > 0 && !scoped) {
      for (const svc of yield* listObjects(options.store, codec, "", "services", namespace)) {
        for (const [k, v] of usage({ group: "", plural: "services" }, svc.object, serviceKeys)) add(k, v)
      }
    }
    for (const k of keys) {
      if (podKeys.includes(k) || serviceKeys.includes(k)) continue
      const target = k.startsWith("count/") ? parseCountKey(k.slice("count/".length)) : legacyCounts.has(k) ? { group: "", plural: k } : undefined
      if (target === undefined) continue
      out.set(k, Quantity.fromUnits(scoped ? 0 : yield* countObjects(options.store, target.group, target.plural, namespace)))
    }
    for (const k of keys) if (!out.has(k)) out.set(k, Quantity.zero)
    return out
  })

/** The resource of a `count/…` key's suffix: "deployments.apps" → apps/deployments; "pods" → core pods. */
export const parseCountKey = (s: string): Target => {
  const dot = s.indexOf(".")
  return dot < 0 ? { group: "", plural: s } : { group: s.slice(dot + 1), plural: s.slice(0, dot) }
}

/** A quota object with its status brought up to date: `hard` from spec, `used` as given. */
export const withStatus = (quota: JsonObject, used: Amounts): JsonObject => {
  const hard = asObject(quota["spec"])["hard"]
  return { ...quota, status: { ...(isJsonObject(hard) ? { hard: { ...hard } } : {}), used: format(used) } }
}

const quotaKeysUsed = (quota: Stored, keys: ReadonlyArray<string>) => {
  const used = usedOf(quota.object)
  return keys.every((k) => used.has(k)) ? used : undefined
}

/** The store operations reserving (or releasing) a write's usage, or the refusal. */
const reserve = (options: Options, request: Admission.Request): Effect.Effect<ReadonlyArray<TxnOp>, ApiError.ApiError> =>
  Effect.gen(function* () {
    const r = request.resource
    // A CONNECT (exec, signal) creates nothing a quota counts.
    if (request.operation === "CONNECT" || !r.namespaced || request.namespace === "") return []
    if (r.group === "" && r.plural === "resourcequotas" && request.operation !== "DELETE") return []
    const t: Target = { group: r.group, plural: r.plural }
    // Subresource writes change no usage, so kube-apiserver's quota admission skips them; here too,
    // except a pod's status turning Succeeded or Failed, which releases the pod's usage at once.
    if (request.subresource !== "" && !(isPods(t) && request.subresource === "status" && terminal(request.object) !== terminal(request.oldObject))) return []
    const codec = options.transformer ?? identity
    const quotas = yield* listObjects(options.store, codec, "", "resourcequotas", request.namespace)
    const ops: Array<TxnOp> = []
    for (const quota of quotas) {
      // A quota being deleted does not count itself.
      if (r.group === "" && r.plural === "resourcequotas" && metadataOf(quota.object)["name"] === request.name) continue
      const hard = hardOf(quota.object)
      const keys = [...hard.keys()]
      const after = request.operation === "DELETE" || !inScope(quota.object, t, request.object) ? new Map() : usage(t, request.object, keys)
      const before = request.oldObject === undefined || !inScope(quota.object, t, request.oldObject) ? new Map() : usage(t, request.oldObject, keys)
      const delta = subtract(after, before)
      if ([...delta.values()].every(Quantity.isZero)) continue
      const quotaName = String(metadataOf(quota.object)["name"] ?? "")
      if (request.operation === "CREATE" && isPods(t)) {
        const missing = unspecified(request.object, keys)
        if (missing.length > 0) {
          return yield* Effect.fail(ApiError.of(Status.forbidden({ group: r.group, resource: r.plural }, request.name, `failed quota: ${quotaName}: must specify ${missing.join("; ")}`)))
        }
      }
      // A quota whose usage was never counted (new, or new keys) is counted from the store now.
      const used = quotaKeysUsed(quota, keys) ?? (yield* count(options, request.namespace, quota.object, keys))
      const decided = decide({ name: quotaName, hard, used }, delta)
      if (Either.isLeft(decided)) {
        return yield* Effect.fail(ApiError.of(Status.forbidden({ group: r.group, resource: r.plural }, request.name, decided.left)))
      }
      const next = withStatus(quota.object, decided.right)
      ops.push({ op: "update", key: quota.key, value: codec.toStore({ group: "", plural: "resourcequotas" }, JSON.stringify(next)), expectedRevision: quota.revision })
    }
    return ops
  })

/** The plugin. */
export const make = (options: Options): Admission.Plugin => ({
  name,
  mutate: (request) => {
    const r = request.resource
    if (r.group !== "" || r.plural !== "resourcequotas" || request.operation === "DELETE") return Effect.succeed(request.object)
    const keys = [...hardOf(request.object).keys()]
    return Effect.map(count(options, request.namespace, request.object, keys), (used) => withStatus(request.object, used))
  },
  validate: (request) => reserve(options, request)
})
