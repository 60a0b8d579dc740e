/**
 * NodeResourcesFit: a pod goes only where its requests fit what the node has left, and nodes are
 * ranked by how much they would be used, as upstream kube-scheduler's `noderesources.Fit`.
 *
 * - PreFilter: the pod's effective requests (PodInfo.requests) laid out once for Filter, with the
 *   ignored extended resources dropped and each scalar's reason string built.
 * - Filter: every shortfall is a reason (`Too many pods`, `Insufficient cpu`, `Insufficient memory`,
 *   `Insufficient ephemeral-storage`, `Insufficient <scalar>`), Unschedulable (preemption may help).
 *   A pod requesting nothing is only checked for a pod slot, as upstream. `ignoredResources` and
 *   `ignoredResourceGroups` (the part before `/`) skip extended resources only.
 * - PreScore/Score: `scoringStrategy` — LeastAllocated (default), MostAllocated, or
 *   RequestedToCapacityRatio (a broken-linear `shape` of utilisation 0–100 → score 0–10) — over the
 *   weighted `resources` (default cpu and memory, weight 1), with integer arithmetic as upstream.
 *   CPU and memory are counted as non-zero requests (a container without them counts 100m / 200Mi,
 *   on the node as in the pod), so best-effort pods still spread; other resources count actual
 *   requests, and a scalar the pod does not request is left out.
 *
 * The scoring helpers here are shared with NodeResourcesBalancedAllocation, as upstream shares
 * its `resourceAllocationScorer`.
 */
import type { CycleState, Factory, FilterPlugin, PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin, Status } from "../Framework.js"
import { MaxScore, status, success } from "../Framework.js"
import * as FieldError from "../../model/FieldError.js"
import * as Validation from "../../model/Validation.js"
import type { JsonObject } from "../../object/Json.js"
import type { NodeInfo, PodInfo, Resources } from "../Snapshot.js"
import * as Snapshot from "../Snapshot.js"
import * as Signature from "../Signature.js"
import { asObject } from "../../object/Json.js"

/** The plugin's name in profiles and the registry. */
export const name = "NodeResourcesFit"

/** How nodes are ranked. */
export type ScoringStrategyType = "LeastAllocated" | "MostAllocated" | "RequestedToCapacityRatio"

/** A resource to score and its weight. */
export interface ResourceSpec {
  readonly name: string
  readonly weight: number
}

/** One point of the RequestedToCapacityRatio shape: utilisation (0–100) → score (0–10). */
export interface UtilizationShapePoint {
  readonly utilization: number
  readonly score: number
}

/** The scoring strategy (upstream's `ScoringStrategy`). */
export interface ScoringStrategy {
  readonly type: ScoringStrategyType
  readonly resources: ReadonlyArray<ResourceSpec>
  readonly requestedToCapacityRatio?: { readonly shape: ReadonlyArray<UtilizationShapePoint> }
}

/** The plugin's arguments (upstream's NodeResourcesFitArgs, defaulted). */
export interface Args {
  readonly ignoredResources: ReadonlyArray<string>
  readonly ignoredResourceGroups: ReadonlyArray<string>
  readonly scoringStrategy: ScoringStrategy
}

/** Upstream's default scored resources: cpu and memory, weight 1 each. */
export const defaultResources: ReadonlyArray<ResourceSpec> = [
  { name: "cpu", weight: 1 },
  { name: "memory", weight: 1 }
]

/** The arguments when none are given. */
export const defaultArgs: Args = {
  ignoredResources: [],
  ignoredResourceGroups: [],
  scoringStrategy: { type: "LeastAllocated", resources: defaultResources }
}

/** The highest score a RequestedToCapacityRatio shape point may give (upstream's MaxCustomPriorityScore). */
export const MaxCustomPriorityScore = 10

/**
 * Whether a resource is an extended resource (upstream `IsExtendedResourceName`): a domain-prefixed
 * name outside `kubernetes.io/`, not a quota `requests.` name. Only these can be ignored.
 */
export const isExtendedResourceName = (resource: string): boolean =>
  resource.includes("/") && !resource.includes("kubernetes.io/") && !resource.startsWith("requests.")

// ---- arguments --------------------------------------------------------------------------------

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const strategyTypes: ReadonlyArray<ScoringStrategyType> = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]

/**
 * Reads a `resources` list, defaulting (empty list → cpu and memory, weight 0 or unset → 1) as
 * upstream; shape errors are pushed onto `errors`. Range checks are the caller's (they differ).
 */
