/**
 * DefaultPreemption, kube-scheduler's PostFilter plugin: when a pod fits nowhere, find the node
 * where evicting the fewest, least important lower-priority pods makes it fit, and propose those
 * victims and that node (`status.nominatedNodeName`). Pure: the pipeline evicts the victims.
 *
 * Follows upstream defaultpreemption and the preemption Evaluator:
 * - a pod with `preemptionPolicy: Never` does not preempt; nor does a pod whose nominated node
 *   still has a victim terminating because of an earlier preemption (it waits for that);
 * - only nodes whose filter verdict was `Unschedulable` are candidates (`UnschedulableAndUnresolvable`
 *   — affinity, taints — cannot be fixed by evicting pods);
 * - on each, every pod of lower priority is removed and the pod must then fit; victims are then
 *   reprieved (put back) from the most important down while the pod still fits, those whose
 *   eviction would violate a PodDisruptionBudget first, so the budget-protected are kept when possible;
 * - a random offset and a sample of at least `minCandidateNodesPercentage` (10) percent and
 *   `minCandidateNodesAbsolute` (100) nodes bound the dry runs on large clusters;
 * - the node is chosen by: fewest PDB violations, lowest highest-victim priority, smallest sum of
 *   priorities, fewest victims, latest start of the highest-priority victims, then the first;
 * - when nothing helps: `preemption: 0/N nodes are available: X No preemption victims found for
 *   incoming pod, Y Preemption is not helpful for scheduling.` and the nomination is cleared.
 *
 * The plugin does not import the pipeline: it is handed `filter`, a runner of the profile's Filter
 * plugins on one node (the pipeline's runner should count nominated pods of equal or higher
 * priority as placed, as upstream's RunFilterPluginsWithNominatedPods does), and `pdbs`, the
 * budgets of a namespace. Build it with `make(options)`, or register `factory`, which reads both
 * from a `PreemptionHandle`; since Filter plugins are built from the same registry, the pipeline
 * may bind `runFilter` after building the framework: it is only called at PostFilter time.
 *
 * Departures: upstream's PreFilter extensions (AddPod/RemovePod, which let InterPodAffinity and
 * PodTopologySpread update precomputed state as victims leave) and CycleState cloning are not in
 * the framework contract, so Filter plugins see the victims gone only through the NodeInfo they
 * are given (Snapshot's `withoutPod`/`withPod` what-if views); dry runs are sequential, not parallel.
 */
import type { JsonObject } from "../../object/Json.js"
import { timeMs } from "../../object/Metadata.js"
import * as FieldError from "../../model/FieldError.js"
import * as LabelSelector from "../../model/LabelSelector.js"
import {
  type CycleState,
  type Factory,
  type Handle,
  isSuccess,
  type PostFilterPlugin,
  type PostFilterResult,
  type Status,
  status,
  success
} from "../Framework.js"
import { type NodeInfo, type PodInfo, podKey, type Snapshot, withoutPod, withPod } from "../Snapshot.js"
import { asObject } from "../../object/Json.js"

/** The plugin's name. */
export const name = "DefaultPreemption"

/** A PodDisruptionBudget as preemption reads it. */
export interface Budget {
  /** `spec.selector`; a missing or empty selector matches no pod. */
  readonly selector: LabelSelector.LabelSelector | undefined
  /** `status.disruptionsAllowed`. */
  readonly disruptionsAllowed: number
  /** `status.disruptedPods`: pods already being evicted, which do not count again. */
  readonly disruptedPods?: Readonly<Record<string, unknown>>
}


/** A stored PodDisruptionBudget object as a Budget. */
export const budgetOf = (pdb: JsonObject): Budget => {
  const spec = asObject(pdb["spec"])
  const st = asObject(pdb["status"])
  const selector = spec["selector"]
  return {
    selector: selector === undefined || selector === null ? undefined : (selector as LabelSelector.LabelSelector),
    disruptionsAllowed: typeof st["disruptionsAllowed"] === "number" ? st["disruptionsAllowed"] : 0,
    disruptedPods: asObject(st["disruptedPods"])
  }
}

