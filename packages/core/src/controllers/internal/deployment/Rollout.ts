/**
 * A Deployment rollout's view and arithmetic (upstream `pkg/controller/deployment/util` and the
 * scaling steps of `rolling.go`/`sync.go`), kept apart from the sync steps beside it so they read
 * as upstream's: the Deployment's spec and status counts as the rollout reads them, the plan of
 * each ReplicaSet (its stored state and the size and annotations this sync gives it), the surge
 * and unavailability budgets resolved from ints or percentages, how far a new ReplicaSet may
 * grow, which old ReplicaSets shrink and by how much, how a scaling event spreads over
 * ReplicaSets mid-rollout, and the revision history kept on a ReplicaSet that is rolled back to.
 *
 * Pod counts are bounded conservatively from a ReplicaSet's spec and status (see `podBound`,
 * `availableBound`), so the budgets hold for pods even while a ReplicaSet has not yet acted on
 * its newest size.
 */
import { Either } from "effect"
import * as IntOrString from "../../../model/IntOrString.js"
import type * as Conditions from "../../../object/Conditions.js"
import { asArray, asFiniteNumber, asObject, type JsonObject, stableJson } from "../../../object/Json.js"
import { annotationsOf, creationMs, generationOf, isTerminating, nameOf, namespaceOrUndefined, uidOf } from "../../../object/Metadata.js"

type Condition = Conditions.Condition

/** A ReplicaSet as the arithmetic sees it: its planned size and what its status reports. */
export interface Sized {
  readonly name: string
  readonly createdMs: number
  /** `spec.replicas` as planned so far in this sync. */
  readonly replicas: number
  readonly statusReplicas: number
  readonly available: number
}

/** Sum of `f` over `xs`. */
export const sum = <A>(xs: ReadonlyArray<A>, f: (a: A) => number): number => xs.reduce((n, x) => n + f(x), 0)

/** Oldest first (upstream's ReplicaSetsByCreationTimestamp, names breaking ties). */
export const byCreation = (a: Sized, b: Sized): number => a.createdMs - b.createdMs || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

/**
 * The pods a ReplicaSet may have now: its size, or more while it has not yet acted on a
 * scale-down (its status still counts them). Upstream counts `spec.replicas` alone.
 */
export const podBound = (rs: Sized): number => Math.max(rs.replicas, rs.statusReplicas)

/**
 * The pods of a ReplicaSet surely available once it has acted on its size: pods beyond the size
 * are about to be deleted. Upstream counts `status.availableReplicas` alone.
 */
export const availableBound = (rs: Sized, size = rs.replicas): number => Math.min(rs.available, size)

/** The strategy fields the arithmetic reads. */
export interface Strategy {
  readonly type: string
  readonly maxSurge?: IntOrString.IntOrString | undefined
  readonly maxUnavailable?: IntOrString.IntOrString | undefined
}

/** Kubernetes' default `maxSurge` and `maxUnavailable`. */
export const defaultBudget = "25%"

// The API validates both fields, so a value that does not resolve cannot be stored; 0 is a
// harmless reading if one ever is.
const scaled = (value: IntOrString.IntOrString | undefined, total: number, roundUp: boolean): number =>
  Either.getOrElse(IntOrString.scaledValue(value ?? defaultBudget, total, roundUp), () => 0)

/**
 * The surge and unavailability allowed for `desired` replicas (upstream's ResolveFenceposts):
 * surge rounds up and unavailability down, so a rollout always progresses; when both come to 0,
 * one pod may be unavailable (the API should refuse both 0, this keeps the rollout moving anyway).
 */
export const fenceposts = (strategy: Strategy, desired: number): { readonly surge: number; readonly unavailable: number } => {
  const surge = scaled(strategy.maxSurge, desired, true)
  const unavailable = scaled(strategy.maxUnavailable, desired, false)
  return surge === 0 && unavailable === 0 ? { surge, unavailable: 1 } : { surge, unavailable }
}

/** How many pods above `desired` may exist (0 unless RollingUpdate). */
export const maxSurge = (strategy: Strategy, desired: number): number =>
  strategy.type === "RollingUpdate" ? fenceposts(strategy, desired).surge : 0

/** How many of `desired` pods may be unavailable (0 unless RollingUpdate; never above `desired`). */
export const maxUnavailable = (strategy: Strategy, desired: number): number =>
  strategy.type !== "RollingUpdate" || desired === 0 ? 0 : Math.min(desired, fenceposts(strategy, desired).unavailable)