export const parseResourceSpecs = (raw: unknown, path: string, errors: Array<FieldError.FieldError>): ReadonlyArray<ResourceSpec> => {
  if (raw === undefined || raw === null) return defaultResources
  if (!Array.isArray(raw)) {
    errors.push(FieldError.invalid(path, raw, "must be a list"))
    return defaultResources
  }
  if (raw.length === 0) return defaultResources
  return raw.map((r, i) => {
    const spec = asObject(r)
    const resource = spec["name"]
    const weight = spec["weight"] ?? 0
    if (typeof resource !== "string" || resource === "") errors.push(FieldError.required(`${path}[${i}].name`))
    if (typeof weight !== "number" || !Number.isInteger(weight)) errors.push(FieldError.invalid(`${path}[${i}].weight`, weight, "must be an integer"))
    return { name: String(resource ?? ""), weight: weight === 0 || typeof weight !== "number" ? 1 : weight }
  })
}

const stringList = (raw: unknown, path: string, errors: Array<FieldError.FieldError>): ReadonlyArray<string> => {
  if (raw === undefined || raw === null) return []
  if (!Array.isArray(raw)) {
    errors.push(FieldError.invalid(path, raw, "must be a list"))
    return []
  }
  return raw.map((v, i) => {
    if (typeof v !== "string") errors.push(FieldError.invalid(`${path}[${i}]`, v, "must be a string"))
    return String(v)
  })
}

// Upstream's validateFunctionShape.
const shapeOf = (raw: unknown, path: string, errors: Array<FieldError.FieldError>): ReadonlyArray<UtilizationShapePoint> => {
  const points = Array.isArray(raw) ? raw.map(asObject) : []
  if (points.length === 0) {
    errors.push(FieldError.required(path, "at least one point must be specified"))
    return []
  }
  const shape = points.map((p) => ({ utilization: Number(p["utilization"] ?? 0), score: Number(p["score"] ?? 0) }))
  for (let i = 1; i < shape.length; i++) {
    if (shape[i - 1]!.utilization >= shape[i]!.utilization) {
      errors.push(FieldError.invalid(`${path}[${i}].utilization`, shape[i]!.utilization, "values must be sorted in increasing order"))
      break
    }
  }
  shape.forEach((p, i) => {
    if (!Number.isInteger(p.utilization) || p.utilization < 0 || p.utilization > 100)
      errors.push(FieldError.invalid(`${path}[${i}].utilization`, p.utilization, "not in valid range [0, 100]"))
    if (!Number.isInteger(p.score) || p.score < 0 || p.score > MaxCustomPriorityScore)
      errors.push(FieldError.invalid(`${path}[${i}].score`, p.score, `not in valid range [0, ${MaxCustomPriorityScore}]`))
  })
  return shape
}

/**
 * Parses, defaults and validates the arguments as upstream's `SetDefaults_NodeResourcesFitArgs` and
 * `ValidateNodeResourcesFitArgs` do (`undefined`: all defaults); answers every error as one message.
 */
export const parseArgs = (raw: unknown): Args | string => {
  if (raw === undefined || raw === null) return defaultArgs
  if (!isObject(raw)) return FieldError.format(FieldError.invalid("", raw, "NodeResourcesFitArgs must be an object"))
  const errors: Array<FieldError.FieldError> = []
  const ignoredResources = stringList(raw["ignoredResources"], "ignoredResources", errors)
  ignoredResources.forEach((r, i) => {
    for (const msg of Validation.isQualifiedName(r)) errors.push(FieldError.invalid(`ignoredResources[${i}]`, r, msg))
  })
  const ignoredResourceGroups = stringList(raw["ignoredResourceGroups"], "ignoredResourceGroups", errors)
  ignoredResourceGroups.forEach((g, i) => {
    if (g.includes("/")) errors.push(FieldError.invalid(`ignoredResourceGroups[${i}]`, g, "resource group name can't contain '/'"))
    for (const msg of Validation.isQualifiedName(g)) errors.push(FieldError.invalid(`ignoredResourceGroups[${i}]`, g, msg))
  })
  let scoringStrategy: ScoringStrategy = defaultArgs.scoringStrategy
  const rawStrategy = raw["scoringStrategy"]
  if (rawStrategy !== undefined && rawStrategy !== null) {
    const s = asObject(rawStrategy)
    const type = s["type"]
    if (!strategyTypes.includes(type as ScoringStrategyType)) errors.push(FieldError.notSupported("scoringStrategy.type", type, strategyTypes))
    const resources = parseResourceSpecs(s["resources"], "scoringStrategy.resources", errors)
    resources.forEach((r, i) => {
      if (r.weight <= 0 || r.weight > 100)
        errors.push(FieldError.invalid(`scoringStrategy.resources[${i}].weight`, r.weight, `resource weight of ${r.name} not in valid range (0, 100]`))
    })
    const ratio = s["requestedToCapacityRatio"]
    const hasRatio = ratio !== undefined && ratio !== null
    let shape: ReadonlyArray<UtilizationShapePoint> = []
    if (type === "RequestedToCapacityRatio") {
      if (!hasRatio) errors.push(FieldError.required("scoringStrategy.requestedToCapacityRatio", "must be specified when type is RequestedToCapacityRatio"))
      else shape = shapeOf(asObject(ratio)["shape"], "scoringStrategy.requestedToCapacityRatio.shape", errors)
    } else if (hasRatio) {
      errors.push(FieldError.forbidden("scoringStrategy.requestedToCapacityRatio", "must be nil when type is not RequestedToCapacityRatio"))
    }
    scoringStrategy = {
      type: type as ScoringStrategyType,
      resources,
      ...(type === "RequestedToCapacityRatio" ? { requestedToCapacityRatio: { shape } } : {})
    }
  }
  if (errors.length > 0) return FieldError.formatAll(errors)
  return { ignoredResources, ignoredResourceGroups, scoringStrategy }
}

