/**
 * The `batch` group, as kube-apiserver's `pkg/registry/batch`: Job defaults (completions,
 * backoff, pod failure policy, labels from the template), the selector generated on create once
 * the uid is known, CronJob defaults; and their columns (status, completions, durations).
 */
import * as Batch from "../../model/Batch.js"
import { RegionLabel } from "../../model/Meta.js"
import { asArray, asObject, type JsonObject } from "../../object/Json.js"
import * as Metadata from "../../object/Metadata.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies, PrinterColumn, Strategy } from "../Strategy.js"
import { defaultTemplate } from "./CoreDefaults.js"
import { age, humanDuration, num, podTemplateSpec, selectorText, sinceTimestamp, str, workloadWide } from "./Printing.js"
import { neutral, objectAt, typed, typedUpdate, withDefault, withSpec } from "./Rules.js"

const defaultFailurePolicyRule = (r: unknown) => {
  const rule = asObject(r)
  return Array.isArray(rule["onPodConditions"]) ? { ...rule, onPodConditions: rule["onPodConditions"].map((c) => withDefault(asObject(c), "status", "True")) } : rule
}

/** Job spec defaults (SetDefaults_Job); CronJob job templates only get pod defaults, as upstream. */
const defaultJobSpec = (s: JsonObject): JsonObject => {
  let spec = s
  if (spec["completions"] === undefined && spec["parallelism"] === undefined) spec = { ...spec, completions: 1, parallelism: 1 }
  spec = withDefault(spec, "parallelism", 1)
  spec = withDefault(spec, "backoffLimit", spec["backoffLimitPerIndex"] !== undefined ? 2147483647 : 6)
  spec = withDefault(spec, "completionMode", "NonIndexed")
  spec = withDefault(spec, "suspend", false)
  const failurePolicy = objectAt(spec["podFailurePolicy"])
  if (failurePolicy) spec = { ...spec, podFailurePolicy: { ...failurePolicy, rules: asArray(failurePolicy["rules"]).map(defaultFailurePolicyRule) } }
  spec = withDefault(spec, "podReplacementPolicy", failurePolicy ? "Failed" : "TerminatingOrFailed")
  spec = withDefault(spec, "manualSelector", false)
  return defaultTemplate(spec)
}

/** The labels of a workload's pod template, when it has a label map. */
const templateLabels = (o: JsonObject): JsonObject | undefined => objectAt(objectAt(objectAt(objectAt(o["spec"])?.["template"])?.["metadata"])?.["labels"])

/**
 * A Job without labels of its own takes its template's (SetDefaults_Job). The region label the
 * server adds to every object does not count as the Job's own.
 */
const defaultJobLabels = (o: JsonObject): JsonObject => {
  const m = Metadata.metadataOf(o)
  const labels = asObject(m["labels"])
  const fromTemplate = templateLabels(o)
  const own = Object.keys(labels).filter((k) => k !== RegionLabel)
  return own.length === 0 && fromTemplate ? { ...o, metadata: { ...m, labels: { ...fromTemplate, ...labels } } } : o
}

/** Whether the object's `spec.template` already carries the `batch.kubernetes.io/` labels. */
const hasPrefixedJobLabels = (o: JsonObject) => templateLabels(o)?.[Batch.ControllerUidLabel] !== undefined

const defaultCronJobSpec = (s: JsonObject): JsonObject => {
  let spec = withDefault(s, "concurrencyPolicy", "Allow")
  spec = withDefault(spec, "suspend", false)
  spec = withDefault(spec, "successfulJobsHistoryLimit", 3)
  spec = withDefault(spec, "failedJobsHistoryLimit", 1)
  const jobTemplate = objectAt(spec["jobTemplate"])
  const jobSpec = objectAt(jobTemplate?.["spec"])
  return jobTemplate && jobSpec ? { ...spec, jobTemplate: { ...jobTemplate, spec: defaultTemplate(jobSpec) } } : spec
}