/**
 * The size a rolling update may give its new ReplicaSet (upstream's NewRSNewReplicas): grow into
 * the surge room left by `currentTotal` pods, never past `desired`. Recreate takes `desired` at once.
 */
export const newReplicas = (strategy: Strategy, desired: number, currentTotal: number, current: number): number => {
  if (strategy.type !== "RollingUpdate") return desired
  const maxTotal = desired + scaled(strategy.maxSurge, desired, true)
  if (currentTotal >= maxTotal) return current
  return current + Math.min(maxTotal - currentTotal, desired - current)
}

/**
 * The change one ReplicaSet takes of a scaling event (upstream's GetReplicaSetProportion with
 * getReplicaSetFraction): its size scaled by new max size / max size when it was last scaled
 * (`annotatedMax`, the `max-replicas` annotation; else `fallbackMax`, the Deployment's replicas),
 * bounded by what is left to add or remove.
 */
export const proportion = (input: {
  readonly replicas: number
  readonly desired: number
  readonly maxSurge: number
  readonly annotatedMax: number | undefined
  readonly fallbackMax: number
  readonly toAdd: number
  readonly added: number
}): number => {
  const { replicas, desired, toAdd, added } = input
  if (replicas === 0 || toAdd === 0 || toAdd === added) return 0
  let fraction: number
  if (desired === 0) fraction = -replicas
  else {
    const before = input.annotatedMax !== undefined && input.annotatedMax !== 0 ? input.annotatedMax : input.fallbackMax
    // Go's math.Round: halves away from zero (sizes are positive here).
    fraction = before === 0 ? 0 : Math.round((replicas * (desired + input.maxSurge)) / before) - replicas
  }
  const allowed = toAdd - added
  return toAdd > 0 ? Math.min(fraction, allowed) : Math.max(fraction, allowed)
}

/** Upstream's limit on the `revision-history` annotation, in characters. */
export const revisionHistoryLimitChars = 2000

/**
 * The `revision-history` annotation after `oldRevision` is superseded (a rollback to this
 * ReplicaSet): appended, dropping the oldest entries to stay within `limitChars`; undefined when
 * even that cannot fit (upstream then leaves the annotation as it was).
 */
export const appendRevisionHistory = (history: string | undefined, oldRevision: string, limitChars = revisionHistoryLimitChars): string | undefined => {
  if (history === undefined || history === "") return oldRevision
  const revisions = history.split(",")
  let total = history.length + oldRevision.length + 1
  let start = 0
  while (total > limitChars && start < revisions.length) {
    total -= revisions[start]!.length + 1
    start++
  }
  return total <= limitChars ? [...revisions.slice(start), oldRevision].join(",") : undefined
}

/**
 * The scale-down steps of a rolling update (upstream's reconcileOldReplicaSets), oldest
 * ReplicaSets first: at most `replicas - minAvailable - unavailable new pods` in all; unhealthy
 * old replicas go first (they cost no availability and would block the rollout, kubernetes#16737),
 * then healthy ones while more than `replicas - maxUnavailable` stay available. Each step is a
 * ReplicaSet and its next size; one ReplicaSet may take two steps.
 */
export const rollingScaleDown = <R extends Sized>(
  strategy: Strategy,
  desired: number,
  all: ReadonlyArray<R>,
  activeOlds: ReadonlyArray<R>,
  newRS: R
): ReadonlyArray<readonly [R, number]> => {
  if (sum(activeOlds, (rs) => rs.replicas) === 0) return []
  const minAvailable = desired - maxUnavailable(strategy, desired)
  const maxScaledDown = sum(all, (rs) => rs.replicas) - minAvailable - (newRS.replicas - availableBound(newRS))
  if (maxScaledDown <= 0) return []
  const size = new Map<R, number>(all.map((rs) => [rs, rs.replicas]))
  const steps: Array<readonly [R, number]> = []
  const step = (rs: R, to: number) => {
    size.set(rs, to)
    steps.push([rs, to])
  }
  const oldest = [...activeOlds].sort(byCreation)
  let cleaned = 0
  for (const rs of oldest) {
    if (cleaned >= maxScaledDown) break
    const unhealthy = size.get(rs)! - availableBound(rs, size.get(rs)!)
    if (size.get(rs) === 0 || unhealthy <= 0) continue
    const n = Math.min(maxScaledDown - cleaned, unhealthy)
    step(rs, size.get(rs)! - n)
    cleaned += n
  }
  const available = sum(all, (rs) => availableBound(rs, size.get(rs)!))
  if (available <= minAvailable) return steps
  const budget = available - minAvailable
  let scaledDown = 0
  for (const rs of oldest) {
    if (scaledDown >= budget) break
    const now = size.get(rs)!
    if (now === 0) continue
    const n = Math.min(now, budget - scaledDown)
    step(rs, now - n)
    scaledDown += n
  }
  return steps
}

