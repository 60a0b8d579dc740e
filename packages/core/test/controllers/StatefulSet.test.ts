import { describe, expect, it } from "vitest"
import * as History from "../../src/controllers/History.js"
import * as StatefulSet from "../../src/controllers/StatefulSet.js"

const NOW = Date.parse("2024-05-01T12:00:00Z")
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

const set = (spec: Record<string, unknown> = {}, image = "v2", meta: Record<string, unknown> = {}) => ({
  apiVersion: "apps/v1",
  kind: "StatefulSet",
  metadata: { name: "web", namespace: "default", uid: "set-uid", generation: 4, ...meta },
  spec: {
    replicas: 3,
    serviceName: "web-svc",
    selector: { matchLabels: { app: "web" } },
    template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "c", image }], volumes: [{ name: "www", emptyDir: {} }, { name: "tmp", emptyDir: {} }] } },
    volumeClaimTemplates: [{ metadata: { name: "www" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } }],
    ...spec
  }
})

const rev = (image: string, number: number) => History.make(set({}, image), { data: History.patchOf(set({}, image)), revision: number, hash: image })
const R1 = rev("v1", 1)
const R2 = rev("v2", 2)

interface PodState {
  readonly rev?: string
  readonly phase?: string
  readonly ready?: boolean
  readonly readyFor?: number
  readonly terminating?: boolean
}

const pod = (ordinal: number, state: PodState = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: `web-${ordinal}`,
    namespace: "default",
    uid: `pod-${ordinal}`,
    labels: { app: "web", [History.HashLabel]: state.rev ?? "web-v2", [StatefulSet.PodNameLabel]: `web-${ordinal}`, [StatefulSet.PodIndexLabel]: String(ordinal) },
    ...(state.terminating ? { deletionTimestamp: iso(NOW) } : {})
  },
  spec: {},
  status: {
    phase: state.phase ?? "Running",
    conditions: [{ type: "Ready", status: state.ready === false ? "False" : "True", lastTransitionTime: iso(NOW - (state.readyFor ?? 3600) * 1000) }]
  }
})

const claim = (ordinal: number, meta: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name: `www-web-${ordinal}`, namespace: "default", uid: `claim-${ordinal}`, ...meta }
})

const decide = (
  s: Record<string, unknown>,
  pods: ReadonlyArray<Record<string, unknown>>,
  options: { readonly current?: Record<string, unknown>; readonly update?: Record<string, unknown>; readonly claims?: ReadonlyArray<Record<string, unknown>> } = {}
) =>
  StatefulSet.decide(
    s,
    {
      pods,
      claims: new Map((options.claims ?? []).map((c: any) => [c.metadata.name, c])),
      currentRevision: options.current ?? R2,
      updateRevision: options.update ?? R2,
      collisionCount: 0
    },
    NOW
  )

const summary = (a: StatefulSet.Actions) => ({
  create: a.createPods.map((p: any) => `${p.metadata.name}@${p.metadata.labels[History.HashLabel]}`),
  delete: a.deletePods.map((d) => `${d.name}:${d.reason}`)
})

const ready = (n: number, rev = "web-v2") => Array.from({ length: n }, (_, i) => pod(i, { rev }))

