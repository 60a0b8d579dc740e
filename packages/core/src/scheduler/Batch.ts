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
 *                                                top node unchanged? ─ yes ─▶ take it
 *                                                  └ no ─▶ Filter + Score it again, re-sort, repeat
 *
 * A pod qualifies when every Filter and Score plugin the profile runs for it is node-local (has a
 * `sign`) or skipped it at PreFilter and PreScore — InterPodAffinity, PodTopologySpread and
 * VolumeBinding read other nodes, and skip pods without affinity terms (theirs or matching ones of
 * existing pods), spread constraints (explicit or system defaults) or claims — and when it has no
 * nominated node. Every normalising Score plugin must have given the whole sample one raw score:
 * only then is the normalised value of one rescored node known without the others. A batch ends
 * after 500 ms (upstream's maxBatchAge: older scores come from a cluster that has moved on), at a
 * pod with another signature or profile, or when its nodes run out.
 *
 * What holds for a batched pod: its node passes every Filter plugin as the snapshot has the node
 * now (unchanged since filtered, or filtered again), and no node of the batch's sample scores higher
 * for it. Departures from a full cycle, as upstream's: the sample is the batch's rather than a fresh
 * one from the next start index, and ties go to the earlier-scored node rather than a random one.
 */
import { CycleState, type FilterPlugin, type Framework, MaxScore, MinScore, type ScorePlugin } from "./Framework.js"
import * as Schedule from "./Schedule.js"
import type { PodInfo, Snapshot } from "./Snapshot.js"

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

const str = (v: unknown): string => (typeof v === "string" ? v : "")
const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})

const nominatedOf = (pod: PodInfo): string => str(obj(pod.pod["status"])["nominatedNodeName"])

/** The pod's signature under a framework: every signing Filter and Score plugin's part. */
const signatureOf = (framework: Framework, pod: PodInfo): string => {
  let s = ""
  for (const p of framework.filter) if (p.sign !== undefined) s += `${p.name}=${p.sign(pod)}\u0000`
  for (const { plugin } of framework.score) if (plugin.sign !== undefined) s += `${plugin.name}=${plugin.sign(pod)}\u0000`
  return s
}

/** Whether the plugins that read other nodes all skipped the pod (PreFilter for Filter, PreScore for Score). */
const onlyNodeLocal = (framework: Framework, state: CycleState): boolean => {
  for (const p of framework.filter) if (p.sign === undefined && !state.skipFilter.has(p.name)) return false
  for (const { plugin } of framework.score) if (plugin.sign === undefined && !state.skipScore.has(plugin.name)) return false
  return true
}

/** Insert `e` into `entries` (best first) after every entry with a total at least as high. */
const insert = (entries: Array<Entry>, e: Entry): void => {
  let lo = 0
  let hi = entries.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (entries[mid]!.total >= e.total) lo = mid + 1
    else hi = mid
  }
  entries.splice(lo, 0, e)
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
    if (!onlyNodeLocal(framework, state)) return undefined
    // The same Score plugins must run as when the batch was scored (PreScore may skip some per pod).
    let active = 0
    for (const { plugin } of framework.score) {
      if (state.skipScore.has(plugin.name)) continue
      if (b.plugins[active]?.plugin !== plugin) return undefined
      active++
    }
    if (active !== b.plugins.length) return undefined

    const filters: Array<FilterPlugin> = []
    for (const p of framework.filter) if (!state.skipFilter.has(p.name)) filters.push(p)
    let refiltered = 0
    while (entries.length > 0) {
      const e = entries[0]!
      const node = snapshot.get(e.node)
      if (node === undefined) {
        entries.shift()
        continue
      }
      if (node.generation === e.generation) break
      refiltered++
      entries.shift()
      let feasible = true
      for (const f of filters) {
        const s = f.filter(state, pod, node)
        if (s.code === "Success" || s.code === "Skip") continue
        if (s.code !== "Unschedulable" && s.code !== "UnschedulableAndUnresolvable") return undefined
        feasible = false
        break
      }
      // A node that no longer fits drops out of the sample (a full cycle would skip it too).
      if (!feasible) continue
      let total = 0
      for (let p = 0; p < b.plugins.length; p++) {
        const { plugin, weight } = b.plugins[p]!
        const raw = plugin.score(state, pod, node)
        let v = raw
        if (plugin.normalize !== undefined) {
          // Normalised among nodes that all scored the same, a different raw score has no known value.
          if (raw !== b.uniformRaw[p]) return undefined
          v = b.uniformValue[p]!
        }
        if (!(v >= MinScore && v <= MaxScore)) return undefined
        total += weight * v
      }
      e.generation = node.generation
      e.total = total
      insert(entries, e)
    }
    const best = entries[0]
    if (best === undefined) return undefined
    batched++
    return {
      decision: {
        _tag: "Scheduled",
        node: best.node,
        evaluated: refiltered,
        feasible: entries.length,
        scores: undefined,
        statuses: new Map(),
        nextStartIndex: startIndex,
        reusedFrom: b.from
      },
      state
    }
  }

  /** A batch from a full cycle's decision, when the pod qualifies. */
  const start = (framework: Framework, state: CycleState, pod: PodInfo, snapshot: Snapshot, decision: Schedule.Decision, nowMs: number): State | undefined => {
    if (decision._tag !== "Scheduled" || decision.scores === undefined || !onlyNodeLocal(framework, state)) return undefined
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
    // Stable: equal totals keep the order they were scored in.
    entries.sort((a, b) => b.total - a.total)
    return {
      framework,
      signature: sign(framework, pod),
      from: `${pod.namespace}/${pod.name}`,
      createdMs: nowMs,
      plugins,
      uniformRaw: scores.uniformRaw,
      uniformValue,
      entries
    }
  }

  return {
    schedule: (framework, pod, snapshot, options, nowMs) => {
      const b = current
      if (b !== undefined) {
        const fresh = b.framework === framework && nowMs - b.createdMs <= MaxBatchAgeMs
        if (fresh && nominatedOf(pod) === "" && sign(framework, pod) === b.signature) {
          const outcome = hint(b, pod, snapshot, options.startIndex ?? 0)
          if (outcome !== undefined) return outcome
        }
        current = undefined
      }
      const state = new CycleState()
      const decision = Schedule.schedule(framework, state, pod, snapshot, options)
      if (nominatedOf(pod) === "") current = start(framework, state, pod, snapshot, decision, nowMs)
      return { decision, state }
    },
    batched: () => batched
  }
}
