/**
 * NodeAffinity: a pod goes only where its `spec.nodeSelector` and required node affinity allow,
 * and prefers the nodes its preferred terms weigh highest, as upstream kube-scheduler's
 * `nodeaffinity` plugin. The matching rules are the shared ones in `../NodeAffinity.ts`.
 *
 * - PreFilter: Skip when the pod has neither a nodeSelector nor required affinity (and the profile
 *   adds none); narrows the cycle to the nodes named by `matchFields` `metadata.name In` terms
 *   (the union over terms of each term's intersection, as upstream; `pod affinity terms conflict`
 *   when every term names no node).
 * - Filter: `node(s) didn't match Pod's node affinity/selector`, or
 *   `node(s) didn't match scheduler-enforced node affinity` for the profile's `addedAffinity`;
 *   both UnschedulableAndUnresolvable.
 * - PreScore/Score: the sum of the weights of the matching preferred terms (the pod's and the
 *   profile's), normalised to 0–100 with upstream's DefaultNormalizeScore.
 *
 * Args (upstream's NodeAffinityArgs): `addedAffinity` with `requiredDuringSchedulingIgnoredDuringExecution`
 * (a NodeSelector every pod of the profile must also match) and
 * `preferredDuringSchedulingIgnoredDuringExecution` (terms added to every pod's score).
 */
import * as FieldError from "../../model/FieldError.js"
import type { CycleState, Factory, FilterPlugin, NodeScore, PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin, Status } from "../Framework.js"
import { MaxScore, status, success } from "../Framework.js"
import * as NodeAffinity from "../../matching/NodeAffinity.js"
import type { NodeInfo, PodInfo } from "../Snapshot.js"
import * as Signature from "../Signature.js"
import { asArray, asObject, asString } from "../../object/Json.js"

/** The plugin's name in profiles and the registry. */
export const name = "NodeAffinity"

/** Upstream's reason for a node the pod's nodeSelector or required affinity excludes. */
export const ErrReasonPod = "node(s) didn't match Pod's node affinity/selector"
/** Upstream's reason for a node the profile's `addedAffinity` excludes. */
export const ErrReasonEnforced = "node(s) didn't match scheduler-enforced node affinity"
/** Upstream's reason when the required terms' `metadata.name` fields name no node at all. */
export const ErrReasonConflict = "pod affinity terms conflict"

const rejectedPod: Status = status("UnschedulableAndUnresolvable", ErrReasonPod)
const rejectedEnforced: Status = status("UnschedulableAndUnresolvable", ErrReasonEnforced)
const conflict: PreFilterResult = { status: status("UnschedulableAndUnresolvable", ErrReasonConflict) }
const skipPreFilter: PreFilterResult = { status: status("Skip") }
const proceed: PreFilterResult = { status: success }
const skip: Status = status("Skip")
const preFilterKey = `PreFilter${name}`
const preScoreKey = `PreScore${name}`

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const hasOwn = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k)

/**
 * Upstream's `helper.DefaultNormalizeScore`: scales scores in place so the highest becomes
 * `maxPriority` (integer arithmetic, as upstream), reversed (`maxPriority - score`) when asked;
 * all-zero scores stay 0, or become `maxPriority` when reversed.
 */
export const defaultNormalizeScore = (maxPriority: number, reverse: boolean, scores: Array<NodeScore>): void => {
  let maxCount = 0
  for (let i = 0; i < scores.length; i++) if (scores[i]!.score > maxCount) maxCount = scores[i]!.score
  if (maxCount === 0) {
    if (reverse) for (let i = 0; i < scores.length; i++) scores[i]!.score = maxPriority
    return
  }
  for (let i = 0; i < scores.length; i++) {
    const score = Math.trunc((maxPriority * scores[i]!.score) / maxCount)
    scores[i]!.score = reverse ? maxPriority - score : score
  }
}

/** A preferred term (`preferredDuringSchedulingIgnoredDuringExecution[]`): a weight and a NodeSelectorTerm. */
export interface PreferredTerm {
  readonly weight: number
  readonly preference: Record<string, unknown>
}

/** The plugin's arguments (upstream's NodeAffinityArgs). */
export interface Args {
  readonly addedAffinity?: {
    /** Terms every pod of the profile must also match (any term). */
    readonly requiredDuringSchedulingIgnoredDuringExecution?: { readonly nodeSelectorTerms: ReadonlyArray<Record<string, unknown>> }
    readonly preferredDuringSchedulingIgnoredDuringExecution?: ReadonlyArray<PreferredTerm>
  }
}

const operators = new Set(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])

