/**
 * One scheduling cycle's placement, as a pure function of (framework, pod, snapshot): the chain of
 * kube-scheduler's `schedulePod` — PreFilter (which may narrow the nodes or rule the pod out),
 * Filter over the nodes until enough feasible ones are found, PostFilter (preemption) only when
 * none is, then PreScore, Score, NormalizeScore, × weight, and the highest total wins.
 *
 *   PreFilter ─▶ nominated node first ─▶ Filter (from startIndex, stop at numFeasibleNodesToFind)
 *       │                                   ├─ 0 feasible ─▶ PostFilter ─▶ Unschedulable (FitError message)
 *       ▼                                   ├─ 1 feasible ─▶ Scheduled (no scoring, as upstream)
 *   Unschedulable for every node            └─ n feasible ─▶ PreScore ─▶ Score ─▶ normalise ─▶ × weight ─▶ pick
 *
 * Follows upstream (`schedule_one.go`, `runtime/framework.go`, `FitError.Error()`): the adaptive
 * sample (`numFeasibleNodesToFind`), the round-robin start index that the caller carries from cycle
 * to cycle (`nextStartIndex`), the exact `0/N nodes are available: …` message, and reservoir
 * sampling among equal totals. Departures: filtering is sequential (upstream runs 16 goroutines,
 * so its sample is the first N feasible in a nondeterministic order; ours is deterministic); the
 * nominated pods of other, higher-priority pods are not added to nodes before Filter (upstream's
 * RunFilterPluginsWithNominatedPods); ties go to the first-evaluated node unless `random` is given;
 * the decision keeps every evaluated node's verdict and every plugin's score for `explain`.
 */
import type { CycleState, Framework, NodeScore, PostFilterResult, Status } from "./Framework.js"
import { MaxScore, MinScore } from "./Framework.js"
import type { NodeInfo, PodInfo, Snapshot } from "./Snapshot.js"
import { asObject, asString } from "../object/Json.js"

/** How one cycle searches (what kube-scheduler keeps in the Scheduler between cycles). */
export interface Options {
  /** The share of nodes to find feasible before scoring (0 or unset: adaptive); the profile's own value wins. */
  readonly percentageOfNodesToScore?: number
  /** Where to start filtering (the previous decision's `nextStartIndex`). */
  readonly startIndex?: number
  /** Uniform in [0, 1), for breaking ties among the best nodes; without it the first evaluated wins. */
  readonly random?: () => number
}

/** Every scored node's normalised score per plugin, kept flat (no per-node objects on the hot path). */
export interface Scores {
  /** The scored nodes, in evaluation order. */
  readonly nodes: ReadonlyArray<string>
  /** The score plugins that ran, with their weights. */
  readonly plugins: ReadonlyArray<{ readonly name: string; readonly weight: number }>
  /** `values[n * plugins.length + p]`: node n's score from plugin p after NormalizeScore (0–100, before weight). */
  readonly values: Float64Array
  /** Σ weight × score per node. */
  readonly totals: Float64Array
  /**
   * Per plugin that normalises: the raw score (before NormalizeScore) every node had, or NaN when
   * they differed; NaN for plugins that do not normalise. Batching rescoring one node can only
   * tell what normalisation would make of its score when the set it was normalised in was uniform.
   */
  readonly uniformRaw: Float64Array
}

/** Where the pod goes, or why it goes nowhere. */
export type Decision =
  | {
      readonly _tag: "Scheduled"
      readonly node: string
      /** Nodes filtered this cycle (feasible + rejected). */
      readonly evaluated: number
      readonly feasible: number
      /** Undefined when one node was feasible (upstream does not score then). */
      readonly scores: Scores | undefined
      /** The verdicts of the nodes that were filtered out. */
      readonly statuses: ReadonlyMap<string, Status>
      /** Where the next cycle starts filtering. */
      readonly nextStartIndex: number
      /**
       * Set when the decision reused an earlier cycle's scores (opportunistic batching): that
       * cycle's pod, as `namespace/name`. `scores` is then undefined, `evaluated` counts the
       * nodes filtered again (changed since, or judged afresh by plugins that read other nodes)
       * and `feasible` is the size of the batch's sample.
       */
      readonly reusedFrom?: string
    }
  | {
      readonly _tag: "Unschedulable"
      /** Every node's verdict (PreFilter's, or Filter's). */
      readonly statuses: ReadonlyMap<string, Status>
      /** kube-scheduler's FitError text: `0/5 nodes are available: 2 Insufficient cpu, 3 node(s) …`. */
      readonly message: string
      /** What PostFilter proposed (preemption victims and the nominated node), when it ran. */
      readonly postFilter?: PostFilterResult
      /** The plugins that rejected the pod (which cluster events can make it schedulable). */
      readonly unschedulablePlugins: ReadonlySet<string>
      readonly nextStartIndex: number
    }
  | { readonly _tag: "Error"; readonly message: string; readonly nextStartIndex: number }