const strategies: Record<string, Strategy> = {
  "batch/v1/Job": {
    ...neutral,
    defaults: (o) => defaultJobLabels(withSpec(o, defaultJobSpec)),
    // The selector is generated here, not in `defaults`: it needs the uid, which the server
    // assigns (with name and creationTimestamp) before calling prepareForCreate, just as
    // kube-apiserver's BeforeCreate fills system fields before the Job strategy's PrepareForCreate.
    // The object was decoded as a Job before defaulting; generateSelector only copies plain fields.
    prepareForCreate: (o) => ({ ...(Batch.generateSelector(o as unknown as Batch.Job) as unknown as JsonObject), status: {} }),
    validate: (o) => typed(Batch.Job, (job) => Batch.validateJob(job, { requirePrefixedLabels: hasPrefixedJobLabels(o) }))(o),
    validateUpdate: typedUpdate(Batch.Job, Batch.validateJobUpdate),
    tracksGeneration: true
  },
  "batch/v1/CronJob": {
    ...neutral,
    defaults: (o) => withSpec(o, defaultCronJobSpec),
    prepareForCreate: (o) => ({ ...o, status: {} }),
    validate: typed(Batch.CronJob, Batch.validateCronJob),
    tracksGeneration: true
  }
}

const jobCondition = (o: JsonObject, type: string) =>
  asArray(Views.job(o).status?.conditions).some((c) => asObject(c)["type"] === type && asObject(c)["status"] === "True")

const jobStatus = (o: JsonObject): string => {
  if (jobCondition(o, "Complete")) return "Complete"
  if (jobCondition(o, "Failed")) return "Failed"
  if (Metadata.isTerminating(o)) return "Terminating"
  if (jobCondition(o, "Suspended")) return "Suspended"
  if (jobCondition(o, "FailureTarget")) return "FailureTarget"
  if (jobCondition(o, "SuccessCriteriaMet")) return "SuccessCriteriaMet"
  return "Running"
}

const jobCompletions = (o: JsonObject): string => {
  const job = Views.job(o)
  const succeeded = num(job.status?.succeeded)
  const completions = job.spec?.completions
  if (typeof completions === "number") return `${succeeded}/${completions}`
  const parallelism = job.spec?.parallelism
  return typeof parallelism === "number" && parallelism > 1 ? `${succeeded}/1 of ${parallelism}` : `${succeeded}/1`
}

const jobDuration = (o: JsonObject): string => {
  const start = Views.job(o).status?.startTime
  const end = Views.job(o).status?.completionTime
  if (typeof start !== "string") return ""
  return typeof end === "string" ? humanDuration(Date.parse(end) - Date.parse(start)) : (sinceTimestamp(start) ?? "")
}

const jobTemplateSpec = (o: JsonObject) => asObject(asObject(o["spec"])["jobTemplate"])["spec"]
const cronJobPodSpec = (o: JsonObject): JsonObject => asObject(asObject(asObject(jobTemplateSpec(o))["template"])["spec"])

const cronJobSuspend = (o: JsonObject) => {
  const suspend = Views.cronJob(o).spec?.suspend
  return typeof suspend === "boolean" ? (suspend ? "True" : "False") : "<unset>"
}

const columns: Record<string, ReadonlyArray<PrinterColumn>> = {
  Job: [
    { name: "Status", type: "string", value: jobStatus },
    { name: "Completions", type: "string", value: jobCompletions },
    { name: "Duration", type: "string", value: jobDuration },
    age,
    ...workloadWide(podTemplateSpec)
  ],
  CronJob: [
    { name: "Schedule", type: "string", value: (o) => str(Views.cronJob(o).spec?.schedule) },
    { name: "Timezone", type: "string", value: (o) => str(Views.cronJob(o).spec?.timeZone) || "<none>" },
    { name: "Suspend", type: "boolean", value: cronJobSuspend },
    { name: "Active", type: "integer", value: (o) => asArray(Views.cronJob(o).status?.active).length },
    { name: "Last Schedule", type: "string", value: (o) => sinceTimestamp(Views.cronJob(o).status?.lastScheduleTime) ?? "<none>" },
    age,
    ...workloadWide(cronJobPodSpec, false),
    { name: "Selector", type: "string", value: (o) => selectorText(objectAt(jobTemplateSpec(o))?.["selector"]), priority: 1 }
  ]
}

/** The batch group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies,
  columns,
  withStatus: ["Job", "CronJob"],
  scale: {},
  inAll: ["Job", "CronJob"]
}
