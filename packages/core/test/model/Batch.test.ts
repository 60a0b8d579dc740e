// batch/v1 Job and CronJob: decoding, SetDefaults_Job/SetDefaults_CronJob through the strategy,
// the generated selector, and kube-apiserver's validation messages.
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Batch, Kinds } from "../../src/model/index.js"
import { created, createErrors, updateErrors } from "./harness.js"

const uid = "0b5e7a36-1111-4c1d-9c4e-000000000001"

const podTemplate = (spec: Record<string, unknown> = {}, labels?: Record<string, string>) => ({
  ...(labels === undefined ? {} : { metadata: { labels } }),
  spec: { restartPolicy: "Never", containers: [{ name: "pi", image: "perl:5.34", command: ["perl", "-e", "print 1"] }], ...spec }
})

const job = (spec: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}) => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name: "pi", namespace: "default", ...metadata },
  spec: { template: podTemplate(), ...spec }
})

const cronJob = (spec: Record<string, unknown> = {}, name = "nightly") => ({
  apiVersion: "batch/v1",
  kind: "CronJob",
  metadata: { name, namespace: "default" },
  spec: { schedule: "*/5 * * * *", jobTemplate: { spec: { template: podTemplate() } }, ...spec }
})

describe("Job", () => {
  it("decodes a Job as kubectl prints it (strict)", () => {
    const full = {
      ...job({
        parallelism: 2,
        completions: 4,
        activeDeadlineSeconds: 600,
        backoffLimit: 3,
        manualSelector: true,
        selector: { matchLabels: { app: "pi" } },
        template: podTemplate({}, { app: "pi" }),
        ttlSecondsAfterFinished: 100,
        completionMode: "NonIndexed",
        suspend: false,
        podReplacementPolicy: "TerminatingOrFailed",
        podFailurePolicy: { rules: [{ action: "FailJob", onExitCodes: { containerName: "pi", operator: "In", values: [42] } }, { action: "Ignore", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] }] }
      }),
      status: {
        conditions: [{ type: "Complete", status: "True", lastProbeTime: "2024-05-01T10:01:00Z", lastTransitionTime: "2024-05-01T10:01:00Z", reason: "Completed", message: "done" }],
        startTime: "2024-05-01T10:00:00Z",
        completionTime: "2024-05-01T10:01:00Z",
        active: 0,
        succeeded: 4,
        failed: 1,
        ready: 0,
        terminating: 0,
        uncountedTerminatedPods: { succeeded: [], failed: [] }
      }
    }
    const r = Kinds.decodeAny(full, { strict: true })
    if (Either.isLeft(r)) expect(r.left).toEqual([])
    expect(Either.isRight(r) && r.right.info.plural).toBe("jobs")
  })

  it("gets SetDefaults_Job's defaults: both completions and parallelism 1 when neither is set", () => {
    const o = created(job())
    expect(o.spec).toMatchObject({
      completions: 1,
      parallelism: 1,
      backoffLimit: 6,
      completionMode: "NonIndexed",
      suspend: false,
      manualSelector: false,
      podReplacementPolicy: "TerminatingOrFailed"
    })
    expect(o.status).toEqual({})
    expect(o.metadata.generation).toBe(1)
  })

  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    ["parallelism only: completions stay unset", { parallelism: 3 }, { parallelism: 3 }],
    ["completions only: parallelism 1", { completions: 5 }, { completions: 5, parallelism: 1 }],
    ["backoffLimitPerIndex: backoffLimit is MaxInt32", { completionMode: "Indexed", completions: 3, backoffLimitPerIndex: 1 }, { backoffLimit: 2147483647 }],
    ["a pod failure policy: replacement on Failed", { podFailurePolicy: { rules: [{ action: "Ignore", onPodConditions: [{ type: "DisruptionTarget" }] }] } }, { podReplacementPolicy: "Failed" }]
  ])("%s", (_, spec, expected) => {
    const o = created(job(spec))
    expect(o.spec).toMatchObject(expected)
    if ("parallelism" in spec && !("completions" in spec)) expect(o.spec).not.toHaveProperty("completions")
  })

  it("defaults onPodConditions status to True", () => {
    const o = created(job({ podFailurePolicy: { rules: [{ action: "Ignore", onPodConditions: [{ type: "DisruptionTarget" }] }] } }))
    expect(o.spec.podFailurePolicy.rules[0].onPodConditions).toEqual([{ type: "DisruptionTarget", status: "True" }])
  })

  it("generates the selector from the uid and labels the template, after the server assigns the uid", () => {
    const o = created(job({ template: podTemplate({}, { app: "pi" }) }), uid)
    expect(o.metadata.uid).toBe(uid)
    expect(o.spec.selector).toEqual({ matchLabels: { "batch.kubernetes.io/controller-uid": uid } })
    expect(o.spec.template.metadata.labels).toEqual({
      app: "pi",
      "batch.kubernetes.io/controller-uid": uid,
      "batch.kubernetes.io/job-name": "pi",
      "controller-uid": uid,
      "job-name": "pi"
    })
    // A Job without labels of its own takes the template's (as the user wrote them).
    expect(o.metadata.labels).toEqual({ app: "pi", "fleet.koder.dev/region": "local" })
  })

  it("keeps its own labels when it has some", () => {
    expect(created(job({ template: podTemplate({}, { app: "pi" }) }, { labels: { team: "a" } })).metadata.labels).toEqual({ team: "a", "fleet.koder.dev/region": "local" })
  })

  it("uses the user's selector with manualSelector", () => {
    const o = created(job({ manualSelector: true, selector: { matchLabels: { app: "pi" } }, template: podTemplate({}, { app: "pi" }) }))
    expect(o.spec.selector).toEqual({ matchLabels: { app: "pi" } })
    expect(o.spec.template.metadata.labels).toEqual({ app: "pi" })
  })

  it("the pure generateSelector leaves manual selectors alone", () => {
    const decoded = Kinds.decodeAny(job({ manualSelector: true, selector: { matchLabels: { a: "b" } } }))
    if (Either.isLeft(decoded)) throw new Error("decode")
    const j = decoded.right.object as Batch.Job
    expect(Batch.generateSelector(j)).toBe(j)
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["restartPolicy Always", job({ template: podTemplate({ restartPolicy: "Always" }) }), 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'],
    ["no restartPolicy (defaulted to Always)", job({ template: { spec: { containers: [{ name: "pi", image: "perl" }] } } }), 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'],
    [
      "OnFailure with a pod failure policy",
      job({ template: podTemplate({ restartPolicy: "OnFailure" }), podFailurePolicy: { rules: [{ action: "FailJob", onExitCodes: { operator: "In", values: [1] } }] } }),
      'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified'
    ],
    ["Indexed without completions", job({ completionMode: "Indexed", parallelism: 2 }), "spec.completions: Required value: when completion mode is Indexed"],
    ["an unknown completion mode", job({ completionMode: "Sparse" }), 'spec.completionMode: Unsupported value: "Sparse": supported values: "NonIndexed", "Indexed"'],
    ["backoffLimitPerIndex on a NonIndexed Job", job({ backoffLimitPerIndex: 1 }), "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"],
    ["maxFailedIndexes without backoffLimitPerIndex", job({ completionMode: "Indexed", completions: 3, maxFailedIndexes: 1 }), "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified"],
    ["a negative backoffLimit", job({ backoffLimit: -1 }), "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0"],
    ["a negative parallelism", job({ parallelism: -1 }), "spec.parallelism: Invalid value: -1: must be greater than or equal to 0"],
    ["manualSelector without a selector", job({ manualSelector: true }), "spec.selector: Required value"],
    [
      "a manual selector that misses the template",
      job({ manualSelector: true, selector: { matchLabels: { app: "x" } }, template: podTemplate({}, { app: "pi" }) }),
      'spec.template.metadata.labels: Invalid value: {"app":"pi"}: `selector` does not match template `labels`'
    ],
    [
      "a template claiming another Job's uid",
      job({ template: podTemplate({}, { "controller-uid": "someone-else" }) }),
      `spec.template.metadata.labels[controller-uid]: Invalid value: {"controller-uid":"someone-else","job-name":"pi","batch.kubernetes.io/job-name":"pi","batch.kubernetes.io/controller-uid":"${uid}"}: must be '${uid}'`
    ],
    [
      "a selector it did not generate",
      job({ selector: { matchLabels: { app: "pi" } }, template: podTemplate({}, { app: "pi" }) }),
      'spec.selector: Invalid value: {"matchLabels":{"app":"pi","batch.kubernetes.io/controller-uid":"' + uid + '"}}: `selector` not auto-generated'
    ],
    [
      "an Indexed Job whose last pod name is no DNS label",
      job({ completionMode: "Indexed", completions: 10 }, { name: "a".repeat(62) }),
      `metadata.name: Invalid value: "${"a".repeat(62)}": will not able to create pod with invalid DNS label: ${"a".repeat(62)}-9`
    ]
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(object)).toContain(message)
  })

  it("the selector-generation errors differ only by the generated labels", () => {
    // Sanity check on the cases above: the template of a valid Job has the four labels.
    expect(Object.keys(created(job()).spec.template.metadata.labels).sort()).toEqual([
      "batch.kubernetes.io/controller-uid",
      "batch.kubernetes.io/job-name",
      "controller-uid",
      "job-name"
    ])
  })

  describe("updates", () => {
    const old = created(job({ parallelism: 2, completions: 4 }))
    const withSpec = (spec: Record<string, unknown>) => ({ ...old, spec: { ...old.spec, ...spec } })

    it.each<[string, Record<string, unknown>]>([
      ["parallelism", { parallelism: 5 }],
      ["suspend", { suspend: true }],
      ["activeDeadlineSeconds", { activeDeadlineSeconds: 60 }],
      ["backoffLimit", { backoffLimit: 1 }],
      ["ttlSecondsAfterFinished", { ttlSecondsAfterFinished: 30 }]
    ])("allows changing %s", (_, spec) => {
      expect(updateErrors(withSpec(spec), old)).toEqual([])
    })

    it.each<[string, Record<string, unknown>, string]>([
      ["the selector", { selector: { matchLabels: { ...old.spec.selector.matchLabels, x: "y" } } }, "spec.selector: Invalid value: "],
      ["the template", { template: { ...old.spec.template, spec: { ...old.spec.template.spec, activeDeadlineSeconds: 5 } } }, "spec.template: Invalid value: "],
      ["completions", { completions: 9 }, "spec.completions: Invalid value: 9: field is immutable"],
      ["the completion mode", { completionMode: "Indexed" }, 'spec.completionMode: Invalid value: "Indexed": field is immutable']
    ])("forbids changing %s", (_, spec, message) => {
      expect(updateErrors(withSpec(spec), old).join("\n")).toContain(message)
    })

    it("lets an Indexed Job scale completions with parallelism (elastic Indexed Jobs)", () => {
      const indexed = created(job({ completionMode: "Indexed", completions: 3, parallelism: 3 }))
      expect(updateErrors({ ...indexed, spec: { ...indexed.spec, completions: 5, parallelism: 5 } }, indexed)).toEqual([])
      expect(updateErrors({ ...indexed, spec: { ...indexed.spec, completions: 5 } }, indexed)).toContain(
        "spec.completions: Invalid value: 5: can only be modified in tandem with spec.parallelism"
      )
    })

    it("lets a suspended Job that never started change where its pods run", () => {
      const suspended = created(job({ suspend: true }))
      const t = suspended.spec.template
      const moved = { ...t, metadata: { labels: { ...t.metadata.labels, queue: "a" } }, spec: { ...t.spec, nodeSelector: { zone: "b" } } }
      expect(updateErrors({ ...suspended, spec: { ...suspended.spec, template: moved } }, suspended)).toEqual([])
      const started = { ...suspended, status: { startTime: "2024-05-01T10:00:00Z" } }
      expect(updateErrors({ ...started, spec: { ...started.spec, template: moved } }, started).join("\n")).toContain("spec.template: Invalid value: ")
    })
  })
})

