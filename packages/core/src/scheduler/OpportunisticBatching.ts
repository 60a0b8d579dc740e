/**
 * Opportunistic batching, as upstream's KEP-5598 with its rescoring extension: a Deployment's pods
 * are alike, and scheduling them one by one filters and scores the same sample of nodes again for
 * each, though only the node the previous pod went to has changed. So a full cycle whose pod
 * qualifies keeps its scored nodes, best first; the next pod with the same signature takes the best
 * of them, after filtering and rescoring only the nodes whose NodeInfo changed since they were
 * scored (the node the previous pod was assumed on, a node whose binding the informer confirmed).
 *
 *   full cycle ─▶ scored sample, best first ──▶ next pod, same signature:
 *                                                PreFilter, PreScore (cheap, per pod)
 *                                                best node changed? ─ yes ─▶ node-local Filter + Score again, re-sort
 *                                                  └ no ─▶ other Filter plugins afresh ─ fit ─▶ take it
 *                                                                                   └ not ─▶ next node
 *
 * The scores are what is reused, so a pod qualifies when every Score plugin the profile runs for
 * it is node-local (has a `sign`: it reads only the pod and the one node) or skipped it at PreScore
 * — InterPodAffinity and PodTopologySpread score from other nodes' pods, and skip pods without
 * preferred terms or soft spread constraints — and when it has no nominated node. Every
 * normalising Score plugin must have given the whole sample one raw score: only then is the
 * normalised value of one rescored node known without the others. Filter verdicts of node-local
 * plugins are reused on unchanged nodes; the other Filter plugins (required pod (anti-)affinity,
 * DoNotSchedule spread, volumes) are asked afresh for every candidate with this pod's own PreFilter
 * state, since the previous pod changed what they count: a candidate they reject is passed over
 * for this pod and kept for the next. So the replicas of a spread, anti-affine Deployment batch too.
 * A batch ends after 500 ms (upstream's maxBatchAge: older scores come from a cluster that has
 * moved on), at a pod with another signature or profile, or when its nodes run out.
 *
 * What holds for a batched pod: its node passes every Filter plugin as the snapshot has the node
 * now (unchanged since filtered by the node-local ones, or filtered again), and no node of the
 * batch's sample that passes them all scores higher for it. Departures from a full cycle, as
 * upstream's: the sample is the batch's rather than a fresh one from the next start index, and
 * ties go to the earlier-scored node rather than a random one.
 */
import { CycleState, type FilterPlugin, type Framework, MaxScore, MinScore, type ScorePlugin } from "./Framework.js"
import * as Schedule from "./Schedule.js"
import type { NodeInfo, PodInfo, Snapshot } from "./Snapshot.js"
import { asObject, asString } from "../object/Json.js"

/** How long a batch's scores are reused (upstream's maxBatchAge). */
export const MaxBatchAgeMs = 500

/** One scored node of a batch. */
interface Entry {
  readonly node: string
  /** The NodeInfo generation the score was computed on. */
  generation: number
  total: number
}

interface State {
  readonly framework: Framework
  readonly signature: string
  /** The pod whose full cycle scored the sample (`namespace/name`). */
  readonly from: string
  readonly createdMs: number
  /** The Score plugins that ran, in the full cycle's order. */
  readonly plugins: ReadonlyArray<{ readonly plugin: ScorePlugin; readonly weight: number }>
  /** Per plugin, for normalising ones: the raw score every node had, and what it normalised to. */
  readonly uniformRaw: Float64Array
  readonly uniformValue: Float64Array
  /** Best total first; equal totals in the order they were scored. */
  readonly entries: Array<Entry>
}

/** A cycle's outcome: the decision and the cycle state it was made with (Reserve and binding read it). */
export interface Outcome {
  readonly decision: Schedule.Decision
  readonly state: CycleState
}

/** The scheduling loop's batch: one at a time, carried from cycle to cycle like the start index. */
export interface Batch {
  /** Place `pod`: from the batch when it qualifies, else by a full cycle (which may start a batch). */
  readonly schedule: (framework: Framework, pod: PodInfo, snapshot: Snapshot, options: Schedule.Options, nowMs: number) => Outcome
  /** Pods placed from a batch so far. */
  readonly batched: () => number
}


const nominatedOf = (pod: PodInfo): string => asString(asObject(pod.pod["status"])["nominatedNodeName"])

