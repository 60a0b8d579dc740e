// apps/v1 StatefulSet, DaemonSet and ControllerRevision: decoding, defaults through the
// strategy, and kube-apiserver's validation messages.
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Apps, Kinds } from "../../src/model/index.js"
import { created, createErrors, updateErrors } from "./harness.js"

const template = (labels: Record<string, string> = { app: "web" }, spec: Record<string, unknown> = {}) => ({
  metadata: { labels },
  spec: { containers: [{ name: "web", image: "nginx:1.27" }], ...spec }
})

const sts = (spec: Record<string, unknown> = {}, name = "web") => ({
  apiVersion: "apps/v1",
  kind: "StatefulSet",
  metadata: { name, namespace: "default" },
  spec: { selector: { matchLabels: { app: "web" } }, serviceName: "web", template: template(), ...spec }
})

const ds = (spec: Record<string, unknown> = {}) => ({
  apiVersion: "apps/v1",
  kind: "DaemonSet",
  metadata: { name: "agent", namespace: "kube-system" },
  spec: { selector: { matchLabels: { app: "web" } }, template: template(), ...spec }
})

describe("StatefulSet", () => {
  it("decodes a StatefulSet as kubectl prints it (strict)", () => {
    const full = {
      ...sts({
        replicas: 3,
        podManagementPolicy: "Parallel",
        updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 1, maxUnavailable: "50%" } },
        revisionHistoryLimit: 5,
        minReadySeconds: 10,
        persistentVolumeClaimRetentionPolicy: { whenDeleted: "Delete", whenScaled: "Retain" },
        ordinals: { start: 1 },
        volumeClaimTemplates: [
          {
            apiVersion: "v1",
            kind: "PersistentVolumeClaim",
            metadata: { name: "www", creationTimestamp: null },
            spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, volumeMode: "Filesystem" },
            status: { phase: "Pending" }
          }
        ]
      }),
      status: {
        observedGeneration: 2,
        replicas: 3,
        readyReplicas: 3,
        currentReplicas: 3,
        updatedReplicas: 3,
        availableReplicas: 3,
        currentRevision: "web-5d8f9c",
        updateRevision: "web-5d8f9c",
        collisionCount: 0
      }
    }
    const r = Kinds.decodeAny(full, { strict: true })
    if (Either.isLeft(r)) expect(r.left).toEqual([])
    expect(Either.isRight(r) && r.right.info.plural).toBe("statefulsets")
  })

  it("gets SetDefaults_StatefulSet's defaults, claim template defaults and an empty status", () => {
    const o = created(sts({ volumeClaimTemplates: [{ metadata: { name: "www" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } }] }))
    expect(o.spec).toMatchObject({
      replicas: 1,
      podManagementPolicy: "OrderedReady",
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 0 } },
      revisionHistoryLimit: 10,
      persistentVolumeClaimRetentionPolicy: { whenDeleted: "Retain", whenScaled: "Retain" }
    })
    expect(o.spec.updateStrategy.rollingUpdate).not.toHaveProperty("maxUnavailable")
    expect(o.spec.volumeClaimTemplates[0]).toMatchObject({
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      spec: { volumeMode: "Filesystem" },
      status: { phase: "Pending" }
    })
    expect(o.spec.template.spec).toMatchObject({ restartPolicy: "Always", dnsPolicy: "ClusterFirst", terminationGracePeriodSeconds: 30 })
    expect(o.status).toEqual({ replicas: 0, availableReplicas: 0 })
    expect(o.metadata.generation).toBe(1)
  })

  it("keeps OnDelete without rolling-update defaults, and an explicit RollingUpdate without rollingUpdate as is", () => {
    expect(created(sts({ updateStrategy: { type: "OnDelete" } })).spec.updateStrategy).toEqual({ type: "OnDelete" })
    expect(created(sts({ updateStrategy: { type: "RollingUpdate" } })).spec.updateStrategy).toEqual({ type: "RollingUpdate" })
    expect(created(sts({ updateStrategy: { type: "RollingUpdate", rollingUpdate: {} } })).spec.updateStrategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { partition: 0 }
    })
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["a selector that misses the template", sts({ selector: { matchLabels: { app: "db" } } }), 'spec.template.metadata.labels: Invalid value: {"app":"web"}: `selector` does not match template `labels`'],
    ["an empty selector", sts({ selector: {} }), "spec.selector: Invalid value: {}: empty selector is invalid for statefulset"],
    ["a missing selector", { ...sts(), spec: { template: template() } }, "spec.selector: Required value"],
    ["an unknown pod management policy", sts({ podManagementPolicy: "Eager" }), `spec.podManagementPolicy: Invalid value: "Eager": must be 'OrderedReady' or 'Parallel'`],
    ["an unknown update strategy", sts({ updateStrategy: { type: "Blue" } }), `spec.updateStrategy.type: Invalid value: "Blue": must be 'RollingUpdate' or 'OnDelete'`],
    [
      "rollingUpdate with OnDelete",
      sts({ updateStrategy: { type: "OnDelete", rollingUpdate: { partition: 1 } } }),
      `spec.updateStrategy.rollingUpdate: Invalid value: {"partition":1}: only allowed for updateStrategy 'RollingUpdate'`
    ],
    ["a negative partition", sts({ updateStrategy: { rollingUpdate: { partition: -1 } } }), "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0"],
    ["maxUnavailable 0", sts({ updateStrategy: { rollingUpdate: { maxUnavailable: 0 } } }), "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: cannot be 0"],
    ["maxUnavailable over 100%", sts({ updateStrategy: { rollingUpdate: { maxUnavailable: "120%" } } }), 'spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "120%": must not be greater than 100%'],
    ["a negative replica count", sts({ replicas: -1 }), "spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
    ["an unknown retention policy", sts({ persistentVolumeClaimRetentionPolicy: { whenDeleted: "Keep" } }), 'spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep": supported values: "Retain", "Delete"'],
    ["a negative ordinal start", sts({ ordinals: { start: -1 } }), "spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0"],
    ["restartPolicy OnFailure", sts({ template: template({ app: "web" }, { restartPolicy: "OnFailure" }) }), 'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"'],
    [
      "activeDeadlineSeconds",
      sts({ template: template({ app: "web" }, { activeDeadlineSeconds: 10 }) }),
      "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported"
    ],
    ["a name that is no DNS label", sts({}, "web.v1"), 'metadata.name: Invalid value: "web.v1": a lowercase RFC 1123 label must consist of']
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(object).join("\n")).toContain(message)
  })

  describe("updates", () => {
    const old = created(sts({ volumeClaimTemplates: [{ metadata: { name: "www" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } }] }))
    const withSpec = (spec: Record<string, unknown>) => ({ ...old, spec: { ...old.spec, ...spec } })

    it.each<[string, Record<string, unknown>]>([
      ["replicas", { replicas: 5 }],
      ["the template", { template: template({ app: "web" }, { containers: [{ name: "web", image: "nginx:1.28" }] }) }],
      ["the update strategy", { updateStrategy: { type: "OnDelete" } }],
      ["minReadySeconds", { minReadySeconds: 30 }],
      ["ordinals", { ordinals: { start: 5 } }],
      ["the claim retention policy", { persistentVolumeClaimRetentionPolicy: { whenDeleted: "Delete", whenScaled: "Delete" } }],
      ["revisionHistoryLimit", { revisionHistoryLimit: 3 }]
    ])("allows changing %s", (_, spec) => {
      expect(updateErrors(withSpec(spec), old)).toEqual([])
    })

    it.each<[string, Record<string, unknown>]>([
      ["serviceName", { serviceName: "other" }],
      ["podManagementPolicy", { podManagementPolicy: "Parallel" }],
      ["volumeClaimTemplates", { volumeClaimTemplates: [] }],
      ["the selector", { selector: { matchLabels: { app: "web", tier: "x" } }, template: template({ app: "web", tier: "x" }) }]
    ])("forbids changing %s", (_, spec) => {
      expect(updateErrors(withSpec(spec), old)).toContain(
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
      )
    })
  })
})

