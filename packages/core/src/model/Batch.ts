/**
 * The batch/v1 kinds: `Job` (runs pods until a number of them succeed) and `CronJob` (creates
 * Jobs on a cron schedule). Unless `manualSelector` is set, the API server gives every Job a
 * selector on its own uid and labels its pod template to match (`generateSelector`), so a Job
 * can never adopt another's pods. Validation follows kube-apiserver's `ValidateJob` and
 * `ValidateCronJob`; schedules are checked by `CronSchedule`.
 */
import { Schema } from "effect"
import * as CronSchedule from "./CronSchedule.js"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import * as LabelSelector from "./LabelSelector.js"
import { ConditionStatus, ObjectMeta, ObjectReference } from "./Meta.js"
import { PodTemplateSpec } from "./Pod.js"
import { Int32, NonNegativeInt32, NonNegativeInt64, Time } from "./Scalars.js"
import * as Validation from "./Validation.js"

// ---- Labels --------------------------------------------------------------------------------

/** The label holding the Job's uid on its pods (and its generated selector). */
export const ControllerUidLabel = "batch.kubernetes.io/controller-uid"

/** The unprefixed form of `ControllerUidLabel`, still set for older clients. */
export const LegacyControllerUidLabel = "controller-uid"

/** The label holding the Job's name on its pods. */
export const JobNameLabel = "batch.kubernetes.io/job-name"

/** The unprefixed form of `JobNameLabel`, still set for older clients. */
export const LegacyJobNameLabel = "job-name"

/** The annotation (and label) with a pod's completion index in an Indexed Job. */
export const JobCompletionIndexAnnotation = "batch.kubernetes.io/job-completion-index"

// ---- Job -----------------------------------------------------------------------------------

/** How a Job counts completions: any N successes, or one success per index 0..N-1. */
export const CompletionMode = Schema.Literal("NonIndexed", "Indexed")

/** A completion mode. */
export type CompletionMode = typeof CompletionMode.Type

/** What a pod failure policy rule does when it matches. */
export const PodFailurePolicyAction = Schema.Literal("FailJob", "FailIndex", "Ignore", "Count")

/** Matches a failed pod by its containers' exit codes. */
export const PodFailurePolicyOnExitCodesRequirement = Schema.Struct({
  containerName: optional(Schema.String),
  operator: Schema.Literal("In", "NotIn"),
  values: Schema.Array(Int32)
})

/** Matches a failed pod by one of its conditions (e.g. `DisruptionTarget`). */
export const PodFailurePolicyOnPodConditionsPattern = Schema.Struct({
  type: Schema.String,
  status: optional(ConditionStatus)
})

/** One rule of a pod failure policy; the first matching rule decides. */
export const PodFailurePolicyRule = Schema.Struct({
  action: PodFailurePolicyAction,
  onExitCodes: optional(PodFailurePolicyOnExitCodesRequirement),
  onPodConditions: optional(Schema.Array(PodFailurePolicyOnPodConditionsPattern))
})

/** How pod failures count against `backoffLimit`. */
export const PodFailurePolicy = Schema.Struct({ rules: Schema.Array(PodFailurePolicyRule) })

/** The desired state of a Job. `selector` is generated unless `manualSelector` is true. */
export const JobSpec = Schema.Struct({
  parallelism: optional(NonNegativeInt32),
  completions: optional(NonNegativeInt32),
  activeDeadlineSeconds: optional(NonNegativeInt64),
  podFailurePolicy: optional(PodFailurePolicy),
  backoffLimit: optional(NonNegativeInt32),
  backoffLimitPerIndex: optional(NonNegativeInt32),
  maxFailedIndexes: optional(NonNegativeInt32),
  selector: optional(LabelSelector.LabelSelector),
  manualSelector: optional(Schema.Boolean),
  template: PodTemplateSpec,
  ttlSecondsAfterFinished: optional(NonNegativeInt32),
  completionMode: optional(CompletionMode),
  suspend: optional(Schema.Boolean),
  podReplacementPolicy: optional(Schema.Literal("TerminatingOrFailed", "Failed"))
})

