import { describe, expect, it } from "vitest"
import * as Deployment from "../../src/controllers/Deployment.js"
import * as Rollout from "../../src/controllers/internal/deployment/Rollout.js"
import * as Pods from "../../src/object/Pods.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

type Json = Record<string, any>

const template = (image: string): Json => ({ metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "app", image }] } })
const hashOf = (image: string, collisionCount?: number) => Pods.templateHash(template(image), collisionCount)

const deployment = (spec: Json = {}, status: Json = {}, meta: Json = {}): Json => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default", uid: "d-uid", generation: 1, annotations: { [Deployment.RevisionAnnotation]: "1" }, ...meta },
  spec: {
    replicas: 10,
    selector: { matchLabels: { app: "web" } },
    template: template("v1"),
    strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 3, maxUnavailable: 2 } },
    revisionHistoryLimit: 10,
    progressDeadlineSeconds: 600,
    ...spec
  },
  status
})

interface RsOptions {
  readonly replicas: number
  readonly statusReplicas?: number
  readonly available?: number
  readonly revision?: number
  readonly created?: number
  readonly desired?: number
  readonly max?: number
  readonly owner?: string | null
  readonly generation?: number
  readonly observedGeneration?: number
  readonly failure?: Json
}

const replicaSet = (image: string, o: RsOptions): Json => {
  const hash = hashOf(image)
  const t = template(image)
  return {
    apiVersion: "apps/v1",
    kind: "ReplicaSet",
    metadata: {
      name: `web-${hash}`,
      namespace: "default",
      uid: `uid-${image}`,
      generation: o.generation ?? 1,
      creationTimestamp: iso(o.created ?? T0 - 60_000),
      labels: { app: "web", [Deployment.PodTemplateHashLabel]: hash },
      annotations: {
        [Deployment.RevisionAnnotation]: String(o.revision ?? 1),
        ...(o.desired !== undefined ? { [Deployment.DesiredReplicasAnnotation]: String(o.desired) } : {}),
        ...(o.max !== undefined ? { [Deployment.MaxReplicasAnnotation]: String(o.max) } : {})
      },
      ...(o.owner === null ? {} : { ownerReferences: [{ apiVersion: "apps/v1", kind: "Deployment", name: "web", uid: o.owner ?? "d-uid", controller: true }] })
    },
    spec: {
      replicas: o.replicas,
      selector: { matchLabels: { app: "web", [Deployment.PodTemplateHashLabel]: hash } },
      template: { ...t, metadata: { labels: { ...t.metadata.labels, [Deployment.PodTemplateHashLabel]: hash } } }
    },
    status: {
      replicas: o.statusReplicas ?? o.replicas,
      readyReplicas: o.available ?? o.replicas,
      availableReplicas: o.available ?? o.replicas,
      observedGeneration: o.observedGeneration ?? o.generation ?? 1,
      ...(o.failure ? { conditions: [o.failure] } : {})
    }
  }
}

const creates = (d: Deployment.Decision) => d.actions.filter((a) => a.type === "create").map((a) => (a as any).replicaSet as Json)
const sizes = (d: Deployment.Decision): Record<string, number> =>
  Object.fromEntries(d.actions.flatMap((a) => (a.type === "update" && (a.patch as Json)["spec"]?.["replicas"] !== undefined ? [[a.name, (a.patch as Json)["spec"]["replicas"]]] : [])))
const events = (d: Deployment.Decision) => d.actions.flatMap((a) => (a.type === "create" || a.type === "update" ? a.events.map((e) => e.message) : []))
const condition = (d: Deployment.Decision, type: string) => ((d.status?.["conditions"] ?? []) as Array<Json>).find((c) => c.type === type)

const v1 = `web-${hashOf("v1")}`
const v2 = `web-${hashOf("v2")}`