/** Below this many nodes every node is filtered (upstream's minFeasibleNodesToFind). */
export const MinFeasibleNodesToFind = 100
/** The adaptive percentage never goes below this (upstream's minFeasibleNodesPercentageToFind). */
export const MinFeasibleNodesPercentageToFind = 5

/**
 * How many feasible nodes to find before scoring, as upstream: every node below 100; else the
 * configured percentage, or adaptively 50% − 1% per 125 nodes (never under 5%), and at least 100.
 */
export const numFeasibleNodesToFind = (percentageOfNodesToScore: number | undefined, numAllNodes: number): number => {
  if (numAllNodes < MinFeasibleNodesToFind) return numAllNodes
  let percentage = percentageOfNodesToScore ?? 0
  if (percentage <= 0) percentage = Math.max(MinFeasibleNodesPercentageToFind, 50 - Math.floor(numAllNodes / 125))
  const n = Math.floor((numAllNodes * Math.min(percentage, 100)) / 100)
  return n < MinFeasibleNodesToFind ? MinFeasibleNodesToFind : n
}

/** Upstream's `sort.Strings` order (byte order for ASCII; not locale order). */
const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/**
 * kube-scheduler's FitError text: `0/N nodes are available:`, then PreFilter's message, or the
 * histogram of every node's reasons (`<count> <reason>`, sorted as strings), then PostFilter's.
 */
export const fitErrorMessage = (
  numAllNodes: number,
  statuses: Iterable<Status>,
  messages: { readonly preFilter?: string; readonly postFilter?: string } = {}
): string => {
  let text = `0/${numAllNodes} nodes are available:`
  if (messages.preFilter !== undefined && messages.preFilter !== "") {
    text += ` ${messages.preFilter}.`
  } else {
    const counts = new Map<string, number>()
    for (const s of statuses) for (const reason of s.reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1)
    const histogram = Array.from(counts, ([reason, n]) => `${n} ${reason}`).sort(byCodeUnit)
    if (histogram.length > 0) text += ` ${histogram.join(", ")}.`
  }
  if (messages.postFilter !== undefined && messages.postFilter !== "") text += ` ${messages.postFilter}`
  return text
}

/** A status's user-facing message (its reasons joined, as upstream's Status.Message()). */
export const statusMessage = (s: Status): string => s.reasons.join(", ")

// Read once: imported bindings can cost an accessor call per read under some loaders, and the
// range check runs for every node and plugin.
const minScore = MinScore
const maxScore = MaxScore

const rejected = (s: Status): boolean => s.code === "Unschedulable" || s.code === "UnschedulableAndUnresolvable"


/** The message when the snapshot has no node at all (upstream's ErrNoNodesAvailable). */
export const NoNodesAvailable = "no nodes available to schedule pods"

/** Place `pod` (pure): PreFilter, Filter, PostFilter when nothing fits, PreScore, Score, select. */
export const schedule = (framework: Framework, state: CycleState, pod: PodInfo, snapshot: Snapshot, options: Options = {}): Decision => {
  const startIndex = options.startIndex ?? 0
  try {
    return run(framework, state, pod, snapshot, options, startIndex)
  } catch (e) {
    // Plugins are pure code and should not throw; if one does, this pod is retried with backoff
    // instead of the scheduler loop dying.
    return { _tag: "Error", message: `internal error: ${e instanceof Error ? e.message : String(e)}`, nextStartIndex: startIndex }
  }
}

