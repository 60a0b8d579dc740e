/**
 * The strategies of the built-in kinds: the defaults kube-apiserver fills in, which subresources
 * each kind has, which fields an update may not change, and the columns `kubectl get` shows.
 * Each rule is a small pure function over JSON, mirroring the Kubernetes registry it comes from.
 */
import { Either, type Schema } from "effect"
import * as AlertRule from "../model/AlertRule.js"
import * as Apps from "../model/Apps.js"
import * as Autoscaling from "../model/Autoscaling.js"
import * as Batch from "../model/Batch.js"
import * as Config from "../model/Config.js"
import { decodeObject } from "../model/Decode.js"
import * as EndpointSlice from "../model/EndpointSlice.js"
import * as FieldError from "../model/FieldError.js"
import * as Ingress from "../model/Ingress.js"
import * as LabelSelector from "../model/LabelSelector.js"
import { RegionLabel } from "../model/Meta.js"
import * as Networking from "../model/Networking.js"
import * as NetworkPolicy from "../model/NetworkPolicy.js"
import * as Policy from "../model/Policy.js"
import * as ProcessControl from "../model/ProcessControl.js"
import * as Scheduling from "../model/Scheduling.js"
import * as Rbac from "../model/Rbac.js"
import * as Volume from "../model/Volume.js"
import type { JsonObject, PrinterColumn, ScaleSpec, Strategy } from "./Registry.js"
import { asArray, jsonEqual } from "../object/Json.js"

type Json = Record<string, unknown>

const obj = (v: unknown): Json | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : undefined)
const withDefault = (o: Json, key: string, value: unknown) => (o[key] === undefined ? { ...o, [key]: value } : o)

const imagePullPolicy = (image: unknown) => {
  if (typeof image !== "string") return "IfNotPresent"
  const lastSlash = image.lastIndexOf("/")
  const tagged = image.slice(lastSlash + 1)
  if (image.includes("@")) return "IfNotPresent"
  const colon = tagged.lastIndexOf(":")
  return colon < 0 || tagged.slice(colon + 1) === "latest" ? "Always" : "IfNotPresent"
}

const defaultContainer = (c: unknown) => {
  let container = obj(c) ?? {}
  container = withDefault(container, "imagePullPolicy", imagePullPolicy(container["image"]))
  container = withDefault(container, "terminationMessagePath", "/dev/termination-log")
  container = withDefault(container, "terminationMessagePolicy", "File")
  if (Array.isArray(container["ports"])) {
    container = { ...container, ports: container["ports"].map((p) => withDefault(obj(p) ?? {}, "protocol", "TCP")) }
  }
  return container
}

/** PodSpec defaults (also inside pod templates). */
export const defaultPodSpec = (spec: Json): Json => {
  let s = spec
  s = withDefault(s, "restartPolicy", "Always")
  s = withDefault(s, "terminationGracePeriodSeconds", 30)
  s = withDefault(s, "dnsPolicy", "ClusterFirst")
  s = withDefault(s, "schedulerName", "default-scheduler")
  s = withDefault(s, "securityContext", {})
  if (Array.isArray(s["containers"])) s = { ...s, containers: s["containers"].map(defaultContainer) }
  if (Array.isArray(s["initContainers"])) s = { ...s, initContainers: s["initContainers"].map(defaultContainer) }
  return s
}

const withSpec = (o: JsonObject, f: (spec: Json) => Json): JsonObject => {
  const spec = obj(o["spec"])
  return spec ? { ...o, spec: f(spec) } : o
}

const defaultTemplate = (spec: Json): Json => {
  const template = obj(spec["template"])
  const podSpec = obj(template?.["spec"])
  return template && podSpec ? { ...spec, template: { ...template, spec: defaultPodSpec(podSpec) } } : spec
}

const immutable = (path: string, a: unknown, b: unknown): ReadonlyArray<FieldError.FieldError> =>
  jsonEqual(a, b) ? [] : [FieldError.invalid(path, a, "field is immutable")]

const none = (): ReadonlyArray<FieldError.FieldError> => []

/**
 * Runs a typed validator of a model module on a JSON object. The object was decoded before
 * defaulting, but admission may have changed it since, so it is decoded again: a shape error is
 * reported as such instead of reaching the validator.
 */
const typed =
  <A, I>(schema: Schema.Schema<A, I, never>, validate: (a: A) => ReadonlyArray<FieldError.FieldError>) =>
  (o: JsonObject): ReadonlyArray<FieldError.FieldError> => {
    const decoded = decodeObject(schema, o)
    return Either.isLeft(decoded) ? decoded.left : validate(decoded.right)
  }

/** `typed` for update rules; a stored object that no longer decodes imposes nothing. */
const typedUpdate =
  <A, I>(schema: Schema.Schema<A, I, never>, validate: (a: A, old: A) => ReadonlyArray<FieldError.FieldError>) =>
  (o: JsonObject, old: JsonObject): ReadonlyArray<FieldError.FieldError> => {
    const decoded = decodeObject(schema, o)
    const previous = decodeObject(schema, old)
    if (Either.isLeft(decoded)) return decoded.left
    return Either.isLeft(previous) ? [] : validate(decoded.right, previous.right)
  }

/** A claim (or claim template) with the defaults SetDefaults_PersistentVolumeClaim gives it. */
const defaultClaimSpec = (spec: Json): Json => withDefault(spec, "volumeMode", "Filesystem")

const defaultClaimTemplate = (t: unknown): Json => {
  const template = obj(t) ?? {}
  return {
    ...template,
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    spec: defaultClaimSpec(obj(template["spec"]) ?? {}),
    status: withDefault(obj(template["status"]) ?? {}, "phase", "Pending")
  }
}

