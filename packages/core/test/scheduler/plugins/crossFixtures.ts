/**
 * Fixtures for the cross-pod and volume plugin tests (InterPodAffinity, PodTopologySpread,
 * VolumeBinding): pods and nodes as API JSON turned into PodInfo/NodeInfo by the real Snapshot
 * constructors, plugins built through their factories, and drivers that run the extension points
 * in the framework's order, answering verdicts as short strings a table can hold.
 */
import { CycleState, type Factory, type FilterPlugin, type NodeScore, type Plugin, type PreFilterPlugin, type PreScorePlugin, type ScorePlugin, type Status } from "../../../src/scheduler/Framework.js"
import * as Snapshot from "../../../src/scheduler/Snapshot.js"
import type { NodeInfo, PodInfo } from "../../../src/scheduler/Snapshot.js"

type Json = Record<string, unknown>

/** The zone label. */
export const zone = "topology.kubernetes.io/zone"
/** The hostname label. */
export const hostname = "kubernetes.io/hostname"

let seq = 0

/** What a test pod looks like. */
export interface PodOptions {
  readonly name?: string
  readonly namespace?: string
  readonly labels?: Record<string, string>
  /** Extra `metadata` (ownerReferences, deletionTimestamp …). */
  readonly metadata?: Json
  /** Extra `spec` (affinity, topologySpreadConstraints, nodeSelector, volumes …). */
  readonly spec?: Json
}

/** A pod's JSON. */
export const podJson = (o: PodOptions = {}): Json => {
  const name = o.name ?? `pod-${++seq}`
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: o.namespace ?? "default", uid: `uid-${name}-${++seq}`, labels: o.labels ?? {}, ...o.metadata },
    spec: { containers: [{ name: "c", image: "app" }], ...o.spec }
  }
}

/** A PodInfo. */
export const pod = (o: PodOptions = {}): PodInfo => Snapshot.podInfo(podJson(o))

/** A node's JSON. */
export const nodeJson = (name: string, labels: Record<string, string> = {}, taints?: ReadonlyArray<Json>): Json => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels: { [hostname]: name, ...labels } },
  spec: taints === undefined ? {} : { taints },
  status: { allocatable: { cpu: "4", memory: "8Gi", pods: "110" } }
})

/** A NodeInfo (labelled with its hostname) carrying `pods`. */
export const node = (name: string, labels: Record<string, string> = {}, pods: ReadonlyArray<PodInfo> = [], taints?: ReadonlyArray<Json>): NodeInfo =>
  Snapshot.nodeInfo(nodeJson(name, labels, taints), pods)

/** A node in zone `z`. */
export const zoned = (name: string, z: string, pods: ReadonlyArray<PodInfo> = [], taints?: ReadonlyArray<Json>): NodeInfo => node(name, { [zone]: z }, pods, taints)

/** `n` pods labelled `labels` (in `namespace`). */
export const pods = (n: number, labels: Record<string, string>, o: Omit<PodOptions, "labels"> = {}): ReadonlyArray<PodInfo> =>
  Array.from({ length: n }, () => pod({ ...o, labels }))

/** A plugin from its factory, failing the test on an argument error. */
export const build = <P extends Plugin>(factory: Factory, args: unknown = {}, handle: Json = {}): P => {
  const p = factory(args, { schedulerName: "default-scheduler", ...handle })
  if (typeof p === "string") throw new Error(p)
  return p as P
}

/** A verdict as a table cell: `ok`, or `Code: reason, reason`. */
export const verdict = (s: Status): string => (s.code === "Success" ? "ok" : `${s.code}: ${s.reasons.join(", ")}`)

/** What PreFilter answered and, when it let the pod go on, every node's Filter verdict. */
export interface FilterRun {
  readonly preFilter: string
  readonly verdicts: Record<string, string>
  readonly state: CycleState
}

/** PreFilter then Filter on every node, as the framework runs them. */
export const filterAll = (plugin: PreFilterPlugin & FilterPlugin, p: PodInfo, snapshot: Snapshot.Snapshot, state = new CycleState()): FilterRun => {
  const pre = plugin.preFilter(state, p, snapshot)
  const verdicts: Record<string, string> = {}
  if (pre.status.code === "Success") for (const n of snapshot.nodes) verdicts[n.name] = verdict(plugin.filter(state, p, n))
  return { preFilter: verdict(pre.status), verdicts, state }
}

/** Nodes' verdicts from a snapshot of `nodes`. */
export const filterNodes = (plugin: PreFilterPlugin & FilterPlugin, p: PodInfo, nodes: ReadonlyArray<NodeInfo>): FilterRun => filterAll(plugin, p, Snapshot.make(nodes))

/** PreScore, Score and normalize over `nodes` (after PreFilter, which gives the plugins their snapshot). */
export const scoreNodes = (
  plugin: PreFilterPlugin & PreScorePlugin & ScorePlugin,
  p: PodInfo,
  nodes: ReadonlyArray<NodeInfo>,
  feasible: ReadonlyArray<NodeInfo> = nodes
): { readonly preScore: string; readonly scores: Record<string, number> } => {
  const state = new CycleState()
  plugin.preFilter(state, p, Snapshot.make(nodes))
  const pre = plugin.preScore(state, p, feasible)
  const scores: Record<string, number> = {}
  if (pre.code !== "Success") return { preScore: verdict(pre), scores }
  const list: Array<NodeScore> = feasible.map((n) => ({ node: n.name, score: plugin.score(state, p, n) }))
  plugin.normalize?.(state, p, list)
  for (const s of list) scores[s.node] = s.score
  return { preScore: "ok", scores }
}

/** A small deterministic PRNG (mulberry32) for randomised equivalence tests. */
export const random = (seed: number) => (): number => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
