/**
 * The `apps` group, as kube-apiserver's `pkg/registry/apps`: workload defaults (rolling updates,
 * history limits, claim templates), the selector that may not change, a Deployment's rules
 * beyond its schema, and the workloads' columns.
 */
import * as Apps from "../../model/Apps.js"
import * as FieldError from "../../model/FieldError.js"
import { asObject, type JsonObject } from "../../object/Json.js"
import * as Metadata from "../../object/Metadata.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies, PrinterColumn, ScaleSpec, Strategy } from "../Strategy.js"
import { defaultClaimSpec, defaultTemplate } from "./CoreDefaults.js"
import { age, labelsText, num, podTemplateSpec, str, workloadWide } from "./Printing.js"
import { immutable, neutral, objectAt, typed, typedUpdate, withDefault, withSpec } from "./Rules.js"

const defaultDeploymentSpec = (s: JsonObject): JsonObject => {
  let spec = withDefault(s, "replicas", 1)
  spec = withDefault(spec, "revisionHistoryLimit", 10)
  spec = withDefault(spec, "progressDeadlineSeconds", 600)
  const strategy = asObject(spec["strategy"])
  const type = strategy["type"] ?? "RollingUpdate"
  spec = {
    ...spec,
    strategy:
      type === "RollingUpdate"
        ? { ...strategy, type, rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%", ...asObject(strategy["rollingUpdate"]) } }
        : { ...strategy, type }
  }
  return defaultTemplate(spec)
}

const isZeroIntOrPercent = (v: unknown) => v === 0 || v === "0%" || v === "0"

/**
 * A Deployment's rules beyond its schema, worded as kube-apiserver words them: a rolling update
 * must be able to make progress (maxSurge and maxUnavailable not both 0, maxUnavailable at most
 * 100%), Recreate takes no rollingUpdate, the progress deadline outlasts minReadySeconds, and
 * pods of a Deployment always restart.
 */
const validateDeploymentSpec = (spec: JsonObject): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const strategy = asObject(spec["strategy"])
  const rolling = objectAt(strategy["rollingUpdate"])
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
  const restartPolicy = objectAt(objectAt(spec["template"])?.["spec"])?.["restartPolicy"]
  if (restartPolicy !== undefined && restartPolicy !== "Always") {
    errors.push(FieldError.notSupported("spec.template.spec.restartPolicy", restartPolicy, ["Always"]))
  }
  return errors
}

const defaultClaimTemplate = (t: unknown): JsonObject => {
  const template = asObject(t)
  return {
    ...template,
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    spec: defaultClaimSpec(asObject(template["spec"])),
    status: withDefault(asObject(template["status"]), "phase", "Pending")
  }
}

