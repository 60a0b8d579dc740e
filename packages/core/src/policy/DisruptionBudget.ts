/**
 * Pod disruption budgets as pure arithmetic, shared by the PDB status controller and the
 * `pods/eviction` subresource (upstream: pkg/controller/disruption and the eviction REST storage):
 * which pods a budget covers, how many pods it expects and how many must stay healthy
 * (`minAvailable` / `maxUnavailable`, integers or percentages rounded up), which approved
 * evictions still count as disrupted (`status.disruptedPods`, for 2 minutes), how many
 * disruptions are allowed now, and whether one eviction may go ahead.
 *
 *   pods ─▶ expected(spec, pods, scales) ─▶ disrupted(status, pods, now) ─▶ healthy ─▶ status
 *   eviction(pod, budgets) ─▶ delete | decrement then delete | 429 | 500
 */
import { Either } from "effect"
import type { JsonObject } from "../api/Registry.js"
import * as Conditions from "../object/Conditions.js"
import * as Pods from "../object/Pods.js"
import * as IntOrString from "../model/IntOrString.js"
import * as LabelSelector from "../model/LabelSelector.js"
import { asArray, asObject } from "../object/Json.js"
import { controllerRefOf, labelsOf, metadataOf, nameOf, rfc3339, timeMs } from "../object/Metadata.js"


/** How long an approved eviction keeps its pod out of the healthy count (upstream's DeletionTimeout). */
export const deletionTimeoutMs = 2 * 60 * 1000

/** Refuse evictions once this many approvals wait for the controller (upstream's MaxDisruptedPodSize). */
export const maxDisruptedPods = 2000

/** The condition the controller keeps on a budget. */
export const DisruptionAllowed = "DisruptionAllowed"

/** The message of a refused eviction. */
export const tooManyRequestsMessage = "Cannot evict pod as it would violate the pod's disruption budget."

/** The StatusCause type naming a budget in a refused eviction. */
export const DisruptionBudgetCause = "DisruptionBudget"

const time = timeMs
/** Whether a pod is healthy for a budget: Ready (upstream's IsPodReady). */
export const isHealthy = Pods.isReady

const selectorOf = (pdb: JsonObject) => asObject(pdb["spec"])["selector"] as LabelSelector.LabelSelector | undefined

/**
 * Whether the budget's status controller counts this pod: same namespace and selected (`{}`
 * selects every pod of the namespace, no selector none).
 */
export const covers = (pdb: JsonObject, pod: JsonObject): boolean =>
  metadataOf(pdb)["namespace"] === metadataOf(pod)["namespace"] && LabelSelector.matches(selectorOf(pdb), labelsOf(pod))

/**
 * Whether the budget guards this pod against eviction: as `covers`, except that an empty
 * selector guards nothing (upstream's eviction: "a PDB with a nil or empty selector matches
 * nothing").
 */
export const guards = (pdb: JsonObject, pod: JsonObject): boolean => {
  const selector = selectorOf(pdb)
  return selector !== undefined && !LabelSelector.isEmpty(selector) && covers(pdb, pod)
}

/** The scale of a pod's controller, found by the caller (Deployment, ReplicaSet, StatefulSet, …). */
export interface ControllerScale {
  readonly uid: string
  readonly replicas: number
}

/** What a budget expects of its pods. */
export interface Expected {
  /** The pods there should be (the controllers' replicas, or the pods themselves). */
  readonly expectedPods: number
  /** The pods that must stay healthy. */
  readonly desiredHealthy: number
  /** Selected pods without a controller (they cannot be counted against a scale). */
  readonly unmanaged: ReadonlyArray<string>
}

/**
 * The sum of the scales of the pods' controllers, each counted once (upstream's
 * getExpectedScale); pods without a controller are unmanaged and skipped; a controller that
 * cannot be found is an error.
 */