describe("StatefulSet.decide: scaling", () => {
  const cases: ReadonlyArray<[string, Record<string, unknown>, ReadonlyArray<Record<string, unknown>>, { create: Array<string>; delete: Array<string> }]> = [
    ["OrderedReady creates ordinal 0 first", set(), [], { create: ["web-0@web-v2"], delete: [] }],
    ["OrderedReady waits for 0 to be ready", set(), [pod(0, { ready: false })], { create: [], delete: [] }],
    ["OrderedReady waits for 0 to be Running", set(), [pod(0, { phase: "Pending" })], { create: [], delete: [] }],
    ["OrderedReady creates 1 once 0 is ready", set(), [pod(0)], { create: ["web-1@web-v2"], delete: [] }],
    ["OrderedReady fills a gap before going on", set(), [pod(0), pod(2)], { create: ["web-1@web-v2"], delete: [] }],
    ["Parallel creates every missing ordinal", set({ podManagementPolicy: "Parallel" }), [pod(0, { ready: false })], { create: ["web-1@web-v2", "web-2@web-v2"], delete: [] }],
    ["ordinals.start shifts the range", set({ ordinals: { start: 5 }, replicas: 2 }), [pod(5)], { create: ["web-6@web-v2"], delete: [] }],
    ["at scale: nothing to do", set(), ready(3), { create: [], delete: [] }],
    ["OrderedReady scales down from the highest ordinal, one at a time", set({ replicas: 1 }), ready(3), { create: [], delete: ["web-2:ScaleDown"] }],
    ["OrderedReady waits for the terminating pod", set({ replicas: 1 }), [pod(0), pod(1), pod(2, { terminating: true })], { create: [], delete: [] }],
    ["OrderedReady does not scale down while a replica is unready", set({ replicas: 1 }), [pod(0, { ready: false }), pod(1), pod(2)], { create: [], delete: [] }],
    ["OrderedReady deletes an unready condemned pod if it is the first unavailable", set({ replicas: 1 }), [pod(0), pod(1), pod(2, { ready: false })], { create: [], delete: ["web-2:ScaleDown"] }],
    ["OrderedReady blocks on an unready condemned pod below the target", set({ replicas: 1 }), [pod(0), pod(1, { ready: false }), pod(2, { ready: false })], { create: [], delete: [] }],
    ["Parallel scales down all at once", set({ replicas: 1, podManagementPolicy: "Parallel" }), ready(3), { create: [], delete: ["web-2:ScaleDown", "web-1:ScaleDown"] }],
    ["to zero", set({ replicas: 0 }), ready(2), { create: [], delete: ["web-1:ScaleDown"] }],
    ["a failed pod is deleted to be recreated", set(), [pod(0), pod(1, { phase: "Failed" })], { create: [], delete: ["web-1:Finished"] }],
    ["a succeeded pod too", set(), [pod(0, { phase: "Succeeded" })], { create: [], delete: ["web-0:Finished"] }],
    ["a failed pod already terminating is waited for", set(), [pod(0, { phase: "Failed", terminating: true })], { create: [], delete: [] }],
    ["Parallel recreates a failed pod and goes on", set({ podManagementPolicy: "Parallel" }), [pod(0, { phase: "Failed" })], { create: ["web-1@web-v2", "web-2@web-v2"], delete: ["web-0:Finished"] }],
    ["pods of another set name are ignored", set(), [{ ...pod(0), metadata: { ...pod(0).metadata, name: "webx-0" } }], { create: ["web-0@web-v2"], delete: [] }],
    ["a set being deleted does nothing", set({}, "v2", { deletionTimestamp: iso(NOW) }), [pod(0)], { create: [], delete: [] }]
  ]
  it.each(cases)("%s", (_what, s, pods, want) => {
    expect(summary(decide(s, pods))).toEqual(want)
  })

  it("waits for minReadySeconds before the next ordinal and asks to look again", () => {
    const a = decide(set({ minReadySeconds: 10 }), [pod(0, { readyFor: 4 })])
    expect(summary(a)).toEqual({ create: [], delete: [] })
    expect(a.requeueAfterMs).toBe(6001)
    expect(a.status["readyReplicas"]).toBe(1)
    expect(a.status["availableReplicas"]).toBe(0)
    expect(summary(decide(set({ minReadySeconds: 10 }), [pod(0, { readyFor: 11 })])).create).toEqual(["web-1@web-v2"])
  })
})