/** StatefulSet defaults (SetDefaults_StatefulSet); `maxUnavailable` stays unset (alpha upstream). */
const defaultStatefulSetSpec = (s: Json): Json => {
  let spec = withDefault(s, "podManagementPolicy", "OrderedReady")
  let strategy = obj(spec["updateStrategy"]) ?? {}
  if (strategy["type"] === undefined) strategy = { ...strategy, type: "RollingUpdate", rollingUpdate: obj(strategy["rollingUpdate"]) ?? {} }
  const rollingUpdate = obj(strategy["rollingUpdate"])
  if (strategy["type"] === "RollingUpdate" && rollingUpdate) strategy = { ...strategy, rollingUpdate: withDefault(rollingUpdate, "partition", 0) }
  const retention = obj(spec["persistentVolumeClaimRetentionPolicy"]) ?? {}
  spec = {
    ...spec,
    updateStrategy: strategy,
    persistentVolumeClaimRetentionPolicy: withDefault(withDefault(retention, "whenDeleted", "Retain"), "whenScaled", "Retain")
  }
  spec = withDefault(withDefault(spec, "replicas", 1), "revisionHistoryLimit", 10)
  if (Array.isArray(spec["volumeClaimTemplates"])) spec = { ...spec, volumeClaimTemplates: spec["volumeClaimTemplates"].map(defaultClaimTemplate) }
  return defaultTemplate(spec)
}

/** DaemonSet defaults (SetDefaults_DaemonSet). */
const defaultDaemonSetSpec = (s: Json): Json => {
  let strategy = obj(s["updateStrategy"]) ?? {}
  strategy = withDefault(strategy, "type", "RollingUpdate")
  if (strategy["type"] === "RollingUpdate") {
    const rollingUpdate = withDefault(withDefault(obj(strategy["rollingUpdate"]) ?? {}, "maxUnavailable", 1), "maxSurge", 0)
    strategy = { ...strategy, rollingUpdate }
  }
  return defaultTemplate(withDefault({ ...s, updateStrategy: strategy }, "revisionHistoryLimit", 10))
}

/** Job spec defaults (SetDefaults_Job); CronJob job templates only get pod defaults, as upstream. */
const defaultJobSpec = (s: Json): Json => {
  let spec = s
  if (spec["completions"] === undefined && spec["parallelism"] === undefined) spec = { ...spec, completions: 1, parallelism: 1 }
  spec = withDefault(spec, "parallelism", 1)
  spec = withDefault(spec, "backoffLimit", spec["backoffLimitPerIndex"] !== undefined ? 2147483647 : 6)
  spec = withDefault(spec, "completionMode", "NonIndexed")
  spec = withDefault(spec, "suspend", false)
  const failurePolicy = obj(spec["podFailurePolicy"])
  if (failurePolicy) {
    const rules = asArray(failurePolicy["rules"]).map((r) => {
      const rule = obj(r) ?? {}
      return Array.isArray(rule["onPodConditions"]) ? { ...rule, onPodConditions: rule["onPodConditions"].map((c) => withDefault(obj(c) ?? {}, "status", "True")) } : rule
    })
    spec = { ...spec, podFailurePolicy: { ...failurePolicy, rules } }
  }
  spec = withDefault(spec, "podReplacementPolicy", failurePolicy ? "Failed" : "TerminatingOrFailed")
  spec = withDefault(spec, "manualSelector", false)
  return defaultTemplate(spec)
}

/**
 * A Job without labels of its own takes its template's (SetDefaults_Job). The region label the
 * server adds to every object does not count as the Job's own.
 */
const defaultJobLabels = (o: JsonObject): JsonObject => {
  const m = obj(o["metadata"]) ?? {}
  const labels = obj(m["labels"]) ?? {}
  const templateLabels = obj(obj(obj(o["spec"])?.["template"])?.["metadata"])?.["labels"]
  const own = Object.keys(labels).filter((k) => k !== RegionLabel)
  return own.length === 0 && obj(templateLabels) ? { ...o, metadata: { ...m, labels: { ...(obj(templateLabels) ?? {}), ...labels } } } : o
}

/** Whether the object's `spec.template` already carries the `batch.kubernetes.io/` labels. */
const hasPrefixedJobLabels = (o: JsonObject) => obj(obj(obj(obj(o["spec"])?.["template"])?.["metadata"])?.["labels"])?.[Batch.ControllerUidLabel] !== undefined

const base: Strategy = {
  defaults: (o) => o,
  prepareForCreate: (o) => o,
  validate: none,
  validateUpdate: none,
  tracksGeneration: false,
  deleteReturnsObject: false
}

/** Pod fields an update may change (kube-apiserver's ValidatePodUpdate). */
const podUpdatable = (spec: Json): Json => {
  const strip = (c: unknown) => ({ ...(obj(c) ?? {}), image: undefined })
  return {
    ...spec,
    containers: asArray(spec["containers"]).map(strip),
    initContainers: asArray(spec["initContainers"]).map(strip),
    activeDeadlineSeconds: undefined,
    tolerations: undefined,
    terminationGracePeriodSeconds: undefined,
    // Binding (the scheduler) sets nodeName once.
    nodeName: undefined
  }
}

