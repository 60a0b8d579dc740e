/**
 * The baseline scheduler: binds each pending pod to one feasible node, through the `pods/binding`
 * subresource. It is a small, complete placement chain in Nomad's shape — feasibility filters,
 * then ranking, then selection — good enough for a single-host cluster and the test cluster;
 * issue [6/10] replaces it with the plugin framework (DESIGN §7), which keeps these semantics.
 *
 * Feasible: the node is Ready, not cordoned, every NoSchedule/NoExecute taint is tolerated, the
 * pod's nodeSelector and required node affinity (labels and `metadata.name` fields) match, and
 * the pod's requests fit the node's allocatable CPU, memory and pod count given the pods already
 * there. Ranked by least requested share (spreads load), ties by name. A pod nothing fits gets
 * `PodScheduled=False` reason `Unschedulable` with kube-scheduler's message shape, and is tried
 * again whenever a node changes.
 */
import { Clock, Effect } from "effect"
import type * as Client from "../client/Client.js"
import * as Conditions from "../controllers/Conditions.js"
import type * as Controller from "../controllers/Controller.js"
import * as Informer from "../controllers/Informer.js"
import * as Pods from "../controllers/Pods.js"
import * as Quantity from "../model/Quantity.js"
import * as NodeAffinity from "./NodeAffinity.js"
import * as TaintToleration from "./TaintToleration.js"

type JsonObject = Client.JsonObject

const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const NodeRef: Client.ResourceRef = { apiVersion: "v1", kind: "Node" }

const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

/** The name the pods it schedules carry in `spec.schedulerName`. */
export const schedulerName = "default-scheduler"

/** CPU (milli), memory (bytes) and one pod: what a pod asks of a node. */
export interface Requests {
  readonly milliCpu: number
  readonly memory: number
  readonly pods: number
}

const quantity = (v: unknown, milli: boolean): number => {
  if (typeof v !== "string" && typeof v !== "number") return 0
  const parsed = Quantity.parse(String(v))
  if (parsed._tag === "Left") return 0
  return milli ? Quantity.toMilli(parsed.right) : Quantity.toUnits(parsed.right)
}

/** A pod's effective requests: the sum over containers, or the largest init container if larger. */
export const requestsOf = (pod: JsonObject): Requests => {
  const spec = obj(pod["spec"])
  const sum = (list: ReadonlyArray<unknown>) =>
    list.reduce<{ cpu: number; mem: number }>(
      (acc, c) => {
        const r = obj(obj(obj(c)["resources"])["requests"])
        return { cpu: acc.cpu + quantity(r["cpu"], true), mem: acc.mem + quantity(r["memory"], false) }
      },
      { cpu: 0, mem: 0 }
    )
  const main = sum(arr(spec["containers"]))
  const init = arr(spec["initContainers"]).map((c) => sum([c]))
  const cpu = Math.max(main.cpu, ...init.map((i) => i.cpu))
  const mem = Math.max(main.mem, ...init.map((i) => i.mem))
  return { milliCpu: cpu, memory: mem, pods: 1 }
}

/** Why a node cannot take a pod, worded like kube-scheduler's filter messages. */
export type Rejection =
  | "node(s) were not ready"
  | "node(s) were unschedulable"
  | "node(s) had untolerated taint"
  | "node(s) didn't match Pod's node affinity/selector"
  | "Insufficient cpu"
  | "Insufficient memory"
  | "Too many pods"

/** The node with what is already placed on it. */
export interface NodeInfo {
  readonly node: JsonObject
  readonly requested: Requests
}