// ---- resource allocation scoring (shared with NodeResourcesBalancedAllocation) -----------------

const CPU = 0
const MEMORY = 1
const EPHEMERAL = 2
const SCALAR = 3
const UNSCORED = 4

/** A scored resource with the field of Resources it reads resolved once (not per node). */
export interface ScoredResource {
  readonly name: string
  readonly weight: number
  readonly kind: number
}

/** Resolves resource specs for scoring; `pods` is never scored (upstream finds no allocatable for it). */
export const scoredResources = (specs: ReadonlyArray<ResourceSpec>): ReadonlyArray<ScoredResource> =>
  specs.map((s) => ({
    name: s.name,
    weight: s.weight,
    kind: s.name === "cpu" ? CPU : s.name === "memory" ? MEMORY : s.name === "ephemeral-storage" ? EPHEMERAL : s.name === "pods" ? UNSCORED : SCALAR
  }))

const amount = (r: Resources, resource: ScoredResource): number => {
  switch (resource.kind) {
    case CPU:
      return r.milliCpu
    case MEMORY:
      return r.memory
    case EPHEMERAL:
      return r.ephemeralStorage
    case SCALAR:
      return r.scalar[resource.name] ?? 0
    default:
      return 0
  }
}

const probeNode: JsonObject = { metadata: { name: "" } }

/**
 * The pod's non-zero requests (upstream's NonMissingContainerRequests: a container without a CPU or
 * memory request counts 100m / 200Mi). Read from a NodeInfo holding only the pod, so the pod is
 * counted by exactly the rule its node's `nonZeroRequested` was summed with; once per cycle.
 */
const nonZeroRequests = (pod: PodInfo): Resources => Snapshot.nodeInfo(probeNode, [pod]).nonZeroRequested

/**
 * The pod's request per scored resource, in `resources` order. With `useRequested` false (the
 * Fit strategies) CPU and memory count the non-zero defaults; BalancedAllocation uses actual requests.
 */
export const podRequestList = (pod: PodInfo, resources: ReadonlyArray<ScoredResource>, useRequested: boolean): Array<number> => {
  const nonZero = useRequested || !resources.some((r) => r.kind === CPU || r.kind === MEMORY) ? undefined : nonZeroRequests(pod)
  return resources.map((resource) =>
    nonZero !== undefined && (resource.kind === CPU || resource.kind === MEMORY) ? amount(nonZero, resource) : amount(pod.requests, resource)
  )
}

/**
 * The node's allocatable amount of a resource for scoring, 0 meaning "leave this resource out":
 * no such resource on the node, or a scalar the pod does not request (upstream's
 * `calculateResourceAllocatableRequest`).
 */
export const allocatableFor = (resource: ScoredResource, node: NodeInfo, podRequest: number): number =>
  resource.kind === SCALAR && podRequest === 0 ? 0 : amount(node.allocatable, resource)

/**
 * What the node would have requested of a resource with the pod on it. CPU and memory read
 * `nonZeroRequested` unless `useRequested`; ephemeral storage and scalars always read `requested`.
 */