describe("DaemonSet", () => {
  it("decodes and gets SetDefaults_DaemonSet's defaults", () => {
    const o = created(ds())
    expect(o.spec).toMatchObject({ updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } }, revisionHistoryLimit: 10 })
    expect(o.status).toEqual({ currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0 })
    expect(created(ds({ updateStrategy: { type: "OnDelete" } })).spec.updateStrategy).toEqual({ type: "OnDelete" })
    expect(created(ds({ updateStrategy: { rollingUpdate: { maxUnavailable: 0, maxSurge: "10%" } } })).spec.updateStrategy.rollingUpdate).toEqual({ maxUnavailable: 0, maxSurge: "10%" })
  })

  it("decodes a status as the controller writes it (strict)", () => {
    const status = { currentNumberScheduled: 2, numberMisscheduled: 0, desiredNumberScheduled: 2, numberReady: 2, observedGeneration: 1, updatedNumberScheduled: 2, numberAvailable: 2 }
    expect(Either.isRight(Kinds.decodeAny({ ...ds(), status }, { strict: true }))).toBe(true)
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["a selector that misses the template", ds({ selector: { matchLabels: { app: "db" } } }), "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`"],
    ["an empty selector", ds({ selector: {} }), "spec.selector: Invalid value: {}: empty selector is invalid for daemonset"],
    ["both surge and unavailability", ds({ updateStrategy: { rollingUpdate: { maxSurge: 1 } } }), "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"],
    ["neither surge nor unavailability", ds({ updateStrategy: { rollingUpdate: { maxUnavailable: 0 } } }), "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"],
    ["over 100%", ds({ updateStrategy: { rollingUpdate: { maxUnavailable: "150%" } } }), 'spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be greater than 100%'],
    ["a bad percentage", ds({ updateStrategy: { rollingUpdate: { maxUnavailable: "x%" } } }), "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"x%\": a valid percent string"],
    ["an unknown strategy", ds({ updateStrategy: { type: "Blue" } }), 'spec.updateStrategy.type: Unsupported value: "Blue": supported values: "RollingUpdate", "OnDelete"'],
    ["restartPolicy Never", ds({ template: template({ app: "web" }, { restartPolicy: "Never" }) }), 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(object).join("\n")).toContain(message)
  })

  it("keeps the selector immutable and lets the template change", () => {
    const old = created(ds())
    expect(updateErrors({ ...old, spec: { ...old.spec, template: template({ app: "web" }, { containers: [{ name: "web", image: "nginx:2" }] }) } }, old)).toEqual([])
    const moved = { ...old, spec: { ...old.spec, selector: { matchLabels: { app: "web", v: "2" } }, template: template({ app: "web", v: "2" }) } }
    expect(updateErrors(moved, old).join("\n")).toContain('spec.selector: Invalid value: {"matchLabels":{"app":"web","v":"2"}}: field is immutable')
  })
})