/** Whether `node` can take `pod`, or the first reason it cannot. */
export const feasible = (pod: JsonObject, info: NodeInfo): Rejection | undefined => {
  const node = info.node
  const spec = obj(node["spec"])
  const ready = Pods.condition(node, "Ready")?.["status"] === "True"
  if (!ready) return "node(s) were not ready"
  const tolerations = arr(obj(pod["spec"])["tolerations"]).map(obj)
  if (spec["unschedulable"] === true && !TaintToleration.tolerates(tolerations, { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" })) return "node(s) were unschedulable"
  for (const taint of arr(spec["taints"]).map(obj)) {
    if (taint["effect"] === "PreferNoSchedule") continue
    if (!TaintToleration.tolerates(tolerations, taint)) return "node(s) had untolerated taint"
  }
  if (!NodeAffinity.matchesNodeSelectorAndAffinity(pod, node)) return "node(s) didn't match Pod's node affinity/selector"
  const allocatable = obj(obj(node["status"])["allocatable"])
  const want = requestsOf(pod)
  const cpu = allocatable["cpu"] === undefined ? Infinity : quantity(allocatable["cpu"], true)
  const mem = allocatable["memory"] === undefined ? Infinity : quantity(allocatable["memory"], false)
  const pods = allocatable["pods"] === undefined ? 110 : quantity(allocatable["pods"], false)
  if (info.requested.pods + 1 > pods) return "Too many pods"
  if (want.milliCpu > 0 && info.requested.milliCpu + want.milliCpu > cpu) return "Insufficient cpu"
  if (want.memory > 0 && info.requested.memory + want.memory > mem) return "Insufficient memory"
  return undefined
}

/** The share of the node left unused after placing `want` (0–100; higher is better). */
const score = (info: NodeInfo, want: Requests): number => {
  const allocatable = obj(obj(info.node["status"])["allocatable"])
  const share = (used: number, capacity: number) => (capacity > 0 && Number.isFinite(capacity) ? Math.min(1, used / capacity) : 0)
  const cpu = share(info.requested.milliCpu + want.milliCpu, quantity(allocatable["cpu"] ?? "0", true))
  const mem = share(info.requested.memory + want.memory, quantity(allocatable["memory"] ?? "0", false))
  const pods = share(info.requested.pods + 1, quantity(allocatable["pods"] ?? "110", false))
  return Math.round(((3 - cpu - mem - pods) / 3) * 100)
}

/** The decision for one pod: a node, or why none fits. */
export type Decision =
  | { readonly _tag: "Bind"; readonly node: string }
  | { readonly _tag: "Unschedulable"; readonly message: string }

/** Choose a node for `pod` among `nodes` (pure). */
export const decide = (pod: JsonObject, nodes: ReadonlyArray<NodeInfo>): Decision => {
  const reasons = new Map<Rejection, number>()
  let best: { info: NodeInfo; score: number } | undefined
  const want = requestsOf(pod)
  for (const info of nodes) {
    const why = feasible(pod, info)
    if (why !== undefined) {
      reasons.set(why, (reasons.get(why) ?? 0) + 1)
      continue
    }
    const s = score(info, want)
    const name = String(Pods.meta(info.node)["name"])
    if (best === undefined || s > best.score || (s === best.score && name < String(Pods.meta(best.info.node)["name"]))) best = { info, score: s }
  }
  if (best !== undefined) return { _tag: "Bind", node: String(Pods.meta(best.info.node)["name"]) }
  const detail = [...reasons.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([why, n]) => `${n} ${why}`)
    .join(", ")
  return { _tag: "Unschedulable", message: `0/${nodes.length} nodes are available${detail === "" ? "" : `: ${detail}`}.` }
}

const isPending = (pod: JsonObject) => {
  const spec = obj(pod["spec"])
  return (spec["nodeName"] === undefined || spec["nodeName"] === "") && Pods.isActive(pod) && (spec["schedulerName"] ?? schedulerName) === schedulerName
}

/** What each node already carries (pods bound to it that are not finished). */
export const nodeInfos = (nodes: ReadonlyArray<JsonObject>, pods: ReadonlyArray<JsonObject>): Array<NodeInfo> => {
  const load = new Map<string, { milliCpu: number; memory: number; pods: number }>()
  for (const p of pods) {
    const node = obj(p["spec"])["nodeName"]
    if (typeof node !== "string" || node === "") continue
    const phase = Pods.phase(p)
    if (phase === "Succeeded" || phase === "Failed") continue
    const r = requestsOf(p)
    const l = load.get(node) ?? { milliCpu: 0, memory: 0, pods: 0 }
    load.set(node, { milliCpu: l.milliCpu + r.milliCpu, memory: l.memory + r.memory, pods: l.pods + 1 })
  }
  return nodes
    .filter((n) => !Pods.isTerminating(n))
    .map((node) => ({ node, requested: load.get(String(Pods.meta(node)["name"])) ?? { milliCpu: 0, memory: 0, pods: 0 } }))
}

/** The scheduler as a reconciler over pods (one worker: decisions see each other's bindings). */
export const reconciler = (): Controller.Reconciler => ({
  name: "scheduler",
  primary: PodRef,
  workers: 1,
  watches: [
    {
      ref: NodeRef,
      // A node that appears or changes may fit pods that fit nowhere before.
      keys: (_change, informers) => informers.for(PodRef).list().filter(isPending).map(Informer.keyOf)
    }
  ],
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const pods = ctx.informers.for(PodRef)
      const pod = pods.get(namespace, name)
      if (pod === undefined || !isPending(pod)) return
      const decision = decide(pod, nodeInfos(ctx.informers.for(NodeRef).list(), pods.list()))
      if (decision._tag === "Bind") {
        yield* ctx.client
          .createSubresource(PodRef, namespace, name, "binding", {
            apiVersion: "v1",
            kind: "Binding",
            metadata: { name, namespace, uid: Pods.meta(pod)["uid"] },
            target: { apiVersion: "v1", kind: "Node", name: decision.node }
          })
          .pipe(Effect.catchIf((e) => e.status.code === 409 || e.status.code === 404, () => Effect.void))
        // The binding is a subresource write the informer sees as a pod change; wait for it so the
        // next decision counts this pod on its node.
        yield* pods.waitUntil(() => obj(pods.get(namespace, name)?.["spec"])["nodeName"] !== undefined || pods.get(namespace, name) === undefined, 10_000)
        return
      }
      const now = Pods.rfc3339(yield* Clock.currentTimeMillis)
      const conditions = (arr(obj(pod["status"])["conditions"]) as ReadonlyArray<Conditions.Condition>)
      const next = Conditions.set(conditions, { type: "PodScheduled", status: "False", reason: "Unschedulable", message: decision.message }, now)
      if (next !== conditions) {
        yield* ctx.client.patch(PodRef, namespace, name, "merge", { status: { conditions: next } }, "status")
        yield* ctx.events.record(pod, "Warning", "FailedScheduling", decision.message)
      }
    })
})
