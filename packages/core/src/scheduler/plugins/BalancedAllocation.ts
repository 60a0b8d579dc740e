/**
 * NodeResourcesBalancedAllocation: prefers nodes whose resources would be used evenly with the pod
 * on them, as upstream kube-scheduler's `noderesources.BalancedAllocation`: for each scored
 * resource the requested fraction of allocatable (capped at 1), and the score is
 * `(1 - standard deviation of the fractions) × 100`, truncated (two resources: |f₁ - f₂| / 2).
 *
 * As upstream it counts actual requests (not the 100m/200Mi defaults NodeResourcesFit scores
 * with), leaves out a scalar the pod does not request or the node lacks, and answers Skip at
 * PreScore for a pod requesting none of the scored resources (a best-effort pod would otherwise
 * pile onto whichever node is already balanced; upstream kubernetes#129138).
 *
 * Args (upstream's NodeResourcesBalancedAllocationArgs): `resources` (default cpu and memory),
 * each weight 1 — weights do not apply to a deviation, so upstream rejects any other.
 */
import * as FieldError from "../../model/FieldError.js"
import type { CycleState, Factory, PreScorePlugin, ScorePlugin } from "../Framework.js"
import { MaxScore, status, success } from "../Framework.js"
import type { NodeInfo } from "../Snapshot.js"
import * as NodeResourcesFit from "./NodeResourcesFit.js"
import * as Signature from "../Signature.js"

/** The plugin's name in profiles and the registry. */
export const name = "NodeResourcesBalancedAllocation"

/** The plugin's arguments (upstream's NodeResourcesBalancedAllocationArgs, defaulted). */
export interface Args {
  readonly resources: ReadonlyArray<NodeResourcesFit.ResourceSpec>
}

/** The arguments when none are given: cpu and memory. */
export const defaultArgs: Args = { resources: NodeResourcesFit.defaultResources }

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** Parses, defaults and validates the arguments as upstream (`undefined`: defaults); answers the errors as one message. */
export const parseArgs = (raw: unknown): Args | string => {
  if (raw === undefined || raw === null) return defaultArgs
  if (!isObject(raw)) return FieldError.format(FieldError.invalid("", raw, "NodeResourcesBalancedAllocationArgs must be an object"))
  const errors: Array<FieldError.FieldError> = []
  const resources = NodeResourcesFit.parseResourceSpecs(raw["resources"], "resources", errors)
  const seen = new Set<string>()
  resources.forEach((r, i) => {
    if (seen.has(r.name)) errors.push(FieldError.duplicate(`resources[${i}].name`, r.name))
    seen.add(r.name)
    if (r.weight !== 1) errors.push(FieldError.invalid(`resources[${i}].weight`, r.weight, "must be 1"))
  })
  return errors.length > 0 ? FieldError.formatAll(errors) : { resources }
}

const skip = status("Skip")

/** The plugin built from parsed arguments: PreScore and Score. */
export const make = (args: Args = defaultArgs): PreScorePlugin & ScorePlugin => {
  const resources = NodeResourcesFit.scoredResources(args.resources)
  const preScoreKey = `PreScore${name}`
  // Scratch for the fractions of more than two resources: scoring is single-threaded and never
  // re-entrant, so one buffer per plugin instance keeps Score allocation-free.
  const fractions = new Float64Array(resources.length)

  const balancedScore = (node: NodeInfo, podRequests: ReadonlyArray<number>): number => {
    let count = 0
    let total = 0
    for (let i = 0; i < resources.length; i++) {
      const resource = resources[i]!
      const capacity = NodeResourcesFit.allocatableFor(resource, node, podRequests[i]!)
      if (capacity === 0) continue
      const fraction = Math.min(1, NodeResourcesFit.requestedFor(resource, node, podRequests[i]!, true) / capacity)
      fractions[count++] = fraction
      total += fraction
    }
    let std = 0
    if (count === 2) std = Math.abs((fractions[0]! - fractions[1]!) / 2)
    else if (count > 2) {
      const mean = total / count
      let sum = 0
      for (let i = 0; i < count; i++) sum += (fractions[i]! - mean) * (fractions[i]! - mean)
      std = Math.sqrt(sum / count)
    }
    return Math.trunc((1 - std) * MaxScore)
  }

  return {
    name,
    sign: Signature.requests,
    preScore: (state: CycleState, pod) => {
      const podRequests = NodeResourcesFit.podRequestList(pod, resources, true)
      if (podRequests.every((r) => r === 0)) return skip
      state.write(preScoreKey, podRequests)
      return success
    },
    score: (state, pod, node) =>
      balancedScore(node, state.read<ReadonlyArray<number>>(preScoreKey) ?? NodeResourcesFit.podRequestList(pod, resources, true))
  }
}

/** Builds the plugin from profile arguments (upstream's NodeResourcesBalancedAllocationArgs), or answers why they are invalid. */
export const factory: Factory = (args) => {
  const parsed = parseArgs(args)
  return typeof parsed === "string" ? parsed : make(parsed)
}