export const expectedScale = (
  pods: ReadonlyArray<JsonObject>,
  scaleOf: (ref: Record<string, unknown>, namespace: string) => ControllerScale | undefined
): Either.Either<{ readonly expectedPods: number; readonly unmanaged: ReadonlyArray<string> }, string> => {
  // Scales by the uid of the scale owner (a Deployment, not its ReplicaSets), each counted once.
  const scales = new Map<string, number>()
  const resolved = new Map<string, ControllerScale>()
  const unmanaged: Array<string> = []
  for (const pod of pods) {
    const ref = controllerRefOf(pod)
    if (ref === undefined) {
      unmanaged.push(nameOf(pod))
      continue
    }
    const refUid = String(ref["uid"] ?? "")
    const found = resolved.get(refUid) ?? scaleOf(ref, String(metadataOf(pod)["namespace"] ?? ""))
    if (found === undefined) return Either.left(`found no controllers for pod "${nameOf(pod)}"`)
    resolved.set(refUid, found)
    scales.set(found.uid, found.replicas)
  }
  let total = 0
  for (const n of scales.values()) total += n
  return Either.right({ expectedPods: total, unmanaged })
}

/**
 * The expected pods and the healthy pods the budget requires (upstream's getExpectedPodCount):
 * with `maxUnavailable`, expected is the controllers' scale and desired is expected minus
 * `maxUnavailable` (a percentage of expected, rounded up); with an integer `minAvailable`,
 * expected is the number of selected pods and desired is `minAvailable`; with a percentage,
 * expected is the scale and desired is that percentage of it, rounded up.
 */
export const expected = (
  pdb: JsonObject,
  pods: ReadonlyArray<JsonObject>,
  scaleOf: (ref: Record<string, unknown>, namespace: string) => ControllerScale | undefined
): Either.Either<Expected, string> => {
  const spec = asObject(pdb["spec"])
  const maxUnavailable = spec["maxUnavailable"] as IntOrString.IntOrString | undefined
  const minAvailable = spec["minAvailable"] as IntOrString.IntOrString | undefined
  if (maxUnavailable !== undefined) {
    return Either.flatMap(expectedScale(pods, scaleOf), ({ expectedPods, unmanaged }) =>
      Either.map(IntOrString.scaledValue(maxUnavailable, expectedPods, true), (n) => ({ expectedPods, desiredHealthy: Math.max(0, expectedPods - n), unmanaged }))
    )
  }
  if (typeof minAvailable === "number") return Either.right({ expectedPods: pods.length, desiredHealthy: minAvailable, unmanaged: [] })
  if (typeof minAvailable === "string") {
    return Either.flatMap(expectedScale(pods, scaleOf), ({ expectedPods, unmanaged }) =>
      Either.map(IntOrString.scaledValue(minAvailable, expectedPods, true), (desiredHealthy) => ({ expectedPods, desiredHealthy, unmanaged }))
    )
  }
  return Either.right({ expectedPods: 0, desiredHealthy: 0, unmanaged: [] })
}

/** The approved evictions that still count (upstream's buildDisruptedPodMap). */
export interface Disrupted {
  /** Pods approved for eviction less than 2 minutes ago and not yet being deleted, by name. */
  readonly pods: Readonly<Record<string, string>>
  /** Pods approved more than 2 minutes ago that were never deleted (worth a warning). */
  readonly notDeleted: ReadonlyArray<string>
  /** When the oldest kept entry expires (look again then). */
  readonly recheckAtMs: number | undefined
}

/** Prune `status.disruptedPods` at `nowMs`: entries of deleted, deleting or overdue pods go. */
export const disrupted = (pdb: JsonObject, pods: ReadonlyArray<JsonObject>, nowMs: number): Disrupted => {
  const recorded = asObject(asObject(pdb["status"])["disruptedPods"])
  const kept: Record<string, string> = {}
  const notDeleted: Array<string> = []
  let recheckAtMs: number | undefined
  for (const pod of pods) {
    if (metadataOf(pod)["deletionTimestamp"] !== undefined) continue
    const name = nameOf(pod)
    const at = time(recorded[name])
    if (at === undefined) continue
    const expires = at + deletionTimeoutMs
    if (expires < nowMs) notDeleted.push(name)
    else {
      kept[name] = String(recorded[name])
      recheckAtMs = recheckAtMs === undefined ? expires : Math.min(recheckAtMs, expires)
    }
  }
  return { pods: kept, notDeleted, recheckAtMs }
}

