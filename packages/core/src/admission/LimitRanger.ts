/**
 * LimitRanger admission: the LimitRanges of a namespace default and bound the resources of new
 * pods. Mutation fills a container's missing limits from `default` and missing requests from
 * `defaultRequest` (a request missing beside a given limit takes the limit, as Kubernetes'
 * defaulting does first), recording what it set in the `kubernetes.io/limit-ranger` annotation.
 * Validation enforces `min`, `max` and `maxLimitRequestRatio` per container and per pod, refusing
 * with 403 and kube-apiserver's messages. Only pod creation is checked: pod resources are
 * immutable afterwards.
 */
import { Effect } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Quantity from "../model/Quantity.js"
import * as Status from "../model/Status.js"
import { asArray, asObject, type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import type { StoreService } from "../store/Store.js"
import { listObjects, strings } from "./internal/json.js"
import { amounts, containerRequirements, podTotals, type Amounts } from "./internal/resources.js"

/** The plugin's name. */
export const name = "LimitRanger"

/** The annotation naming what the plugin defaulted. */
export const annotation = "kubernetes.io/limit-ranger"

/** One LimitRange item, parsed. */
export interface Item {
  readonly type: string
  readonly min: Amounts
  readonly max: Amounts
  readonly default: Amounts
  readonly defaultRequest: Amounts
  readonly maxLimitRequestRatio: Amounts
}

/** The items of LimitRange objects, in order. */
export const items = (limitRanges: ReadonlyArray<unknown>): ReadonlyArray<Item> =>
  limitRanges.flatMap((lr) =>
    asArray(asObject(asObject(lr)["spec"])["limits"]).map((i) => {
      const o = asObject(i)
      return {
        type: String(o["type"] ?? ""),
        min: amounts(o["min"]),
        max: amounts(o["max"]),
        default: amounts(o["default"]),
        defaultRequest: amounts(o["defaultRequest"]),
        maxLimitRequestRatio: amounts(o["maxLimitRequestRatio"])
      }
    })
  )

const resourcesOf = (c: JsonObject) => asObject(c["resources"])

/** Fill one container's missing requests and limits; what was set, for the annotation. */
const defaultContainer = (container: unknown, containerItems: ReadonlyArray<Item>, prefix: string) => {
  const c = asObject(container)
  const resources = resourcesOf(c)
  const limits: JsonObject = { ...asObject(resources["limits"]) }
  const requests: JsonObject = { ...asObject(resources["requests"]) }
  const setLimits = new Set<string>()
  const setRequests = new Set<string>()
  let changed = false
  for (const item of containerItems) {
    for (const [k, v] of item.default) {
      if (limits[k] === undefined) {
        limits[k] = Quantity.format(v)
        setLimits.add(k)
        changed = true
      }
    }
  }
  const userLimits = asObject(resources["limits"])
  for (const item of containerItems) {
    for (const [k, v] of item.defaultRequest) {
      if (requests[k] !== undefined) continue
      // Kubernetes defaults a missing request to the limit the user gave, before LimitRanger runs.
      requests[k] = userLimits[k] ?? Quantity.format(v)
      changed = true
      if (userLimits[k] === undefined) setRequests.add(k)
    }
  }
  const notes: Array<string> = []
  const cname = String(c["name"] ?? "")
  if (setRequests.size > 0) notes.push(`${[...setRequests].sort().join(", ")} request for ${prefix} ${cname}`)
  if (setLimits.size > 0) notes.push(`${[...setLimits].sort().join(", ")} limit for ${prefix} ${cname}`)
  if (!changed) return { container: c, notes }
  const nextResources: JsonObject = { ...resources }
  if (Object.keys(limits).length > 0) nextResources["limits"] = limits
  if (Object.keys(requests).length > 0) nextResources["requests"] = requests
  return { container: { ...c, resources: nextResources }, notes }
}

/** The pod with its containers' defaults filled from the Container items (pure). */
export const applyDefaults = (pod: JsonObject, all: ReadonlyArray<Item>): JsonObject => {
  const containerItems = all.filter((i) => i.type === "Container")
  if (containerItems.length === 0) return pod
  const spec = asObject(pod["spec"])
  const notes: Array<string> = []
  const fill = (list: unknown, prefix: string) =>
    asArray(list).map((c) => {
      const r = defaultContainer(c, containerItems, prefix)
      notes.push(...r.notes)
      return r.container
    })
  const nextSpec: JsonObject = { ...spec, containers: fill(spec["containers"], "container") }
  if (spec["initContainers"] !== undefined) nextSpec["initContainers"] = fill(spec["initContainers"], "init container")
  if (notes.length === 0) return { ...pod, spec: nextSpec }
  const m = metadataOf(pod)
  return {
    ...pod,
    metadata: { ...m, annotations: { ...strings(m["annotations"]), [annotation]: `LimitRanger plugin set: ${notes.join("; ")}` } },
    spec: nextSpec
  }
}

const q = Quantity.format

const minConstraint = (type: string, k: string, enforced: Quantity.Quantity, requests: Amounts, limits: Amounts): string | undefined => {
  const req = requests.get(k)
  const lim = limits.get(k)
  if (req === undefined) return `minimum ${k} usage per ${type} is ${q(enforced)}.  No request is specified`
  if (Quantity.compare(req, enforced) < 0) return `minimum ${k} usage per ${type} is ${q(enforced)}, but request is ${q(req)}`
  if (lim !== undefined && Quantity.compare(lim, enforced) < 0) return `minimum ${k} usage per ${type} is ${q(enforced)}, but limit is ${q(lim)}`
  return undefined
}

const maxConstraint = (type: string, k: string, enforced: Quantity.Quantity, requests: Amounts, limits: Amounts): string | undefined => {
  const req = requests.get(k)
  const lim = limits.get(k)
  if (lim === undefined) return `maximum ${k} usage per ${type} is ${q(enforced)}.  No limit is specified`
  if (Quantity.compare(lim, enforced) > 0) return `maximum ${k} usage per ${type} is ${q(enforced)}, but limit is ${q(lim)}`
  if (req !== undefined && Quantity.compare(req, enforced) > 0) return `maximum ${k} usage per ${type} is ${q(enforced)}, but request is ${q(req)}`
  return undefined
}

const ratioConstraint = (type: string, k: string, enforced: Quantity.Quantity, requests: Amounts, limits: Amounts): string | undefined => {
  const req = requests.get(k)
  const lim = limits.get(k)
  if (req === undefined || Quantity.isZero(req)) return `${k} max limit to request ratio per ${type} is ${q(enforced)}, but no request is specified or request is 0`
  if (lim === undefined || Quantity.isZero(lim)) return `${k} max limit to request ratio per ${type} is ${q(enforced)}, but no limit is specified or limit is 0`
  const ratio = Number(lim.nanos) / Number(req.nanos)
  // Compare exactly: lim / req > enforced  ⇔  lim × 10⁹ > enforced × req (all in nanos).
  if (lim.nanos * 1_000_000_000n > enforced.nanos * req.nanos) {
    return `${k} max limit to request ratio per ${type} is ${q(enforced)}, but provided ratio is ${ratio.toFixed(6)}`
  }
  return undefined
}

const check = (item: Item, type: string, r: { readonly requests: Amounts; readonly limits: Amounts }): ReadonlyArray<string> => {
  const out: Array<string> = []
  const push = (e: string | undefined) => {
    if (e !== undefined) out.push(e)
  }
  for (const [k, v] of item.min) push(minConstraint(type, k, v, r.requests, r.limits))
  for (const [k, v] of item.max) push(maxConstraint(type, k, v, r.requests, r.limits))
  for (const [k, v] of item.maxLimitRequestRatio) push(ratioConstraint(type, k, v, r.requests, r.limits))
  return out
}

/** Every violation of the items by the pod (pure; empty when it is admitted). */
export const violations = (pod: JsonObject, all: ReadonlyArray<Item>): ReadonlyArray<string> => {
  const errors: Array<string> = []
  const spec = asObject(pod["spec"])
  for (const item of all) {
    if (item.type === "Container") {
      for (const c of [...asArray(spec["initContainers"]), ...asArray(spec["containers"])]) errors.push(...check(item, "Container", containerRequirements(c)))
    } else if (item.type === "Pod") {
      errors.push(...check(item, "Pod", podTotals(pod, false)))
    }
  }
  return [...new Set(errors)]
}

/** kube's aggregate error text: one message as is, several in brackets. */
export const aggregate = (messages: ReadonlyArray<string>): string => (messages.length === 1 ? messages[0]! : `[${messages.join(", ")}]`)

const isPodCreate = (request: Admission.Request) =>
  request.operation === "CREATE" && request.resource.group === "" && request.resource.plural === "pods" && request.subresource === ""

/** The plugin, reading the namespace's LimitRanges from `store`. */
export const make = (options: { readonly store: StoreService; readonly transformer?: Transformer }): Admission.Plugin => {
  const load = (namespace: string) =>
    Effect.map(listObjects(options.store, options.transformer ?? identity, "", "limitranges", namespace), (found) => items(found.map((s) => s.object)))
  return {
    name,
    mutate: (request) =>
      isPodCreate(request) ? Effect.map(load(request.namespace), (all) => applyDefaults(request.object, all)) : Effect.succeed(request.object),
    validate: (request) =>
      !isPodCreate(request)
        ? Effect.succeed([])
        : Effect.flatMap(load(request.namespace), (all) => {
            const errors = violations(request.object, all)
            return errors.length === 0 ? Effect.succeed([]) : Effect.fail(ApiError.of(Status.forbidden("pods", request.name, aggregate(errors))))
          })
  }
}
