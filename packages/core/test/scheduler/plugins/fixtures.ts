/**
 * Test fixtures for the plugin tests: pods and nodes as API JSON, turned into PodInfo/NodeInfo by
 * the real Snapshot constructors, and small drivers that run a plugin's points the way the
 * framework does (PreFilter then Filter per node; PreScore then Score per node then normalize).
 */
import { CycleState, type FilterPlugin, type NodeScore, type PreFilterPlugin, type PreFilterResult, type PreScorePlugin, type ScorePlugin, type Status } from "../../../src/scheduler/Framework.js"
import * as Snapshot from "../../../src/scheduler/Snapshot.js"
import type { NodeInfo, PodInfo } from "../../../src/scheduler/Snapshot.js"

/** What a test pod looks like. */
export interface PodOptions {
  readonly name?: string
  readonly namespace?: string
  readonly labels?: Record<string, string>
  /** One container's `resources.requests` (omitted: no resources at all). */
  readonly requests?: Record<string, string>
  /** More `spec` fields (tolerations, affinity, nodeSelector, nodeName, priority, containers …). */
  readonly spec?: Record<string, unknown>
}

let seq = 0

/** A pod's JSON. */
export const podJson = (o: PodOptions = {}): Record<string, unknown> => {
  const name = o.name ?? `pod-${seq++}`
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: o.namespace ?? "default", uid: `uid-${name}-${seq++}`, labels: o.labels ?? {} },
    spec: {
      containers: [{ name: "c", image: "app", ...(o.requests === undefined ? {} : { resources: { requests: o.requests } }) }],
      ...o.spec
    }
  }
}

/** A PodInfo. */
export const pod = (o: PodOptions = {}): PodInfo => Snapshot.podInfo(podJson(o))

/** What a test node looks like. */
export interface NodeOptions {
  readonly name: string
  readonly labels?: Record<string, string>
  readonly taints?: ReadonlyArray<Record<string, unknown>>
  readonly unschedulable?: boolean
  /** `status.allocatable` (default 4 CPUs, 8Gi, 110 pods). */
  readonly allocatable?: Record<string, string>
}

/** A node's JSON. */
export const nodeJson = (o: NodeOptions): Record<string, unknown> => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: o.name, labels: o.labels ?? {} },
  spec: { ...(o.taints === undefined ? {} : { taints: o.taints }), ...(o.unschedulable === undefined ? {} : { unschedulable: o.unschedulable }) },
  status: { allocatable: o.allocatable ?? { cpu: "4", memory: "8Gi", pods: "110" } }
})

/** A NodeInfo carrying `pods`. */
export const node = (o: NodeOptions, pods: ReadonlyArray<PodInfo> = []): NodeInfo => Snapshot.nodeInfo(nodeJson(o), pods)

/** `n` nodes named `node-0` … built by `f`. */
export const manyNodes = (n: number, f: (i: number) => NodeInfo): ReadonlyArray<NodeInfo> => Array.from({ length: n }, (_, i) => f(i))

/** Runs PreFilter (if the plugin has one) and then Filter on every node, as the framework does. */
export const runFilter = (
  plugin: FilterPlugin & Partial<PreFilterPlugin>,
  p: PodInfo,
  nodes: ReadonlyArray<NodeInfo>,
  state: CycleState = new CycleState()
): { readonly preFilter: PreFilterResult | undefined; readonly verdicts: ReadonlyMap<string, Status> } => {
  const preFilter = plugin.preFilter?.(state, p, Snapshot.make(nodes))
  const verdicts = new Map<string, Status>()
  if (preFilter !== undefined && preFilter.status.code !== "Success") return { preFilter, verdicts }
  for (const n of nodes) {
    if (preFilter?.nodeNames !== undefined && !preFilter.nodeNames.has(n.name)) continue
    verdicts.set(n.name, plugin.filter(state, p, n))
  }
  return { preFilter, verdicts }
}

/** Runs PreScore (if any), Score on every node and normalize (if any); answers scores by node, or the PreScore verdict when it is not Success. */
export const runScore = (
  plugin: ScorePlugin & Partial<PreScorePlugin>,
  p: PodInfo,
  nodes: ReadonlyArray<NodeInfo>,
  state: CycleState = new CycleState()
): Record<string, number> | Status => {
  const pre = plugin.preScore?.(state, p, nodes)
  if (pre !== undefined && pre.code !== "Success") return pre
  const scores: Array<NodeScore> = nodes.map((n) => ({ node: n.name, score: plugin.score(state, p, n) }))
  plugin.normalize?.(state, p, scores)
  return Object.fromEntries(scores.map((s) => [s.node, s.score]))
}