describe("StatefulSet.decide: identity and claims", () => {
  it("stamps the identity and points the claim volume at the replica's claim, created first", () => {
    const a = decide(set(), [])
    const p = a.createPods[0] as any
    expect(p.metadata.name).toBe("web-0")
    expect(p.metadata.labels).toEqual({ app: "web", [StatefulSet.PodNameLabel]: "web-0", [StatefulSet.PodIndexLabel]: "0", [History.HashLabel]: "web-v2" })
    expect(p.metadata.ownerReferences[0]).toMatchObject({ kind: "StatefulSet", name: "web", uid: "set-uid", controller: true })
    expect(p.spec.hostname).toBe("web-0")
    expect(p.spec.subdomain).toBe("web-svc")
    // The template volume named like the claim template is replaced; others stay.
    expect(p.spec.volumes).toEqual([{ name: "www", persistentVolumeClaim: { claimName: "www-web-0" } }, { name: "tmp", emptyDir: {} }])
    expect(a.createClaims).toEqual([
      {
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        metadata: { name: "www-web-0", namespace: "default", labels: { app: "web" } },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } }
      }
    ])
  })

  it("reuses an existing claim", () => {
    const a = decide(set(), [], { claims: [claim(0)] })
    expect(a.createClaims).toEqual([])
    expect(a.createPods).toHaveLength(1)
  })

  it("waits while the claim is being deleted", () => {
    const a = decide(set(), [], { claims: [claim(0, { deletionTimestamp: iso(NOW) })] })
    expect(a.createPods).toEqual([])
    expect(a.waiting).toContain("www-web-0 is being deleted")
    expect(a.requeueAfterMs).toBeGreaterThan(0)
  })

  it("creates a missing claim for a pending pod", () => {
    const a = decide(set(), [pod(0, { phase: "Pending" })])
    expect(a.createClaims.map((c: any) => c.metadata.name)).toEqual(["www-web-0"])
  })

  it("restores missing identity labels", () => {
    const p = pod(0)
    const bare = { ...p, metadata: { ...p.metadata, labels: { app: "web", [History.HashLabel]: "web-v2" } } }
    expect(decide(set({ replicas: 1 }), [bare]).labelPods).toEqual([{ name: "web-0", labels: { [StatefulSet.PodNameLabel]: "web-0", [StatefulSet.PodIndexLabel]: "0" } }])
  })

  const setRef = { apiVersion: "apps/v1", kind: "StatefulSet", name: "web", uid: "set-uid", controller: true, blockOwnerDeletion: true }
  const podRef = (i: number) => ({ apiVersion: "v1", kind: "Pod", name: `web-${i}`, uid: `pod-${i}`, controller: true, blockOwnerDeletion: true })
  it("whenDeleted: Delete gives new claims an owner reference to the set", () => {
    const a = decide(set({ persistentVolumeClaimRetentionPolicy: { whenDeleted: "Delete", whenScaled: "Retain" } }), [])
    expect((a.createClaims[0] as any).metadata.ownerReferences).toEqual([setRef])
  })

  const policies: ReadonlyArray<[string, Record<string, unknown>, ReadonlyArray<Record<string, unknown>>, ReadonlyArray<Record<string, unknown>>, ReadonlyArray<unknown>]> = [
    ["Retain/Retain leaves claims alone", { whenDeleted: "Retain", whenScaled: "Retain" }, [claim(0), claim(1)], ready(2), []],
    ["whenDeleted: Delete adds the set to existing claims", { whenDeleted: "Delete", whenScaled: "Retain" }, [claim(0)], ready(1), [{ name: "www-web-0", ownerReferences: [setRef] }]],
    ["whenScaled: Delete gives a condemned pod's claim to the pod", { whenDeleted: "Retain", whenScaled: "Delete" }, [claim(0), claim(1)], ready(2), [{ name: "www-web-1", ownerReferences: [podRef(1)] }]],
    ["both Delete: condemned → pod only, in range → set only", { whenDeleted: "Delete", whenScaled: "Delete" }, [claim(0, { ownerReferences: [setRef] }), claim(1, { ownerReferences: [setRef] })], ready(2), [{ name: "www-web-1", ownerReferences: [podRef(1)] }]],
    ["back to Retain scrubs our references", { whenDeleted: "Retain", whenScaled: "Retain" }, [claim(0, { ownerReferences: [setRef] })], ready(1), [{ name: "www-web-0", ownerReferences: [] }]],
    ["a reference to a previous set of the name is left alone", { whenDeleted: "Delete", whenScaled: "Retain" }, [claim(0, { ownerReferences: [{ ...setRef, uid: "old" }] })], ready(1), []]
  ]
  it.each(policies)("retention: %s", (_what, policy, claims, pods, want) => {
    const a = decide(set({ replicas: 1, persistentVolumeClaimRetentionPolicy: policy }), pods, { claims })
    expect(a.ownClaims).toEqual(want)
  })

  it("whenScaled: Delete waits for a claim still owned by a previous pod of the name", () => {
    const stale = claim(0, { ownerReferences: [{ ...podRef(0), uid: "gone" }] })
    const a = decide(set({ persistentVolumeClaimRetentionPolicy: { whenDeleted: "Retain", whenScaled: "Delete" } }), [], { claims: [stale] })
    expect(a.createPods).toEqual([])
    expect(a.waiting).toContain("previous web-0")
  })
})