const run = (framework: Framework, state: CycleState, pod: PodInfo, snapshot: Snapshot, options: Options, startIndex: number): Decision => {
  const all = snapshot.nodes
  if (all.length === 0) {
    return { _tag: "Unschedulable", statuses: new Map(), message: NoNodesAvailable, unschedulablePlugins: new Set(), nextStartIndex: 0 }
  }
  const error = (message: string): Decision => ({ _tag: "Error", message, nextStartIndex: startIndex })

  // ── PreFilter ──
  let narrowed: Set<string> | undefined
  const narrowing: Array<string> = []
  let preFilterRejection: Status | undefined
  for (const pl of framework.preFilter) {
    const r = pl.preFilter(state, pod, snapshot)
    const s = r.status
    if (s.code === "Skip") {
      state.skipFilter.add(pl.name)
      continue
    }
    if (s.code !== "Success") {
      if (!rejected(s)) return error(`running PreFilter plugin "${pl.name}": ${statusMessage(s)}`)
      preFilterRejection = { ...s, plugin: pl.name }
      // Unresolvable: preemption cannot help, so the rest need not run; Unschedulable: the rest
      // still run so preemption sees their state.
      if (s.code === "UnschedulableAndUnresolvable") break
      continue
    }
    if (r.nodeNames !== undefined) {
      narrowing.push(pl.name)
      narrowed = narrowed === undefined ? new Set(r.nodeNames) : new Set([...narrowed].filter((n) => r.nodeNames!.has(n)))
      if (narrowed.size === 0) {
        const message = narrowing.length === 1 ? `node(s) didn't satisfy plugin ${narrowing[0]}` : `node(s) didn't satisfy plugin(s) [${narrowing.join(" ")}] simultaneously`
        preFilterRejection = { code: "UnschedulableAndUnresolvable", reasons: [message] }
        break
      }
    }
  }
  if (preFilterRejection !== undefined) {
    const statuses = new Map<string, Status>()
    for (const n of all) statuses.set(n.name, preFilterRejection)
    const plugins = new Set<string>(narrowing)
    if (preFilterRejection.plugin !== undefined) plugins.add(preFilterRejection.plugin)
    return unschedulable(framework, state, pod, snapshot, statuses, plugins, statusMessage(preFilterRejection), startIndex)
  }

  // Filter verdicts carry the plugin name; plugins tend to return shared constant statuses, so
  // the named copy is made once per (status, plugin) per cycle, not once per node.
  const named = new Map<Status, Status>()
  // The plugins PreFilter did not skip, found once per cycle rather than once per node.
  const skipFilter = state.skipFilter
  const filters = skipFilter.size === 0 ? framework.filter : framework.filter.filter((pl) => !skipFilter.has(pl.name))
  const numFilters = filters.length
  const filterNode = (node: NodeInfo): Status | undefined => {
    for (let f = 0; f < numFilters; f++) {
      const pl = filters[f]!
      const s = pl.filter(state, pod, node)
      if (s.code === "Success" || s.code === "Skip") continue
      if (!rejected(s)) return { code: "Error", reasons: [`running "${pl.name}" filter plugin: ${statusMessage(s)}`], plugin: pl.name }
      if (s.plugin === pl.name) return s
      let n = named.get(s)
      if (n === undefined || n.plugin !== pl.name) {
        n = { ...s, plugin: pl.name }
        named.set(s, n)
      }
      return n
    }
    return undefined
  }
  const statuses = new Map<string, Status>()

  // ── The nominated node first: preemption made room there in an earlier cycle ──
  const nominated = asString(asObject(pod.pod["status"])["nominatedNodeName"])
  if (nominated !== "") {
    const node = snapshot.get(nominated)
    if (node !== undefined) {
      const s = filterNode(node)
      if (s === undefined) return { _tag: "Scheduled", node: nominated, evaluated: 1, feasible: 1, scores: undefined, statuses, nextStartIndex: startIndex }
      if (s.code === "Error") return error(statusMessage(s))
      statuses.set(nominated, s)
    }
  }

  // ── Filter ──
  let nodes: ReadonlyArray<NodeInfo> = all
  if (narrowed !== undefined) {
    const list: Array<NodeInfo> = []
    for (const name of narrowed) {
      const n = snapshot.get(name)
      if (n !== undefined) list.push(n)
    }
    nodes = list
  }
  const numNodes = nodes.length
  const percentage = framework.profile.percentageOfNodesToScore ?? options.percentageOfNodesToScore
  // Without scoring, any feasible node is as good as another: stop at the first.
  const toFind = framework.score.length === 0 ? 1 : numFeasibleNodesToFind(percentage, numNodes)
  const feasible: Array<NodeInfo> = []
  let processed = 0
  for (let i = 0; i < numNodes && feasible.length < toFind; i++) {
    const node = nodes[(startIndex + i) % numNodes]!
    processed++
    const s = filterNode(node)
    if (s === undefined) {
      feasible.push(node)
      // Only the nominated node can have a verdict already (statuses is empty otherwise): a
      // Map.delete per feasible node showed up as a tenth of the scheduler's time.
      if (statuses.size > 0) statuses.delete(node.name)
    } else if (s.code === "Error") {
      return { _tag: "Error", message: statusMessage(s), nextStartIndex: (startIndex + processed) % all.length }
    } else {
      statuses.set(node.name, s)
    }
  }
  const nextStartIndex = (startIndex + processed) % all.length

  if (feasible.length === 0) {
    const plugins = new Set<string>(narrowing)
    for (const s of statuses.values()) if (s.plugin !== undefined) plugins.add(s.plugin)
    if (narrowed !== undefined) {
      // Nodes PreFilter left out are unschedulable for the plugins that narrowed (upstream's absent-node status).
      const absent: Status = { code: "UnschedulableAndUnresolvable", reasons: [`node(s) didn't satisfy plugin(s) [${[...narrowing].sort(byCodeUnit).join(" ")}]`] }
      for (const n of all) if (!statuses.has(n.name)) statuses.set(n.name, absent)
    }
    return unschedulable(framework, state, pod, snapshot, statuses, plugins, undefined, nextStartIndex)
  }
  const evaluated = feasible.length + statuses.size
  if (feasible.length === 1) {
    return { _tag: "Scheduled", node: feasible[0]!.name, evaluated, feasible: 1, scores: undefined, statuses, nextStartIndex }
  }

  // ── PreScore ──
  for (const pl of framework.preScore) {
    const s = pl.preScore(state, pod, feasible)
    if (s.code === "Skip") state.skipScore.add(pl.name)
    else if (s.code !== "Success") return { _tag: "Error", message: `running PreScore plugin "${pl.name}": ${statusMessage(s)}`, nextStartIndex }
  }

  // ── Score, NormalizeScore, weights ──
  const active = framework.score.filter((s) => !state.skipScore.has(s.plugin.name))
  const width = active.length
  const count = feasible.length
  const values = new Float64Array(count * width)
  const totals = new Float64Array(count)
  const uniformRaw = new Float64Array(width).fill(NaN)
  let holders: Array<NodeScore> | undefined
  for (let p = 0; p < width; p++) {
    const { plugin, weight } = active[p]!
    if (plugin.normalize === undefined) {
      for (let n = 0; n < count; n++) values[n * width + p] = plugin.score(state, pod, feasible[n]!)
    } else {
      // One array of holders per cycle, reused by every normalising plugin.
      const h = (holders ??= feasible.map((node) => ({ node: node.name, score: 0 })))
      for (let n = 0; n < count; n++) h[n]!.score = plugin.score(state, pod, feasible[n]!)
      const raw = h[0]!.score
      let uniform = true
      for (let n = 1; n < count && uniform; n++) uniform = h[n]!.score === raw
      if (uniform) uniformRaw[p] = raw
      plugin.normalize(state, pod, h.slice())
      for (let n = 0; n < count; n++) values[n * width + p] = h[n]!.score
    }
    for (let n = 0; n < count; n++) {
      const v = values[n * width + p]!
      if (!(v >= minScore && v <= maxScore)) {
        return { _tag: "Error", message: `plugin "${plugin.name}" returns an invalid score ${v}, it should in the range of [${minScore}, ${maxScore}] after normalizing`, nextStartIndex }
      }
      totals[n] = totals[n]! + weight * v
    }
  }
  // Upstream scores every node 1 when no Score plugin is configured: totals stay equal.

  // ── Select: the highest total; among equals each is equally likely (reservoir sampling) ──
  let best = 0
  let ties = 1
  for (let n = 1; n < count; n++) {
    const t = totals[n]!
    if (t > totals[best]!) {
      best = n
      ties = 1
    } else if (t === totals[best]!) {
      ties++
      if (options.random !== undefined && Math.floor(options.random() * ties) === 0) best = n
    }
  }
  const scores: Scores = { nodes: feasible.map((n) => n.name), plugins: active.map((a) => ({ name: a.plugin.name, weight: a.weight })), values, totals, uniformRaw }
  return { _tag: "Scheduled", node: feasible[best]!.name, evaluated, feasible: count, scores, statuses, nextStartIndex }
}

