/**
 * Taints and tolerations, as Kubernetes matches them (upstream `v1helper`): a toleration tolerates
 * a taint when the keys match (an empty key with `Exists` tolerates every taint), the effect
 * matches (an empty effect matches all), and either the operator is `Exists` or the values are
 * equal (`Equal`, the default). One rule for the scheduler's filter, the DaemonSet controller and
 * NoExecute eviction.
 */
import type { JsonObject } from "../object/Json.js"
import { asArray, asObject, asString } from "../object/Json.js"


/** A taint as it appears in `node.spec.taints` (only key, value and effect matter here). */
export interface TaintLike {
  readonly key?: unknown
  readonly value?: unknown
  readonly effect?: unknown
}

/** A toleration as it appears in `pod.spec.tolerations`. */
export interface TolerationLike {
  readonly key?: unknown
  readonly operator?: unknown
  readonly value?: unknown
  readonly effect?: unknown
  readonly tolerationSeconds?: unknown
}

/**
 * Whether one toleration tolerates one taint, as Kubernetes' `Toleration.ToleratesTaint`: an
 * empty effect matches every effect, an empty key (with `Exists`) every key; `Equal` (the
 * default operator) also compares values.
 */
export const toleratesTaint = (toleration: TolerationLike, taint: TaintLike): boolean => {
  const effect = asString(toleration.effect)
  if (effect !== "" && effect !== asString(taint.effect)) return false
  const key = asString(toleration.key)
  if (key !== "" && key !== asString(taint.key)) return false
  switch (asString(toleration.operator)) {
    case "":
    case "Equal":
      return asString(toleration.value) === asString(taint.value)
    case "Exists":
      return true
    default:
      return false
  }
}

/** Whether any of `tolerations` tolerates `taint`. */
export const tolerates = (tolerations: ReadonlyArray<TolerationLike>, taint: TaintLike): boolean =>
  tolerations.some((t) => toleratesTaint(t, taint))

/**
 * The first taint passing `filter` that no toleration tolerates, or undefined (upstream's
 * `FindMatchingUntoleratedTaint`).
 */
export const untoleratedTaint = (
  taints: ReadonlyArray<TaintLike>,
  tolerations: ReadonlyArray<TolerationLike>,
  filter: (taint: TaintLike) => boolean = () => true
): TaintLike | undefined => taints.find((t) => filter(t) && !tolerates(tolerations, t))

/** A node's taints. */
export const taintsOf = (node: JsonObject): ReadonlyArray<TaintLike> => asArray(asObject(node["spec"])["taints"]).map(asObject)

/** A pod's (or pod spec's) tolerations. */
export const tolerationsOf = (podSpec: Record<string, unknown>): ReadonlyArray<TolerationLike> => asArray(podSpec["tolerations"]).map(asObject)