/** A Job spec. */
export type JobSpec = typeof JobSpec.Type

/** The condition types a Job reports. */
export const JobConditionType = Schema.Literal("Complete", "Failed", "Suspended", "FailureTarget", "SuccessCriteriaMet")

/** A Job condition type. */
export type JobConditionType = typeof JobConditionType.Type

/** A Job condition: `Complete`/`Failed` are terminal, `Suspended` while suspended. */
export const JobCondition = Schema.Struct({
  type: JobConditionType,
  status: ConditionStatus,
  lastProbeTime: optional(Time),
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** A Job condition. */
export type JobCondition = typeof JobCondition.Type

/**
 * Pods that finished but are not yet counted in `succeeded`/`failed` (by uid): the controller
 * records them here before removing their finalizer, so no pod is counted twice or lost.
 */
export const UncountedTerminatedPods = Schema.Struct({
  succeeded: optional(Schema.Array(Schema.String)),
  failed: optional(Schema.Array(Schema.String))
})

/** The observed state of a Job. */
export const JobStatus = Schema.Struct({
  conditions: optional(Schema.Array(JobCondition)),
  startTime: optional(Time),
  completionTime: optional(Time),
  active: optional(NonNegativeInt32),
  succeeded: optional(NonNegativeInt32),
  failed: optional(NonNegativeInt32),
  terminating: optional(NonNegativeInt32),
  ready: optional(NonNegativeInt32),
  completedIndexes: optional(Schema.String),
  failedIndexes: optional(Schema.String),
  uncountedTerminatedPods: optional(UncountedTerminatedPods)
})

/** A Job status. */
export type JobStatus = typeof JobStatus.Type

/** The `Job` kind (batch/v1). */
export const Job = Schema.Struct({
  apiVersion: Schema.Literal("batch/v1"),
  kind: Schema.Literal("Job"),
  metadata: ObjectMeta,
  spec: JobSpec,
  status: optional(JobStatus)
})

/** A Job object. */
export type Job = typeof Job.Type

/**
 * Gives a Job its generated selector (kube-apiserver's `generateSelector`, run on create once the
 * uid is known): the template gets the controller-uid and job-name labels (prefixed and legacy)
 * unless it already has them, and the selector matches `batch.kubernetes.io/controller-uid`.
 * Labels the user set differently are left for validation to refuse.
 */
export const generateSelector = (job: Job): Job => {
  if (job.spec.manualSelector === true) return job
  const uid = job.metadata.uid ?? ""
  const name = job.metadata.name ?? ""
  const withMissing = (existing: Readonly<Record<string, string>> | undefined, added: Readonly<Record<string, string>>) => {
    const out = { ...existing }
    for (const [k, v] of Object.entries(added)) if (!(k in out)) out[k] = v
    return out
  }
  const labels = withMissing(job.spec.template.metadata?.labels, {
    [LegacyJobNameLabel]: name,
    [JobNameLabel]: name,
    [LegacyControllerUidLabel]: uid,
    [ControllerUidLabel]: uid
  })
  const matchLabels = withMissing(job.spec.selector?.matchLabels, { [ControllerUidLabel]: uid })
  return {
    ...job,
    spec: {
      ...job.spec,
      selector: { ...job.spec.selector, matchLabels },
      template: { ...job.spec.template, metadata: { ...job.spec.template.metadata, labels } }
    }
  }
}

const maxParallelismForIndexedJob = 100000
const maxFailedIndexesForIndexedJob = 100000

const hasLabel = (template: PodTemplateSpec, key: string, expected: string): ReadonlyArray<FieldError.FieldError> => {
  const labels = template.metadata?.labels ?? {}
  const path = `spec.template.metadata.labels[${key}]`
  if (!(key in labels)) return [FieldError.required(path, `must be '${expected}'`)]
  return labels[key] === expected ? [] : [FieldError.invalid(path, labels, `must be '${expected}'`)]
}

/** kube-apiserver's `validateGeneratedSelector`: the generated labels and selector are intact. */
const validateGeneratedSelector = (job: Job, requirePrefixedLabels: boolean): ReadonlyArray<FieldError.FieldError> => {
  if (job.spec.manualSelector === true || job.spec.selector === undefined) return []
  const uid = job.metadata.uid ?? ""
  const name = job.metadata.name ?? ""
  const errors: Array<FieldError.FieldError> = []
  if (uid === "") errors.push(FieldError.required("metadata.uid"))
  errors.push(...hasLabel(job.spec.template, LegacyControllerUidLabel, uid), ...hasLabel(job.spec.template, LegacyJobNameLabel, name))
  const expected: Record<string, string> = { [LegacyControllerUidLabel]: uid, [LegacyJobNameLabel]: name }
  if (requirePrefixedLabels) {
    errors.push(...hasLabel(job.spec.template, ControllerUidLabel, uid), ...hasLabel(job.spec.template, JobNameLabel, name))
    expected[ControllerUidLabel] = uid
    expected[JobNameLabel] = name
  }
  if (!LabelSelector.matches(job.spec.selector, expected)) {
    errors.push(FieldError.invalid("spec.selector", job.spec.selector, "`selector` not auto-generated"))
  }
  return errors
}

/**
 * Errors of a Job spec at `path` that hold for Jobs and CronJob job templates alike
 * (kube-apiserver's `validateJobSpec`): completion mode rules and the restart policy, which must
 * be `OnFailure` or `Never` (a template without one is defaulted to `Always`, hence "Required").
 */
export const validateJobSpec = (spec: JobSpec, path = "spec"): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const indexed = spec.completionMode === "Indexed"
  if (spec.maxFailedIndexes !== undefined && spec.backoffLimitPerIndex === undefined) {
    errors.push(FieldError.required(`${path}.backoffLimitPerIndex`, "when maxFailedIndexes is specified"))
  }
  if (indexed) {
    if (spec.completions === undefined) errors.push(FieldError.required(`${path}.completions`, "when completion mode is Indexed"))
    if (spec.parallelism !== undefined && spec.parallelism > maxParallelismForIndexedJob) {
      errors.push(FieldError.invalid(`${path}.parallelism`, spec.parallelism, `must be less than or equal to ${maxParallelismForIndexedJob} when completion mode is Indexed`))
    }
    if (spec.completions !== undefined && spec.maxFailedIndexes !== undefined && spec.maxFailedIndexes > spec.completions) {
      errors.push(FieldError.invalid(`${path}.maxFailedIndexes`, spec.maxFailedIndexes, "must be less than or equal to completions"))
    }
    if (spec.maxFailedIndexes !== undefined && spec.maxFailedIndexes > maxFailedIndexesForIndexedJob) {
      errors.push(FieldError.invalid(`${path}.maxFailedIndexes`, spec.maxFailedIndexes, `must be less than or equal to ${maxFailedIndexesForIndexedJob}`))
    }
  } else {
    if (spec.backoffLimitPerIndex !== undefined) {
      errors.push(FieldError.invalid(`${path}.backoffLimitPerIndex`, spec.backoffLimitPerIndex, "requires indexed completion mode"))
    }
    if (spec.maxFailedIndexes !== undefined) {
      errors.push(FieldError.invalid(`${path}.maxFailedIndexes`, spec.maxFailedIndexes, "requires indexed completion mode"))
    }
  }
  const policy = spec.template.spec.restartPolicy
  const at = `${path}.template.spec.restartPolicy`
  if (policy === undefined || policy === "Always") errors.push(FieldError.required(at, 'valid values: "OnFailure", "Never"'))
  else if (spec.podFailurePolicy !== undefined && policy !== "Never") {
    errors.push(FieldError.invalid(at, policy, 'only "Never" is supported when podFailurePolicy is specified'))
  }
  return errors
}

/** Options of Job validation. */
export interface JobValidationOptions {
  /** Require the `batch.kubernetes.io/` labels too (new Jobs; old ones may only have the legacy ones). */
  readonly requirePrefixedLabels: boolean
}

/** Errors of a (defaulted, selector-generated) Job beyond its schema (kube-apiserver's `ValidateJob`). */
export const validateJob = (job: Job, options: JobValidationOptions = { requirePrefixedLabels: true }): ReadonlyArray<FieldError.FieldError> => {
  const spec = job.spec
  const errors: Array<FieldError.FieldError> = [...validateGeneratedSelector(job, options.requirePrefixedLabels), ...validateJobSpec(spec)]
  if (spec.selector === undefined) errors.push(FieldError.required("spec.selector"))
  else if (!LabelSelector.matches(spec.selector, spec.template.metadata?.labels ?? {})) {
    errors.push(FieldError.invalid("spec.template.metadata.labels", spec.template.metadata?.labels ?? {}, "`selector` does not match template `labels`"))
  }
  // An Indexed Job's pods are named `<job>-<index>`; the largest must still be a DNS label.
  if (spec.completionMode === "Indexed" && spec.completions !== undefined && spec.completions > 0) {
    const hostname = `${job.metadata.name ?? ""}-${spec.completions - 1}`
    if (Validation.isDNS1123Label(hostname).length > 0) {
      errors.push(FieldError.invalid("metadata.name", job.metadata.name ?? "", `will not able to create pod with invalid DNS label: ${hostname}`))
    }
  }
  return errors
}

const canonicalJson = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    typeof x === "object" && x !== null && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x
  ) ?? "undefined"