describe("StatefulSet.decide: updates", () => {
  const old = (n: number) => ready(n, "web-v1")
  const cases: ReadonlyArray<[string, Record<string, unknown>, ReadonlyArray<Record<string, unknown>>, { create: Array<string>; delete: Array<string> }]> = [
    ["RollingUpdate replaces the highest ordinal first", set(), old(3), { create: [], delete: ["web-2:Update"] }],
    ["then waits for it to be ready", set(), [...old(2), pod(2, { ready: false })], { create: [], delete: [] }],
    ["then the next one down", set(), [...old(2), pod(2)], { create: [], delete: ["web-1:Update"] }],
    ["a terminating outdated pod is waited for", set(), [...old(2), pod(2, { rev: "web-v1", terminating: true })], { create: [], delete: [] }],
    ["a replaced ordinal is recreated at the update revision", set(), old(2), { create: ["web-2@web-v2"], delete: [] }],
    ["partition 2 updates only ordinal 2", set({ updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 2 } } }), old(3), { create: [], delete: ["web-2:Update"] }],
    ["partition 2 stops there", set({ updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 2 } } }), [...old(2), pod(2)], { create: [], delete: [] }],
    ["below the partition, pods are recreated at the current revision", set({ updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 2 } } }), [pod(1, { rev: "web-v1" }), pod(2)], { create: ["web-0@web-v1"], delete: [] }],
    ["partition with ordinals.start is relative to start", set({ ordinals: { start: 3 }, updateStrategy: { rollingUpdate: { partition: 2 } } }), [3, 4, 5].map((i) => pod(i, { rev: "web-v1" })), { create: [], delete: ["web-5:Update"] }],
    ["OnDelete never deletes", set({ updateStrategy: { type: "OnDelete" } }), old(3), { create: [], delete: [] }],
    ["OnDelete creates new pods at the update revision", set({ updateStrategy: { type: "OnDelete" } }), old(2), { create: ["web-2@web-v2"], delete: [] }],
    ["maxUnavailable 2 replaces two at once", set({ updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 2 } } }), old(3), { create: [], delete: ["web-2:Update", "web-1:Update"] }],
    ["maxUnavailable counts pods already unavailable (Parallel; OrderedReady would wait)", set({ podManagementPolicy: "Parallel", updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 2 } } }), [...old(2), pod(2, { ready: false })], { create: [], delete: ["web-1:Update"] }],
    ["maxUnavailable as a percentage rounds down, at least 1", set({ updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "50%" } } }), old(3), { create: [], delete: ["web-2:Update"] }],
    ["scaling comes before updating", set({ replicas: 2 }), old(3), { create: [], delete: ["web-2:ScaleDown"] }]
  ]
  it.each(cases)("%s", (_what, s, pods, want) => {
    expect(summary(decide(s, pods, { current: R1, update: R2 }))).toEqual(want)
  })

  it("recreates a pod below the partition from the current revision's template", () => {
    const a = decide(set({ updateStrategy: { rollingUpdate: { partition: 3 } } }), [], { current: R1, update: R2 })
    expect((a.createPods[0] as any).spec.containers[0].image).toBe("v1")
  })
})

describe("StatefulSet.decide: status", () => {
  it("counts replicas, ready, current and updated pods", () => {
    const a = decide(set(), [pod(0, { rev: "web-v1" }), pod(1, { rev: "web-v1", ready: false }), pod(2), pod(3, { terminating: true })], { current: R1, update: R2 })
    expect(a.status).toEqual({
      observedGeneration: 4,
      replicas: 4,
      readyReplicas: 3,
      availableReplicas: 3,
      currentReplicas: 2,
      updatedReplicas: 1,
      currentRevision: "web-v1",
      updateRevision: "web-v2",
      collisionCount: 0
    })
  })

  it("completes a rolling update when every replica is updated and ready", () => {
    const a = decide(set(), ready(3), { current: R1, update: R2 })
    expect(a.status["currentRevision"]).toBe("web-v2")
    expect(a.status["currentReplicas"]).toBe(3)
  })

  it("a partitioned update never completes", () => {
    const s = set({ updateStrategy: { rollingUpdate: { partition: 2 } } })
    const a = decide(s, [pod(0, { rev: "web-v1" }), pod(1, { rev: "web-v1" }), pod(2)], { current: R1, update: R2 })
    expect(a.status["currentRevision"]).toBe("web-v1")
    expect(a.status["updatedReplicas"]).toBe(1)
  })

  it("OnDelete does not complete either (as upstream)", () => {
    const a = decide(set({ updateStrategy: { type: "OnDelete" } }), ready(3), { current: R1, update: R2 })
    expect(a.status["currentRevision"]).toBe("web-v1")
  })
})