/** DefaultPreemptionArgs: how many nodes to dry-run at least. */
export interface Args {
  readonly minCandidateNodesPercentage: number
  readonly minCandidateNodesAbsolute: number
}

/** Upstream's defaults: 10 percent, at least 100 nodes. */
export const defaultArgs: Args = { minCandidateNodesPercentage: 10, minCandidateNodesAbsolute: 100 }

/** Errors of the arguments, worded like kube-scheduler's ValidateDefaultPreemptionArgs. */
export const validateArgs = (args: Args): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const pct = args.minCandidateNodesPercentage
  const abs = args.minCandidateNodesAbsolute
  if (!Number.isInteger(pct) || pct < 0 || pct > 100) errors.push(FieldError.invalid("minCandidateNodesPercentage", pct, "not in valid range [0, 100]"))
  if (!Number.isInteger(abs) || abs < 0) errors.push(FieldError.invalid("minCandidateNodesAbsolute", abs, "not in valid range [0, inf)"))
  if (pct === 0 && abs === 0) {
    errors.push(
      FieldError.invalid("minCandidateNodesPercentage", pct, "cannot be zero at the same time as minCandidateNodesAbsolute"),
      FieldError.invalid("minCandidateNodesAbsolute", abs, "cannot be zero at the same time as minCandidateNodesPercentage")
    )
  }
  return errors
}

/** How many nodes to dry-run out of `n` (upstream calculateNumCandidates). */
export const numCandidates = (n: number, args: Args = defaultArgs): number =>
  Math.min(n, Math.max(Math.floor((n * args.minCandidateNodesPercentage) / 100), args.minCandidateNodesAbsolute))

/** What the plugin is given. */
export interface Options extends Partial<Args> {
  /** Runs the profile's Filter plugins on one node, answering the first failure (or success). */
  readonly filter: (state: CycleState, pod: PodInfo, node: NodeInfo) => Status
  /** The budgets of a namespace (none when absent). */
  readonly pdbs?: (namespace: string) => ReadonlyArray<Budget>
  /** A random integer in [0, n): the node the dry runs start from (tests pin it). */
  readonly random?: (n: number) => number
  /** The clock (ms), for victims without a start time. */
  readonly now?: () => number
}

/** A Handle that carries what the registered factory needs. */
export interface PreemptionHandle extends Handle {
  readonly runFilter?: (state: CycleState, pod: PodInfo, node: NodeInfo) => Status
  readonly pdbs?: (namespace: string) => ReadonlyArray<Budget>
}

/** The reason of a node with nothing to evict. */
export const noVictimsReason = "No preemption victims found for incoming pod"

/** The reason of a node preemption was not tried on (its verdict cannot be fixed by evictions). */
export const notHelpfulReason = "Preemption is not helpful for scheduling"

/** The condition the pipeline sets on a victim before deleting it (upstream's DisruptionTarget). */
export const victimCondition = (schedulerName: string): Record<string, string> => ({
  type: "DisruptionTarget",
  status: "True",
  reason: "PreemptionByScheduler",
  message: `${schedulerName}: preempting to accommodate a higher priority pod`
})

/** Nominated pods to un-nominate once `pod` preempts on their node: those of lower priority. */
export const nominationsToClear = (pod: PodInfo, nominated: ReadonlyArray<PodInfo>): ReadonlyArray<PodInfo> =>
  nominated.filter((p) => p.priority < pod.priority && p.uid !== pod.uid)

// ---- victims ----------------------------------------------------------------------------------

const startMs = (p: PodInfo, now: number): number => timeMs(asObject(p.pod["status"])["startTime"]) ?? now

/** Upstream MoreImportantPod: higher priority, then the one that started earlier. */
const moreImportant = (now: number) => (a: PodInfo, b: PodInfo): number =>
  a.priority !== b.priority ? b.priority - a.priority : startMs(a, now) - startMs(b, now)