describe("CronJob", () => {
  it("decodes a CronJob as kubectl prints it (strict)", () => {
    const full = {
      ...cronJob({
        timeZone: "Europe/Paris",
        startingDeadlineSeconds: 200,
        concurrencyPolicy: "Forbid",
        suspend: false,
        successfulJobsHistoryLimit: 3,
        failedJobsHistoryLimit: 1,
        jobTemplate: { metadata: { labels: { app: "nightly" } }, spec: { backoffLimit: 2, template: podTemplate({}, { app: "nightly" }) } }
      }),
      status: {
        active: [{ apiVersion: "batch/v1", kind: "Job", name: "nightly-28567890", namespace: "default", uid: "j1", resourceVersion: "12" }],
        lastScheduleTime: "2024-05-01T10:00:00Z",
        lastSuccessfulTime: "2024-05-01T09:55:03Z"
      }
    }
    const r = Kinds.decodeAny(full, { strict: true })
    if (Either.isLeft(r)) expect(r.left).toEqual([])
    expect(Either.isRight(r) && r.right.info.shortNames).toEqual(["cj"])
  })

  it("gets SetDefaults_CronJob's defaults; the job template gets pod defaults only", () => {
    const o = created(cronJob())
    expect(o.spec).toMatchObject({ concurrencyPolicy: "Allow", suspend: false, successfulJobsHistoryLimit: 3, failedJobsHistoryLimit: 1 })
    expect(o.spec.jobTemplate.spec).not.toHaveProperty("backoffLimit")
    expect(o.spec.jobTemplate.spec).not.toHaveProperty("selector")
    expect(o.spec.jobTemplate.spec.template.spec).toMatchObject({ restartPolicy: "Never", dnsPolicy: "ClusterFirst", schedulerName: "default-scheduler" })
    expect(o.status).toEqual({})
  })

  it.each([["@hourly"], ["0 3 * * 1-5"], ["*/10 * * * *"], ["@every 2h"]])("accepts the schedule %j", (schedule) => {
    expect(createErrors(cronJob({ schedule }))).toEqual([])
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["an empty schedule", cronJob({ schedule: "" }), "spec.schedule: Required value"],
    ["a missing schedule", { ...cronJob(), spec: { jobTemplate: { spec: { template: podTemplate() } } } }, "spec.schedule: Required value"],
    ["a six-field schedule", cronJob({ schedule: "0 */5 * * * *" }), 'spec.schedule: Invalid value: "0 */5 * * * *": expected exactly 5 fields, found 6: [0 */5 * * * *]'],
    ["an out-of-range minute", cronJob({ schedule: "61 * * * *" }), 'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61'],
    ["TZ in the schedule", cronJob({ schedule: "TZ=UTC 0 * * * *" }), 'spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead'],
    ["an unknown time zone", cronJob({ timeZone: "Mars/Olympus" }), 'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus'],
    ["an empty time zone", cronJob({ timeZone: "" }), 'spec.timeZone: Invalid value: "": timeZone must be nil or non-empty string'],
    ["an unknown concurrency policy", cronJob({ concurrencyPolicy: "Sometimes" }), 'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"'],
    ["a negative history limit", cronJob({ successfulJobsHistoryLimit: -1 }), "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0"],
    [
      "a job template with a selector",
      cronJob({ jobTemplate: { spec: { selector: { matchLabels: { a: "b" } }, template: podTemplate({}, { a: "b" }) } } }),
      'spec.jobTemplate.spec.selector: Invalid value: {"matchLabels":{"a":"b"}}: `selector` will be auto-generated'
    ],
    [
      "a job template with manualSelector",
      cronJob({ jobTemplate: { spec: { manualSelector: true, template: podTemplate() } } }),
      'spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: "nil", "false"'
    ],
    [
      "a job template that restarts always",
      cronJob({ jobTemplate: { spec: { template: podTemplate({ restartPolicy: "Always" }) } } }),
      'spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'
    ],
    ["a name over 52 characters", cronJob({}, "n".repeat(53)), `metadata.name: Invalid value: "${"n".repeat(53)}": must be no more than 52 characters`]
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(object)).toContain(message)
  })

  it("may change its schedule, time zone and suspension", () => {
    const old = created(cronJob())
    expect(updateErrors({ ...old, spec: { ...old.spec, schedule: "@daily", timeZone: "Asia/Tokyo", suspend: true } }, old)).toEqual([])
    expect(updateErrors({ ...old, spec: { ...old.spec, schedule: "bad" } }, old)).toContain('spec.schedule: Invalid value: "bad": expected exactly 5 fields, found 1: [bad]')
  })
})
