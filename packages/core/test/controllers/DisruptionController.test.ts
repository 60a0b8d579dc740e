import { describe, expect, it } from "vitest"
import type * as Client from "../../src/client/Client.js"
import * as Disruption from "../../src/controllers/DisruptionController.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

const owner = (kind: string, name: string, uid: string, apiVersion = "apps/v1") => ({ apiVersion, kind, name, uid, controller: true })
const obj = (kind: string, name: string, uid: string, replicas: number | undefined, ownerRef?: Record<string, unknown>) => ({
  apiVersion: kind === "ReplicationController" ? "v1" : "apps/v1",
  kind,
  metadata: { name, namespace: "default", uid, ...(ownerRef ? { ownerReferences: [ownerRef] } : {}) },
  spec: replicas === undefined ? {} : { replicas }
})
const deploy = obj("Deployment", "web", "d-1", 4)
const rs = obj("ReplicaSet", "web-abc", "rs-1", 4, owner("Deployment", "web", "d-1"))
const bareRs = obj("ReplicaSet", "api-1", "rs-2", 3)
const sts = obj("StatefulSet", "db", "ss-1", undefined)
const table = new Map<string, Client.JsonObject>([
  ["Deployment/web", deploy],
  ["ReplicaSet/web-abc", rs],
  ["ReplicaSet/api-1", bareRs],
  ["StatefulSet/db", sts]
])
const lookup: Disruption.Lookup = (ref, _ns, name) => table.get(`${ref.kind}/${name}`)

const pod = (name: string, ownerRef: Record<string, unknown> | undefined, ready = true, labels: Record<string, string> = { app: "web" }) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", labels, ...(ownerRef ? { ownerReferences: [ownerRef] } : {}) },
  status: { phase: "Running", conditions: [{ type: "Ready", status: ready ? "True" : "False" }] }
})
const pdb = (spec: Record<string, unknown>, status?: Record<string, unknown>) => ({
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: { name: "budget", namespace: "default", generation: 1 },
  spec: { selector: { matchLabels: { app: "web" } }, ...spec },
  ...(status ? { status } : {})
})

describe("Disruption.scaleOf", () => {
  const cases: ReadonlyArray<[string, Record<string, unknown>, unknown]> = [
    ["a Deployment's ReplicaSet answers the Deployment", owner("ReplicaSet", "web-abc", "rs-1"), { uid: "d-1", replicas: 4 }],
    ["a bare ReplicaSet answers itself", owner("ReplicaSet", "api-1", "rs-2"), { uid: "rs-2", replicas: 3 }],
    ["a StatefulSet without replicas counts 1", owner("StatefulSet", "db", "ss-1"), { uid: "ss-1", replicas: 1 }],
    ["another uid is not the owner", owner("ReplicaSet", "api-1", "other"), undefined],
    ["an unknown kind has no scale", owner("Job", "j", "j-1", "batch/v1"), undefined]
  ]
  it.each(cases)("%s", (_what, ref, expected) => expect(Disruption.scaleOf(lookup)(ref, "default")).toEqual(expected))
})

describe("Disruption.decide", () => {
  const rsOwned = (name: string, ready = true) => pod(name, owner("ReplicaSet", "web-abc", "rs-1"), ready)
  const cases: ReadonlyArray<[string, Record<string, unknown>, ReadonlyArray<Client.JsonObject>, Record<string, unknown>]> = [
    ["minAvailable 3 of 4 ready", { minAvailable: 3 }, [rsOwned("a"), rsOwned("b"), rsOwned("c"), rsOwned("d")], { expectedPods: 4, currentHealthy: 4, desiredHealthy: 3, disruptionsAllowed: 1 }],
    ["maxUnavailable 1 against the Deployment's 4, one pod missing", { maxUnavailable: 1 }, [rsOwned("a"), rsOwned("b"), rsOwned("c")], { expectedPods: 4, currentHealthy: 3, desiredHealthy: 3, disruptionsAllowed: 0 }],
    ["minAvailable 50%, one unready", { minAvailable: "50%" }, [rsOwned("a"), rsOwned("b"), rsOwned("c", false)], { expectedPods: 4, currentHealthy: 2, desiredHealthy: 2, disruptionsAllowed: 0 }],
    ["pods of other labels do not count", { minAvailable: 1 }, [rsOwned("a"), pod("x", undefined, true, { app: "db" })], { expectedPods: 1, currentHealthy: 1, desiredHealthy: 1, disruptionsAllowed: 0 }]
  ]
  it.each(cases)("%s", (_what, spec, pods, expected) => {
    const d = Disruption.decide(pdb(spec), pods, lookup, T0)
    expect(d.status).toMatchObject({ ...expected, observedGeneration: 1 })
    expect((d.status as any).conditions[0]).toMatchObject({ type: "DisruptionAllowed", status: expected["disruptionsAllowed"] ? "True" : "False" })
  })

  it("writes nothing when the stored status is current", () => {
    const first = Disruption.decide(pdb({ minAvailable: 1 }), [rsOwned("a")], lookup, T0)
    const again = Disruption.decide(pdb({ minAvailable: 1 }, first.status), [rsOwned("a")], lookup, T0 + 5_000)
    expect(again.status).toBeUndefined()
  })

  it("fails safe when a pod's controller cannot be found, and warns about unmanaged pods", () => {
    const orphanOwner = pod("a", owner("ReplicaSet", "gone", "rs-9"))
    const d = Disruption.decide(pdb({ maxUnavailable: 1 }, { disruptionsAllowed: 2 }), [orphanOwner], lookup, T0)
    expect(d.status).toMatchObject({ disruptionsAllowed: 0, conditions: [{ type: "DisruptionAllowed", status: "False", reason: "SyncFailed", message: 'found no controllers for pod "a"' }] })
    expect(d.events.map((e) => e.reason)).toEqual(["CalculateExpectedPodCountFailed"])
    const unmanaged = Disruption.decide(pdb({ maxUnavailable: 1 }), [rsOwned("a"), pod("loose", undefined)], lookup, T0)
    expect(unmanaged.events.map((e) => e.reason)).toEqual(["UnmanagedPods"])
    expect(Disruption.decide(pdb({ minAvailable: 1 }), [], lookup, T0).events.map((e) => e.reason)).toEqual(["NoPods"])
  })

  it("keeps fresh eviction approvals out of the healthy count and looks again when they expire", () => {
    const pods = [rsOwned("a"), rsOwned("b"), rsOwned("c")]
    const d = Disruption.decide(pdb({ minAvailable: 2 }, { disruptedPods: { a: at(T0 - 60_000) } }), pods, lookup, T0)
    expect(d.status).toMatchObject({ currentHealthy: 2, disruptionsAllowed: 0, disruptedPods: { a: at(T0 - 60_000) } })
    expect(d.requeueAfterMs).toBe(60_001)
    const expired = Disruption.decide(pdb({ minAvailable: 2 }, { disruptedPods: { a: at(T0 - 180_000) } }), pods, lookup, T0)
    expect(expired.status).toMatchObject({ currentHealthy: 3, disruptionsAllowed: 1 })
    expect((expired.status as any).disruptedPods).toBeUndefined()
    expect(expired.events.map((e) => e.reason)).toEqual(["NotDeleted"])
  })
})
