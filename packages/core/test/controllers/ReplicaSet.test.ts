import { describe, expect, it } from "vitest"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

type Json = Record<string, any>

const rs = (spec: Json = {}, meta: Json = {}, status: Json = { replicas: 0 }): Json => ({
  apiVersion: "apps/v1",
  kind: "ReplicaSet",
  metadata: { name: "web", namespace: "default", uid: "rs-uid", generation: 2, ...meta },
  spec: {
    replicas: 3,
    selector: { matchLabels: { app: "web" } },
    template: { metadata: { labels: { app: "web", tier: "front" } }, spec: { containers: [{ name: "c", image: "nginx" }] } },
    ...spec
  },
  status
})

interface PodOptions {
  readonly owner?: string | null
  readonly labels?: Record<string, string>
  readonly phase?: string
  readonly node?: string | null
  readonly ready?: boolean
  readonly readySince?: number
  readonly restarts?: number
  readonly created?: number
  readonly deleting?: boolean
  readonly cost?: number
}

const pod = (name: string, o: PodOptions = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name,
    namespace: "default",
    uid: `uid-${name}`,
    resourceVersion: "5",
    creationTimestamp: iso(o.created ?? T0),
    labels: o.labels ?? { app: "web", tier: "front" },
    ...(o.deleting ? { deletionTimestamp: iso(T0) } : {}),
    ...(o.cost !== undefined ? { annotations: { [ReplicaSet.PodDeletionCostAnnotation]: String(o.cost) } } : {}),
    ...(o.owner === null ? {} : { ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "x", uid: o.owner ?? "rs-uid", controller: true }] })
  },
  spec: { ...(o.node === null ? {} : { nodeName: o.node ?? "n1" }), containers: [{ name: "c", image: "nginx" }] },
  status: {
    phase: o.phase ?? "Running",
    conditions: [{ type: "Ready", status: (o.ready ?? true) ? "True" : "False", lastTransitionTime: iso(o.readySince ?? T0 - 60_000) }],
    containerStatuses: [{ name: "c", restartCount: o.restarts ?? 0 }]
  }
})

const names = (pods: ReadonlyArray<Json>) => pods.map((p) => p.metadata.name)

describe("ReplicaSet.decide", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly rs: Json
    readonly pods: ReadonlyArray<Json>
    readonly create?: number
    readonly delete?: ReadonlyArray<string>
    readonly adopt?: ReadonlyArray<string>
    readonly release?: ReadonlyArray<string>
    readonly counted?: number
  }> = [
    { name: "creates the missing pods", rs: rs(), pods: [pod("a")], create: 2, counted: 1 },
    { name: "does nothing when the count is right", rs: rs(), pods: [pod("a"), pod("b"), pod("c")], create: 0, delete: [], counted: 3 },
    {
      name: "pods being deleted and finished pods do not count",
      rs: rs(),
      pods: [pod("a"), pod("b", { deleting: true }), pod("c", { phase: "Failed" }), pod("d", { phase: "Succeeded" })],
      create: 2,
      counted: 1
    },
    {
      name: "pods of another controller, and non-matching orphans, are left alone",
      rs: rs(),
      pods: [pod("a", { owner: "other" }), pod("b", { owner: null, labels: { app: "db" } })],
      create: 3,
      adopt: [],
      counted: 0
    },
    { name: "adopts a matching orphan and counts it", rs: rs(), pods: [pod("a"), pod("o", { owner: null })], create: 1, adopt: ["o"], counted: 2 },
    { name: "does not adopt an orphan being deleted", rs: rs(), pods: [pod("o", { owner: null, deleting: true })], adopt: [], create: 3 },
    {
      name: "releases an owned pod whose labels no longer match, and replaces it",
      rs: rs(),
      pods: [pod("a"), pod("b"), pod("c", { labels: { app: "debug" } })],
      release: ["c"],
      create: 1,
      counted: 2
    },
    {
      name: "a ReplicaSet being deleted creates, deletes, adopts and releases nothing",
      rs: rs({}, { deletionTimestamp: iso(T0) }),
      pods: [pod("a", { labels: { app: "x" } }), pod("o", { owner: null })],
      create: 0,
      adopt: [],
      release: [],
      counted: 0
    },
    { name: "creates at most burstReplicas per sync", rs: rs({ replicas: 1000 }), pods: [], create: ReplicaSet.burstReplicas },
    {
      name: "deletes the extras: unscheduled, pending, not ready, then more restarts, then newer",
      rs: rs({ replicas: 1 }),
      pods: [
        pod("ready-old", { created: T0 - 5000 }),
        pod("ready-new", { created: T0 - 1000 }),
        pod("restarts", { restarts: 3, created: T0 - 9000 }),
        pod("not-ready", { ready: false }),
        pod("pending", { phase: "Pending", ready: false }),
        pod("unscheduled", { phase: "Pending", node: null, ready: false })
      ],
      delete: ["unscheduled", "pending", "not-ready", "restarts", "ready-new"],
      counted: 6
    },
    {
      name: "a pod ready for less time goes before one ready longer",
      rs: rs({ replicas: 1 }),
      pods: [pod("long", { readySince: T0 - 60_000 }), pod("short", { readySince: T0 - 1000 })],
      delete: ["short"]
    },
    {
      name: "a lower pod-deletion-cost goes first",
      rs: rs({ replicas: 1 }),
      pods: [pod("cheap", { cost: -10, created: T0 - 60_000 }), pod("dear", { cost: 100 })],
      delete: ["cheap"]
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const d = ReplicaSet.decide(c.rs, { pods: c.pods }, T0)
      if (c.create !== undefined) expect(d.create).toBe(c.create)
      if (c.delete !== undefined) expect(names(d.delete)).toEqual(c.delete)
      if (c.adopt !== undefined) expect(names(d.adopt)).toEqual(c.adopt)
      if (c.release !== undefined) expect(names(d.release)).toEqual(c.release)
      if (c.counted !== undefined) expect(d.pods).toHaveLength(c.counted)
    })
  }

  it("prefers deleting pods doubled up on a node with their siblings", () => {
    const siblings = [rs(), rs({}, { name: "web-old", uid: "old-uid", ownerReferences: [{ uid: "dep", controller: true }] })]
    const owned: Json = { ...siblings[0]!, metadata: { ...siblings[0]!.metadata, ownerReferences: [{ uid: "dep", controller: true }] } }
    const pods = [pod("alone", { node: "n1", created: T0 - 1 }), pod("crowded", { node: "n2", created: T0 - 9000 }), pod("sib", { node: "n2", owner: "old-uid" })]
    const d = ReplicaSet.decide({ ...owned, spec: { ...owned.spec, replicas: 1 } }, { pods, replicaSets: [owned, siblings[1]!] }, T0)
    expect(names(d.delete)).toEqual(["crowded"])
  })
})