/** The pod's signature under a framework: every signing Filter and Score plugin's part. */
const signatureOf = (framework: Framework, pod: PodInfo): string => {
  let s = ""
  for (const p of framework.filter) if (p.sign !== undefined) s += `${p.name}=${p.sign(pod)}\u0000`
  for (const { plugin } of framework.score) if (plugin.sign !== undefined) s += `${plugin.name}=${plugin.sign(pod)}\u0000`
  return s
}

/** Whether the Score plugins that read other nodes all skipped the pod (at PreScore). */
const scoresNodeLocal = (framework: Framework, state: CycleState): boolean => {
  for (const { plugin } of framework.score) if (plugin.sign === undefined && !state.skipScore.has(plugin.name)) return false
  return true
}

/** Run `filters` on a node: its verdict, as the loop needs it. */
const verdict = (filters: ReadonlyArray<FilterPlugin>, state: CycleState, pod: PodInfo, node: NodeInfo): "fits" | "rejected" | "error" => {
  for (const f of filters) {
    const s = f.filter(state, pod, node)
    if (s.code === "Success" || s.code === "Skip") continue
    return s.code === "Unschedulable" || s.code === "UnschedulableAndUnresolvable" ? "rejected" : "error"
  }
  return "fits"
}

/** Insert `e` into `entries` (best first) after every entry with a total at least as high; answers where. */
const insert = (entries: Array<Entry>, e: Entry): number => {
  let lo = 0
  let hi = entries.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (entries[mid]!.total >= e.total) lo = mid + 1
    else hi = mid
  }
  entries.splice(lo, 0, e)
  return lo
}

/** Every pod by a full cycle (batching off). */
export const unbatched: Batch = {
  schedule: (framework, pod, snapshot, options) => {
    const state = new CycleState()
    return { decision: Schedule.schedule(framework, state, pod, snapshot, options), state }
  },
  batched: () => 0
}