export const requestedFor = (resource: ScoredResource, node: NodeInfo, podRequest: number, useRequested: boolean): number => {
  const onNode = !useRequested && (resource.kind === CPU || resource.kind === MEMORY) ? node.nonZeroRequested : node.requested
  return amount(onNode, resource) + podRequest
}

/** Upstream's `leastRequestedScore`: the unused share × 100 (integer), 0 when over capacity. */
export const leastRequestedScore = (requested: number, capacity: number): number =>
  capacity === 0 || requested > capacity ? 0 : Math.trunc(((capacity - requested) * MaxScore) / capacity)

/** Upstream's `mostRequestedScore`: the used share × 100 (integer), capped at capacity. */
export const mostRequestedScore = (requested: number, capacity: number): number =>
  capacity === 0 ? 0 : Math.trunc((Math.min(requested, capacity) * MaxScore) / capacity)

/**
 * Upstream's `BuildBrokenLinearFunction`: the score at utilisation `p` by linear interpolation
 * between shape points (integer division truncating toward zero, as Go), flat beyond the ends.
 */
export const brokenLinear = (shape: ReadonlyArray<UtilizationShapePoint>, p: number): number => {
  for (let i = 0; i < shape.length; i++) {
    const point = shape[i]!
    if (p <= point.utilization) {
      if (i === 0) return point.score
      const prev = shape[i - 1]!
      return prev.score + Math.trunc(((point.score - prev.score) * (p - prev.utilization)) / (point.utilization - prev.utilization))
    }
  }
  return shape[shape.length - 1]!.score
}

/** Scores one node from the pod's request list; the strategies differ only here. */
type NodeScorer = (node: NodeInfo, podRequests: ReadonlyArray<number>) => number

/** LeastAllocated / MostAllocated: the weighted mean of per-resource scores (integer division). */
const weightedScorer =
  (resources: ReadonlyArray<ScoredResource>, perResource: (requested: number, capacity: number) => number): NodeScorer =>
  (node, podRequests) => {
    let nodeScore = 0
    let weightSum = 0
    for (let i = 0; i < resources.length; i++) {
      const resource = resources[i]!
      const capacity = allocatableFor(resource, node, podRequests[i]!)
      if (capacity === 0) continue
      nodeScore += perResource(requestedFor(resource, node, podRequests[i]!, false), capacity) * resource.weight
      weightSum += resource.weight
    }
    return weightSum === 0 ? 0 : Math.trunc(nodeScore / weightSum)
  }

/** RequestedToCapacityRatio: the shape at each resource's utilisation; only positive scores count, the mean is rounded. */
const ratioScorer = (resources: ReadonlyArray<ScoredResource>, points: ReadonlyArray<UtilizationShapePoint>): NodeScorer => {
  // Shape scores are 0–10; the scheduler's scores are 0–100.
  const shape = points.map((p) => ({ utilization: p.utilization, score: p.score * (MaxScore / MaxCustomPriorityScore) }))
  return (node, podRequests) => {
    let nodeScore = 0
    let weightSum = 0
    for (let i = 0; i < resources.length; i++) {
      const resource = resources[i]!
      const capacity = allocatableFor(resource, node, podRequests[i]!)
      if (capacity === 0) continue
      const requested = requestedFor(resource, node, podRequests[i]!, false)
      const score = brokenLinear(shape, requested > capacity ? 100 : Math.trunc((requested * 100) / capacity))
      if (score > 0) {
        nodeScore += score * resource.weight
        weightSum += resource.weight
      }
    }
    return weightSum === 0 ? 0 : Math.round(nodeScore / weightSum)
  }
}

const scorerFor = (strategy: ScoringStrategy, resources: ReadonlyArray<ScoredResource>): NodeScorer => {
  switch (strategy.type) {
    case "MostAllocated":
      return weightedScorer(resources, mostRequestedScore)
    case "RequestedToCapacityRatio":
      return ratioScorer(resources, strategy.requestedToCapacityRatio?.shape ?? [])
    default:
      return weightedScorer(resources, leastRequestedScore)
  }
}

// ---- filter -----------------------------------------------------------------------------------

/** What Filter needs, computed once per cycle: the pod's requests, scalars as parallel arrays. */
interface FitState {
  readonly milliCpu: number
  readonly memory: number
  readonly ephemeralStorage: number
  /** Requests nothing at all: only a pod slot is checked. */
  readonly empty: boolean
  readonly scalarNames: ReadonlyArray<string>
  readonly scalarAmounts: ReadonlyArray<number>
  readonly scalarVerdicts: ReadonlyArray<Status>
}