const strategies: Record<string, Strategy> = {
  "v1/Pod": {
    ...base,
    defaults: (o) => withSpec(o, defaultPodSpec),
    prepareForCreate: (o) => ({ ...o, status: { phase: "Pending" } }),
    validateUpdate: (o, old) => {
      const spec = obj(o["spec"]) ?? {}
      const oldSpec = obj(old["spec"]) ?? {}
      const errors: Array<FieldError.FieldError> = []
      if (!jsonEqual(podUpdatable(spec), podUpdatable(oldSpec))) {
        errors.push(
          FieldError.forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
          )
        )
      }
      if (oldSpec["nodeName"] !== undefined && spec["nodeName"] !== oldSpec["nodeName"]) {
        errors.push(...immutable("spec.nodeName", spec["nodeName"], oldSpec["nodeName"]))
      }
      return errors
    },
    tracksGeneration: true,
    deleteReturnsObject: true
  },
  "v1/Namespace": {
    ...base,
    defaults: (o) => withSpec({ ...o, spec: o["spec"] ?? {} }, (s) => withDefault(s, "finalizers", ["kubernetes"])),
    prepareForCreate: (o) => ({ ...o, status: { phase: "Active" } }),
    deleteReturnsObject: true
  },
  "v1/Node": { ...base, validateUpdate: (o, old) => {
    const podCIDR = obj(old["spec"])?.["podCIDR"]
    return podCIDR === undefined ? [] : immutable("spec.podCIDR", obj(o["spec"])?.["podCIDR"], podCIDR)
  } },
  "v1/Service": {
    ...base,
    defaults: (o) =>
      withSpec(o, (s) => {
        let spec = withDefault(s, "type", "ClusterIP")
        spec = withDefault(spec, "sessionAffinity", "None")
        if (Array.isArray(spec["ports"])) {
          spec = {
            ...spec,
            ports: spec["ports"].map((p) => {
              const port = withDefault(obj(p) ?? {}, "protocol", "TCP")
              return withDefault(port, "targetPort", port["port"])
            })
          }
        }
        return spec
      }),
    prepareForUpdate: (o, old) => withSpec(o, (spec) => prepareServiceUpdate(spec, obj(old["spec"]) ?? {})),
    validateUpdate: (o, old) => {
      const spec = obj(o["spec"]) ?? {}
      const oldSpec = obj(old["spec"]) ?? {}
      const ip = oldSpec["clusterIP"]
      // Changing to or from ExternalName allocates or releases the IP; otherwise it is fixed.
      if (ip === undefined || ip === "" || spec["type"] === "ExternalName" || oldSpec["type"] === "ExternalName") return []
      return immutable("spec.clusterIP", spec["clusterIP"], ip)
    },
    deleteReturnsObject: true
  },
  "v1/Secret": {
    ...base,
    defaults: (o) => {
      // stringData is write-only: it is folded into data (base64) and never stored.
      const stringData = obj(o["stringData"])
      let out: JsonObject = withDefault(o, "type", "Opaque")
      if (stringData) {
        const data = { ...(obj(o["data"]) ?? {}) }
        for (const [k, v] of Object.entries(stringData)) data[k] = base64(String(v))
        out = { ...out, data, stringData: undefined }
        delete out["stringData"]
      }
      return out
    },
    validate: Config.validateSecretSize,
    validateUpdate: (o, old) => [
      ...(old["immutable"] === true ? [...immutable("data", o["data"], old["data"]), ...immutable("immutable", o["immutable"], true)] : []),
      ...immutable("type", o["type"], old["type"])
    ]
  },
  "v1/ConfigMap": {
    ...base,
    validate: Config.validateConfigMapSize,
    validateUpdate: (o, old) =>
      old["immutable"] === true
        ? [...immutable("data", o["data"], old["data"]), ...immutable("binaryData", o["binaryData"], old["binaryData"]), ...immutable("immutable", o["immutable"], true)]
        : []
  },
  "apps/v1/Deployment": {
    ...base,
    defaults: (o) =>
      withSpec(o, (s) => {
        let spec = withDefault(s, "replicas", 1)
        spec = withDefault(spec, "revisionHistoryLimit", 10)
        spec = withDefault(spec, "progressDeadlineSeconds", 600)
        const strategy = obj(spec["strategy"]) ?? {}
        const type = strategy["type"] ?? "RollingUpdate"
        spec = {
          ...spec,
          strategy:
            type === "RollingUpdate"
              ? { ...strategy, type, rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%", ...(obj(strategy["rollingUpdate"]) ?? {}) } }
              : { ...strategy, type }
        }
        return defaultTemplate(spec)
      }),
    prepareForCreate: (o) => ({ ...o, status: {} }),
    validate: (o) => validateDeploymentSpec(obj(o["spec"]) ?? {}),
    validateUpdate: (o, old) => immutable("spec.selector", obj(o["spec"])?.["selector"], obj(old["spec"])?.["selector"]),
    tracksGeneration: true
  },
  "scheduling.k8s.io/v1/PriorityClass": {
    ...base,
    defaults: Scheduling.defaults,
    validate: typed(Scheduling.PriorityClass, Scheduling.validatePriorityClass),
    validateUpdate: typedUpdate(Scheduling.PriorityClass, Scheduling.validatePriorityClassUpdate)
  },
  "networking.k8s.io/v1/Ingress": { ...base, validate: typed(Ingress.Ingress, Ingress.validate) },
  "networking.k8s.io/v1/NetworkPolicy": {
    ...base,
    defaults: NetworkPolicy.defaults,
    validate: typed(NetworkPolicy.NetworkPolicy, NetworkPolicy.validate),
    validateUpdate: typed(NetworkPolicy.NetworkPolicy, NetworkPolicy.validate),
    tracksGeneration: true
  },
  "fleet.koder.dev/v1/ProcessControl": { ...base, validate: typed(ProcessControl.ProcessControl, ProcessControl.validate) },
  "fleet.koder.dev/v1/AlertRule": {
    ...base,
    defaults: (o) =>
      withSpec(o, (s) => {
        const d = AlertRule.defaults
        const threshold = obj(s["threshold"]) ?? {}
        const webhook = obj(s["webhook"])
        let spec: Json = { ...s, threshold: withDefault(withDefault(threshold, "count", d.count), "window", d.window) }
        spec = withDefault(withDefault(withDefault(spec, "severity", d.severity), "resendInterval", d.resendInterval), "sendResolved", d.sendResolved)
        return webhook ? { ...spec, webhook: withDefault(webhook, "timeoutSeconds", d.timeoutSeconds) } : spec
      }),
    prepareForCreate: (o) => ({ ...o, status: {} }),
    validate: typed(AlertRule.AlertRule, AlertRule.validate),
    tracksGeneration: true
  },
  "apiextensions.k8s.io/v1/CustomResourceDefinition": {
    ...base,
    validate: (o) => {
      const spec = obj(o["spec"]) ?? {}
      const names = obj(spec["names"]) ?? {}
      const want = `${String(names["plural"])}.${String(spec["group"])}`
      const errors: Array<FieldError.FieldError> = []
      const name = obj(o["metadata"])?.["name"]
      if (name !== want) errors.push(FieldError.invalid("metadata.name", name, `must be spec.names.plural+"."+spec.group`))
      const versions = asArray(spec["versions"])
      if (versions.filter((v) => obj(v)?.["storage"] === true).length !== 1) {
        errors.push(FieldError.invalid("spec.versions", versions.length, "must have exactly one version marked as storage version"))
      }
      return errors
    },
    prepareForCreate: (o) => {
      const spec = obj(o["spec"]) ?? {}
      const m = obj(o["metadata"]) ?? {}
      const finalizers = asArray(m["finalizers"]) as Array<string>
      const storage = asArray(spec["versions"]).find((v) => obj(v)?.["storage"] === true)
      return {
        ...o,
        metadata: { ...m, finalizers: finalizers.includes(crdCleanup) ? finalizers : [...finalizers, crdCleanup] },
        status: {
          conditions: [
            { type: "NamesAccepted", status: "True", reason: "NoConflicts", message: "no conflicts found" },
            { type: "Established", status: "True", reason: "InitialNamesAccepted", message: "the initial names have been accepted" }
          ],
          acceptedNames: spec["names"],
          storedVersions: storage ? [obj(storage)?.["name"]] : []
        }
      }
    },
    validateUpdate: (o, old) => immutable("spec.scope", obj(o["spec"])?.["scope"], obj(old["spec"])?.["scope"])
  },
  "v1/LimitRange": { ...base, defaults: (o) => withSpec(o, (s) => ({ ...s, limits: asArray(s["limits"]).map(defaultLimitRangeItem) })) },
  "v1/ResourceQuota": {
    ...base,
    // status.hard mirrors spec.hard; status.used is the ResourceQuota admission plugin's.
    prepareForCreate: (o) => ({ ...o, status: obj(obj(o["spec"])?.["hard"]) ? { hard: obj(o["spec"])?.["hard"] } : {} })
  },
  "rbac.authorization.k8s.io/v1/Role": { ...base, validate: (o) => Rbac.validateRules(o["rules"], true) },
  "rbac.authorization.k8s.io/v1/ClusterRole": { ...base, validate: (o) => Rbac.validateRules(o["rules"], false) },
  "rbac.authorization.k8s.io/v1/RoleBinding": {
    ...base,
    defaults: Rbac.defaultSubjects,
    validate: (o) => Rbac.validateBinding(o, true),
    validateUpdate: (o, old) => immutable("roleRef", o["roleRef"], old["roleRef"])
  },
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": {
    ...base,
    defaults: Rbac.defaultSubjects,
    validate: (o) => Rbac.validateBinding(o, false),
    validateUpdate: (o, old) => immutable("roleRef", o["roleRef"], old["roleRef"])
  },
  "apps/v1/ReplicaSet": {
    ...base,
    defaults: (o) => withSpec(o, (s) => defaultTemplate(withDefault(s, "replicas", 1))),
    prepareForCreate: (o) => ({ ...o, status: { replicas: 0 } }),
    validateUpdate: (o, old) => immutable("spec.selector", obj(o["spec"])?.["selector"], obj(old["spec"])?.["selector"]),
    tracksGeneration: true
  },
  "apps/v1/StatefulSet": {
    ...base,
    defaults: (o) => withSpec(o, defaultStatefulSetSpec),
    prepareForCreate: (o) => ({ ...o, status: { replicas: 0, availableReplicas: 0 } }),
    validate: typed(Apps.StatefulSet, Apps.validateStatefulSet),
    validateUpdate: typedUpdate(Apps.StatefulSet, Apps.validateStatefulSetUpdate),
    tracksGeneration: true
  },
  "apps/v1/DaemonSet": {
    ...base,
    defaults: (o) => withSpec(o, defaultDaemonSetSpec),
    prepareForCreate: (o) => ({ ...o, status: { currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0 } }),
    validate: typed(Apps.DaemonSet, Apps.validateDaemonSet),
    validateUpdate: typedUpdate(Apps.DaemonSet, Apps.validateDaemonSetUpdate),
    tracksGeneration: true
  },
  "apps/v1/ControllerRevision": {
    ...base,
    validate: typed(Apps.ControllerRevision, Apps.validateControllerRevision),
    validateUpdate: typedUpdate(Apps.ControllerRevision, Apps.validateControllerRevisionUpdate)
  },
  "batch/v1/Job": {
    ...base,
    defaults: (o) => defaultJobLabels(withSpec(o, defaultJobSpec)),
    // The selector is generated here, not in `defaults`: it needs the uid, which the server
    // assigns (with name and creationTimestamp) before calling prepareForCreate, just as
    // kube-apiserver's BeforeCreate fills system fields before the Job strategy's PrepareForCreate.
    prepareForCreate: (o) => ({ ...(Batch.generateSelector(o as unknown as Batch.Job) as unknown as JsonObject), status: {} }),
    validate: (o) => typed(Batch.Job, (job) => Batch.validateJob(job, { requirePrefixedLabels: hasPrefixedJobLabels(o) }))(o),
    validateUpdate: typedUpdate(Batch.Job, Batch.validateJobUpdate),
    tracksGeneration: true
  },
  "batch/v1/CronJob": {
    ...base,
    defaults: (o) =>
      withSpec(o, (s) => {
        let spec = withDefault(s, "concurrencyPolicy", "Allow")
        spec = withDefault(spec, "suspend", false)
        spec = withDefault(spec, "successfulJobsHistoryLimit", 3)
        spec = withDefault(spec, "failedJobsHistoryLimit", 1)
        const jobTemplate = obj(spec["jobTemplate"])
        const jobSpec = obj(jobTemplate?.["spec"])
        return jobTemplate && jobSpec ? { ...spec, jobTemplate: { ...jobTemplate, spec: defaultTemplate(jobSpec) } } : spec
      }),
    prepareForCreate: (o) => ({ ...o, status: {} }),
    validate: typed(Batch.CronJob, Batch.validateCronJob),
    tracksGeneration: true
  },
  "autoscaling/v2/HorizontalPodAutoscaler": {
    ...base,
    defaults: Autoscaling.defaults,
    prepareForCreate: (o) => ({ ...o, status: { desiredReplicas: 0 } }),
    validate: typed(Autoscaling.HorizontalPodAutoscaler, Autoscaling.validate),
    tracksGeneration: true
  },
  "v1/PersistentVolumeClaim": {
    ...base,
    defaults: (o) => withSpec(o, defaultClaimSpec),
    prepareForCreate: (o) => ({ ...o, status: { phase: "Pending" } }),
    validate: typed(Volume.PersistentVolumeClaim, Volume.validateClaim),
    validateUpdate: typedUpdate(Volume.PersistentVolumeClaim, Volume.validateClaimUpdate),
    deleteReturnsObject: true
  },
  "v1/PersistentVolume": {
    ...base,
    defaults: (o) => withSpec(o, (s) => withDefault(withDefault(s, "persistentVolumeReclaimPolicy", "Retain"), "volumeMode", "Filesystem")),
    prepareForCreate: (o) => ({ ...o, status: { phase: "Pending" } }),
    validate: typed(Volume.PersistentVolume, Volume.validateVolume),
    validateUpdate: typedUpdate(Volume.PersistentVolume, Volume.validateVolumeUpdate),
    deleteReturnsObject: true
  },
  "discovery.k8s.io/v1/EndpointSlice": {
    ...base,
    defaults: (o) =>
      Array.isArray(o["ports"]) ? { ...o, ports: o["ports"].map((p) => withDefault(withDefault(obj(p) ?? {}, "name", ""), "protocol", "TCP")) } : o,
    validate: typed(EndpointSlice.EndpointSlice, EndpointSlice.validate),
    validateUpdate: typedUpdate(EndpointSlice.EndpointSlice, EndpointSlice.validateUpdate)
  },
  "policy/v1/PodDisruptionBudget": {
    ...base,
    prepareForCreate: (o) => ({ ...o, status: { disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0 } }),
    validate: typed(Policy.PodDisruptionBudget, Policy.validatePodDisruptionBudget),
    tracksGeneration: true
  },
  "networking.k8s.io/v1/IPAddress": {
    ...base,
    validate: typed(Networking.IPAddress, Networking.validateIPAddress),
    validateUpdate: (o, old) => immutable("spec.parentRef", obj(o["spec"])?.["parentRef"], obj(old["spec"])?.["parentRef"])
  }
}