describe("ControllerRevision", () => {
  const revision = (data: unknown, revision = 1) => ({
    apiVersion: "apps/v1",
    kind: "ControllerRevision",
    metadata: { name: "web-5d8f9c", namespace: "default", ownerReferences: [{ apiVersion: "apps/v1", kind: "StatefulSet", name: "web", uid: "u", controller: true }] },
    data,
    revision
  })

  it("stores any JSON as data", () => {
    const data = { spec: { template: { $patch: "replace", spec: { containers: [{ name: "web", image: "nginx:1.27" }] } } } }
    expect(created(revision(data)).data).toEqual(data)
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["data missing", JSON.parse(JSON.stringify(revision(undefined))), "data: Required value: data is mandatory"],
    ["data null", revision(null), "data: Required value: data is mandatory"],
    ["a negative revision", revision({}, -1), "revision: Invalid value: -1: must be greater than or equal to 0"],
    ["revision missing", JSON.parse(JSON.stringify({ ...revision({}), revision: undefined })), "revision: Required value"]
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(object)).toContain(message)
  })

  it("keeps data immutable but lets the revision be renumbered", () => {
    const old = created(revision({ a: 1 }))
    expect(updateErrors({ ...old, revision: 7 }, old)).toEqual([])
    expect(updateErrors({ ...old, data: { a: 2 } }, old)).toContain('data: Invalid value: {"a":2}: field is immutable')
  })

  it("exports the typed validators", () => {
    expect(Apps.statefulSetMutableFields).toContain("revisionHistoryLimit")
  })
})