const tooManyPods: Status = status("Unschedulable", "Too many pods")
const insufficientCpu: Status = status("Unschedulable", "Insufficient cpu")
const insufficientMemory: Status = status("Unschedulable", "Insufficient memory")
const insufficientEphemeral: Status = status("Unschedulable", "Insufficient ephemeral-storage")

/** Adds a second (or later) reason: the list is only built when a node fails more than once. */
const addReason = (reasons: Array<string> | undefined, first: Status, next: Status): Array<string> => {
  const out = reasons ?? [first.reasons[0]!]
  out.push(next.reasons[0]!)
  return out
}

/** The plugin built from parsed arguments: PreFilter, Filter, PreScore, Score. */
export const make = (args: Args = defaultArgs): PreFilterPlugin & FilterPlugin & PreScorePlugin & ScorePlugin => {
  const ignored = new Set(args.ignoredResources)
  const ignoredGroups = new Set(args.ignoredResourceGroups)
  const resources = scoredResources(args.scoringStrategy.resources)
  const scorer = scorerFor(args.scoringStrategy, resources)
  const preFilterKey = `PreFilter${name}`
  const preScoreKey = `PreScore${name}`

  const isIgnored = (resource: string) =>
    isExtendedResourceName(resource) && (ignored.has(resource) || (ignoredGroups.size > 0 && ignoredGroups.has(resource.split("/")[0]!)))

  const fitState = (pod: PodInfo): FitState => {
    const r = pod.requests
    const scalars = Object.keys(r.scalar).sort()
    const names = scalars.filter((s) => r.scalar[s] !== 0 && !isIgnored(s))
    return {
      milliCpu: r.milliCpu,
      memory: r.memory,
      ephemeralStorage: r.ephemeralStorage,
      empty: r.milliCpu === 0 && r.memory === 0 && r.ephemeralStorage === 0 && scalars.length === 0,
      scalarNames: names,
      scalarAmounts: names.map((s) => r.scalar[s]!),
      scalarVerdicts: names.map((s) => status("Unschedulable", `Insufficient ${s}`))
    }
  }

  return {
    name,
    sign: Signature.requests,
    preFilter: (state: CycleState, pod): PreFilterResult => {
      state.write(preFilterKey, fitState(pod))
      return { status: success }
    },
    filter: (state, pod, node) => {
      const s = state.read<FitState>(preFilterKey) ?? fitState(pod)
      const allocatable = node.allocatable
      const requested = node.requested
      let failures = 0
      let first: Status = success
      let reasons: Array<string> | undefined
      if (node.pods.length + 1 > allocatable.pods) {
        failures++
        first = tooManyPods
      }
      if (!s.empty) {
        if (s.milliCpu > 0 && s.milliCpu > allocatable.milliCpu - requested.milliCpu) {
          if (failures++ === 0) first = insufficientCpu
          else reasons = addReason(reasons, first, insufficientCpu)
        }
        if (s.memory > 0 && s.memory > allocatable.memory - requested.memory) {
          if (failures++ === 0) first = insufficientMemory
          else reasons = addReason(reasons, first, insufficientMemory)
        }
        if (s.ephemeralStorage > 0 && s.ephemeralStorage > allocatable.ephemeralStorage - requested.ephemeralStorage) {
          if (failures++ === 0) first = insufficientEphemeral
          else reasons = addReason(reasons, first, insufficientEphemeral)
        }
        for (let i = 0; i < s.scalarNames.length; i++) {
          const resource = s.scalarNames[i]!
          if (s.scalarAmounts[i]! > (allocatable.scalar[resource] ?? 0) - (requested.scalar[resource] ?? 0)) {
            if (failures++ === 0) first = s.scalarVerdicts[i]!
            else reasons = addReason(reasons, first, s.scalarVerdicts[i]!)
          }
        }
      }
      if (failures === 0) return success
      return reasons === undefined ? first : { code: "Unschedulable", reasons }
    },
    preScore: (state, pod) => {
      state.write(preScoreKey, podRequestList(pod, resources, false))
      return success
    },
    score: (state, pod, node) => scorer(node, state.read<ReadonlyArray<number>>(preScoreKey) ?? podRequestList(pod, resources, false))
  }
}

/** Builds the plugin from profile arguments (upstream's NodeResourcesFitArgs), or answers why they are invalid. */
export const factory: Factory = (args) => {
  const parsed = parseArgs(args)
  return typeof parsed === "string" ? parsed : make(parsed)
}
