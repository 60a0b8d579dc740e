/**
 * What a member reports of itself to the hub (pure): node counts, capacity and allocatable summed
 * over its nodes, allocated (the requests of its pods that are bound and not finished: each
 * container's, or an init container's when larger, as the scheduler counts them), and node
 * models — nodes grouped by their allocatable cpu and memory, with the most room left on one of
 * them, which is what the global scheduler needs to estimate how many replicas fit.
 */
import * as Quantity from "../model/Quantity.js"
import { asArray, asObject, asString, type JsonObject } from "../object/Json.js"
import { nameOf } from "../object/Metadata.js"

type Sums = Map<string, Quantity.Quantity>

const parse = (v: unknown): Quantity.Quantity | undefined => {
  if (typeof v !== "string" && typeof v !== "number") return undefined
  const q = Quantity.parse(String(v))
  return q._tag === "Right" ? q.right : undefined
}

const addAll = (into: Sums, list: unknown) => {
  for (const [k, v] of Object.entries(asObject(list))) {
    const q = parse(v)
    if (q !== undefined) into.set(k, Quantity.add(into.get(k) ?? { ...Quantity.zero, format: q.format }, q))
  }
}

const out = (sums: Sums): Record<string, string> => Object.fromEntries([...sums].sort(([a], [b]) => a.localeCompare(b)).map(([k, q]) => [k, Quantity.format(q)]))

const isReady = (node: JsonObject) =>
  asArray(asObject(node["status"])["conditions"])
    .map(asObject)
    .some((c) => c["type"] === "Ready" && c["status"] === "True")

/** A pod's requests as the scheduler counts them (max of the sum of containers and each init container). */
export const podRequests = (pod: JsonObject): Sums => {
  const spec = asObject(pod["spec"])
  const sum: Sums = new Map()
  for (const c of asArray(spec["containers"])) addAll(sum, asObject(asObject(asObject(c)["resources"])["requests"]))
  for (const c of asArray(spec["initContainers"])) {
    const one: Sums = new Map()
    addAll(one, asObject(asObject(asObject(c)["resources"])["requests"]))
    for (const [k, q] of one) if (Quantity.compare(q, sum.get(k) ?? Quantity.zero) > 0) sum.set(k, q)
  }
  return sum
}

/** The member's summary. */
export interface Summary {
  readonly nodeCount: number
  readonly readyNodeCount: number
  readonly resources: { readonly capacity: Record<string, string>; readonly allocatable: Record<string, string>; readonly allocated: Record<string, string> }
  readonly nodeModels: ReadonlyArray<{ readonly allocatable: Record<string, string>; readonly free: Record<string, string>; readonly count: number }>
}

/** Summarize nodes and pods (pure). */
export const summarize = (nodes: ReadonlyArray<JsonObject>, pods: ReadonlyArray<JsonObject>): Summary => {
  const capacity: Sums = new Map()
  const allocatable: Sums = new Map()
  const allocated: Sums = new Map()
  const perNode = new Map<string, Sums>()
  for (const p of pods) {
    const node = asString(asObject(p["spec"])["nodeName"])
    const phase = asString(asObject(p["status"])["phase"])
    if (node === "" || phase === "Succeeded" || phase === "Failed") continue
    const r = podRequests(p)
    let used = perNode.get(node)
    if (used === undefined) perNode.set(node, (used = new Map()))
    for (const [k, q] of r) {
      allocated.set(k, Quantity.add(allocated.get(k) ?? Quantity.zero, q))
      used.set(k, Quantity.add(used.get(k) ?? Quantity.zero, q))
    }
  }
  const models = new Map<string, { allocatable: Record<string, string>; free: Sums; count: number }>()
  let ready = 0
  for (const n of nodes) {
    const status = asObject(n["status"])
    addAll(capacity, status["capacity"])
    addAll(allocatable, status["allocatable"])
    if (isReady(n)) ready++
    const own: Sums = new Map()
    addAll(own, status["allocatable"])
    const shape = { cpu: own.get("cpu"), memory: own.get("memory") }
    const key = `${shape.cpu?.nanos ?? 0n}/${shape.memory?.nanos ?? 0n}`
    const used = perNode.get(nameOf(n)) ?? new Map()
    const free: Sums = new Map()
    for (const r of ["cpu", "memory", "pods"]) {
      const a = own.get(r)
      if (a === undefined) continue
      const left = Quantity.sub(a, r === "pods" ? Quantity.fromUnits(pods.filter((p) => asString(asObject(p["spec"])["nodeName"]) === nameOf(n)).length) : used.get(r) ?? Quantity.zero)
      free.set(r, left.nanos < 0n ? Quantity.zero : { ...left, format: a.format })
    }
    const m = models.get(key)
    const model = { cpu: shape.cpu, memory: shape.memory }
    if (m === undefined) {
      models.set(key, { allocatable: out(new Map([...(model.cpu === undefined ? [] : [["cpu", model.cpu] as const]), ...(model.memory === undefined ? [] : [["memory", model.memory] as const])])), free, count: 1 })
    } else {
      m.count++
      // The emptiest node of the shape (most cpu left) stands for it.
      if (Quantity.compare(free.get("cpu") ?? Quantity.zero, m.free.get("cpu") ?? Quantity.zero) > 0) m.free = free
    }
  }
  return {
    nodeCount: nodes.length,
    readyNodeCount: ready,
    resources: { capacity: out(capacity), allocatable: out(allocatable), allocated: out(allocated) },
    nodeModels: [...models.values()].map((m) => ({ allocatable: m.allocatable, free: out(m.free), count: m.count }))
  }
}