// PostFilter (upstream's RunPostFilterPlugins) and the FitError message.
const unschedulable = (
  framework: Framework,
  state: CycleState,
  pod: PodInfo,
  snapshot: Snapshot,
  statuses: ReadonlyMap<string, Status>,
  unschedulablePlugins: ReadonlySet<string>,
  preFilterMessage: string | undefined,
  nextStartIndex: number
): Decision => {
  let postFilter: PostFilterResult | undefined
  if (framework.postFilter.length > 0) {
    let proposal: PostFilterResult | undefined
    const reasons: Array<string> = []
    let rejector: string | undefined
    for (const pl of framework.postFilter) {
      const r = pl.postFilter(state, pod, snapshot, statuses)
      const s = r.status
      if (s.code === "Success" || s.code === "UnschedulableAndUnresolvable") {
        postFilter = { ...r, status: { ...s, plugin: pl.name } }
        break
      }
      if (!rejected(s)) {
        // A failing PostFilter does not change the verdict: the pod stays unschedulable.
        postFilter = { status: { code: "Error", reasons: s.reasons, plugin: pl.name } }
        break
      }
      if (r.nominatedNode !== undefined || (r.victims !== undefined && r.victims.length > 0)) proposal = r
      reasons.push(...s.reasons)
      rejector ??= pl.name
    }
    postFilter ??= { ...proposal, status: { code: "Unschedulable", reasons, ...(rejector === undefined ? {} : { plugin: rejector }) } }
  }
  const message = fitErrorMessage(snapshot.nodes.length, statuses.values(), {
    ...(preFilterMessage === undefined ? {} : { preFilter: preFilterMessage }),
    ...(postFilter === undefined ? {} : { postFilter: statusMessage(postFilter.status) })
  })
  return { _tag: "Unschedulable", statuses, message, ...(postFilter === undefined ? {} : { postFilter }), unschedulablePlugins, nextStartIndex }
}