/**
 * Upstream's FindActiveOrLatest: the one ReplicaSet with replicas (or, with none, the new one or
 * else the newest), which then takes the Deployment's whole size; undefined when several are active.
 */
export const activeOrLatest = <R extends Sized>(newRS: R | undefined, olds: ReadonlyArray<R>): R | undefined => {
  if (newRS === undefined && olds.length === 0) return undefined
  const newestFirst = [...olds].sort(byCreation).reverse()
  const active = [...newestFirst, ...(newRS ? [newRS] : [])].filter((rs) => rs.replicas > 0)
  if (active.length === 0) return newRS ?? newestFirst[0]
  return active.length === 1 ? active[0] : undefined
}

/**
 * The sizes of a scaling event during a rolling update (upstream's proportional scaling in
 * `scale`): the room `replicas + maxSurge - current` (negative when shrinking) is shared among the
 * active ReplicaSets in proportion to their sizes, largest first (newer first among equals when
 * growing, older first when shrinking), the rounding leftover to the largest.
 */
export const proportionalSizes = <R extends Sized>(
  active: ReadonlyArray<R>,
  options: { readonly desired: number; readonly maxSurge: number; readonly fallbackMax: number; readonly annotatedMax: (rs: R) => number | undefined }
): { readonly sizes: ReadonlyArray<readonly [R, number]>; readonly operation: "up" | "down" | "" } => {
  const allowed = options.desired > 0 ? options.desired + options.maxSurge : 0
  const toAdd = allowed - sum(active, (rs) => rs.replicas)
  const ordered = [...active].sort((a, b) => b.replicas - a.replicas || (toAdd > 0 ? byCreation(b, a) : byCreation(a, b)))
  let added = 0
  const sizes = ordered.map((rs) => {
    const p = proportion({ replicas: rs.replicas, desired: options.desired, maxSurge: options.maxSurge, annotatedMax: options.annotatedMax(rs), fallbackMax: options.fallbackMax, toAdd, added })
    added += p
    return [rs, rs.replicas + p] as const
  })
  const withLeftover = sizes.map(([rs, size], i) => [rs, i === 0 && toAdd !== 0 ? Math.max(0, size + toAdd - added) : size] as const)
  return { sizes: withLeftover, operation: toAdd > 0 ? "up" : toAdd < 0 ? "down" : "" }
}

// progressDeadlineSeconds = MaxInt32 means "no deadline" upstream.
const noDeadline = 2147483647

/** The label telling a Deployment's ReplicaSets (and their pods) apart. */
export const PodTemplateHashLabel = "pod-template-hash"

/** A field as a finite number, else `fallback`. */
const num = (v: unknown, fallback = 0): number => asFiniteNumber(v) ?? fallback

/** A revision annotation's number (0 when absent or not a number). */
export const parseRevision = (v: string | undefined): number => {
  const n = Number(v)
  return v !== undefined && /^\d+$/.test(v) && Number.isSafeInteger(n) ? n : 0
}

/** A template without the `pod-template-hash` label (what a Deployment's template is compared as). */
const withoutHash = (template: unknown): unknown => {
  const t = asObject(template)
  const m = asObject(t["metadata"])
  const { [PodTemplateHashLabel]: _hash, ...labels } = asObject(m["labels"])
  return { ...t, metadata: { ...m, labels: Object.keys(labels).length > 0 ? labels : undefined } }
}

/** Whether two pod templates are equal apart from the `pod-template-hash` label (upstream's EqualIgnoreHash). */
export const equalIgnoreHash = (a: unknown, b: unknown): boolean => stableJson(withoutHash(a)) === stableJson(withoutHash(b))

/** A ReplicaSet as a sync sees and plans it (the `Sized` fields are what the arithmetic reads). */
export interface Planned extends Sized {
  /** The stored object, or the draft of one this sync creates. */
  readonly object: JsonObject
  readonly exists: boolean
  readonly uid: string
  readonly template: unknown
  readonly storedReplicas: number
  readonly storedAnnotations: Readonly<Record<string, string>>
  readonly storedMinReadySeconds: number
  readonly ready: number
  readonly generation: number
  readonly observedGeneration: number
  readonly deleting: boolean
  readonly failure: Condition | undefined
  replicas: number
  annotations: Record<string, string>
  minReadySeconds: number
  events: Array<string>
}