/** StatefulSet defaults (SetDefaults_StatefulSet); `maxUnavailable` stays unset (alpha upstream). */
const defaultStatefulSetSpec = (s: JsonObject): JsonObject => {
  let spec = withDefault(s, "podManagementPolicy", "OrderedReady")
  let strategy = asObject(spec["updateStrategy"])
  if (strategy["type"] === undefined) strategy = { ...strategy, type: "RollingUpdate", rollingUpdate: asObject(strategy["rollingUpdate"]) }
  const rollingUpdate = objectAt(strategy["rollingUpdate"])
  if (strategy["type"] === "RollingUpdate" && rollingUpdate) strategy = { ...strategy, rollingUpdate: withDefault(rollingUpdate, "partition", 0) }
  const retention = asObject(spec["persistentVolumeClaimRetentionPolicy"])
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
const defaultDaemonSetSpec = (s: JsonObject): JsonObject => {
  let strategy = withDefault(asObject(s["updateStrategy"]), "type", "RollingUpdate")
  if (strategy["type"] === "RollingUpdate") {
    const rollingUpdate = withDefault(withDefault(asObject(strategy["rollingUpdate"]), "maxUnavailable", 1), "maxSurge", 0)
    strategy = { ...strategy, rollingUpdate }
  }
  return defaultTemplate(withDefault({ ...s, updateStrategy: strategy }, "revisionHistoryLimit", 10))
}

const selectorImmutable = (o: JsonObject, old: JsonObject) =>
  immutable("spec.selector", objectAt(o["spec"])?.["selector"], objectAt(old["spec"])?.["selector"])

const strategies: Record<string, Strategy> = {
  "apps/v1/Deployment": {
    ...neutral,
    defaults: (o) => withSpec(o, defaultDeploymentSpec),
    prepareForCreate: (o) => ({ ...o, status: {} }),
    validate: (o) => validateDeploymentSpec(asObject(o["spec"])),
    validateUpdate: selectorImmutable,
    tracksGeneration: true
  },
  "apps/v1/ReplicaSet": {
    ...neutral,
    defaults: (o) => withSpec(o, (s) => defaultTemplate(withDefault(s, "replicas", 1))),
    prepareForCreate: (o) => ({ ...o, status: { replicas: 0 } }),
    validateUpdate: selectorImmutable,
    tracksGeneration: true
  },
  "apps/v1/StatefulSet": {
    ...neutral,
    defaults: (o) => withSpec(o, defaultStatefulSetSpec),
    prepareForCreate: (o) => ({ ...o, status: { replicas: 0, availableReplicas: 0 } }),
    validate: typed(Apps.StatefulSet, Apps.validateStatefulSet),
    validateUpdate: typedUpdate(Apps.StatefulSet, Apps.validateStatefulSetUpdate),
    tracksGeneration: true
  },
  "apps/v1/DaemonSet": {
    ...neutral,
    defaults: (o) => withSpec(o, defaultDaemonSetSpec),
    prepareForCreate: (o) => ({ ...o, status: { currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0 } }),
    validate: typed(Apps.DaemonSet, Apps.validateDaemonSet),
    validateUpdate: typedUpdate(Apps.DaemonSet, Apps.validateDaemonSetUpdate),
    tracksGeneration: true
  },
  "apps/v1/ControllerRevision": {
    ...neutral,
    validate: typed(Apps.ControllerRevision, Apps.validateControllerRevision),
    validateUpdate: typedUpdate(Apps.ControllerRevision, Apps.validateControllerRevisionUpdate)
  }
}

/** `kind.group/name` of the controlling owner, as kubectl prints a ControllerRevision's. */
const controllerOf = (o: JsonObject): string => {
  const ref = Metadata.controllerRefOf(o)
  if (ref === undefined) return "<none>"
  const apiVersion = str(ref.apiVersion)
  const group = apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : ""
  return `${str(ref.kind).toLowerCase()}${group === "" ? "" : `.${group}`}/${str(ref.name)}`
}

const columns: Record<string, ReadonlyArray<PrinterColumn>> = {
  StatefulSet: [
    { name: "Ready", type: "string", value: (o) => `${num(Views.statefulSet(o).status?.readyReplicas)}/${num(Views.statefulSet(o).spec?.replicas)}` },
    age,
    ...workloadWide(podTemplateSpec, false)
  ],
  DaemonSet: [
    { name: "Desired", type: "integer", value: (o) => num(Views.daemonSet(o).status?.desiredNumberScheduled) },
    { name: "Current", type: "integer", value: (o) => num(Views.daemonSet(o).status?.currentNumberScheduled) },
    { name: "Ready", type: "integer", value: (o) => num(Views.daemonSet(o).status?.numberReady) },
    { name: "Up-to-date", type: "integer", value: (o) => num(Views.daemonSet(o).status?.updatedNumberScheduled) },
    { name: "Available", type: "integer", value: (o) => num(Views.daemonSet(o).status?.numberAvailable) },
    { name: "Node Selector", type: "string", value: (o) => labelsText(podTemplateSpec(o)["nodeSelector"]) },
    age,
    ...workloadWide(podTemplateSpec)
  ],
  ControllerRevision: [
    { name: "Controller", type: "string", value: controllerOf },
    { name: "Revision", type: "integer", value: (o) => num(Views.controllerRevision(o).revision) },
    age
  ],
  Deployment: [
    { name: "Ready", type: "string", value: (o) => `${Number(Views.deployment(o).status?.readyReplicas ?? 0)}/${Number(Views.deployment(o).spec?.replicas ?? 0)}` },
    { name: "Up-to-date", type: "integer", value: (o) => Number(Views.deployment(o).status?.updatedReplicas ?? 0) },
    { name: "Available", type: "integer", value: (o) => Number(Views.deployment(o).status?.availableReplicas ?? 0) },
    age
  ],
  ReplicaSet: [
    { name: "Desired", type: "integer", value: ".spec.replicas" },
    { name: "Current", type: "integer", value: (o) => Number(Views.replicaSet(o).status?.replicas ?? 0) },
    { name: "Ready", type: "integer", value: (o) => Number(Views.replicaSet(o).status?.readyReplicas ?? 0) },
    age
  ]
}

const replicasScale: ScaleSpec = { specReplicasPath: "spec.replicas", statusReplicasPath: "status.replicas", labelSelectorPath: "spec.selector" }

/** The apps group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies,
  columns,
  withStatus: ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"],
  scale: { Deployment: replicasScale, ReplicaSet: replicasScale, StatefulSet: replicasScale },
  inAll: ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"]
}
