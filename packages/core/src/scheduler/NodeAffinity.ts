/**
 * Whether a pod may run on a node by its `spec.nodeSelector` (every label equal) and its
 * required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`: any term matches;
 * within a term every `matchExpressions` entry on labels and every `matchFields` entry on
 * `metadata.name` holds), with Kubernetes' operators In, NotIn, Exists, DoesNotExist, Gt, Lt.
 */

type Json = Record<string, unknown>

const obj = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

/** One `NodeSelectorRequirement` against a value (undefined: the label or field is absent). */
export const requirementHolds = (requirement: Json, value: string | undefined): boolean => {
  const values = arr(requirement["values"]).map(String)
  switch (requirement["operator"]) {
    case "In":
      return value !== undefined && values.includes(value)
    case "NotIn":
      return value === undefined || !values.includes(value)
    case "Exists":
      return value !== undefined
    case "DoesNotExist":
      return value === undefined
    case "Gt":
    case "Lt": {
      if (value === undefined || values.length !== 1) return false
      const a = Number.parseInt(value, 10)
      const b = Number.parseInt(values[0]!, 10)
      if (!Number.isFinite(a) || !Number.isFinite(b)) return false
      return requirement["operator"] === "Gt" ? a > b : a < b
    }
    default:
      return false
  }
}

/** Whether one `NodeSelectorTerm` matches the node (an empty term matches nothing, as upstream). */
export const termMatches = (term: Json, node: Json): boolean => {
  const expressions = arr(term["matchExpressions"]).map(obj)
  const fields = arr(term["matchFields"]).map(obj)
  if (expressions.length === 0 && fields.length === 0) return false
  const m = obj(node["metadata"])
  const labels = obj(m["labels"]) as Record<string, string>
  return (
    expressions.every((r) => requirementHolds(r, labels[String(r["key"])])) &&
    fields.every((r) => r["key"] === "metadata.name" && requirementHolds(r, String(m["name"])))
  )
}

/** Whether the pod's nodeSelector and required node affinity both admit the node. */
export const matches = (pod: Json, node: Json): boolean => {
  const spec = obj(pod["spec"])
  const labels = obj(obj(node["metadata"])["labels"])
  for (const [k, v] of Object.entries(obj(spec["nodeSelector"]))) if (labels[k] !== v) return false
  const required = obj(obj(obj(spec["affinity"])["nodeAffinity"])["requiredDuringSchedulingIgnoredDuringExecution"])
  const terms = arr(required["nodeSelectorTerms"]).map(obj)
  if (required["nodeSelectorTerms"] === undefined) return true
  return terms.some((t) => termMatches(t, node))
}