/** One node in a placement explanation. */
export interface NodeVerdict {
  readonly node: string
  /** `Selected`, `Feasible`, or the filter verdict's code. */
  readonly verdict: string
  /** The plugin that filtered the node out. */
  readonly plugin?: string
  readonly reasons?: ReadonlyArray<string>
  /** Σ weight × score. */
  readonly total?: number
  /** Per plugin: the normalised score and its weight. */
  readonly scores?: Readonly<Record<string, { readonly score: number; readonly weight: number }>>
}

/** The JSON a `pods/{name}/placement` request returns for the last attempt. */
export interface Explanation {
  readonly result: Decision["_tag"]
  readonly node?: string
  readonly message?: string
  readonly evaluatedNodes?: number
  readonly feasibleNodes?: number
  readonly nominatedNode?: string
  readonly victims?: ReadonlyArray<{ readonly namespace: string; readonly name: string }>
  readonly postFilterMessage?: string
  /** The pod whose cycle's scores this placement reused (opportunistic batching). */
  readonly reusedScoresOf?: string
  /** Scored nodes best first, then the filtered-out nodes by name. */
  readonly nodes: ReadonlyArray<NodeVerdict>
}

const rejectedVerdicts = (statuses: ReadonlyMap<string, Status>): Array<NodeVerdict> =>
  Array.from(statuses, ([node, s]) => ({ node, verdict: s.code, ...(s.plugin === undefined ? {} : { plugin: s.plugin }), reasons: s.reasons })).sort((a, b) =>
    byCodeUnit(a.node, b.node)
  )

/** Every evaluated node's verdict and per-plugin scores, as plain JSON (for the placement subresource). */
export const explain = (decision: Decision): Explanation => {
  switch (decision._tag) {
    case "Error":
      return { result: "Error", message: decision.message, nodes: [] }
    case "Unschedulable": {
      const pf = decision.postFilter
      return {
        result: "Unschedulable",
        message: decision.message,
        ...(pf?.nominatedNode === undefined ? {} : { nominatedNode: pf.nominatedNode }),
        ...(pf?.victims === undefined ? {} : { victims: pf.victims.map((v) => ({ namespace: v.namespace, name: v.name })) }),
        ...(pf === undefined || statusMessage(pf.status) === "" ? {} : { postFilterMessage: statusMessage(pf.status) }),
        nodes: rejectedVerdicts(decision.statuses)
      }
    }
    case "Scheduled": {
      const scored: Array<NodeVerdict> = []
      const s = decision.scores
      if (s === undefined) {
        scored.push({ node: decision.node, verdict: "Selected" })
      } else {
        const width = s.plugins.length
        s.nodes.forEach((node, n) => {
          const perPlugin: Record<string, { score: number; weight: number }> = {}
          s.plugins.forEach((p, i) => {
            perPlugin[p.name] = { score: s.values[n * width + i]!, weight: p.weight }
          })
          scored.push({ node, verdict: node === decision.node ? "Selected" : "Feasible", total: s.totals[n]!, scores: perPlugin })
        })
        scored.sort((a, b) => (a.verdict === "Selected" ? -1 : b.verdict === "Selected" ? 1 : b.total! - a.total! || byCodeUnit(a.node, b.node)))
      }
      return {
        result: "Scheduled",
        node: decision.node,
        evaluatedNodes: decision.evaluated,
        feasibleNodes: decision.feasible,
        ...(decision.reusedFrom === undefined ? {} : { reusedScoresOf: decision.reusedFrom }),
        nodes: [...scored, ...rejectedVerdicts(decision.statuses)]
      }
    }
  }
}
