/**
 * PodSecurity admission, as kube-apiserver's: each namespace's `pod-security.kubernetes.io/*`
 * labels choose a Pod Security Standard per mode (`policy/PodSecurity.ts` evaluates it), and
 *
 *   pods (create, update of the spec)       enforce ─▶ 403 "violates PodSecurity …"; audit ─▶ audit annotation; warn ─▶ Warning header
 *   workload templates (Deployment, …)      audit and warn only: a template is never refused, its pods are
 *   namespaces (create, update)             invalid labels ─▶ 422; a stricter enforce level ─▶ warnings naming existing pods that violate it
 *
 * Modes without a label take the server's defaults (kube-apiserver's are `privileged`). Fleet
 * adds one rule for its customer profile: a namespace with no Pod Security labels in which a
 * RoleBinding grants `fleet:customer` takes `restricted` in every mode, whatever the server's
 * default, and a namespace created by anyone but an administrator (`system:masters`) is
 * labelled `enforce: restricted` unless it names an enforce level. An administrator's label always
 * wins; customers cannot change namespace labels (their role has no write on namespaces).
 * Exempt users, namespaces and runtime classes are not evaluated, as in Kubernetes.
 */
import { Effect } from "effect"
import * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Status from "../model/Status.js"
import { asArray, asObject, isJsonObject, type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import * as PodSecurity from "../policy/PodSecurityStandards.js"
import type { StoreService } from "../store/Store.js"
import { getObject, labels, listObjects } from "./internal/json.js"

/** The plugin's name. */
export const name = "PodSecurity"

/** Who and what is never evaluated (kube's PodSecurityConfiguration exemptions). */
export interface Exemptions {
  readonly usernames?: ReadonlyArray<string>
  readonly namespaces?: ReadonlyArray<string>
  readonly runtimeClasses?: ReadonlyArray<string>
}

/** How the plugin is configured. */
export interface Options {
  readonly store: StoreService
  readonly transformer?: Transformer
  /** The policy of modes a namespace does not label (default: `privileged` in every mode, as kube-apiserver). */
  readonly defaults?: PodSecurity.Policy
  readonly exemptions?: Exemptions
  /** The ClusterRole whose RoleBinding makes a namespace a customer's (default `fleet:customer`). */
  readonly customerRole?: string
}

/** The ClusterRole of Fleet's customer profile. */
export const customerRole = "fleet:customer"

/** The group of administrators, whose namespaces are not labelled `restricted` for them. */
const adminGroup = "system:masters"

/** kube's cap on the existing pods checked when a namespace's enforce level tightens. */
const maxPodsToCheck = 3000

/** Where a workload kind keeps its pod template. */
const templatePaths: Readonly<Record<string, ReadonlyArray<string>>> = {
  "/replicationcontrollers": ["spec", "template"],
  "/podtemplates": ["template"],
  "apps/deployments": ["spec", "template"],
  "apps/replicasets": ["spec", "template"],
  "apps/statefulsets": ["spec", "template"],
  "apps/daemonsets": ["spec", "template"],
  "batch/jobs": ["spec", "template"],
  "batch/cronjobs": ["spec", "jobTemplate", "spec", "template"]
}

/** The pod template of a workload object, when the resource has one. */
export const templateOf = (group: string, plural: string, object: unknown): PodSecurity.PodView | undefined => {
  const path = templatePaths[`${group}/${plural}`]
  if (path === undefined) return undefined
  let at: unknown = object
  for (const key of path) at = asObject(at)[key]
  return isJsonObject(at) ? (at as PodSecurity.PodView) : undefined // PodView's readers never throw on any shape
}

/** Whether a pod update can change what the checks see (kube's isSignificantPodUpdate: the spec is otherwise immutable). */
export const significantPodUpdate = (pod: unknown, old: unknown): boolean => {
  const spec = (o: unknown) => asObject(asObject(o)["spec"])
  // The seccomp and AppArmor annotations are the checked metadata.
  const profiles = (o: unknown) =>
    JSON.stringify(
      Object.entries(asObject(metadataOf(asObject(o))["annotations"]))
        .filter(([k]) => k.includes("seccomp.security.alpha.kubernetes.io") || k.startsWith("container.apparmor.security.beta.kubernetes.io/"))
        .sort(([a], [b]) => (a < b ? -1 : 1))
    )
  const images = (o: unknown, field: string) => JSON.stringify(asArray(spec(o)[field]).map((c) => [asObject(c)["name"], asObject(c)["image"]]))
  return (
    profiles(pod) !== profiles(old) ||
    images(pod, "containers") !== images(old, "containers") ||
    images(pod, "initContainers") !== images(old, "initContainers") ||
    JSON.stringify(spec(pod)["ephemeralContainers"] ?? []) !== JSON.stringify(spec(old)["ephemeralContainers"] ?? [])
  )
}

/** What the plugin decided for one pod or template: a refusal, and what to note. */
export interface Decision {
  readonly refusal?: string
  readonly warning?: string
  readonly annotations: Readonly<Record<string, string>>
}

/**
 * The decision for one pod (`enforce` true) or pod template (`enforce` false) under `policy`
 * (pure; kube's EvaluatePod). A refused pod gets no warning, as kube-apiserver avoids warning
 * about a request it rejects.
 */
export const decide = (policy: PodSecurity.Policy, pod: PodSecurity.PodView, enforce: boolean): Decision => {
  const annotations: Record<string, string> = {}
  let refusal: string | undefined
  const cache = new Map<string, ReadonlyArray<PodSecurity.Violation>>()
  const violations = (lv: PodSecurity.LevelVersion) => {
    const key = PodSecurity.describe(lv)
    const hit = cache.get(key)
    if (hit !== undefined) return hit
    const found = PodSecurity.evaluate(lv, pod)
    cache.set(key, found)
    return found
  }
  if (enforce) {
    annotations[PodSecurity.enforcePolicyAnnotation] = PodSecurity.describe(policy.enforce)
    const found = violations(policy.enforce)
    if (found.length > 0) refusal = `violates PodSecurity ${JSON.stringify(PodSecurity.describe(policy.enforce))}: ${PodSecurity.formatViolations(found)}`
  }
  const audited = violations(policy.audit)
  if (audited.length > 0) {
    annotations[PodSecurity.auditViolationsAnnotation] = `would violate PodSecurity ${JSON.stringify(PodSecurity.describe(policy.audit))}: ${PodSecurity.formatViolations(audited)}`
  }
  const warned = refusal === undefined ? violations(policy.warn) : []
  const warning = warned.length > 0 ? `would violate PodSecurity ${JSON.stringify(PodSecurity.describe(policy.warn))}: ${PodSecurity.formatViolations(warned)}` : undefined
  return { ...(refusal === undefined ? {} : { refusal }), ...(warning === undefined ? {} : { warning }), annotations }
}

/**
 * kube's warnings when a namespace's enforce level tightens: which existing pods violate it,
 * pods with the same reasons grouped under the first name (pure).
 */
export const existingPodWarnings = (namespace: string, enforce: PodSecurity.LevelVersion, pods: ReadonlyArray<JsonObject>): ReadonlyArray<string> => {
  const checked = pods.slice(0, maxPodsToCheck)
  const byReasons = new Map<string, { first: string; count: number }>()
  for (const pod of checked) {
    const found = PodSecurity.evaluate(enforce, pod as PodSecurity.PodView) // PodView's readers never throw on any shape
    if (found.length === 0) continue
    const reasons = PodSecurity.formatReasons(found)
    const podName = String(metadataOf(pod)["name"] ?? "")
    const seen = byReasons.get(reasons)
    if (seen === undefined) byReasons.set(reasons, { first: podName, count: 1 })
    else byReasons.set(reasons, { first: podName < seen.first ? podName : seen.first, count: seen.count + 1 })
  }
  const out: Array<string> = []
  if (checked.length < pods.length) out.push(`new PodSecurity enforce level only checked against the first ${checked.length} of ${pods.length} existing pods`)
  if (byReasons.size > 0) out.push(`existing pods in namespace ${JSON.stringify(namespace)} violate the new PodSecurity enforce level ${JSON.stringify(PodSecurity.describe(enforce))}`)
  const perPod = [...byReasons].map(([reasons, { first, count }]) =>
    count === 1 ? `${first}: ${reasons}` : count === 2 ? `${first} (and 1 other pod): ${reasons}` : `${first} (and ${count - 1} other pods): ${reasons}`
  )
  return [...out, ...perPod.sort()]
}

/** Whether a namespace labels any Pod Security level. */
const labelsAnyLevel = (l: Readonly<Record<string, string>>) => PodSecurity.modes.some((m) => PodSecurity.hasLevelLabel(l, m))

/** The plugin. */
export const make = (options: Options): Admission.Plugin => {
  const codec = options.transformer ?? identity
  const defaults = options.defaults ?? PodSecurity.uniform("privileged")
  const role = options.customerRole ?? customerRole
  const exempt = {
    usernames: new Set(options.exemptions?.usernames ?? []),
    namespaces: new Set(options.exemptions?.namespaces ?? []),
    runtimeClasses: new Set(options.exemptions?.runtimeClasses ?? [])
  }

  /** Whether a RoleBinding in the namespace grants the customer profile. */
  const isCustomerNamespace = (namespace: string) =>
    Effect.map(listObjects(options.store, codec, "rbac.authorization.k8s.io", "rolebindings", namespace), (bindings) =>
      bindings.some((b) => {
        const ref = asObject(b.object["roleRef"])
        return ref["kind"] === "ClusterRole" && ref["name"] === role
      })
    )

  /** The policy a namespace's labels ask for, with the customer profile's defaults where they apply. */
  const policyOf = (namespace: string, nsLabels: Readonly<Record<string, string>>) =>
    Effect.gen(function* () {
      const customer = !labelsAnyLevel(nsLabels) && (yield* isCustomerNamespace(namespace))
      return PodSecurity.policyOf(nsLabels, customer ? PodSecurity.uniform("restricted") : defaults).policy
    })

  const note = (decision: Decision, extra: Readonly<Record<string, string>> = {}) =>
    Effect.gen(function* () {
      for (const [k, v] of Object.entries({ ...decision.annotations, ...extra })) yield* Admission.annotate(k, v)
      if (decision.warning !== undefined) yield* Admission.warn(decision.warning)
    })

  /** Evaluate a pod (enforce) or a template (audit and warn only). */
  const evaluate = (request: Admission.Request, pod: PodSecurity.PodView, enforce: boolean) =>
    Effect.gen(function* () {
      if (exempt.namespaces.has(request.namespace)) return yield* Admission.annotate(PodSecurity.exemptAnnotation, "namespace")
      if (exempt.usernames.has(request.user.name)) return yield* Admission.annotate(PodSecurity.exemptAnnotation, "user")
      const ns = yield* getObject(options.store, codec, { group: "", plural: "namespaces", name: request.namespace })
      // A missing namespace is NamespaceLifecycle's to refuse.
      if (ns === undefined) return
      const policy = yield* policyOf(request.namespace, labels(ns.object))
      if (policy.enforce.level === "privileged" && policy.audit.level === "privileged" && policy.warn.level === "privileged") return
      const runtimeClass = asObject(asObject(pod)["spec"])["runtimeClassName"]
      if (typeof runtimeClass === "string" && exempt.runtimeClasses.has(runtimeClass)) return yield* Admission.annotate(PodSecurity.exemptAnnotation, "runtimeClass")
      const decision = decide(policy, pod, enforce)
      yield* note(decision)
      if (decision.refusal !== undefined) {
        return yield* Effect.fail(ApiError.of(Status.forbidden({ group: "", resource: "pods" }, request.name, decision.refusal)))
      }
    })

  /** Namespace labels: valid levels and versions; a tighter enforce level warns about existing pods. */
  const validateNamespace = (request: Admission.Request) =>
    Effect.gen(function* () {
      const next = labels(request.object)
      const { errors } = PodSecurity.policyOf(next, defaults)
      const old = request.oldObject === undefined ? undefined : labels(request.oldObject)
      const changed = old === undefined || PodSecurity.modes.some((m) => next[PodSecurity.levelLabel(m)] !== old[PodSecurity.levelLabel(m)] || next[PodSecurity.versionLabel(m)] !== old[PodSecurity.versionLabel(m)])
      if (errors.length > 0 && changed) {
        return yield* Effect.fail(ApiError.of(Status.invalid({ group: "", kind: "Namespace" }, request.name, errors)))
      }
      if (old === undefined || !changed || exempt.namespaces.has(request.name)) return
      const after = (yield* policyOf(request.name, next)).enforce
      const before = (yield* policyOf(request.name, old)).enforce
      if (after.level === "privileged" || (after.level === before.level && after.version === before.version)) return
      if (after.version === before.version && PodSecurity.compareLevels(after.level, before.level) < 1) return
      const pods = yield* listObjects(options.store, codec, "", "pods", request.name)
      for (const w of existingPodWarnings(request.name, after, pods.map((p) => p.object))) yield* Admission.warn(w)
    })

  return {
    name,
    // A namespace a non-administrator creates enforces `restricted` unless it names an enforce level.
    mutate: (request) => {
      const r = request.resource
      if (request.operation !== "CREATE" || r.group !== "" || r.plural !== "namespaces" || request.subresource !== "") return Effect.succeed(request.object)
      if (request.user.groups.includes(adminGroup) || exempt.usernames.has(request.user.name) || PodSecurity.hasLevelLabel(labels(request.object), "enforce")) {
        return Effect.succeed(request.object)
      }
      const m = metadataOf(request.object)
      return Effect.succeed({ ...request.object, metadata: { ...m, labels: { ...labels(request.object), [PodSecurity.levelLabel("enforce")]: "restricted" } } })
    },
    validate: (request) =>
      Effect.gen(function* () {
        const r = request.resource
        if (request.operation !== "CREATE" && request.operation !== "UPDATE") return []
        if (r.group === "" && r.plural === "namespaces") {
          if (request.subresource === "") yield* validateNamespace(request)
          return []
        }
        if (r.group === "" && r.plural === "pods") {
          // Status, binding and the other subresources cannot change what the checks read.
          if (request.subresource !== "" && request.subresource !== "ephemeralcontainers") return []
          if (request.operation === "UPDATE" && !significantPodUpdate(request.object, request.oldObject)) return []
          yield* evaluate(request, request.object as PodSecurity.PodView, true) // PodView's readers never throw on any shape
          return []
        }
        if (request.subresource !== "") return []
        const template = templateOf(r.group, r.plural, request.object)
        if (template === undefined) return []
        if (request.operation === "UPDATE") {
          const before = templateOf(r.group, r.plural, request.oldObject)
          if (JSON.stringify(before) === JSON.stringify(template)) return []
        }
        yield* evaluate(request, template, false)
        return []
      })
  }
}