describe("ReplicaSet status", () => {
  it("counts replicas, fully labeled, ready and available pods and observes the generation", () => {
    const pods = [pod("a"), pod("b", { labels: { app: "web" } }), pod("c", { ready: false }), pod("d", { readySince: T0 - 1000 })]
    const status = ReplicaSet.statusOf(rs({ minReadySeconds: 5 }), pods, T0)
    expect(status).toEqual({ replicas: 4, fullyLabeledReplicas: 3, readyReplicas: 3, availableReplicas: 2, observedGeneration: 2 })
  })

  it("asks to look again when the next pod becomes available", () => {
    const d = ReplicaSet.decide(rs({ minReadySeconds: 5 }), { pods: [pod("a"), pod("b", { readySince: T0 - 3000 }), pod("c", { readySince: T0 - 1000 })] }, T0)
    expect(d.requeueAfterMs).toBe(2010)
    expect(ReplicaSet.decide(rs(), { pods: [pod("a")] }, T0).requeueAfterMs).toBeUndefined()
  })

  it("answers no status when the stored one is current", () => {
    const stored = { replicas: 3, fullyLabeledReplicas: 3, readyReplicas: 3, availableReplicas: 3, observedGeneration: 2 }
    expect(ReplicaSet.decide(rs({}, {}, stored), { pods: [pod("a"), pod("b"), pod("c")] }, T0).status).toBeUndefined()
    expect(ReplicaSet.decide(rs({}, { generation: 3 }, stored), { pods: [pod("a"), pod("b"), pod("c")] }, T0).status).toMatchObject({ observedGeneration: 3 })
  })

  it("sets ReplicaFailure on a failure, keeps the first report while failing, clears it after", () => {
    const failing = ReplicaSet.statusOf(rs(), [], T0, { reason: "FailedCreate", message: 'pods "web-x" is forbidden: exceeded quota' })
    expect(failing["conditions"]).toEqual([
      { type: "ReplicaFailure", status: "True", reason: "FailedCreate", message: 'pods "web-x" is forbidden: exceeded quota', lastTransitionTime: iso(T0) }
    ])
    const again = ReplicaSet.statusOf(rs({}, {}, failing), [], T0 + 5000, { reason: "FailedCreate", message: "another message" })
    expect(again["conditions"]).toEqual(failing["conditions"])
    const cleared = ReplicaSet.statusOf(rs({}, {}, failing), [], T0 + 9000)
    expect(cleared["conditions"]).toBeUndefined()
    expect(ReplicaSet.statusChanged(failing, cleared)).toBe(true)
  })
})

describe("ReplicaSet helpers", () => {
  const batches: ReadonlyArray<readonly [number, ReadonlyArray<number>]> = [
    [0, []],
    [1, [1]],
    [2, [1, 1]],
    [10, [1, 2, 4, 3]],
    [15, [1, 2, 4, 8]]
  ]
  for (const [count, want] of batches) it(`slow start of ${count}: ${want.join(",")}`, () => expect(ReplicaSet.slowStartBatches(count)).toEqual(want))

  it("claim: keep, adopt and release by selector; an owner being deleted only keeps", () => {
    const owner = rs()
    const objs = [pod("mine"), pod("orphan", { owner: null }), pod("stray", { labels: { app: "x" } }), pod("theirs", { owner: "zzz" })]
    const c = ReplicaSet.claim(owner, objs)
    expect([names(c.owned), names(c.adopt), names(c.release)]).toEqual([["mine", "orphan"], ["orphan"], ["stray"]])
    const gone = ReplicaSet.claim(rs({}, { deletionTimestamp: iso(T0) }), objs)
    expect([names(gone.owned), names(gone.adopt), names(gone.release)]).toEqual([["mine"], [], []])
  })
})