/** A new, empty batch. */
export const make = (): Batch => {
  let current: State | undefined
  let batched = 0
  // Signatures are asked for once per cycle; a pod keeps its PodInfo while it waits.
  const signatures = new WeakMap<PodInfo, { readonly framework: Framework; readonly signature: string }>()
  const sign = (framework: Framework, pod: PodInfo): string => {
    const hit = signatures.get(pod)
    if (hit !== undefined && hit.framework === framework) return hit.signature
    const signature = signatureOf(framework, pod)
    signatures.set(pod, { framework, signature })
    return signature
  }

  /** The batch's best node for `pod` now, or undefined when a full cycle must run. */
  const hint = (b: State, pod: PodInfo, snapshot: Snapshot, startIndex: number): Outcome | undefined => {
    const { framework } = b
    const state = new CycleState()
    for (const pl of framework.preFilter) {
      const s = pl.preFilter(state, pod, snapshot).status
      if (s.code === "Skip") state.skipFilter.add(pl.name)
      // A rejection or an error is the full cycle's to report.
      else if (s.code !== "Success") return undefined
    }
    const entries = b.entries
    const first = entries.find((e) => snapshot.get(e.node) !== undefined)
    if (first === undefined) return undefined
    for (const pl of framework.preScore) {
      const s = pl.preScore(state, pod, [snapshot.get(first.node)!])
      if (s.code === "Skip") state.skipScore.add(pl.name)
      else if (s.code !== "Success") return undefined
    }
    if (!scoresNodeLocal(framework, state)) return undefined
    // The same Score plugins must run as when the batch was scored (PreScore may skip some per pod).
    let active = 0
    for (const { plugin } of framework.score) {
      if (state.skipScore.has(plugin.name)) continue
      if (b.plugins[active]?.plugin !== plugin) return undefined
      active++
    }
    if (active !== b.plugins.length) return undefined

    // Node-local verdicts hold while a node is unchanged; the other plugins' (InterPodAffinity,
    // PodTopologySpread) depend on the rest of the cluster and are asked afresh, with this pod's
    // own PreFilter state, for every candidate.
    const local: Array<FilterPlugin> = []
    const global: Array<FilterPlugin> = []
    for (const p of framework.filter) if (!state.skipFilter.has(p.name)) (p.sign === undefined ? global : local).push(p)
    let evaluated = 0
    let best: Entry | undefined
    let j = 0
    while (j < entries.length) {
      const e = entries[j]!
      const node = snapshot.get(e.node)
      if (node === undefined) {
        entries.splice(j, 1)
        continue
      }
      if (node.generation !== e.generation) {
        evaluated++
        entries.splice(j, 1)
        const v = verdict(local, state, pod, node)
        if (v === "error") return undefined
        // A node that no longer fits this signature drops out of the sample (a full cycle would skip it too).
        if (v === "rejected") continue
        let total = 0
        for (let p = 0; p < b.plugins.length; p++) {
          const { plugin, weight } = b.plugins[p]!
          const raw = plugin.score(state, pod, node)
          let value = raw
          if (plugin.normalize !== undefined) {
            // Normalised among nodes that all scored the same, a different raw score has no known value.
            if (raw !== b.uniformRaw[p]) return undefined
            value = b.uniformValue[p]!
          }
          if (!(value >= MinScore && value <= MaxScore)) return undefined
          total += weight * value
        }
        e.generation = node.generation
        e.total = total
        // Look at it again where it now ranks (before the entries passed over, if it rose).
        j = Math.min(j, insert(entries, e))
        continue
      }
      if (global.length > 0) {
        evaluated++
        const v = verdict(global, state, pod, node)
        if (v === "error") return undefined
        // Not for this pod (its spread, its anti-affinity), perhaps for the next: kept.
        if (v === "rejected") {
          j++
          continue
        }
      }
      best = e
      break
    }
    if (best === undefined) return undefined
    batched++
    return {
      decision: {
        _tag: "Scheduled",
        node: best.node,
        evaluated,
        feasible: entries.length,
        scores: undefined,
        statuses: new Map(),
        nextStartIndex: startIndex,
        reusedFrom: b.from
      },
      state
    }
  }

  /**
   * A batch from a full cycle's decision, when the pod qualifies. `carry` is a batch of the same
   * signature whose nodes all failed the pod's other plugins (its sample had, say, no node in the
   * one zone the spread allowed): its nodes stay, beside the new sample, until the batch's age is up.
   */
  const start = (
    framework: Framework,
    state: CycleState,
    pod: PodInfo,
    snapshot: Snapshot,
    decision: Schedule.Decision,
    nowMs: number,
    carry: State | undefined
  ): State | undefined => {
    if (decision._tag !== "Scheduled" || decision.scores === undefined || !scoresNodeLocal(framework, state)) return undefined
    const scores = decision.scores
    const plugins = framework.score.filter((s) => !state.skipScore.has(s.plugin.name))
    const width = plugins.length
    if (width !== scores.plugins.length) return undefined
    const uniformValue = new Float64Array(width).fill(NaN)
    for (let p = 0; p < width; p++) {
      if (plugins[p]!.plugin.normalize === undefined) continue
      if (Number.isNaN(scores.uniformRaw[p]!)) return undefined
      uniformValue[p] = scores.values[p]!
    }
    const entries: Array<Entry> = []
    for (let n = 0; n < scores.nodes.length; n++) {
      const node = snapshot.get(scores.nodes[n]!)
      if (node !== undefined) entries.push({ node: node.name, generation: node.generation, total: scores.totals[n]! })
    }
    const signature = sign(framework, pod)
    const merge =
      carry !== undefined &&
      carry.framework === framework &&
      carry.signature === signature &&
      carry.plugins.length === width &&
      carry.plugins.every((p, i) => p.plugin === plugins[i]!.plugin && p.weight === plugins[i]!.weight && Object.is(carry.uniformRaw[i], scores.uniformRaw[i]) && Object.is(carry.uniformValue[i], uniformValue[i]))
    if (merge) {
      const fresh = new Set(entries.map((e) => e.node))
      for (const e of carry.entries) if (!fresh.has(e.node)) entries.push(e)
    }
    // Stable: equal totals keep the order they were scored in.
    entries.sort((a, b) => b.total - a.total)
    return {
      framework,
      signature,
      from: `${pod.namespace}/${pod.name}`,
      createdMs: merge ? carry.createdMs : nowMs,
      plugins,
      uniformRaw: scores.uniformRaw,
      uniformValue,
      entries
    }
  }

  return {
    schedule: (framework, pod, snapshot, options, nowMs) => {
      const b = current
      let carry: State | undefined
      if (b !== undefined) {
        const fresh = b.framework === framework && nowMs - b.createdMs <= MaxBatchAgeMs
        if (fresh && nominatedOf(pod) === "" && sign(framework, pod) === b.signature) {
          const outcome = hint(b, pod, snapshot, options.startIndex ?? 0)
          if (outcome !== undefined) return outcome
          carry = b
        }
        current = undefined
      }
      const state = new CycleState()
      const decision = Schedule.schedule(framework, state, pod, snapshot, options)
      if (nominatedOf(pod) === "") current = start(framework, state, pod, snapshot, decision, nowMs, carry)
      return { decision, state }
    },
    batched: () => batched
  }
}