describe("Rollout arithmetic", () => {
  const fence: ReadonlyArray<readonly [Json, number, { surge: number; unavailable: number }]> = [
    [{ maxSurge: "25%", maxUnavailable: "25%" }, 10, { surge: 3, unavailable: 2 }],
    [{ maxSurge: 3, maxUnavailable: 2 }, 10, { surge: 3, unavailable: 2 }],
    [{ maxSurge: "0%", maxUnavailable: "10%" }, 5, { surge: 0, unavailable: 1 }],
    [{ maxSurge: 0, maxUnavailable: 0 }, 5, { surge: 0, unavailable: 1 }],
    [{}, 4, { surge: 1, unavailable: 1 }]
  ]
  for (const [budget, desired, want] of fence) {
    it(`fenceposts ${JSON.stringify(budget)} of ${desired}`, () => expect(Rollout.fenceposts({ type: "RollingUpdate", ...budget }, desired)).toEqual(want))
  }

  it("maxUnavailable is 0 for Recreate and never above the replicas", () => {
    expect(Rollout.maxUnavailable({ type: "Recreate" }, 10)).toBe(0)
    expect(Rollout.maxUnavailable({ type: "RollingUpdate", maxUnavailable: 50 }, 10)).toBe(10)
    expect(Rollout.maxSurge({ type: "Recreate" }, 10)).toBe(0)
  })

  // desired 10, maxSurge 3: [pods in all ReplicaSets, new ReplicaSet now, new ReplicaSet next]
  const grow: ReadonlyArray<readonly [number, number, number]> = [
    [10, 0, 3],
    [13, 3, 3],
    [11, 3, 5],
    [5, 0, 8],
    [0, 0, 10]
  ]
  for (const [total, current, want] of grow) {
    it(`a new ReplicaSet of ${current} with ${total} pods in all grows to ${want}`, () =>
      expect(Rollout.newReplicas({ type: "RollingUpdate", maxSurge: 3 }, 10, total, current)).toBe(want))
  }

  it("revision history keeps the newest entries within the limit", () => {
    expect(Rollout.appendRevisionHistory(undefined, "1")).toBe("1")
    expect(Rollout.appendRevisionHistory("1,2", "4")).toBe("1,2,4")
    expect(Rollout.appendRevisionHistory("10,11,12", "13", 9)).toBe("11,12,13")
    expect(Rollout.appendRevisionHistory("10,11,12", "13", 6)).toBe("12,13")
    expect(Rollout.appendRevisionHistory("10", "1234567", 6)).toBeUndefined()
  })

  it("proportions scale by the max-replicas annotation", () => {
    const base = { desired: 20, maxSurge: 3, fallbackMax: 13, toAdd: 10 }
    expect(Rollout.proportion({ ...base, replicas: 8, annotatedMax: 13, added: 0 })).toBe(6)
    expect(Rollout.proportion({ ...base, replicas: 5, annotatedMax: 13, added: 6 })).toBe(4)
    expect(Rollout.proportion({ ...base, replicas: 5, annotatedMax: 13, added: 10 })).toBe(0)
    expect(Rollout.proportion({ ...base, desired: 0, toAdd: -13, replicas: 8, annotatedMax: 13, added: 0 })).toBe(-8)
  })
})

