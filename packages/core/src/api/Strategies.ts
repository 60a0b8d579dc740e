/**
 * The strategies of the built-in kinds: the defaults kube-apiserver fills in, which subresources
 * each kind has, which fields an update may not change, and the columns `kubectl get` shows.
 * Each rule is a small pure function over JSON, mirroring the Kubernetes registry it comes from.
 */
import * as FieldError from "../model/FieldError.js"
import * as Rbac from "../model/Rbac.js"
import type { JsonObject, PrinterColumn, ScaleSpec, Strategy } from "./Registry.js"

type Json = Record<string, unknown>

const obj = (v: unknown): Json | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : undefined)
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])
const withDefault = (o: Json, key: string, value: unknown) => (o[key] === undefined ? { ...o, [key]: value } : o)

/** Structural equality of JSON values (key order ignored). */
export const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const bb = b as Array<unknown>
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]))
  }
  const ao = a as Json
  const bo = b as Json
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined)
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined)
  return ak.length === bk.length && ak.every((k) => jsonEqual(ao[k], bo[k]))
}

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
    containers: arr(spec["containers"]).map(strip),
    initContainers: arr(spec["initContainers"]).map(strip),
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
    validateUpdate: (o, old) => {
      const ip = obj(old["spec"])?.["clusterIP"]
      return ip === undefined || ip === "" ? [] : immutable("spec.clusterIP", obj(o["spec"])?.["clusterIP"], ip)
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
    validateUpdate: (o, old) => [
      ...(old["immutable"] === true ? [...immutable("data", o["data"], old["data"]), ...immutable("immutable", o["immutable"], true)] : []),
      ...immutable("type", o["type"], old["type"])
    ]
  },
  "v1/ConfigMap": {
    ...base,
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
    validateUpdate: (o, old) => immutable("spec.selector", obj(o["spec"])?.["selector"], obj(old["spec"])?.["selector"]),
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
      const versions = arr(spec["versions"])
      if (versions.filter((v) => obj(v)?.["storage"] === true).length !== 1) {
        errors.push(FieldError.invalid("spec.versions", versions.length, "must have exactly one version marked as storage version"))
      }
      return errors
    },
    prepareForCreate: (o) => {
      const spec = obj(o["spec"]) ?? {}
      const m = obj(o["metadata"]) ?? {}
      const finalizers = arr(m["finalizers"]) as Array<string>
      const storage = arr(spec["versions"]).find((v) => obj(v)?.["storage"] === true)
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
  "v1/LimitRange": { ...base, defaults: (o) => withSpec(o, (s) => ({ ...s, limits: arr(s["limits"]).map(defaultLimitRangeItem) })) },
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

/** The strategy of a built-in kind (a neutral one for kinds without special rules). */
export const forKind = (apiVersion: string, kind: string): Strategy => strategies[`${apiVersion}/${kind}`] ?? base

/** The neutral strategy (custom resources start from it). */
export const neutral: Strategy = base

const withStatus = new Set(["Pod", "Node", "Namespace", "Service", "Deployment", "ReplicaSet", "CustomResourceDefinition", "ResourceQuota"])
const scale: Record<string, ScaleSpec> = {
  Deployment: { specReplicasPath: "spec.replicas", statusReplicasPath: "status.replicas", labelSelectorPath: "spec.selector" },
  ReplicaSet: { specReplicasPath: "spec.replicas", statusReplicasPath: "status.replicas", labelSelectorPath: "spec.selector" }
}

/** The subresources a built-in kind has. */
export const subresources = (kind: string) => ({ status: withStatus.has(kind), scale: scale[kind] })

/** Discovery categories (`kubectl get all`). */
export const categories = (kind: string): ReadonlyArray<string> =>
  ["Pod", "Service", "Deployment", "ReplicaSet"].includes(kind) ? ["all"] : []

const age: PrinterColumn = { name: "Age", type: "date", value: ".metadata.creationTimestamp" }

const containersReady = (o: JsonObject) => {
  const statuses = arr(obj(o["status"])?.["containerStatuses"])
  const total = arr(obj(o["spec"])?.["containers"]).length
  return `${statuses.filter((s) => obj(s)?.["ready"] === true).length}/${total}`
}

const restarts = (o: JsonObject) =>
  arr(obj(o["status"])?.["containerStatuses"]).reduce<number>((n, s) => n + Number(obj(s)?.["restartCount"] ?? 0), 0)

const columns: Record<string, ReadonlyArray<PrinterColumn>> = {
  Pod: [
    { name: "Ready", type: "string", value: containersReady },
    { name: "Status", type: "string", value: (o) => (obj(o["metadata"])?.["deletionTimestamp"] ? "Terminating" : obj(o["status"])?.["phase"] ?? "") },
    { name: "Restarts", type: "integer", value: restarts },
    age,
    { name: "IP", type: "string", value: ".status.podIP", priority: 1 },
    { name: "Node", type: "string", value: ".spec.nodeName", priority: 1 }
  ],
  Namespace: [{ name: "Status", type: "string", value: ".status.phase" }, age],
  Node: [
    {
      name: "Status",
      type: "string",
      value: (o) => {
        const ready = arr(obj(o["status"])?.["conditions"]).find((c) => obj(c)?.["type"] === "Ready")
        const status = obj(ready)?.["status"] === "True" ? "Ready" : "NotReady"
        return obj(o["spec"])?.["unschedulable"] === true ? `${status},SchedulingDisabled` : status
      }
    },
    age
  ],
  ConfigMap: [{ name: "Data", type: "integer", value: (o) => Object.keys(obj(o["data"]) ?? {}).length + Object.keys(obj(o["binaryData"]) ?? {}).length }, age],
  Secret: [{ name: "Type", type: "string", value: ".type" }, { name: "Data", type: "integer", value: (o) => Object.keys(obj(o["data"]) ?? {}).length }, age],
  Service: [
    { name: "Type", type: "string", value: ".spec.type" },
    { name: "Cluster-IP", type: "string", value: (o) => obj(o["spec"])?.["clusterIP"] ?? "<none>" },
    {
      name: "Port(s)",
      type: "string",
      value: (o) =>
        arr(obj(o["spec"])?.["ports"])
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
  Endpoints: [
    {
      name: "Endpoints",
      type: "string",
      value: (o) =>
        arr(o["subsets"])
          .flatMap((s) => arr(obj(s)?.["addresses"]).flatMap((a) => arr(obj(s)?.["ports"]).map((p) => `${String(obj(a)?.["ip"])}:${String(obj(p)?.["port"])}`)))
          .join(",") || "<none>"
    },
    age
  ]
}

/** The Table columns of a built-in kind (after Name, which every table has). */
export const printerColumns = (kind: string): ReadonlyArray<PrinterColumn> => columns[kind] ?? [age]