const immutable = (path: string, value: unknown, old: unknown): ReadonlyArray<FieldError.FieldError> =>
  canonicalJson(value) === canonicalJson(old) ? [] : [FieldError.invalid(path, value ?? null, "field is immutable")]

/**
 * The template as far as updates must keep it. A suspended Job that never started may still
 * change where its pods will run (kube-apiserver's mutable scheduling directives), so a queueing
 * controller can place it before resuming it.
 */
const frozenTemplate = (template: PodTemplateSpec, mutableScheduling: boolean): unknown => {
  if (!mutableScheduling) return template
  const { labels: _l, annotations: _a, ...metadata } = template.metadata ?? {}
  const { nodeSelector: _n, tolerations: _t, affinity, ...spec } = template.spec
  const { nodeAffinity: _na, ...otherAffinity } = affinity ?? {}
  return { metadata, spec: { ...spec, affinity: otherAffinity } }
}

/**
 * Errors of a Job update (kube-apiserver's `ValidateJobSpecUpdate`): selector, template,
 * completion mode, pod failure policy and per-index backoff are immutable; `completions` is too,
 * except that an Indexed Job may change it together with `parallelism` (elastic Indexed Jobs).
 */
export const validateJobUpdate = (job: Job, old: Job): ReadonlyArray<FieldError.FieldError> => {
  const spec = job.spec
  const oldSpec = old.spec
  const errors: Array<FieldError.FieldError> = []
  if (spec.completions !== oldSpec.completions) {
    if (spec.completionMode !== "Indexed") errors.push(...immutable("spec.completions", spec.completions, oldSpec.completions))
    else if (spec.completions !== undefined && spec.completions !== spec.parallelism) {
      errors.push(FieldError.invalid("spec.completions", spec.completions, "can only be modified in tandem with spec.parallelism"))
    }
  }
  errors.push(...immutable("spec.selector", spec.selector, oldSpec.selector))
  const mutableScheduling = oldSpec.suspend === true && old.status?.startTime === undefined
  if (canonicalJson(frozenTemplate(spec.template, mutableScheduling)) !== canonicalJson(frozenTemplate(oldSpec.template, mutableScheduling))) {
    errors.push(FieldError.invalid("spec.template", spec.template, "field is immutable"))
  }
  errors.push(
    ...immutable("spec.completionMode", spec.completionMode, oldSpec.completionMode),
    ...immutable("spec.podFailurePolicy", spec.podFailurePolicy, oldSpec.podFailurePolicy),
    ...immutable("spec.backoffLimitPerIndex", spec.backoffLimitPerIndex, oldSpec.backoffLimitPerIndex)
  )
  return errors
}