/** Errors in one NodeSelectorTerm, as upstream's selector parsing reports them. */
const termErrors = (term: unknown, path: string): Array<FieldError.FieldError> => {
  if (!isObject(term)) return [FieldError.invalid(path, term, "must be an object")]
  const errors: Array<FieldError.FieldError> = []
  asArray(term["matchExpressions"]).forEach((r, i) => {
    const op = asObject(r)["operator"]
    if (!operators.has(asString(op))) errors.push(FieldError.notSupported(`${path}.matchExpressions[${i}].operator`, op, [...operators]))
  })
  asArray(term["matchFields"]).forEach((r, i) => {
    const req = asObject(r)
    if (req["key"] !== "metadata.name") errors.push(FieldError.invalid(`${path}.matchFields[${i}].key`, req["key"], "not a valid field selector key"))
    if (req["operator"] !== "In" && req["operator"] !== "NotIn") errors.push(FieldError.notSupported(`${path}.matchFields[${i}].operator`, req["operator"], ["In", "NotIn"]))
  })
  return errors
}

/** Parses and validates the plugin's arguments (`undefined`: none); answers the errors as one message. */
export const parseArgs = (raw: unknown): Args | string => {
  if (raw === undefined || raw === null) return {}
  if (!isObject(raw)) return FieldError.format(FieldError.invalid("", raw, "NodeAffinityArgs must be an object"))
  const added = raw["addedAffinity"]
  if (added === undefined || added === null) return {}
  const path = "addedAffinity"
  if (!isObject(added)) return FieldError.format(FieldError.invalid(path, added, "must be an object"))
  const errors: Array<FieldError.FieldError> = []
  const required = added["requiredDuringSchedulingIgnoredDuringExecution"]
  let requiredTerms: ReadonlyArray<Record<string, unknown>> | undefined
  if (required !== undefined && required !== null) {
    const rPath = `${path}.requiredDuringSchedulingIgnoredDuringExecution`
    if (!isObject(required) || !Array.isArray(required["nodeSelectorTerms"])) errors.push(FieldError.required(`${rPath}.nodeSelectorTerms`))
    else {
      required["nodeSelectorTerms"].forEach((t, i) => errors.push(...termErrors(t, `${rPath}.nodeSelectorTerms[${i}]`)))
      requiredTerms = (required["nodeSelectorTerms"] as ReadonlyArray<unknown>).map(asObject)
    }
  }
  const preferred = added["preferredDuringSchedulingIgnoredDuringExecution"]
  const preferredTerms: Array<PreferredTerm> = []
  if (preferred !== undefined && preferred !== null) {
    const pPath = `${path}.preferredDuringSchedulingIgnoredDuringExecution`
    if (!Array.isArray(preferred)) errors.push(FieldError.invalid(pPath, preferred, "must be a list"))
    else
      preferred.forEach((p, i) => {
        const weight = asObject(p)["weight"]
        if (typeof weight !== "number" || !Number.isInteger(weight)) errors.push(FieldError.invalid(`${pPath}[${i}].weight`, weight, "must be an integer"))
        errors.push(...termErrors(asObject(p)["preference"], `${pPath}[${i}].preference`))
        if (typeof weight === "number") preferredTerms.push({ weight, preference: asObject(asObject(p)["preference"]) })
      })
  }
  if (errors.length > 0) return FieldError.formatAll(errors)
  return {
    addedAffinity: {
      ...(requiredTerms === undefined ? {} : { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: requiredTerms } }),
      ...(preferredTerms.length === 0 ? {} : { preferredDuringSchedulingIgnoredDuringExecution: preferredTerms })
    }
  }
}

/** What Filter needs, read from the pod once per cycle. */
interface FilterState {
  /** `spec.nodeSelector`, as parallel arrays so Filter loops without allocating. */
  readonly selectorKeys: ReadonlyArray<string>
  readonly selectorValues: ReadonlyArray<unknown>
  /** The required `nodeSelectorTerms` (any must match), or undefined without required affinity. */
  readonly terms: ReadonlyArray<Record<string, unknown>> | undefined
}

const specOf = (pod: PodInfo): Record<string, unknown> => asObject(pod.pod["spec"])
const requiredOf = (spec: Record<string, unknown>): unknown => asObject(asObject(spec["affinity"])["nodeAffinity"])["requiredDuringSchedulingIgnoredDuringExecution"]

const filterState = (pod: PodInfo): FilterState => {
  const spec = specOf(pod)
  const selector = asObject(spec["nodeSelector"])
  const required = requiredOf(spec)
  return {
    selectorKeys: Object.keys(selector),
    selectorValues: Object.values(selector),
    // A present required affinity with no terms matches no node (upstream).
    terms: required === undefined || required === null ? undefined : asArray(asObject(required)["nodeSelectorTerms"]).map(asObject)
  }
}

