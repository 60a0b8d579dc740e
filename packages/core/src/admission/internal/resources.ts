/**
 * Resource arithmetic over pods as JSON, shared by LimitRanger and ResourceQuota: a container's
 * requests and limits as exact quantities, and a pod's totals as Kubernetes computes them (the
 * sum over containers, at least the largest init container, plus overhead).
 */
import { Either } from "effect"
import * as Quantity from "../../model/Quantity.js"
import { asArray, asObject } from "../../object/Json.js"

/** Resource name → quantity. */
export type Amounts = ReadonlyMap<string, Quantity.Quantity>

/** Parse a ResourceList (invalid entries are skipped: decoding already refused them). */
export const amounts = (list: unknown): Amounts => {
  const out = new Map<string, Quantity.Quantity>()
  for (const [k, v] of Object.entries(asObject(list))) {
    const q = Quantity.parse(typeof v === "number" ? String(v) : typeof v === "string" ? v : "")
    if (Either.isRight(q)) out.set(k, q.right)
  }
  return out
}

/** A container's requests and limits. */
export interface Requirements {
  readonly requests: Amounts
  readonly limits: Amounts
}

/** The requirements of one container object. */
export const containerRequirements = (container: unknown): Requirements => {
  const resources = asObject(asObject(container)["resources"])
  return { requests: amounts(resources["requests"]), limits: amounts(resources["limits"]) }
}

const addInto = (into: Map<string, Quantity.Quantity>, from: Amounts) => {
  for (const [k, v] of from) {
    const have = into.get(k)
    into.set(k, have === undefined ? v : Quantity.add(have, v))
  }
}

const maxInto = (into: Map<string, Quantity.Quantity>, from: Amounts) => {
  for (const [k, v] of from) {
    const have = into.get(k)
    if (have === undefined || Quantity.compare(v, have) > 0) into.set(k, v)
  }
}

/** The containers and init containers of a pod. */
export const containers = (pod: unknown): { readonly main: ReadonlyArray<unknown>; readonly init: ReadonlyArray<unknown> } => {
  const spec = asObject(asObject(pod)["spec"])
  return { main: asArray(spec["containers"]), init: asArray(spec["initContainers"]) }
}

/** A pod's total requests and limits (Kubernetes' PodRequests / PodLimits, without overhead when `overhead` is false). */
export const podTotals = (pod: unknown, overhead = true): Requirements => {
  const { main, init } = containers(pod)
  const requests = new Map<string, Quantity.Quantity>()
  const limits = new Map<string, Quantity.Quantity>()
  for (const c of main) {
    const r = containerRequirements(c)
    // Kubernetes defaults a missing request to the container's limit.
    addInto(requests, new Map([...r.limits, ...r.requests]))
    addInto(limits, r.limits)
  }
  for (const c of init) {
    const r = containerRequirements(c)
    maxInto(requests, new Map([...r.limits, ...r.requests]))
    maxInto(limits, r.limits)
  }
  if (overhead) {
    const o = amounts(asObject(asObject(pod)["spec"])["overhead"])
    addInto(requests, o)
    for (const [k, v] of o) if (limits.has(k)) limits.set(k, Quantity.add(limits.get(k)!, v))
  }
  return { requests, limits }
}