const crdCleanup = "customresourcecleanup.apiextensions.k8s.io"

/**
 * LimitRange item defaults (SetDefaults_LimitRangeItem): for containers, `default` falls back to
 * `max`, and `defaultRequest` to `default`, then to `min`.
 */
const defaultLimitRangeItem = (item: unknown): Json => {
  const i = obj(item) ?? {}
  if (i["type"] !== "Container") return i
  const def = { ...(obj(i["max"]) ?? {}), ...(obj(i["default"]) ?? {}) }
  const defaultRequest = { ...(obj(i["min"]) ?? {}), ...def, ...(obj(i["defaultRequest"]) ?? {}) }
  return { ...i, default: def, defaultRequest }
}

const base64 = (text: string): string => {
  const bytes = new TextEncoder().encode(text)
  let binary = ""
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]!)
  return btoa(binary)
}

const ipFields = ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] as const

/**
 * kube-apiserver's Service PrepareForUpdate: a body that leaves out the allocated IP fields
 * (`kubectl replace`, a client built from a manifest) keeps them (patchAllocatedValues); a Service
 * turned into an ExternalName drops them when they were left as they were (dropTypeDependentFields),
 * so admission releases the IP.
 */
const prepareServiceUpdate = (spec: Json, old: Json): Json => {
  const next: Json = { ...spec }
  if (spec["type"] === "ExternalName" && old["type"] !== "ExternalName") {
    for (const f of ipFields) if (jsonEqual(next[f], old[f])) delete next[f]
    return next
  }
  if (spec["type"] !== "ExternalName" && old["type"] !== "ExternalName" && (next["clusterIP"] === undefined || next["clusterIP"] === "")) {
    for (const f of ipFields) if (next[f] === undefined && old[f] !== undefined) next[f] = old[f]
  }
  return next
}