describe("Deployment.decide", () => {
  it("a new Deployment creates its first ReplicaSet at full size, revision 1", () => {
    const d = Deployment.decide({ deployment: deployment({}, {}, { annotations: {} }), replicaSets: [] }, T0)
    const [rs] = creates(d)
    expect(rs!.metadata.name).toBe(v1)
    expect(rs!.metadata.labels).toEqual({ app: "web", [Deployment.PodTemplateHashLabel]: hashOf("v1") })
    expect(rs!.spec.selector.matchLabels[Deployment.PodTemplateHashLabel]).toBe(hashOf("v1"))
    expect(rs!.spec.template.metadata.labels[Deployment.PodTemplateHashLabel]).toBe(hashOf("v1"))
    expect(rs!.spec.replicas).toBe(10)
    expect(rs!.metadata.ownerReferences[0]).toMatchObject({ kind: "Deployment", uid: "d-uid", controller: true })
    expect(rs!.metadata.annotations).toEqual({
      [Deployment.RevisionAnnotation]: "1",
      [Deployment.DesiredReplicasAnnotation]: "10",
      [Deployment.MaxReplicasAnnotation]: "13"
    })
    expect(events(d)).toEqual([`Scaled up replica set ${v1} from 0 to 10`])
    expect(d.actions).toContainEqual({ type: "annotate", annotations: { [Deployment.RevisionAnnotation]: "1" } })
    expect(condition(d, "Progressing")).toMatchObject({ status: "True", reason: "NewReplicaSetCreated", message: `Created new replica set "${v1}"` })
    expect(condition(d, "Available")).toMatchObject({ status: "False", reason: "MinimumReplicasUnavailable" })
  })

  it("a collision count salts the hash", () => {
    const d = Deployment.decide({ deployment: deployment({}, { collisionCount: 1 }), replicaSets: [] }, T0)
    expect(creates(d)[0]!.metadata.name).toBe(`web-${hashOf("v1", 1)}`)
  })

  it("a new template starts a rolling update: new ReplicaSet within the surge, old down within availability", () => {
    const old = replicaSet("v1", { replicas: 10, desired: 10, max: 13 })
    const d = Deployment.decide({ deployment: deployment({ template: template("v2") }), replicaSets: [old] }, T0)
    expect(creates(d)[0]!.spec.replicas).toBe(3)
    expect(creates(d)[0]!.metadata.annotations[Deployment.RevisionAnnotation]).toBe("2")
    expect(sizes(d)).toEqual({ [v1]: 8 })
    expect(events(d)).toEqual([`Scaled up replica set ${v2} from 0 to 3`, `Scaled down replica set ${v1} from 10 to 8`])
    expect(d.actions).toContainEqual({ type: "annotate", annotations: { [Deployment.RevisionAnnotation]: "2" } })
  })

  const rolling: ReadonlyArray<{ readonly name: string; readonly sets: ReadonlyArray<Json>; readonly want: Record<string, number> }> = [
    {
      name: "an old ReplicaSet that has not yet acted on its scale-down still counts against the surge",
      sets: [replicaSet("v1", { replicas: 8, statusReplicas: 10, available: 10 }), replicaSet("v2", { replicas: 3, available: 0, revision: 2, created: T0 })],
      want: {}
    },
    {
      name: "once it has, the new ReplicaSet takes the room",
      sets: [replicaSet("v1", { replicas: 8 }), replicaSet("v2", { replicas: 3, available: 0, revision: 2, created: T0 })],
      want: { [v2]: 5 }
    },
    {
      name: "no scale-down while new pods are unavailable",
      sets: [replicaSet("v1", { replicas: 8 }), replicaSet("v2", { replicas: 5, available: 0, revision: 2, created: T0 })],
      want: {}
    },
    {
      name: "new pods available: old scales down to keep replicas - maxUnavailable available",
      sets: [replicaSet("v1", { replicas: 8 }), replicaSet("v2", { replicas: 5, available: 3, revision: 2, created: T0 })],
      want: { [v1]: 5 }
    },
    {
      name: "stale availability of a shrinking old ReplicaSet is not trusted",
      sets: [replicaSet("v1", { replicas: 5, statusReplicas: 8, available: 8 }), replicaSet("v2", { replicas: 8, available: 3, revision: 2, created: T0 })],
      want: {}
    },
    {
      name: "unhealthy old replicas are cleaned up first, then healthy ones as availability allows",
      sets: [replicaSet("v1", { replicas: 10, available: 6 }), replicaSet("v2", { replicas: 3, available: 3, revision: 2, created: T0 })],
      // 4 unhealthy go (10 → 6); 6 + 3 available leaves room for one more above 8.
      want: { [v1]: 5 }
    },
    {
      name: "the last step",
      sets: [replicaSet("v1", { replicas: 2 }), replicaSet("v2", { replicas: 10, available: 10, revision: 2, created: T0 })],
      want: { [v1]: 0 }
    }
  ]
  for (const c of rolling) {
    it(`rolling: ${c.name}`, () => {
      const d = Deployment.decide({ deployment: deployment({ template: template("v2") }), replicaSets: c.sets }, T0)
      expect(creates(d)).toEqual([])
      expect(sizes(d)).toEqual(c.want)
    })
  }

  it("rollback: the old ReplicaSet with the Deployment's template becomes the new one with the next revision", () => {
    const old = replicaSet("v1", { replicas: 0, revision: 1 })
    const current = replicaSet("v2", { replicas: 10, revision: 2, desired: 10, max: 13 })
    const d = Deployment.decide({ deployment: deployment({ template: template("v1") }, {}, { annotations: { [Deployment.RevisionAnnotation]: "2" } }), replicaSets: [old, current] }, T0)
    expect(creates(d)).toEqual([])
    const update = d.actions.find((a) => a.type === "update" && a.name === v1) as any
    expect(update.patch.metadata.annotations).toMatchObject({ [Deployment.RevisionAnnotation]: "3", [Deployment.RevisionHistoryAnnotation]: "1" })
    expect(update.patch.spec.replicas).toBe(3)
    expect(d.actions).toContainEqual({ type: "annotate", annotations: { [Deployment.RevisionAnnotation]: "3" } })
  })

  it("a restartedAt template annotation is a new template", () => {
    const t = template("v1")
    const restarted = { ...t, metadata: { ...t.metadata, annotations: { [Deployment.RestartedAtAnnotation]: "2024-05-01T09:00:00Z" } } }
    const d = Deployment.decide({ deployment: deployment({ template: restarted }), replicaSets: [replicaSet("v1", { replicas: 10 })] }, T0)
    expect(creates(d)).toHaveLength(1)
    expect(creates(d)[0]!.metadata.name).not.toBe(v1)
  })

  describe("Recreate", () => {
    const spec = { strategy: { type: "Recreate" }, template: template("v2") }
    const oldPod = { metadata: { name: "p", labels: { app: "web" }, ownerReferences: [{ uid: "uid-v1", controller: true }], deletionTimestamp: iso(T0) }, status: { phase: "Running" } }

    it("scales old ReplicaSets to 0 first, creating nothing", () => {
      const d = Deployment.decide({ deployment: deployment(spec), replicaSets: [replicaSet("v1", { replicas: 3 })], pods: [] }, T0)
      expect(creates(d)).toEqual([])
      expect(sizes(d)).toEqual({ [v1]: 0 })
    })

    it("waits while old pods exist, terminating ones included", () => {
      const d = Deployment.decide({ deployment: deployment(spec), replicaSets: [replicaSet("v1", { replicas: 0, statusReplicas: 0 })], pods: [oldPod] }, T0)
      expect(d.actions).toEqual([])
    })

    it("creates the new ReplicaSet at full size once they are gone", () => {
      const d = Deployment.decide({ deployment: deployment(spec), replicaSets: [replicaSet("v1", { replicas: 0, statusReplicas: 0 })], pods: [] }, T0)
      expect(creates(d)[0]!.spec.replicas).toBe(10)
      expect(condition(d, "Available")).toMatchObject({ status: "False" })
    })
  })

  describe("pause and scaling", () => {
    it("paused: a new template creates nothing; Progressing says DeploymentPaused", () => {
      const d = Deployment.decide({ deployment: deployment({ paused: true, template: template("v2") }), replicaSets: [replicaSet("v1", { replicas: 10 })] }, T0)
      expect(creates(d)).toEqual([])
      expect(condition(d, "Progressing")).toMatchObject({ status: "Unknown", reason: "DeploymentPaused", message: "Deployment is paused" })
    })

    it("paused: scaling still applies", () => {
      const d = Deployment.decide({ deployment: deployment({ paused: true, replicas: 12 }), replicaSets: [replicaSet("v1", { replicas: 10, desired: 10 })] }, T0)
      expect(sizes(d)).toEqual({ [v1]: 12 })
    })

    it("resumed: Progressing says DeploymentResumed and the rollout goes on", () => {
      const paused = {
        observedGeneration: 1,
        replicas: 11,
        updatedReplicas: 3,
        readyReplicas: 8,
        availableReplicas: 8,
        unavailableReplicas: 3,
        conditions: [{ type: "Progressing", status: "Unknown", reason: "DeploymentPaused", message: "Deployment is paused", lastUpdateTime: iso(T0 - 5000), lastTransitionTime: iso(T0 - 5000) }]
      }
      const sets = [replicaSet("v1", { replicas: 8 }), replicaSet("v2", { replicas: 3, available: 0, revision: 2, created: T0 - 1000 })]
      const d = Deployment.decide({ deployment: deployment({ template: template("v2") }, paused), replicaSets: sets }, T0)
      expect(condition(d, "Progressing")).toMatchObject({ status: "Unknown", reason: "DeploymentResumed", message: "Deployment is resumed" })
      expect(sizes(d)).toEqual({ [v2]: 5 })
    })

    it("scaling mid-rollout spreads the change over ReplicaSets in proportion", () => {
      const sets = [replicaSet("v1", { replicas: 8, desired: 10, max: 13 }), replicaSet("v2", { replicas: 5, available: 0, revision: 2, created: T0, desired: 10, max: 13 })]
      const d = Deployment.decide({ deployment: deployment({ replicas: 20, template: template("v2") }), replicaSets: sets }, T0)
      expect(sizes(d)).toEqual({ [v1]: 14, [v2]: 9 })
      expect(events(d)).toEqual([`Scaled up replica set ${v1} from 8 to 14`, `Scaled up replica set ${v2} from 5 to 9`])
    })

    it("scaling down mid-rollout takes from the larger first", () => {
      const sets = [replicaSet("v1", { replicas: 8, desired: 10, max: 13 }), replicaSet("v2", { replicas: 5, available: 0, revision: 2, created: T0, desired: 10, max: 13 })]
      const d = Deployment.decide({ deployment: deployment({ replicas: 5, template: template("v2") }), replicaSets: sets }, T0)
      // 5 + 3 surge = 8 of 13: 8 → round(8·8/13) = 5, 5 → round(5·8/13) = 3.
      expect(sizes(d)).toEqual({ [v1]: 5, [v2]: 3 })
      expect(events(d)).toEqual([`Scaled down replica set ${v1} from 8 to 5`, `Scaled down replica set ${v2} from 5 to 3`])
    })
  })

  describe("history and adoption", () => {
    it("deletes the oldest empty ReplicaSets beyond revisionHistoryLimit once complete", () => {
      const sets = [
        replicaSet("v1", { replicas: 0, revision: 1, created: T0 - 30_000 }),
        replicaSet("v2", { replicas: 0, revision: 2, created: T0 - 20_000 }),
        replicaSet("v3", { replicas: 0, revision: 3, created: T0 - 10_000 }),
        replicaSet("v4", { replicas: 10, revision: 4, created: T0 })
      ]
      const done = { observedGeneration: 1, replicas: 10, updatedReplicas: 10, availableReplicas: 10, readyReplicas: 10 }
      const d = Deployment.decide({ deployment: deployment({ template: template("v4"), revisionHistoryLimit: 1 }, done), replicaSets: sets }, T0)
      expect(d.actions.filter((a) => a.type === "delete").map((a) => (a as any).name)).toEqual([`web-${hashOf("v1")}`, `web-${hashOf("v2")}`])
    })

    it("adopts a matching orphan ReplicaSet and ignores others' ones", () => {
      const orphan = replicaSet("v1", { replicas: 10, owner: null })
      const theirs = { ...replicaSet("v0", { replicas: 1, owner: "someone" }) }
      const d = Deployment.decide({ deployment: deployment(), replicaSets: [orphan, theirs] }, T0)
      expect(d.adopt.map((o) => (o as Json)["metadata"]["name"])).toEqual([v1])
      expect(creates(d)).toEqual([])
    })
  })

  describe("conditions and status", () => {
    const done = [replicaSet("v1", { replicas: 10 })]

    it("a finished rollout: counts, Available and NewReplicaSetAvailable", () => {
      const d = Deployment.decide({ deployment: deployment(), replicaSets: done }, T0)
      expect(d.status).toMatchObject({ observedGeneration: 1, replicas: 10, updatedReplicas: 10, readyReplicas: 10, availableReplicas: 10, unavailableReplicas: 0 })
      expect(condition(d, "Available")).toMatchObject({ status: "True", reason: "MinimumReplicasAvailable", message: "Deployment has minimum availability." })
      expect(condition(d, "Progressing")).toMatchObject({ status: "True", reason: "NewReplicaSetAvailable", message: `ReplicaSet "${v1}" has successfully progressed.` })
      expect(d.requeueAfterMs).toBeUndefined()
    })

    it("no status write when nothing changed", () => {
      const first = Deployment.decide({ deployment: deployment(), replicaSets: done }, T0)
      const again = Deployment.decide({ deployment: deployment({}, first.status!), replicaSets: done }, T0 + 60_000)
      expect(again.status).toBeUndefined()
      expect(again.actions).toEqual([])
    })

    const stuck = [replicaSet("v1", { replicas: 10, available: 4 })]
    const progressing = (since: number) => ({
      observedGeneration: 1,
      replicas: 10,
      updatedReplicas: 10,
      readyReplicas: 4,
      availableReplicas: 4,
      unavailableReplicas: 6,
      conditions: [{ type: "Progressing", status: "True", reason: "ReplicaSetUpdated", message: "x", lastUpdateTime: iso(since), lastTransitionTime: iso(since) }]
    })

    it("no progress within progressDeadlineSeconds: Progressing=False ProgressDeadlineExceeded", () => {
      const d = Deployment.decide({ deployment: deployment({ progressDeadlineSeconds: 5 }, progressing(T0 - 6000)), replicaSets: stuck }, T0)
      expect(condition(d, "Progressing")).toMatchObject({ status: "False", reason: "ProgressDeadlineExceeded", message: `ReplicaSet "${v1}" has timed out progressing.` })
      expect(d.requeueAfterMs).toBeUndefined()
    })

    it("before the deadline: look again when it passes", () => {
      const d = Deployment.decide({ deployment: deployment({ progressDeadlineSeconds: 5 }, progressing(T0 - 2000)), replicaSets: stuck }, T0)
      expect(d.status === undefined || condition(d, "Progressing")?.reason === "ReplicaSetUpdated").toBe(true)
      expect(d.requeueAfterMs).toBe(3100)
    })

    it("progress moves lastUpdateTime but keeps lastTransitionTime", () => {
      const more = [replicaSet("v1", { replicas: 10, available: 6 })]
      const d = Deployment.decide({ deployment: deployment({ progressDeadlineSeconds: 5 }, progressing(T0 - 4000)), replicaSets: more }, T0)
      expect(condition(d, "Progressing")).toMatchObject({ reason: "ReplicaSetUpdated", message: `ReplicaSet "${v1}" is progressing.`, lastUpdateTime: iso(T0), lastTransitionTime: iso(T0 - 4000) })
    })

    it("a ReplicaSet's ReplicaFailure shows on the Deployment", () => {
      const failure = { type: "ReplicaFailure", status: "True", reason: "FailedCreate", message: "forbidden: exceeded quota", lastTransitionTime: iso(T0 - 1000) }
      const d = Deployment.decide({ deployment: deployment(), replicaSets: [replicaSet("v1", { replicas: 10, available: 2, statusReplicas: 2, failure })] }, T0)
      expect(condition(d, "ReplicaFailure")).toMatchObject({ status: "True", reason: "FailedCreate", message: "forbidden: exceeded quota" })
    })

    it("being deleted: only the status is kept current", () => {
      const d = Deployment.decide({ deployment: deployment({ template: template("v2") }, {}, { deletionTimestamp: iso(T0) }), replicaSets: done }, T0)
      expect(d.actions).toEqual([])
      expect(d.status).toMatchObject({ replicas: 10, updatedReplicas: 0 })
    })
  })

  it("equalIgnoreHash ignores only the pod-template-hash label", () => {
    const rsTemplate = replicaSet("v1", { replicas: 1 }).spec.template
    expect(Deployment.equalIgnoreHash(rsTemplate, template("v1"))).toBe(true)
    expect(Deployment.equalIgnoreHash(rsTemplate, template("v2"))).toBe(false)
  })
})