/** Whether any term holds for the node (an empty list: none). */
const matchesAnyTerm = (terms: ReadonlyArray<Record<string, unknown>>, node: NodeInfo): boolean => {
  for (let i = 0; i < terms.length; i++) if (NodeAffinity.matchesTerm(terms[i]!, node.node)) return true
  return false
}

/** The sum of the weights of the terms that hold for the node. */
const preferredScore = (terms: ReadonlyArray<PreferredTerm>, node: NodeInfo): number => {
  let sum = 0
  for (let i = 0; i < terms.length; i++) if (NodeAffinity.matchesTerm(terms[i]!.preference, node.node)) sum += terms[i]!.weight
  return sum
}

/** The pod's preferred terms with a non-zero weight (zero-weight terms cannot change a score). */
const podPreferredTerms = (pod: PodInfo): ReadonlyArray<PreferredTerm> => {
  const terms = asObject(asObject(specOf(pod)["affinity"])["nodeAffinity"])["preferredDuringSchedulingIgnoredDuringExecution"]
  const out: Array<PreferredTerm> = []
  for (const t of asArray(terms)) {
    const weight = asObject(t)["weight"]
    if (typeof weight === "number" && weight !== 0) out.push({ weight, preference: asObject(asObject(t)["preference"]) })
  }
  return out
}

/**
 * The node names the required terms pin the pod to, as upstream: a term's `metadata.name In`
 * fields intersect; terms union; a term without one leaves every node eligible (undefined).
 */
export const nodeNamesOf = (terms: ReadonlyArray<Record<string, unknown>>): Set<string> | undefined => {
  let nodeNames: Set<string> | undefined
  for (const term of terms) {
    let termNames: Set<string> | undefined
    for (const field of asArray(term["matchFields"])) {
      const r = asObject(field)
      if (r["key"] !== "metadata.name" || r["operator"] !== "In") continue
      const names = new Set(asArray(r["values"]).map(asString))
      termNames = termNames === undefined ? names : new Set([...termNames].filter((n) => names.has(n)))
    }
    if (termNames === undefined) return undefined
    nodeNames = nodeNames === undefined ? termNames : new Set([...nodeNames, ...termNames])
  }
  return nodeNames
}

/** The plugin built from parsed arguments: PreFilter, Filter, PreScore, Score (+ normalize). */
export const make = (args: Args = {}): PreFilterPlugin & FilterPlugin & PreScorePlugin & ScorePlugin => {
  const addedTerms = args.addedAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms
  const addedPreferred = (args.addedAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? []).filter((t) => t.weight !== 0)
  return {
    name,
    sign: Signature.nodeSelection,
    preFilter: (state: CycleState, pod) => {
      const spec = specOf(pod)
      const required = requiredOf(spec)
      const noNodeAffinity = required === undefined || required === null
      const noSelector = spec["nodeSelector"] === undefined || spec["nodeSelector"] === null
      if (noNodeAffinity && addedTerms === undefined && noSelector) return skipPreFilter
      const s = filterState(pod)
      state.write(preFilterKey, s)
      if (s.terms === undefined || s.terms.length === 0) return proceed
      const nodeNames = nodeNamesOf(s.terms)
      if (nodeNames === undefined) return proceed
      return nodeNames.size === 0 ? conflict : { status: success, nodeNames }
    },
    filter: (state, pod, node) => {
      if (addedTerms !== undefined && !matchesAnyTerm(addedTerms, node)) return rejectedEnforced
      const s = state.read<FilterState>(preFilterKey) ?? filterState(pod)
      const labels = node.labels
      for (let i = 0; i < s.selectorKeys.length; i++) {
        const key = s.selectorKeys[i]!
        // spec.nodeSelector: every key present with the same value (NodeAffinity.matchesNodeSelector's rule).
        if (!hasOwn(labels, key) || labels[key] !== s.selectorValues[i]) return rejectedPod
      }
      if (s.terms !== undefined && !matchesAnyTerm(s.terms, node)) return rejectedPod
      return success
    },
    preScore: (state, pod, nodes) => {
      if (nodes.length === 0) return success
      const terms = podPreferredTerms(pod)
      if (terms.length === 0 && addedPreferred.length === 0) return skip
      state.write(preScoreKey, terms)
      return success
    },
    score: (state, pod, node) => {
      const terms = state.read<ReadonlyArray<PreferredTerm>>(preScoreKey) ?? podPreferredTerms(pod)
      return preferredScore(addedPreferred, node) + preferredScore(terms, node)
    },
    normalize: (_state, _pod, scores) => defaultNormalizeScore(MaxScore, false, scores)
  }
}

/** Builds the plugin from profile arguments (upstream's NodeAffinityArgs), or answers why they are invalid. */
export const factory: Factory = (args) => {
  const parsed = parseArgs(args)
  return typeof parsed === "string" ? parsed : make(parsed)
}
