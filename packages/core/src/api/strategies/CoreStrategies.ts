/**
 * The core group (`v1`), as kube-apiserver's `pkg/registry/core`: pods (what an update may
 * change), namespaces, nodes, services (allocated IPs survive a replace), secrets (stringData
 * folded into data), config maps, limit ranges, quotas, claims and volumes; and their columns.
 */
import * as Config from "../../model/Config.js"
import * as FieldError from "../../model/FieldError.js"
import * as Volume from "../../model/Volume.js"
import { asArray, asObject, jsonEqual, type JsonObject } from "../../object/Json.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies, PrinterColumn, Strategy } from "../Strategy.js"
import { defaultClaimSpec, defaultPodSpec } from "./CoreDefaults.js"
import { age, phaseOrTerminating, str } from "./Printing.js"
import { immutable, neutral, objectAt, typed, typedUpdate, withDefault, withSpec } from "./Rules.js"

/** Pod fields an update may change (kube-apiserver's ValidatePodUpdate). */
const podUpdatable = (spec: JsonObject): JsonObject => {
  const strip = (c: unknown) => ({ ...asObject(c), image: undefined })
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

const validatePodUpdate = (o: JsonObject, old: JsonObject): ReadonlyArray<FieldError.FieldError> => {
  const spec = asObject(o["spec"])
  const oldSpec = asObject(old["spec"])
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
}

const defaultServiceSpec = (s: JsonObject): JsonObject => {
  let spec = withDefault(s, "type", "ClusterIP")
  spec = withDefault(spec, "sessionAffinity", "None")
  if (Array.isArray(spec["ports"])) {
    spec = {
      ...spec,
      ports: spec["ports"].map((p) => {
        const port = withDefault(asObject(p), "protocol", "TCP")
        return withDefault(port, "targetPort", port["port"])
      })
    }
  }
  return spec
}

const ipFields = ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] as const

/**
 * kube-apiserver's Service PrepareForUpdate: a body that leaves out the allocated IP fields
 * (`kubectl replace`, a client built from a manifest) keeps them (patchAllocatedValues); a Service
 * turned into an ExternalName drops them when they were left as they were (dropTypeDependentFields),
 * so admission releases the IP.
 */
const prepareServiceUpdate = (spec: JsonObject, old: JsonObject): JsonObject => {
  const next: JsonObject = { ...spec }
  if (spec["type"] === "ExternalName" && old["type"] !== "ExternalName") {
    for (const f of ipFields) if (jsonEqual(next[f], old[f])) delete next[f]
    return next
  }
  if (spec["type"] !== "ExternalName" && old["type"] !== "ExternalName" && (next["clusterIP"] === undefined || next["clusterIP"] === "")) {
    for (const f of ipFields) if (next[f] === undefined && old[f] !== undefined) next[f] = old[f]
  }
  return next
}

const validateServiceUpdate = (o: JsonObject, old: JsonObject): ReadonlyArray<FieldError.FieldError> => {
  const spec = asObject(o["spec"])
  const oldSpec = asObject(old["spec"])
  const ip = oldSpec["clusterIP"]
  // Changing to or from ExternalName allocates or releases the IP; otherwise it is fixed.
  if (ip === undefined || ip === "" || spec["type"] === "ExternalName" || oldSpec["type"] === "ExternalName") return []
  return immutable("spec.clusterIP", spec["clusterIP"], ip)
}

const base64 = (text: string): string => {
  const bytes = new TextEncoder().encode(text)
  let binary = ""
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]!)
  return btoa(binary)
}

// stringData is write-only: it is folded into data (base64) and never stored.
const defaultSecret = (o: JsonObject): JsonObject => {
  const stringData = objectAt(o["stringData"])
  let out: JsonObject = withDefault(o, "type", "Opaque")
  if (stringData) {
    const data = { ...asObject(o["data"]) }
    for (const [k, v] of Object.entries(stringData)) data[k] = base64(String(v))
    out = { ...out, data, stringData: undefined }
    delete out["stringData"]
  }
  return out
}

/**
 * LimitRange item defaults (SetDefaults_LimitRangeItem): for containers, `default` falls back to
 * `max`, and `defaultRequest` to `default`, then to `min`.
 */
const defaultLimitRangeItem = (item: unknown): JsonObject => {
  const i = asObject(item)
  if (i["type"] !== "Container") return i
  const def = { ...asObject(i["max"]), ...asObject(i["default"]) }
  const defaultRequest = { ...asObject(i["min"]), ...def, ...asObject(i["defaultRequest"]) }
  return { ...i, default: def, defaultRequest }
}