/** Whether a pod is going away because the scheduler preempted it. */
export const terminatingByPreemption = (pod: JsonObject): boolean => {
  if (asObject(pod["metadata"])["deletionTimestamp"] === undefined) return false
  const conditions = asObject(pod["status"])["conditions"]
  if (!Array.isArray(conditions)) return false
  const c = conditions.map(asObject).find((x) => x["type"] === "DisruptionTarget")
  return c !== undefined && c["status"] === "True" && c["reason"] === "PreemptionByScheduler"
}

interface CompiledBudget {
  readonly budget: Budget
  readonly matches: LabelSelector.Matcher
}

/**
 * Splits `pods` (kept in order) into those whose eviction would take a budget below zero and the
 * rest, spending each budget's allowance in order (upstream filterPodsWithPDBViolation).
 */
const splitByBudget = (
  pods: ReadonlyArray<PodInfo>,
  budgets: (namespace: string) => ReadonlyArray<CompiledBudget>
): { violating: Array<PodInfo>; other: Array<PodInfo> } => {
  const allowed = new Map<CompiledBudget, number>()
  const violating: Array<PodInfo> = []
  const other: Array<PodInfo> = []
  for (const p of pods) {
    let violated = false
    // A pod without labels matches no budget.
    if (Object.keys(p.labels).length > 0) {
      for (const b of budgets(p.namespace)) {
        if (!b.matches(p.labels)) continue
        // Already being evicted through the API: it was counted there.
        if (b.budget.disruptedPods !== undefined && Object.prototype.hasOwnProperty.call(b.budget.disruptedPods, p.name)) continue
        const left = (allowed.get(b) ?? b.budget.disruptionsAllowed) - 1
        allowed.set(b, left)
        if (left < 0) violated = true
      }
    }
    ;(violated ? violating : other).push(p)
  }
  return { violating, other }
}

/** The victims on one node, or why there are none. */
export type VictimsOnNode =
  | { readonly _tag: "Victims"; readonly victims: ReadonlyArray<PodInfo>; readonly pdbViolations: number }
  | { readonly _tag: "None"; readonly status: Status }

/**
 * The fewest victims on `node` that make room for `pod` (upstream SelectVictimsOnNode): remove
 * every lower-priority pod, check the pod fits, then reprieve victims from the most important
 * down — budget-protected ones first — keeping each one the pod still fits beside.
 */
export const selectVictims = (
  filter: Options["filter"],
  state: CycleState,
  pod: PodInfo,
  node: NodeInfo,
  budgets: (namespace: string) => ReadonlyArray<CompiledBudget>,
  now: number
): VictimsOnNode => {
  const potential = node.pods.filter((p) => p.priority < pod.priority)
  if (potential.length === 0) return { _tag: "None", status: status("UnschedulableAndUnresolvable", noVictimsReason) }
  let view = node
  for (const p of potential) view = withoutPod(view, podKey(p))
  const fits = filter(state, pod, view)
  if (!isSuccess(fits)) return { _tag: "None", status: fits }
  const order = moreImportant(now)
  potential.sort(order)
  const { violating, other } = splitByBudget(potential, budgets)
  const victims: Array<PodInfo> = []
  let pdbViolations = 0
  const reprieve = (p: PodInfo): boolean => {
    const withIt = withPod(view, p)
    if (isSuccess(filter(state, pod, withIt))) {
      view = withIt
      return true
    }
    victims.push(p)
    return false
  }
  for (const p of violating) if (!reprieve(p)) pdbViolations++
  for (const p of other) reprieve(p)
  if (violating.length > 0 && other.length > 0) victims.sort(order)
  return { _tag: "Victims", victims, pdbViolations }
}

/** A node where preemption makes room, with its victims (most important first). */
export interface Candidate {
  readonly node: string
  readonly victims: ReadonlyArray<PodInfo>
  readonly pdbViolations: number
}

const int32Offset = 2 ** 31