/** The plan of a stored ReplicaSet, starting from what it is. */
export const planned = (o: JsonObject): Planned => {
  const s = asObject(o["spec"])
  const st = asObject(o["status"])
  const annotations = { ...annotationsOf(o) }
  return {
    object: o,
    exists: true,
    name: nameOf(o),
    uid: uidOf(o),
    createdMs: creationMs(o) ?? 0,
    template: s["template"],
    storedReplicas: num(s["replicas"], 1),
    storedAnnotations: annotations,
    storedMinReadySeconds: num(s["minReadySeconds"]),
    statusReplicas: num(st["replicas"]),
    ready: num(st["readyReplicas"]),
    available: num(st["availableReplicas"]),
    generation: generationOf(o),
    observedGeneration: num(st["observedGeneration"]),
    deleting: isTerminating(o),
    failure: (asArray(st["conditions"]) as ReadonlyArray<Condition>).find((c) => c.type === "ReplicaFailure"),
    replicas: num(s["replicas"], 1),
    annotations: { ...annotations },
    minReadySeconds: num(s["minReadySeconds"]),
    events: []
  }
}


/** What a Deployment's spec says, with upstream's defaults for anything missing. */
export interface Spec {
  readonly name: string
  readonly namespace: string | undefined
  readonly generation: number
  readonly replicas: number
  readonly strategy: Strategy
  readonly minReadySeconds: number
  readonly revisionHistoryLimit: number | undefined
  readonly paused: boolean
  readonly progressDeadlineSeconds: number | undefined
  readonly template: JsonObject
  readonly selector: unknown
  readonly annotations: Readonly<Record<string, string>>
}

/** A Deployment's spec as the rollout reads it. */
export const specOf = (d: JsonObject): Spec => {
  const s = asObject(d["spec"])
  const strategy = asObject(s["strategy"])
  const rolling = asObject(strategy["rollingUpdate"])
  const type = String(strategy["type"] ?? "RollingUpdate")
  return {
    name: nameOf(d),
    namespace: namespaceOrUndefined(d),
    generation: generationOf(d),
    replicas: num(s["replicas"], 1),
    strategy: {
      type,
      maxSurge: rolling["maxSurge"] as Strategy["maxSurge"],
      maxUnavailable: rolling["maxUnavailable"] as Strategy["maxUnavailable"]
    },
    minReadySeconds: num(s["minReadySeconds"]),
    revisionHistoryLimit: typeof s["revisionHistoryLimit"] === "number" ? s["revisionHistoryLimit"] : undefined,
    paused: s["paused"] === true,
    progressDeadlineSeconds: typeof s["progressDeadlineSeconds"] === "number" ? s["progressDeadlineSeconds"] : undefined,
    template: asObject(s["template"]),
    selector: s["selector"],
    annotations: { ...annotationsOf(d) }
  }
}

/** Whether the Deployment has a progress deadline (MaxInt32 means none). */
export const hasProgressDeadline = (spec: Spec): boolean => spec.progressDeadlineSeconds !== undefined && spec.progressDeadlineSeconds !== noDeadline

/** The counts of a Deployment status. */
export interface Counts {
  readonly observedGeneration: number
  readonly replicas: number
  readonly updatedReplicas: number
  readonly readyReplicas: number
  readonly availableReplicas: number
  readonly unavailableReplicas: number
}

/** The counts of a stored status (absent ones are 0). */
export const countsOf = (status: JsonObject): Counts => ({
  observedGeneration: num(status["observedGeneration"]),
  replicas: num(status["replicas"]),
  updatedReplicas: num(status["updatedReplicas"]),
  readyReplicas: num(status["readyReplicas"]),
  availableReplicas: num(status["availableReplicas"]),
  unavailableReplicas: num(status["unavailableReplicas"])
})

/** Whether the rollout is done: every replica updated and available, the newest spec observed. */
export const complete = (spec: Spec, c: Counts): boolean =>
  c.updatedReplicas === spec.replicas && c.replicas === spec.replicas && c.availableReplicas === spec.replicas && c.observedGeneration >= spec.generation

/** Whether `next` shows progress over `prev` (more updated, fewer old, more ready or available). */
export const progressed = (prev: Counts, next: Counts): boolean =>
  next.updatedReplicas > prev.updatedReplicas ||
  next.replicas - next.updatedReplicas < prev.replicas - prev.updatedReplicas ||
  next.readyReplicas > prev.readyReplicas ||
  next.availableReplicas > prev.availableReplicas