const strategies: Record<string, Strategy> = {
  "v1/Pod": {
    ...neutral,
    defaults: (o) => withSpec(o, defaultPodSpec),
    prepareForCreate: (o) => ({ ...o, status: { phase: "Pending" } }),
    validateUpdate: validatePodUpdate,
    tracksGeneration: true,
    deleteReturnsObject: true
  },
  "v1/Namespace": {
    ...neutral,
    defaults: (o) => withSpec({ ...o, spec: o["spec"] ?? {} }, (s) => withDefault(s, "finalizers", ["kubernetes"])),
    prepareForCreate: (o) => ({ ...o, status: { phase: "Active" } }),
    deleteReturnsObject: true
  },
  "v1/Node": {
    ...neutral,
    validateUpdate: (o, old) => {
      const podCIDR = objectAt(old["spec"])?.["podCIDR"]
      return podCIDR === undefined ? [] : immutable("spec.podCIDR", objectAt(o["spec"])?.["podCIDR"], podCIDR)
    }
  },
  "v1/Service": {
    ...neutral,
    defaults: (o) => withSpec(o, defaultServiceSpec),
    prepareForUpdate: (o, old) => withSpec(o, (spec) => prepareServiceUpdate(spec, asObject(old["spec"]))),
    validateUpdate: validateServiceUpdate,
    deleteReturnsObject: true
  },
  "v1/Secret": {
    ...neutral,
    defaults: defaultSecret,
    validate: Config.validateSecretSize,
    validateUpdate: (o, old) => [
      ...(old["immutable"] === true ? [...immutable("data", o["data"], old["data"]), ...immutable("immutable", o["immutable"], true)] : []),
      ...immutable("type", o["type"], old["type"])
    ]
  },
  "v1/ConfigMap": {
    ...neutral,
    validate: Config.validateConfigMapSize,
    validateUpdate: (o, old) =>
      old["immutable"] === true
        ? [...immutable("data", o["data"], old["data"]), ...immutable("binaryData", o["binaryData"], old["binaryData"]), ...immutable("immutable", o["immutable"], true)]
        : []
  },
  "v1/LimitRange": { ...neutral, defaults: (o) => withSpec(o, (s) => ({ ...s, limits: asArray(s["limits"]).map(defaultLimitRangeItem) })) },
  "v1/ResourceQuota": {
    ...neutral,
    // status.hard mirrors spec.hard; status.used is the ResourceQuota admission plugin's.
    prepareForCreate: (o) => {
      const hard = objectAt(objectAt(o["spec"])?.["hard"])
      return { ...o, status: hard ? { hard } : {} }
    }
  },
  "v1/PersistentVolumeClaim": {
    ...neutral,
    defaults: (o) => withSpec(o, defaultClaimSpec),
    prepareForCreate: (o) => ({ ...o, status: { phase: "Pending" } }),
    validate: typed(Volume.PersistentVolumeClaim, Volume.validateClaim),
    validateUpdate: typedUpdate(Volume.PersistentVolumeClaim, Volume.validateClaimUpdate),
    deleteReturnsObject: true
  },
  "v1/PersistentVolume": {
    ...neutral,
    defaults: (o) => withSpec(o, (s) => withDefault(withDefault(s, "persistentVolumeReclaimPolicy", "Retain"), "volumeMode", "Filesystem")),
    prepareForCreate: (o) => ({ ...o, status: { phase: "Pending" } }),
    validate: typed(Volume.PersistentVolume, Volume.validateVolume),
    validateUpdate: typedUpdate(Volume.PersistentVolume, Volume.validateVolumeUpdate),
    deleteReturnsObject: true
  }
}

const containersReady = (o: JsonObject) => {
  const pod = Views.pod(o)
  const statuses = asArray(pod.status?.containerStatuses)
  const total = asArray(pod.spec?.containers).length
  return `${statuses.filter((s) => asObject(s)["ready"] === true).length}/${total}`
}

const restarts = (o: JsonObject) =>
  asArray(Views.pod(o).status?.containerStatuses).reduce<number>((n, s) => n + Number(asObject(s)["restartCount"] ?? 0), 0)

const nodeStatus = (o: JsonObject) => {
  const node = Views.node(o)
  const ready = asArray(node.status?.conditions).find((c) => asObject(c)["type"] === "Ready")
  const status = asObject(ready)["status"] === "True" ? "Ready" : "NotReady"
  return node.spec?.unschedulable === true ? `${status},SchedulingDisabled` : status
}

const servicePorts = (o: JsonObject) =>
  asArray(Views.service(o).spec?.ports)
    .map((p) => {
      const port = asObject(p)
      return `${String(port["port"])}${port["nodePort"] ? `:${String(port["nodePort"])}` : ""}/${String(port["protocol"] ?? "TCP")}`
    })
    .join(",") || "<none>"

const endpointsText = (o: JsonObject) =>
  asArray(Views.endpoints(o).subsets)
    .flatMap((s) => asArray(asObject(s)["addresses"]).flatMap((a) => asArray(asObject(s)["ports"]).map((p) => `${String(asObject(a)["ip"])}:${String(asObject(p)["port"])}`)))
    .join(",") || "<none>"

const claimModes = (o: JsonObject) => {
  const claim = Views.persistentVolumeClaim(o)
  return str(claim.spec?.volumeName) === "" ? "" : Volume.accessModesShort(asArray(claim.status?.accessModes) as ReadonlyArray<string>) // items passed the AccessMode schema when written
}