const isZeroIntOrPercent = (v: unknown) => v === 0 || v === "0%" || v === "0"

/**
 * A Deployment's rules beyond its schema, worded as kube-apiserver words them: a rolling update
 * must be able to make progress (maxSurge and maxUnavailable not both 0, maxUnavailable at most
 * 100%), Recreate takes no rollingUpdate, the progress deadline outlasts minReadySeconds, and
 * pods of a Deployment always restart.
 */
const validateDeploymentSpec = (spec: Json): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const strategy = obj(spec["strategy"]) ?? {}
  const rolling = obj(strategy["rollingUpdate"])
  if (strategy["type"] === "Recreate" && rolling !== undefined) {
    errors.push(FieldError.forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"))
  }
  if (strategy["type"] !== "Recreate" && rolling !== undefined) {
    const unavailable = rolling["maxUnavailable"]
    if (isZeroIntOrPercent(unavailable) && isZeroIntOrPercent(rolling["maxSurge"])) {
      errors.push(FieldError.invalid("spec.strategy.rollingUpdate.maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0"))
    }
    if (typeof unavailable === "string" && /^\d+%$/.test(unavailable) && Number.parseInt(unavailable, 10) > 100) {
      errors.push(FieldError.invalid("spec.strategy.rollingUpdate.maxUnavailable", unavailable, "must not be greater than 100%"))
    }
  }
  const deadline = spec["progressDeadlineSeconds"]
  const minReady = Number(spec["minReadySeconds"] ?? 0)
  if (typeof deadline === "number" && deadline <= minReady) {
    errors.push(FieldError.invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
  }
  const restartPolicy = obj(obj(spec["template"])?.["spec"])?.["restartPolicy"]
  if (restartPolicy !== undefined && restartPolicy !== "Always") {
    errors.push(FieldError.notSupported("spec.template.spec.restartPolicy", restartPolicy, ["Always"]))
  }
  return errors
}

/** The strategy of a built-in kind (a neutral one for kinds without special rules). */
export const forKind = (apiVersion: string, kind: string): Strategy => strategies[`${apiVersion}/${kind}`] ?? base

/** The neutral strategy (custom resources start from it). */
export const neutral: Strategy = base

const withStatus = new Set([
  "Pod",
  "Node",
  "Namespace",
  "Service",
  "Deployment",
  "ReplicaSet",
  "StatefulSet",
  "DaemonSet",
  "Job",
  "CronJob",
  "HorizontalPodAutoscaler",
  "PersistentVolumeClaim",
  "PersistentVolume",
  "PodDisruptionBudget",
  "CustomResourceDefinition",
  "ResourceQuota",
  "Ingress",
  "AlertRule"
])
const replicasScale: ScaleSpec = { specReplicasPath: "spec.replicas", statusReplicasPath: "status.replicas", labelSelectorPath: "spec.selector" }
const scale: Record<string, ScaleSpec> = { Deployment: replicasScale, ReplicaSet: replicasScale, StatefulSet: replicasScale }

/** The subresources a built-in kind has. */
export const subresources = (kind: string) => ({ status: withStatus.has(kind), scale: scale[kind] })

/** Discovery categories (`kubectl get all`). */
export const categories = (kind: string): ReadonlyArray<string> =>
  ["Pod", "Service", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob", "HorizontalPodAutoscaler"].includes(kind) ? ["all"] : []

const age: PrinterColumn = { name: "Age", type: "date", value: ".metadata.creationTimestamp" }

const containersReady = (o: JsonObject) => {
  const statuses = asArray(obj(o["status"])?.["containerStatuses"])
  const total = asArray(obj(o["spec"])?.["containers"]).length
  return `${statuses.filter((s) => obj(s)?.["ready"] === true).length}/${total}`
}

const restarts = (o: JsonObject) =>
  asArray(obj(o["status"])?.["containerStatuses"]).reduce<number>((n, s) => n + Number(obj(s)?.["restartCount"] ?? 0), 0)

/** kubectl's `duration.HumanDuration` (`45s`, `3m20s`, `5h10m`, `3d4h`, `2y30d`). */
export const humanDuration = (ms: number): string => {
  const seconds = Math.trunc(ms / 1000)
  if (seconds < -1) return "<invalid>"
  if (seconds < 0) return "0s"
  if (seconds < 120) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`
  if (minutes < 180) return `${minutes}m`
  const hours = Math.floor(minutes / 60)
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`
  if (hours < 48) return `${hours}h`
  if (hours < 24 * 8) return hours % 24 === 0 ? `${hours / 24}d` : `${Math.floor(hours / 24)}d${hours % 24}h`
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`
  const years = Math.floor(hours / 24 / 365)
  const days = Math.floor(hours / 24) % 365
  if (hours < 24 * 365 * 8) return days === 0 ? `${years}y` : `${years}y${days}d`
  return `${years}y`
}

// Printer values get no clock; like kubectl's printers (time.Since), the few that need "now"
// (a running Job's duration, a CronJob's last schedule) read the wall clock.
const sinceTimestamp = (t: unknown): string | undefined => (typeof t === "string" ? humanDuration(Date.now() - Date.parse(t)) : undefined)

const str = (v: unknown): string => (typeof v === "string" ? v : v === undefined || v === null ? "" : String(v))
const num = (v: unknown): number => (typeof v === "number" ? v : 0)
const spec = (o: JsonObject) => obj(o["spec"]) ?? {}
const status = (o: JsonObject) => obj(o["status"]) ?? {}

const podTemplate = (o: JsonObject) => obj(obj(spec(o)["template"])?.["spec"]) ?? {}
const containerNames = (template: Json) => asArray(template["containers"]).map((c) => str(obj(c)?.["name"])).join(",")
const containerImages = (template: Json) => asArray(template["containers"]).map((c) => str(obj(c)?.["image"])).join(",")
const selectorText = (selector: unknown) => {
  const s = obj(selector)
  return s === undefined ? "<none>" : LabelSelector.formatSelector(s as LabelSelector.LabelSelector) || "<none>"
}
const labelsText = (labels: unknown) =>
  Object.entries(obj(labels) ?? {})
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${str(v)}`)
    .join(",") || "<none>"

/** `kubectl get -o wide`'s Containers, Images and Selector columns of a workload. */
const workloadWide = (template: (o: JsonObject) => Json, withSelector = true): ReadonlyArray<PrinterColumn> => [
  { name: "Containers", type: "string", value: (o) => containerNames(template(o)), priority: 1 },
  { name: "Images", type: "string", value: (o) => containerImages(template(o)), priority: 1 },
  ...(withSelector ? [{ name: "Selector", type: "string", value: (o: JsonObject) => selectorText(spec(o)["selector"]), priority: 1 } as const] : [])
]

const jobCondition = (o: JsonObject, type: string) => asArray(status(o)["conditions"]).some((c) => obj(c)?.["type"] === type && obj(c)?.["status"] === "True")

const jobStatus = (o: JsonObject): string => {
  if (jobCondition(o, "Complete")) return "Complete"
  if (jobCondition(o, "Failed")) return "Failed"
  if (obj(o["metadata"])?.["deletionTimestamp"] !== undefined) return "Terminating"
  if (jobCondition(o, "Suspended")) return "Suspended"
  if (jobCondition(o, "FailureTarget")) return "FailureTarget"
  if (jobCondition(o, "SuccessCriteriaMet")) return "SuccessCriteriaMet"
  return "Running"
}

const jobCompletions = (o: JsonObject): string => {
  const succeeded = num(status(o)["succeeded"])
  const completions = spec(o)["completions"]
  if (typeof completions === "number") return `${succeeded}/${completions}`
  const parallelism = spec(o)["parallelism"]
  return typeof parallelism === "number" && parallelism > 1 ? `${succeeded}/1 of ${parallelism}` : `${succeeded}/1`
}

const jobDuration = (o: JsonObject): string => {
  const start = status(o)["startTime"]
  const end = status(o)["completionTime"]
  if (typeof start !== "string") return ""
  return typeof end === "string" ? humanDuration(Date.parse(end) - Date.parse(start)) : (sinceTimestamp(start) ?? "")
}

const intOrString = (v: unknown): string => (v === undefined || v === null ? "N/A" : String(v))

/** kubectl's `formatDiscoveryPorts`/`formatDiscoveryEndpoints`: three items, then "+ N more...". */
const listWithMore = (items: ReadonlyArray<string>): string => {
  if (items.length === 0) return "<unset>"
  const shown = items.slice(0, 3).join(",")
  return items.length > 3 ? `${shown} + ${items.length - 3} more...` : shown
}

const controllerOf = (o: JsonObject): string => {
  const ref = asArray(obj(o["metadata"])?.["ownerReferences"]).map(obj).find((r) => r?.["controller"] === true)
  if (ref === undefined) return "<none>"
  const apiVersion = str(ref["apiVersion"])
  const group = apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : ""
  return `${str(ref["kind"]).toLowerCase()}${group === "" ? "" : `.${group}`}/${str(ref["name"])}`
}

const columns: Record<string, ReadonlyArray<PrinterColumn>> = {
  StatefulSet: [
    { name: "Ready", type: "string", value: (o) => `${num(status(o)["readyReplicas"])}/${num(spec(o)["replicas"])}` },
    age,
    ...workloadWide(podTemplate, false)
  ],
  DaemonSet: [
    { name: "Desired", type: "integer", value: (o) => num(status(o)["desiredNumberScheduled"]) },
    { name: "Current", type: "integer", value: (o) => num(status(o)["currentNumberScheduled"]) },
    { name: "Ready", type: "integer", value: (o) => num(status(o)["numberReady"]) },
    { name: "Up-to-date", type: "integer", value: (o) => num(status(o)["updatedNumberScheduled"]) },
    { name: "Available", type: "integer", value: (o) => num(status(o)["numberAvailable"]) },
    { name: "Node Selector", type: "string", value: (o) => labelsText(podTemplate(o)["nodeSelector"]) },
    age,
    ...workloadWide(podTemplate)
  ],
  ControllerRevision: [
    { name: "Controller", type: "string", value: controllerOf },
    { name: "Revision", type: "integer", value: (o) => num(o["revision"]) },
    age
  ],
  Job: [
    { name: "Status", type: "string", value: jobStatus },
    { name: "Completions", type: "string", value: jobCompletions },
    { name: "Duration", type: "string", value: jobDuration },
    age,
    ...workloadWide(podTemplate)
  ],
  CronJob: [
    { name: "Schedule", type: "string", value: (o) => str(spec(o)["schedule"]) },
    { name: "Timezone", type: "string", value: (o) => str(spec(o)["timeZone"]) || "<none>" },
    { name: "Suspend", type: "boolean", value: (o) => (typeof spec(o)["suspend"] === "boolean" ? (spec(o)["suspend"] ? "True" : "False") : "<unset>") },
    { name: "Active", type: "integer", value: (o) => asArray(status(o)["active"]).length },
    { name: "Last Schedule", type: "string", value: (o) => sinceTimestamp(status(o)["lastScheduleTime"]) ?? "<none>" },
    age,
    ...workloadWide((o) => obj(obj(obj(spec(o)["jobTemplate"])?.["spec"])?.["template"])?.["spec"] as Json ?? {}, false),
    { name: "Selector", type: "string", value: (o) => selectorText(obj(obj(spec(o)["jobTemplate"])?.["spec"])?.["selector"]), priority: 1 }
  ],
  HorizontalPodAutoscaler: [
    { name: "Reference", type: "string", value: (o) => `${str(obj(spec(o)["scaleTargetRef"])?.["kind"])}/${str(obj(spec(o)["scaleTargetRef"])?.["name"])}` },
    { name: "Targets", type: "string", value: Autoscaling.formatTargets },
    { name: "MinPods", type: "string", value: (o) => (typeof spec(o)["minReplicas"] === "number" ? String(spec(o)["minReplicas"]) : "<unset>") },
    { name: "MaxPods", type: "integer", value: (o) => num(spec(o)["maxReplicas"]) },
    { name: "Replicas", type: "integer", value: (o) => num(status(o)["currentReplicas"]) },
    age
  ],
  PersistentVolumeClaim: [
    { name: "Status", type: "string", value: (o) => (obj(o["metadata"])?.["deletionTimestamp"] ? "Terminating" : str(status(o)["phase"])) },
    { name: "Volume", type: "string", value: (o) => str(spec(o)["volumeName"]) },
    { name: "Capacity", type: "string", value: (o) => (str(spec(o)["volumeName"]) === "" ? "" : str(obj(status(o)["capacity"])?.["storage"])) },
    {
      name: "Access Modes",
      type: "string",
      value: (o) => (str(spec(o)["volumeName"]) === "" ? "" : Volume.accessModesShort(asArray(status(o)["accessModes"]) as ReadonlyArray<string>))
    },
    { name: "StorageClass", type: "string", value: (o) => str(spec(o)["storageClassName"]) },
    { name: "VolumeAttributesClass", type: "string", value: (o) => str(spec(o)["volumeAttributesClassName"]) || "<unset>" },
    age,
    { name: "VolumeMode", type: "string", value: (o) => str(spec(o)["volumeMode"]) || "<unset>", priority: 1 }
  ],
  PersistentVolume: [
    { name: "Capacity", type: "string", value: (o) => str(obj(spec(o)["capacity"])?.["storage"]) },
    { name: "Access Modes", type: "string", value: (o) => Volume.accessModesShort(asArray(spec(o)["accessModes"]) as ReadonlyArray<string>) },
    { name: "Reclaim Policy", type: "string", value: (o) => str(spec(o)["persistentVolumeReclaimPolicy"]) },
    { name: "Status", type: "string", value: (o) => (obj(o["metadata"])?.["deletionTimestamp"] ? "Terminating" : str(status(o)["phase"])) },
    {
      name: "Claim",
      type: "string",
      value: (o) => {
        const ref = obj(spec(o)["claimRef"])
        return ref ? `${str(ref["namespace"])}/${str(ref["name"])}` : ""
      }
    },
    { name: "StorageClass", type: "string", value: (o) => str(spec(o)["storageClassName"]) },
    { name: "VolumeAttributesClass", type: "string", value: (o) => str(spec(o)["volumeAttributesClassName"]) || "<unset>" },
    { name: "Reason", type: "string", value: (o) => str(status(o)["reason"]) },
    age,
    { name: "VolumeMode", type: "string", value: (o) => str(spec(o)["volumeMode"]) || "<unset>", priority: 1 }
  ],
  EndpointSlice: [
    { name: "AddressType", type: "string", value: (o) => str(o["addressType"]) },
    {
      name: "Ports",
      type: "string",
      value: (o) => listWithMore(asArray(o["ports"]).map((p) => (typeof obj(p)?.["port"] === "number" ? String(obj(p)?.["port"]) : str(obj(p)?.["name"]) || "*")))
    },
    { name: "Endpoints", type: "string", value: (o) => listWithMore(asArray(o["endpoints"]).flatMap((e) => asArray(obj(e)?.["addresses"]).map(str))) },
    age
  ],
  PodDisruptionBudget: [
    { name: "Min Available", type: "string", value: (o) => intOrString(spec(o)["minAvailable"]) },
    { name: "Max Unavailable", type: "string", value: (o) => intOrString(spec(o)["maxUnavailable"]) },
    { name: "Allowed Disruptions", type: "integer", value: (o) => num(status(o)["disruptionsAllowed"]) },
    age
  ],
  IPAddress: [
    {
      name: "ParentRef",
      type: "string",
      value: (o) => {
        const ref = obj(spec(o)["parentRef"]) ?? {}
        const group = str(ref["group"]).toLowerCase()
        const namespace = str(ref["namespace"])
        return `${str(ref["resource"]).toLowerCase()}${group === "" ? "" : `.${group}`}/${namespace === "" ? "" : `${namespace}/`}${str(ref["name"])}`
      }
    },
    age
  ],
  Pod: [
    { name: "Ready", type: "string", value: containersReady },
    { name: "Status", type: "string", value: (o) => (obj(o["metadata"])?.["deletionTimestamp"] ? "Terminating" : obj(o["status"])?.["phase"] ?? "") },
    { name: "Restarts", type: "integer", value: restarts },
    age,
    { name: "IP", type: "string", value: ".status.podIP", priority: 1 },
    { name: "Node", type: "string", value: ".spec.nodeName", priority: 1 }
  ],
  Namespace: [{ name: "Status", type: "string", value: ".status.phase" }, age],
  PriorityClass: [
    { name: "Value", type: "integer", value: ".value" },
    { name: "Global-Default", type: "boolean", value: (o) => o["globalDefault"] === true },
    age,
    { name: "PreemptionPolicy", type: "string", value: ".preemptionPolicy" }
  ],
  Node: [
    {
      name: "Status",
      type: "string",
      value: (o) => {
        const ready = asArray(obj(o["status"])?.["conditions"]).find((c) => obj(c)?.["type"] === "Ready")
        const status = obj(ready)?.["status"] === "True" ? "Ready" : "NotReady"
        return obj(o["spec"])?.["unschedulable"] === true ? `${status},SchedulingDisabled` : status
      }
    },
    age
  ],
  ConfigMap: [{ name: "Data", type: "integer", value: (o) => Object.keys(obj(o["data"]) ?? {}).length + Object.keys(obj(o["binaryData"]) ?? {}).length }, age],
  Secret: [{ name: "Type", type: "string", value: ".type" }, { name: "Data", type: "integer", value: (o) => Object.keys(obj(o["data"]) ?? {}).length }, age],
  Ingress: [
    { name: "Class", type: "string", value: (o) => obj(o["spec"])?.["ingressClassName"] ?? "<none>" },
    {
      name: "Hosts",
      type: "string",
      value: (o) => asArray(obj(o["spec"])?.["rules"]).map((r) => String(obj(r)?.["host"] ?? "*")).join(",") || "*"
    },
    {
      name: "Address",
      type: "string",
      value: (o) =>
        asArray(obj(obj(o["status"])?.["loadBalancer"])?.["ingress"]).map((i) => String(obj(i)?.["ip"] ?? obj(i)?.["hostname"] ?? "")).join(",")
    },
    { name: "Ports", type: "string", value: (o) => (asArray(obj(o["spec"])?.["tls"]).length > 0 ? "80, 443" : "80") },
    age
  ],
  Service: [
    { name: "Type", type: "string", value: ".spec.type" },
    { name: "Cluster-IP", type: "string", value: (o) => obj(o["spec"])?.["clusterIP"] ?? "<none>" },
    {
      name: "Port(s)",
      type: "string",
      value: (o) =>
        asArray(obj(o["spec"])?.["ports"])
          .map((p) => {
            const port = obj(p) ?? {}
            return `${String(port["port"])}${port["nodePort"] ? `:${String(port["nodePort"])}` : ""}/${String(port["protocol"] ?? "TCP")}`
          })
          .join(",") || "<none>"
    },
    age
  ],
  Deployment: [
    { name: "Ready", type: "string", value: (o) => `${Number(obj(o["status"])?.["readyReplicas"] ?? 0)}/${Number(obj(o["spec"])?.["replicas"] ?? 0)}` },
    { name: "Up-to-date", type: "integer", value: (o) => Number(obj(o["status"])?.["updatedReplicas"] ?? 0) },
    { name: "Available", type: "integer", value: (o) => Number(obj(o["status"])?.["availableReplicas"] ?? 0) },
    age
  ],
  ReplicaSet: [
    { name: "Desired", type: "integer", value: ".spec.replicas" },
    { name: "Current", type: "integer", value: (o) => Number(obj(o["status"])?.["replicas"] ?? 0) },
    { name: "Ready", type: "integer", value: (o) => Number(obj(o["status"])?.["readyReplicas"] ?? 0) },
    age
  ],
  Event: [
    { name: "Last Seen", type: "date", value: ".lastTimestamp" },
    { name: "Type", type: "string", value: ".type" },
    { name: "Reason", type: "string", value: ".reason" },
    { name: "Object", type: "string", value: (o) => `${String(obj(o["involvedObject"])?.["kind"] ?? "").toLowerCase()}/${String(obj(o["involvedObject"])?.["name"] ?? "")}` },
    { name: "Message", type: "string", value: ".message" }
  ],
  Lease: [{ name: "Holder", type: "string", value: ".spec.holderIdentity" }, age],
  AlertRule: [
    { name: "Firing", type: "boolean", value: (o) => obj(o["status"])?.["firing"] === true },
    { name: "Last Fired", type: "date", value: ".status.lastFiredTime" },
    { name: "Last Delivery", type: "date", value: ".status.lastDeliveryTime" },
    { name: "Error", type: "string", value: (o) => obj(o["status"])?.["lastDeliveryError"] ?? "", priority: 1 },
    age
  ],
  Endpoints: [
    {
      name: "Endpoints",
      type: "string",
      value: (o) =>
        asArray(o["subsets"])
          .flatMap((s) => asArray(obj(s)?.["addresses"]).flatMap((a) => asArray(obj(s)?.["ports"]).map((p) => `${String(obj(a)?.["ip"])}:${String(obj(p)?.["port"])}`)))
          .join(",") || "<none>"
    },
    age
  ]
}

/** The Table columns of a built-in kind (after Name, which every table has). */
export const printerColumns = (kind: string): ReadonlyArray<PrinterColumn> => columns[kind] ?? [age]