/** Whether a Job has finished: a `Complete` or `Failed` condition is `True`. */
export const isFinished = (job: Pick<Job, "status">): boolean =>
  (job.status?.conditions ?? []).some((c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True")

// ---- CronJob -------------------------------------------------------------------------------

/** What a CronJob does when a run is due while the previous Job is still running. */
export const ConcurrencyPolicy = Schema.Literal("Allow", "Forbid", "Replace")

/** A concurrency policy. */
export type ConcurrencyPolicy = typeof ConcurrencyPolicy.Type

/** The Job a CronJob creates at each run: labels and annotations, and the Job spec. */
export const JobTemplateSpec = Schema.Struct({
  metadata: optional(ObjectMeta),
  spec: JobSpec
})

/** A Job template. */
export type JobTemplateSpec = typeof JobTemplateSpec.Type

/** The desired state of a CronJob. */
export const CronJobSpec = Schema.Struct({
  schedule: Schema.String,
  timeZone: optional(Schema.String),
  startingDeadlineSeconds: optional(NonNegativeInt64),
  concurrencyPolicy: optional(ConcurrencyPolicy),
  suspend: optional(Schema.Boolean),
  jobTemplate: JobTemplateSpec,
  successfulJobsHistoryLimit: optional(NonNegativeInt32),
  failedJobsHistoryLimit: optional(NonNegativeInt32)
})

/** A CronJob spec. */
export type CronJobSpec = typeof CronJobSpec.Type

/** The observed state of a CronJob: its running Jobs and when it last ran and succeeded. */
export const CronJobStatus = Schema.Struct({
  active: optional(Schema.Array(ObjectReference)),
  lastScheduleTime: optional(Time),
  lastSuccessfulTime: optional(Time)
})

/** A CronJob status. */
export type CronJobStatus = typeof CronJobStatus.Type

/** The `CronJob` kind (batch/v1). */
export const CronJob = Schema.Struct({
  apiVersion: Schema.Literal("batch/v1"),
  kind: Schema.Literal("CronJob"),
  metadata: ObjectMeta,
  spec: CronJobSpec,
  status: optional(CronJobStatus)
})

/** A CronJob object. */
export type CronJob = typeof CronJob.Type

// The controller names a run's Job `<cronjob>-<minutes since epoch>` (11 characters at most),
// and Job names become pod label values (63 characters).
const maxCronJobNameLength = 63 - 11

/**
 * Errors of a (defaulted) CronJob beyond its schema (kube-apiserver's `ValidateCronJobCreate`):
 * the schedule parses as robfig/cron does and names no `TZ=` (that is `spec.timeZone`'s job),
 * the time zone is known, and the job template leaves the selector to the Job.
 */
export const validateCronJob = (cj: CronJob): ReadonlyArray<FieldError.FieldError> => {
  const spec = cj.spec
  const errors: Array<FieldError.FieldError> = []
  const name = cj.metadata.name ?? ""
  if (name.length > maxCronJobNameLength) errors.push(FieldError.invalid("metadata.name", name, `must be no more than ${maxCronJobNameLength} characters`))
  if (spec.schedule === "") errors.push(FieldError.required("spec.schedule"))
  else {
    const problem = CronSchedule.validate(spec.schedule)
    if (problem !== undefined) errors.push(FieldError.invalid("spec.schedule", spec.schedule, problem))
    if (spec.schedule.includes("TZ")) {
      errors.push(FieldError.invalid("spec.schedule", spec.schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
    }
  }
  if (spec.timeZone !== undefined) {
    const problem = CronSchedule.validateTimeZone(spec.timeZone)
    if (problem !== undefined) errors.push(FieldError.invalid("spec.timeZone", spec.timeZone, problem))
  }
  const template = spec.jobTemplate.spec
  errors.push(...validateJobSpec(template, "spec.jobTemplate.spec"))
  if (template.selector !== undefined) {
    errors.push(FieldError.invalid("spec.jobTemplate.spec.selector", template.selector, "`selector` will be auto-generated"))
  }
  if (template.manualSelector === true) errors.push(FieldError.notSupported("spec.jobTemplate.spec.manualSelector", true, ["nil", "false"]))
  return errors
}