/** The healthy pods: Ready, not being deleted, not approved for eviction (upstream's countHealthyPods). */
export const currentHealthy = (pods: ReadonlyArray<JsonObject>, disruptedPods: Readonly<Record<string, string>>, nowMs: number): number => {
  let n = 0
  for (const pod of pods) {
    if (metadataOf(pod)["deletionTimestamp"] !== undefined) continue
    const at = time(disruptedPods[nameOf(pod)])
    if (at !== undefined && at + deletionTimeoutMs > nowMs) continue
    if (isHealthy(pod)) n++
  }
  return n
}

/** A budget condition (a metav1.Condition: it also carries the generation it describes). */
type Condition = Conditions.Condition & { readonly observedGeneration?: number }

// Conditions.set keeps the transition-time rules; a budget's condition also moves with the generation.
const setCondition = (conditions: ReadonlyArray<Condition>, next: Omit<Condition, "lastTransitionTime" | "lastUpdateTime">, now: string): ReadonlyArray<Condition> => {
  const { observedGeneration, ...rest } = next
  const set = Conditions.set(conditions, rest, now) as ReadonlyArray<Condition>
  const i = set.findIndex((c) => c.type === next.type)
  if (set[i]!.observedGeneration === observedGeneration) return set
  return set.map((c, j): Condition => (j !== i ? c : observedGeneration === undefined ? c : { ...c, observedGeneration }))
}

/**
 * `conditions` with `DisruptionAllowed` set for `disruptionsAllowed` (upstream's
 * UpdateDisruptionAllowedCondition): True/SufficientPods when some are allowed, else
 * False/InsufficientPods; the transition time moves only when the status does.
 */
export const withAllowedCondition = (conditions: ReadonlyArray<Condition>, disruptionsAllowed: number, observedGeneration: number, now: string): ReadonlyArray<Condition> =>
  setCondition(
    conditions,
    disruptionsAllowed > 0
      ? { type: DisruptionAllowed, status: "True", reason: "SufficientPods", message: "", observedGeneration }
      : { type: DisruptionAllowed, status: "False", reason: "InsufficientPods", message: "", observedGeneration },
    now
  )

/** The budget's status from what was counted (upstream's updatePdbStatus). */
export const status = (
  pdb: JsonObject,
  counted: { readonly currentHealthy: number; readonly desiredHealthy: number; readonly expectedPods: number; readonly disruptedPods: Readonly<Record<string, string>> },
  nowMs: number
): JsonObject => {
  const old = asObject(pdb["status"])
  const generation = Number(metadataOf(pdb)["generation"] ?? 0)
  const allowed = counted.expectedPods <= 0 || counted.currentHealthy - counted.desiredHealthy <= 0 ? 0 : counted.currentHealthy - counted.desiredHealthy
  return {
    ...(Object.keys(counted.disruptedPods).length > 0 ? { disruptedPods: counted.disruptedPods } : {}),
    disruptionsAllowed: allowed,
    currentHealthy: counted.currentHealthy,
    desiredHealthy: counted.desiredHealthy,
    expectedPods: counted.expectedPods,
    observedGeneration: generation,
    conditions: withAllowedCondition(asArray(old["conditions"]) as ReadonlyArray<Condition>, allowed, generation, rfc3339(nowMs))
  }
}

/** The status of a budget whose counts could not be computed (upstream's failSafe): nothing is allowed. */
export const failSafe = (pdb: JsonObject, message: string, nowMs: number): JsonObject => {
  const old = asObject(pdb["status"])
  const generation = Number(metadataOf(pdb)["generation"] ?? 0)
  return {
    ...old,
    disruptionsAllowed: 0,
    currentHealthy: Number(old["currentHealthy"] ?? 0),
    desiredHealthy: Number(old["desiredHealthy"] ?? 0),
    expectedPods: Number(old["expectedPods"] ?? 0),
    observedGeneration: generation,
    conditions: setCondition(
      asArray(old["conditions"]) as ReadonlyArray<Condition>,
      { type: DisruptionAllowed, status: "False", reason: "SyncFailed", message, observedGeneration: generation },
      rfc3339(nowMs)
    )
  }
}

