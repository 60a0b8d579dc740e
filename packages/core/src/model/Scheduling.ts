/**
 * The `scheduling.k8s.io/v1` `PriorityClass` kind: a cluster-scoped name for a pod priority
 * (`value`, an int32), whether pods without a class get it (`globalDefault`), and whether its pods
 * may preempt lower-priority ones (`preemptionPolicy`, default `PreemptLowerPriority`). The
 * Priority admission plugin turns a pod's `spec.priorityClassName` into `spec.priority`; the
 * scheduler orders and preempts by that number.
 *
 * Follows kube-apiserver: v1 defaulting, `ValidatePriorityClass` (names starting `system-` are
 * reserved for the two built-in classes, user values are at most 1,000,000,000) and
 * `ValidatePriorityClassUpdate` (value and preemptionPolicy are immutable), with its messages.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"
import { Int32 } from "./Scalars.js"

/** Whether a pod may evict lower-priority pods to make room for itself. */
export const PreemptionPolicy = Schema.Literal("PreemptLowerPriority", "Never")

/** A preemption policy. */
export type PreemptionPolicy = typeof PreemptionPolicy.Type

/** The `PriorityClass` kind (scheduling.k8s.io/v1, cluster-scoped, short name `pc`). */
export const PriorityClass = Schema.Struct({
  apiVersion: Schema.Literal("scheduling.k8s.io/v1"),
  kind: Schema.Literal("PriorityClass"),
  metadata: ObjectMeta,
  value: Int32,
  globalDefault: optional(Schema.Boolean),
  description: optional(Schema.String),
  preemptionPolicy: optional(PreemptionPolicy)
})

/** A PriorityClass object. */
export type PriorityClass = typeof PriorityClass.Type

/** The highest value a user-defined class may have (Kubernetes' `HighestUserDefinablePriority`). */
export const HighestUserDefinablePriority = 1_000_000_000

/** The value of `system-cluster-critical` (Kubernetes' `SystemCriticalPriority`). */
export const SystemCriticalPriority = 2 * HighestUserDefinablePriority

/** Class names with this prefix are reserved for the built-in classes. */
export const SystemPriorityClassPrefix = "system-"

/** The built-in class for cluster components that may move between nodes. */
export const SystemClusterCritical = "system-cluster-critical"

/** The built-in class for node components that must not move. */
export const SystemNodeCritical = "system-node-critical"

/** The priority of a pod when no class is named and none is the global default. */
export const DefaultPriorityWhenNoDefaultClassExists = 0

/** The preemption policy a class or pod has when it names none. */
export const DefaultPreemptionPolicy: PreemptionPolicy = "PreemptLowerPriority"

const systemClass = (name: string, value: number, description: string): PriorityClass => ({
  apiVersion: "scheduling.k8s.io/v1",
  kind: "PriorityClass",
  metadata: { name },
  value,
  description,
  preemptionPolicy: DefaultPreemptionPolicy
})

/** The two classes kube-apiserver creates at start-up, with its descriptions. */
export const systemPriorityClasses: ReadonlyArray<PriorityClass> = [
  systemClass(
    SystemNodeCritical,
    SystemCriticalPriority + 1000,
    "Used for system critical pods that must not be moved from their current node."
  ),
  systemClass(
    SystemClusterCritical,
    SystemCriticalPriority,
    "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."
  )
]

/**
 * Why `name`/`value`/`globalDefault` is not one of the built-in classes (Kubernetes'
 * `IsKnownSystemPriorityClass`), or undefined when it is.
 */
export const systemClassError = (name: string, value: number, globalDefault: boolean): string | undefined => {
  const known = systemPriorityClasses.find((c) => c.metadata.name === name)
  if (known === undefined) return `${name} is not a known system priority class`
  if (known.value !== value) return `value of ${name} PriorityClass must be ${known.value}`
  if (globalDefault) return `globalDefault of ${name} PriorityClass must be false`
  return undefined
}

/** v1 defaulting: a class without a preemption policy preempts lower priorities. */
export const defaults = <O extends Record<string, unknown>>(o: O): O =>
  o["preemptionPolicy"] === undefined ? { ...o, preemptionPolicy: DefaultPreemptionPolicy } : o

/** Errors of a class beyond its schema, worded like kube-apiserver (create and update). */
export const validatePriorityClass = (pc: PriorityClass): ReadonlyArray<FieldError.FieldError> => {
  const name = pc.metadata.name ?? ""
  if (name.startsWith(SystemPriorityClassPrefix)) {
    const error = systemClassError(name, pc.value, pc.globalDefault === true)
    return error === undefined
      ? []
      : [FieldError.forbidden("metadata.name", `priority class names with '${SystemPriorityClassPrefix}' prefix are reserved for system use only. error: ${error}`)]
  }
  if (pc.value > HighestUserDefinablePriority) {
    return [FieldError.forbidden("value", `maximum allowed value of a user defined priority is ${HighestUserDefinablePriority}`)]
  }
  return []
}

/** What an update may not change: the value and the preemption policy. */
export const validatePriorityClassUpdate = (pc: PriorityClass, old: PriorityClass): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (pc.value !== old.value) errors.push(FieldError.forbidden("value", "may not be changed in an update."))
  if (pc.preemptionPolicy !== old.preemptionPolicy) errors.push(FieldError.invalid("preemptionPolicy", pc.preemptionPolicy, "field is immutable"))
  return errors
}
