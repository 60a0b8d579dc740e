/**
 * Whether a pod may run on a node by its `spec.nodeSelector` (every label equal) and its required
 * node affinity (`requiredDuringSchedulingIgnoredDuringExecution`: any `nodeSelectorTerms` entry
 * matches; within a term every `matchExpressions` requirement on labels and every `matchFields`
 * requirement on `metadata.name` holds), with the operators In, NotIn, Exists, DoesNotExist, Gt
 * and Lt, as upstream's `nodeaffinity.GetRequiredNodeAffinity`.
 */
import type { JsonObject } from "../object/Json.js"
import { asArray, asObject, asString } from "../object/Json.js"
import { labelsOf, nameOf } from "../object/Metadata.js"

const isInteger = (s: string) => /^[+-]?[0-9]+$/.test(s)

/**
 * Whether a set of labels (or fields) satisfies one node selector requirement. A malformed
 * requirement (no values for `In`, values for `Exists`, a non-integer for `Gt`) matches nothing,
 * as upstream's conversion to a selector fails and the term is skipped.
 */
export const matchesRequirement = (requirement: Record<string, unknown>, labels: Readonly<Record<string, string>>): boolean => {
  const key = asString(requirement["key"])
  const values = asArray(requirement["values"]).map(asString)
  const has = Object.prototype.hasOwnProperty.call(labels, key)
  const value = has ? labels[key]! : undefined
  switch (asString(requirement["operator"])) {
    case "In":
      return values.length > 0 && value !== undefined && values.includes(value)
    case "NotIn":
      return values.length > 0 && (value === undefined || !values.includes(value))
    case "Exists":
      return values.length === 0 && has
    case "DoesNotExist":
      return values.length === 0 && !has
    case "Gt":
    case "Lt": {
      if (values.length !== 1 || !isInteger(values[0]!) || value === undefined || !isInteger(value)) return false
      const [have, want] = [Number(value), Number(values[0])]
      return requirement["operator"] === "Gt" ? have > want : have < want
    }
    default:
      return false
  }
}

/**
 * Whether a node selector term holds for `node`: all its `matchExpressions` on the node's labels
 * and all its `matchFields` on `metadata.name`. An empty term matches no node (upstream).
 */
export const matchesTerm = (term: Record<string, unknown>, node: JsonObject): boolean => {
  const expressions = asArray(term["matchExpressions"]).map(asObject)
  const fields = asArray(term["matchFields"]).map(asObject)
  if (expressions.length === 0 && fields.length === 0) return false
  const labels = labelsOf(node)
  const nodeFields = { "metadata.name": nameOf(node) }
  return expressions.every((r) => matchesRequirement(r, labels)) && fields.every((r) => matchesRequirement(r, nodeFields))
}

/** Whether a `NodeSelector` (`{ nodeSelectorTerms }`) holds: any term (OR); no terms match nothing. */
export const matchesNodeSelectorTerms = (selector: Record<string, unknown>, node: JsonObject): boolean =>
  asArray(selector["nodeSelectorTerms"]).some((t) => matchesTerm(asObject(t), node))

/** Whether a `spec.nodeSelector` map holds for `node`: every key present with the same value. */
export const matchesNodeSelector = (nodeSelector: Readonly<Record<string, unknown>> | undefined, node: JsonObject): boolean => {
  const labels = labelsOf(node)
  return Object.entries(nodeSelector ?? {}).every(([k, v]) => Object.prototype.hasOwnProperty.call(labels, k) && labels[k] === v)
}

/** A pod's `spec`, whether given a pod or a pod spec. */
const specOf = (podOrSpec: JsonObject): Record<string, unknown> =>
  podOrSpec["spec"] !== undefined || podOrSpec["metadata"] !== undefined ? asObject(podOrSpec["spec"]) : podOrSpec

/**
 * Whether `node` satisfies the pod's `nodeSelector` and its required node affinity
 * (`requiredDuringSchedulingIgnoredDuringExecution`); preferred terms do not filter. Accepts a pod
 * or a pod spec.
 */
export const matchesNodeSelectorAndAffinity = (pod: JsonObject, node: JsonObject): boolean => {
  const spec = specOf(pod)
  if (!matchesNodeSelector(asObject(spec["nodeSelector"]), node)) return false
  const required = asObject(asObject(spec["affinity"])["nodeAffinity"])["requiredDuringSchedulingIgnoredDuringExecution"]
  // No required affinity means no constraint; a present one with no terms matches nothing.
  return required === undefined || required === null || matchesNodeSelectorTerms(asObject(required), node)
}

// ---- DaemonSet ---------------------------------------------------------------------------------