/** What the eviction subresource does with one request. */
export type EvictionDecision =
  /** Delete without consulting a budget (terminal, pending or deleting pod, or no budget). */
  | { readonly _tag: "Delete"; readonly pinResourceVersion: boolean }
  /** Delete an unhealthy pod the budget does not protect, pinned to the pod's resourceVersion. */
  | { readonly _tag: "DeleteUnhealthy"; readonly budget: string }
  /** Write this budget status (compare-and-swap), then delete. */
  | { readonly _tag: "Decrement"; readonly budget: JsonObject; readonly status: JsonObject }
  /** Refuse with 429. */
  | { readonly _tag: "TooManyRequests"; readonly budget: string; readonly cause: string; readonly retryAfterSeconds: number }
  /** Refuse with 403. */
  | { readonly _tag: "Forbidden"; readonly budget: string; readonly reason: string }
  /** More than one budget guards the pod: 500, as upstream. */
  | { readonly _tag: "MultipleBudgets" }

/** Whether a pod may be deleted without consulting a budget (upstream's canIgnorePDB). */
export const canIgnoreBudget = (pod: JsonObject): boolean => {
  const phase = asObject(pod["status"])["phase"] ?? "Pending"
  return phase === "Succeeded" || phase === "Failed" || phase === "Pending" || metadataOf(pod)["deletionTimestamp"] !== undefined
}

/**
 * The eviction of `pod` given the budgets of its namespace (pure; upstream's EvictionREST.Create
 * and checkAndDecrement). `dryRun` decrements without recording the pod as disrupted.
 */
export const eviction = (pod: JsonObject, budgets: ReadonlyArray<JsonObject>, nowMs: number, dryRun = false): EvictionDecision => {
  if (canIgnoreBudget(pod)) {
    const phase = asObject(pod["status"])["phase"] ?? "Pending"
    // A terminal or deleting pod cannot race a budget; a pending one could turn Ready meanwhile.
    return { _tag: "Delete", pinResourceVersion: !(phase === "Succeeded" || phase === "Failed" || metadataOf(pod)["deletionTimestamp"] !== undefined) }
  }
  const matching = budgets.filter((b) => guards(b, pod))
  if (matching.length > 1) return { _tag: "MultipleBudgets" }
  const pdb = matching[0]
  if (pdb === undefined) return { _tag: "Delete", pinResourceVersion: true }
  const name = nameOf(pdb)
  const st = asObject(pdb["status"])
  const currentHealthy = Number(st["currentHealthy"] ?? 0)
  const desiredHealthy = Number(st["desiredHealthy"] ?? 0)
  if (!isHealthy(pod)) {
    if (asObject(pdb["spec"])["unhealthyPodEvictionPolicy"] === "AlwaysAllow") return { _tag: "DeleteUnhealthy", budget: name }
    if (currentHealthy >= desiredHealthy && desiredHealthy > 0) return { _tag: "DeleteUnhealthy", budget: name }
  }
  const generation = Number(metadataOf(pdb)["generation"] ?? 0)
  if (Number(st["observedGeneration"] ?? 0) < generation) {
    return { _tag: "TooManyRequests", budget: name, cause: `The disruption budget ${name} is still being processed by the server.`, retryAfterSeconds: 10 }
  }
  const allowed = Number(st["disruptionsAllowed"] ?? 0)
  if (allowed < 0) return { _tag: "Forbidden", budget: name, reason: "pdb disruptions allowed is negative" }
  const recorded = asObject(st["disruptedPods"])
  if (Object.keys(recorded).length > maxDisruptedPods) {
    return { _tag: "Forbidden", budget: name, reason: "DisruptedPods map too big - too many evictions not confirmed by PDB controller" }
  }
  if (allowed === 0) {
    return { _tag: "TooManyRequests", budget: name, cause: `The disruption budget ${name} needs ${desiredHealthy} healthy pods and has ${currentHealthy} currently`, retryAfterSeconds: 0 }
  }
  const left = allowed - 1
  const conditions = asArray(st["conditions"]) as ReadonlyArray<Condition>
  return {
    _tag: "Decrement",
    budget: pdb,
    status: {
      ...st,
      disruptionsAllowed: left,
      ...(left === 0 ? { conditions: withAllowedCondition(conditions, 0, Number(st["observedGeneration"] ?? 0), rfc3339(nowMs)) } : {}),
      ...(dryRun ? {} : { disruptedPods: { ...recorded, [nameOf(pod)]: rfc3339(nowMs) } })
    }
  }
}