const volumeClaim = (o: JsonObject) => {
  const ref = objectAt(Views.persistentVolume(o).spec?.claimRef)
  return ref ? `${str(ref["namespace"])}/${str(ref["name"])}` : ""
}

const columns: Record<string, ReadonlyArray<PrinterColumn>> = {
  PersistentVolumeClaim: [
    { name: "Status", type: "string", value: (o) => phaseOrTerminating(o, Views.persistentVolumeClaim(o).status?.phase) },
    { name: "Volume", type: "string", value: (o) => str(Views.persistentVolumeClaim(o).spec?.volumeName) },
    {
      name: "Capacity",
      type: "string",
      value: (o) => {
        const claim = Views.persistentVolumeClaim(o)
        return str(claim.spec?.volumeName) === "" ? "" : str(objectAt(claim.status?.capacity)?.["storage"])
      }
    },
    { name: "Access Modes", type: "string", value: claimModes },
    { name: "StorageClass", type: "string", value: (o) => str(Views.persistentVolumeClaim(o).spec?.storageClassName) },
    { name: "VolumeAttributesClass", type: "string", value: (o) => str(Views.persistentVolumeClaim(o).spec?.volumeAttributesClassName) || "<unset>" },
    age,
    { name: "VolumeMode", type: "string", value: (o) => str(Views.persistentVolumeClaim(o).spec?.volumeMode) || "<unset>", priority: 1 }
  ],
  PersistentVolume: [
    { name: "Capacity", type: "string", value: (o) => str(objectAt(Views.persistentVolume(o).spec?.capacity)?.["storage"]) },
    {
      name: "Access Modes",
      type: "string",
      value: (o) => Volume.accessModesShort(asArray(Views.persistentVolume(o).spec?.accessModes) as ReadonlyArray<string>) // items passed the AccessMode schema when written
    },
    { name: "Reclaim Policy", type: "string", value: (o) => str(Views.persistentVolume(o).spec?.persistentVolumeReclaimPolicy) },
    { name: "Status", type: "string", value: (o) => phaseOrTerminating(o, Views.persistentVolume(o).status?.phase) },
    { name: "Claim", type: "string", value: volumeClaim },
    { name: "StorageClass", type: "string", value: (o) => str(Views.persistentVolume(o).spec?.storageClassName) },
    // Not in Fleet's PersistentVolume schema yet, so read untyped; kubectl prints the column.
    { name: "VolumeAttributesClass", type: "string", value: (o) => str(asObject(o["spec"])["volumeAttributesClassName"]) || "<unset>" },
    { name: "Reason", type: "string", value: (o) => str(Views.persistentVolume(o).status?.reason) },
    age,
    { name: "VolumeMode", type: "string", value: (o) => str(Views.persistentVolume(o).spec?.volumeMode) || "<unset>", priority: 1 }
  ],
  Pod: [
    { name: "Ready", type: "string", value: containersReady },
    { name: "Status", type: "string", value: (o) => (objectAt(o["metadata"])?.["deletionTimestamp"] ? "Terminating" : (Views.pod(o).status?.phase ?? "")) },
    { name: "Restarts", type: "integer", value: restarts },
    age,
    { name: "IP", type: "string", value: ".status.podIP", priority: 1 },
    { name: "Node", type: "string", value: ".spec.nodeName", priority: 1 }
  ],
  Namespace: [{ name: "Status", type: "string", value: ".status.phase" }, age],
  Node: [{ name: "Status", type: "string", value: nodeStatus }, age],
  ConfigMap: [
    {
      name: "Data",
      type: "integer",
      value: (o) => Object.keys(asObject(Views.configMap(o).data)).length + Object.keys(asObject(Views.configMap(o).binaryData)).length
    },
    age
  ],
  Secret: [{ name: "Type", type: "string", value: ".type" }, { name: "Data", type: "integer", value: (o) => Object.keys(asObject(Views.secret(o).data)).length }, age],
  Service: [
    { name: "Type", type: "string", value: ".spec.type" },
    { name: "Cluster-IP", type: "string", value: (o) => Views.service(o).spec?.clusterIP ?? "<none>" },
    { name: "Port(s)", type: "string", value: servicePorts },
    age
  ],
  Event: [
    { name: "Last Seen", type: "date", value: ".lastTimestamp" },
    { name: "Type", type: "string", value: ".type" },
    { name: "Reason", type: "string", value: ".reason" },
    {
      name: "Object",
      type: "string",
      value: (o) => {
        const involved = objectAt(Views.event(o).involvedObject)
        return `${String(involved?.["kind"] ?? "").toLowerCase()}/${String(involved?.["name"] ?? "")}`
      }
    },
    { name: "Message", type: "string", value: ".message" }
  ],
  Endpoints: [{ name: "Endpoints", type: "string", value: endpointsText }, age]
}

/** The core group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies,
  columns,
  withStatus: ["Pod", "Node", "Namespace", "Service", "PersistentVolumeClaim", "PersistentVolume", "ResourceQuota"],
  scale: {},
  inAll: ["Pod", "Service"]
}