/**
 * The best candidate (upstream pickOneNodeForPreemption): fewest PDB violations, then the lowest
 * highest-priority victim, the smallest sum of priorities, the fewest victims, the latest start
 * of the highest-priority victims; the first of any remaining tie.
 */
export const pickOne = (candidates: ReadonlyArray<Candidate>, now: number): Candidate | undefined => {
  if (candidates.length <= 1) return candidates[0]
  const earliestTopStart = (c: Candidate) => {
    const top = c.victims[0]!.priority
    let earliest = Infinity
    for (const v of c.victims) if (v.priority === top) earliest = Math.min(earliest, startMs(v, now))
    return earliest
  }
  // Each returns a score where higher is better; the next breaks ties of the previous.
  const scores: ReadonlyArray<(c: Candidate) => number> = [
    (c) => -c.pdbViolations,
    (c) => -c.victims[0]!.priority,
    // Shifted to non-negative so that many negative-priority victims never look cheaper than few.
    (c) => -c.victims.reduce((sum, v) => sum + v.priority + int32Offset, 0),
    (c) => -c.victims.length,
    earliestTopStart
  ]
  let remaining = candidates
  for (const score of scores) {
    let best = -Infinity
    let kept: Array<Candidate> = []
    for (const c of remaining) {
      const s = score(c)
      if (s > best) {
        best = s
        kept = [c]
      } else if (s === best) kept.push(c)
    }
    if (kept.length === 1) return kept[0]
    remaining = kept
  }
  return remaining[0]
}

// kube-scheduler's FitError text: `0/N nodes are available: <count reason, …>.`, the
// "count reason" strings sorted as Go's sort.Strings sorts them.
const fitMessage = (total: number, statuses: Iterable<Status>): string => {
  const counts = new Map<string, number>()
  for (const s of statuses) for (const r of s.reasons) counts.set(r, (counts.get(r) ?? 0) + 1)
  const parts = [...counts].map(([r, n]) => `${n} ${r}`).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  return `0/${total} nodes are available${parts.length === 0 ? "" : `: ${parts.join(", ")}`}.`
}

const unschedulable = (message: string): Status => status("Unschedulable", `preemption: ${message}`)

/** Whether `pod` may preempt at all; the reason when not (upstream PodEligibleToPreemptOthers). */
export const eligibility = (pod: PodInfo, snapshot: Snapshot, filtered: ReadonlyMap<string, Status>): string | undefined => {
  const spec = asObject(pod.pod["spec"])
  if (spec["preemptionPolicy"] === "Never") return "not eligible due to preemptionPolicy=Never."
  const nominated = asObject(pod.pod["status"])["nominatedNodeName"]
  if (typeof nominated !== "string" || nominated === "") return undefined
  // A nominated node that can no longer take the pod at all frees it to preempt elsewhere.
  const verdict = filtered.get(nominated)
  if (verdict === undefined || verdict.code === "UnschedulableAndUnresolvable") return undefined
  const node = snapshot.get(nominated)
  if (node === undefined) return undefined
  for (const p of node.pods) {
    if (p.priority < pod.priority && terminatingByPreemption(p.pod)) return "not eligible due to a terminating pod on the nominated node."
  }
  return undefined
}

