/**
 * Priority admission, as kube-apiserver's plugin of that name.
 *
 * Pods (create): `spec.priorityClassName` is resolved to `spec.priority` and
 * `spec.preemptionPolicy`; a pod naming no class gets the global default class (its name too), or
 * priority 0 and `PreemptLowerPriority` when there is none. An unknown class is refused with 403
 * `no PriorityClass with name x was found`, and so is a pod that sets `spec.priority` (or
 * `spec.preemptionPolicy`) itself to something other than what its class says. Pods (update): a
 * body without the priority fields keeps the stored ones (the spec is immutable anyway).
 *
 * PriorityClasses (create, update): only one class may be the global default; a second is
 * refused with `PriorityClass x is already marked as default. Only one default can exist`.
 *
 * Departure: kube-apiserver creates the built-in classes (`system-node-critical`,
 * `system-cluster-critical`) at start-up and resolves names only from stored classes; here a name
 * that is not stored still resolves to a built-in class, so servers without that bootstrap step
 * admit critical pods the same way. Subresources (`pods/status`, `pods/binding`) are not touched.
 */
import { Effect, Either } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Scheduling from "../model/Scheduling.js"
import * as Status from "../model/Status.js"
import { asObject, type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import type { StoreService } from "../store/Store.js"
import { getObject, listObjects } from "./internal/json.js"

/** The plugin's name. */
export const name = "Priority"

const group = "scheduling.k8s.io"
const plural = "priorityclasses"

/** What the plugin needs of a PriorityClass. */
export interface ClassInfo {
  readonly name: string
  readonly value: number
  readonly globalDefault: boolean
  readonly preemptionPolicy: Scheduling.PreemptionPolicy | undefined
}

/** A stored PriorityClass as the plugin reads it (undefined when it has no name or value). */
export const classInfo = (o: unknown): ClassInfo | undefined => {
  const pc = asObject(o)
  const className = metadataOf(pc)["name"]
  const value = pc["value"]
  if (typeof className !== "string" || typeof value !== "number") return undefined
  const policy = pc["preemptionPolicy"]
  return {
    name: className,
    value,
    globalDefault: pc["globalDefault"] === true,
    preemptionPolicy: policy === "Never" || policy === "PreemptLowerPriority" ? policy : undefined
  }
}

/** The built-in classes, as the plugin reads them. */
export const systemClasses: ReadonlyArray<ClassInfo> = Scheduling.systemPriorityClasses.flatMap((c) => classInfo(c) ?? [])

/** The global default class: of several marked default (a race), the lowest value, as upstream picks. */
export const defaultClass = (classes: ReadonlyArray<ClassInfo>): ClassInfo | undefined => {
  let found: ClassInfo | undefined
  for (const c of classes) if (c.globalDefault && (found === undefined || c.value < found.value)) found = c
  return found
}

/**
 * A new pod with its priority resolved (pure). `named` is the class the pod names (undefined when
 * it names none or the class does not exist); `fallback` is the global default class. Answers the
 * 403 detail when the pod is refused.
 */
export const resolvePod = (pod: JsonObject, named: ClassInfo | undefined, fallback: ClassInfo | undefined): Either.Either<JsonObject, string> => {
  const spec = asObject(pod["spec"])
  const className = typeof spec["priorityClassName"] === "string" ? spec["priorityClassName"] : ""
  let priority: number
  let policy: Scheduling.PreemptionPolicy | undefined
  let resolvedName = className
  if (className === "") {
    priority = fallback?.value ?? Scheduling.DefaultPriorityWhenNoDefaultClassExists
    // Without a default class the pod still gets an explicit policy; a default class may carry none.
    policy = fallback === undefined ? Scheduling.DefaultPreemptionPolicy : fallback.preemptionPolicy
    resolvedName = fallback?.name ?? ""
  } else {
    if (named === undefined) return Either.left(`no PriorityClass with name ${className} was found`)
    priority = named.value
    policy = named.preemptionPolicy
  }
  const given = spec["priority"]
  if (given !== undefined && given !== null && given !== priority) {
    return Either.left(
      `the integer value of priority (${String(given)}) must not be provided in pod spec; priority admission controller computed ${priority} from the given PriorityClass name`
    )
  }
  const givenPolicy = spec["preemptionPolicy"]
  if (policy !== undefined && givenPolicy !== undefined && givenPolicy !== null && givenPolicy !== policy) {
    return Either.left(
      `the string value of PreemptionPolicy (${String(givenPolicy)}) must not be provided in pod spec; priority admission controller computed ${policy} from the given PriorityClass name`
    )
  }
  const next: Record<string, unknown> = { ...spec, priority }
  if (resolvedName !== "") next["priorityClassName"] = resolvedName
  if (policy !== undefined) next["preemptionPolicy"] = policy
  return Either.right({ ...pod, spec: next })
}

/** An updated pod keeps the stored priority and policy when its body leaves them out (pure). */
export const keepOnUpdate = (pod: JsonObject, old: JsonObject): JsonObject => {
  const spec = asObject(pod["spec"])
  const oldSpec = asObject(old["spec"])
  let next = spec
  for (const key of ["priority", "preemptionPolicy"]) {
    if ((next[key] === undefined || next[key] === null) && oldSpec[key] !== undefined) next = { ...next, [key]: oldSpec[key] }
  }
  return next === spec ? pod : { ...pod, spec: next }
}

/**
 * Why a PriorityClass create or update is refused (pure): it wants to be the global default while
 * another class already is. `current` is the existing default.
 */
export const checkClass = (operation: Admission.Operation, pc: JsonObject, current: ClassInfo | undefined): string | undefined => {
  if (pc["globalDefault"] !== true || current === undefined) return undefined
  if (operation === "CREATE" || (operation === "UPDATE" && current.name !== metadataOf(pc)["name"])) {
    return `PriorityClass ${current.name} is already marked as default. Only one default can exist`
  }
  return undefined
}

/** Where the plugin reads classes (an informer's cache, or the store). */
export interface ClassLookup {
  readonly get: (name: string) => Effect.Effect<ClassInfo | undefined, ApiError.ApiError>
  readonly list: Effect.Effect<ReadonlyArray<ClassInfo>, ApiError.ApiError>
}

/** Classes read straight from the store; built-in classes that are not stored are still found. */
export const storeLookup = (store: StoreService, transformer: Transformer = identity): ClassLookup => ({
  get: (className) =>
    Effect.map(
      getObject(store, transformer, { group, plural, name: className }),
      (stored) => (stored === undefined ? systemClasses.find((c) => c.name === className) : classInfo(stored.object))
    ),
  // Built-in classes are never global defaults, so the list needs no fallback.
  list: Effect.map(listObjects(store, transformer, group, plural), (stored) => stored.flatMap((s) => classInfo(s.object) ?? []))
})

/** What the plugin reads. */
export interface Options {
  readonly store: StoreService
  readonly transformer?: Transformer
  /** Read classes elsewhere (e.g. from an informer) instead of the store. */
  readonly classes?: ClassLookup
}

const forbidden = (request: Admission.Request, detail: string) =>
  Effect.fail(ApiError.of(Status.forbidden({ group: request.resource.group, resource: request.resource.plural }, request.name, detail)))

/** The plugin: `mutate` resolves pod priorities, `validate` keeps one global default class. */
export const make = (options: Options): Admission.Plugin => {
  const classes = options.classes ?? storeLookup(options.store, options.transformer)
  return {
    name,
    mutate: (request) => {
      const r = request.resource
      if (r.group !== "" || r.plural !== "pods" || request.subresource !== "") return Effect.succeed(request.object)
      if (request.operation === "UPDATE" && request.oldObject !== undefined) return Effect.succeed(keepOnUpdate(request.object, request.oldObject))
      if (request.operation !== "CREATE") return Effect.succeed(request.object)
      return Effect.gen(function* () {
        const spec = asObject(request.object["spec"])
        const className = typeof spec["priorityClassName"] === "string" ? spec["priorityClassName"] : ""
        const named = className === "" ? undefined : yield* classes.get(className)
        const fallback = className === "" ? defaultClass(yield* classes.list) : undefined
        const resolved = resolvePod(request.object, named, fallback)
        return Either.isLeft(resolved) ? yield* forbidden(request, resolved.left) : resolved.right
      })
    },
    validate: (request) => {
      const r = request.resource
      const admitted = Effect.succeed([])
      if (r.group !== group || r.plural !== plural || request.subresource !== "") return admitted
      if (request.operation !== "CREATE" && request.operation !== "UPDATE") return admitted
      if (request.object["globalDefault"] !== true) return admitted
      return Effect.gen(function* () {
        const refused = checkClass(request.operation, request.object, defaultClass(yield* classes.list))
        return refused === undefined ? [] : yield* forbidden(request, refused)
      })
    }
  }
}
