/**
 * Taints and tolerations, as Kubernetes matches them: a toleration tolerates a taint when the
 * keys match (an empty key with `Exists` tolerates everything), the effect matches (an empty
 * effect matches all), and either the operator is `Exists` or the values are equal (`Equal`, the
 * default). Used by the scheduler's filter, the DaemonSet controller and the NoExecute eviction.
 */

/** A node taint. */
export interface Taint {
  readonly key?: unknown
  readonly value?: unknown
  readonly effect?: unknown
  readonly timeAdded?: unknown
}

/** A pod toleration. */
export interface Toleration {
  readonly key?: unknown
  readonly operator?: unknown
  readonly value?: unknown
  readonly effect?: unknown
  readonly tolerationSeconds?: unknown
}

/** Whether `toleration` tolerates `taint`. */
export const matches = (toleration: Toleration, taint: Taint): boolean => {
  const effect = toleration.effect ?? ""
  if (effect !== "" && effect !== taint.effect) return false
  const key = toleration.key ?? ""
  const operator = toleration.operator ?? "Equal"
  if (key === "") return operator === "Exists"
  if (key !== taint.key) return false
  if (operator === "Exists") return true
  return (toleration.value ?? "") === (taint.value ?? "")
}

/** Whether some toleration tolerates `taint`. */
export const tolerates = (tolerations: ReadonlyArray<Toleration>, taint: Taint): boolean => tolerations.some((t) => matches(t, taint))

/** The first taint with one of `effects` that no toleration tolerates, if any. */
export const untolerated = (
  taints: ReadonlyArray<Taint>,
  tolerations: ReadonlyArray<Toleration>,
  effects: ReadonlyArray<string> = ["NoSchedule", "NoExecute"]
): Taint | undefined => taints.find((taint) => effects.includes(String(taint.effect)) && !tolerates(tolerations, taint))