/** The plugin. */
export const make = (options: Options): PostFilterPlugin => {
  const args: Args = {
    minCandidateNodesPercentage: options.minCandidateNodesPercentage ?? defaultArgs.minCandidateNodesPercentage,
    minCandidateNodesAbsolute: options.minCandidateNodesAbsolute ?? defaultArgs.minCandidateNodesAbsolute
  }
  const random = options.random ?? ((n: number) => Math.floor(Math.random() * n))
  const clock = options.now ?? Date.now
  const lookup = options.pdbs ?? (() => [])

  const postFilter = (state: CycleState, pod: PodInfo, snapshot: Snapshot, filtered: ReadonlyMap<string, Status>): PostFilterResult => {
    const ineligible = eligibility(pod, snapshot, filtered)
    // Not eligible: keep whatever nomination the pod has (upstream answers no result).
    if (ineligible !== undefined) return { status: unschedulable(ineligible) }
    const nodes = snapshot.nodes
    if (nodes.length === 0) return { status: status("Error", "preemption: no nodes available") }
    const now = clock()

    // Budgets compiled once per namespace for this attempt.
    const compiled = new Map<string, ReadonlyArray<CompiledBudget>>()
    const budgets = (namespace: string) => {
      let bs = compiled.get(namespace)
      if (bs === undefined) {
        bs = lookup(namespace).flatMap((budget) =>
          budget.selector === undefined || LabelSelector.isEmpty(budget.selector) ? [] : [{ budget, matches: LabelSelector.compile(budget.selector) }]
        )
        compiled.set(namespace, bs)
      }
      return bs
    }

    const potential = nodes.filter((n) => filtered.get(n.name)?.code === "Unschedulable")
    const statuses = new Map<string, Status>()
    const clean: Array<Candidate> = []
    const violating: Array<Candidate> = []
    const errors: Array<Status> = []
    if (potential.length > 0) {
      const offset = random(potential.length)
      const wanted = numCandidates(potential.length, args)
      for (let i = 0; i < potential.length; i++) {
        const node = potential[(offset + i) % potential.length]!
        const r = selectVictims(options.filter, state, pod, node, budgets, now)
        if (r._tag === "None") {
          statuses.set(node.name, r.status)
          if (r.status.code === "Error") errors.push(r.status)
          continue
        }
        if (r.victims.length === 0) {
          // The pod fits without evicting anyone: the verdict it was given is stale (upstream errs too).
          const error = status("Error", `expected at least one victim pod on node "${node.name}"`)
          statuses.set(node.name, error)
          errors.push(error)
          continue
        }
        const list = r.pdbViolations === 0 ? clean : violating
        // Each list holds at most `wanted`, as upstream's fixed-size candidate lists.
        if (list.length < wanted) list.push({ node: node.name, victims: r.victims, pdbViolations: r.pdbViolations })
        if (clean.length > 0 && clean.length + violating.length >= wanted) break
      }
    }
    const candidates = [...clean, ...violating]
    if (candidates.length === 0) {
      if (errors.length > 0) return { status: status("Error", `preemption: ${errors.flatMap((e) => e.reasons).join(", ")}`) }
      const notHelpful = status("UnschedulableAndUnresolvable", notHelpfulReason)
      const message = fitMessage(nodes.length, nodes.map((n) => statuses.get(n.name) ?? notHelpful))
      // Clear any earlier nomination: it did not help.
      return { status: unschedulable(message), nominatedNode: "" }
    }
    const best = pickOne(candidates, now)!
    return { status: success, nominatedNode: best.node, victims: best.victims }
  }

  return { name, postFilter }
}

/** Reads DefaultPreemptionArgs from a profile's pluginConfig; an error message when invalid. */
export const parseArgs = (raw: unknown): Args | string => {
  const r = asObject(raw)
  const num = (k: keyof Args) => (r[k] === undefined ? defaultArgs[k] : typeof r[k] === "number" ? r[k] : NaN)
  const args: Args = { minCandidateNodesPercentage: num("minCandidateNodesPercentage"), minCandidateNodesAbsolute: num("minCandidateNodesAbsolute") }
  const errors = validateArgs(args)
  return errors.length === 0 ? args : FieldError.formatAll(errors)
}

/** The registry factory: arguments from the profile, the filter runner and budgets from the handle. */
export const factory: Factory = (raw, handle) => {
  const args = parseArgs(raw)
  if (typeof args === "string") return args
  const h = handle as PreemptionHandle
  // Read at PostFilter time, so the pipeline may fill the handle in after building its plugins.
  return make({
    ...args,
    filter: (state, pod, node) => (h.runFilter === undefined ? status("Error", `${name} needs a handle with runFilter`) : h.runFilter(state, pod, node)),
    pdbs: (namespace) => h.pdbs?.(namespace) ?? []
  })
}
