import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Disruption from "../../src/policy/DisruptionBudget.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

const rsRef = { apiVersion: "apps/v1", kind: "ReplicaSet", name: "web-1", uid: "rs-1", controller: true }
const pod = (name: string, fields: { readonly ready?: boolean; readonly phase?: string; readonly deleting?: boolean; readonly owner?: Record<string, unknown> | null; readonly labels?: Record<string, string> } = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name,
    namespace: "default",
    uid: `uid-${name}`,
    resourceVersion: "5",
    labels: fields.labels ?? { app: "web" },
    ...(fields.owner === null ? {} : { ownerReferences: [fields.owner ?? rsRef] }),
    ...(fields.deleting ? { deletionTimestamp: at(T0) } : {})
  },
  status: { phase: fields.phase ?? "Running", conditions: [{ type: "Ready", status: fields.ready === false ? "False" : "True" }] }
})

const pdb = (spec: Record<string, unknown>, status: Record<string, unknown> = {}, generation = 1) => ({
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: { name: "budget", namespace: "default", generation, resourceVersion: "9" },
  spec: { selector: { matchLabels: { app: "web" } }, ...spec },
  status: { observedGeneration: 1, ...status }
})

const scales = (replicas: number) => (ref: Record<string, unknown>) => (ref["uid"] === "rs-1" ? { uid: "deploy-1", replicas } : undefined)
const three = [pod("a"), pod("b"), pod("c", { ready: false })]

describe("Disruption.expected", () => {
  const cases: ReadonlyArray<[string, Record<string, unknown>, number, number]> = [
    ["minAvailable int: the pods themselves", { minAvailable: 2 }, 3, 2],
    ["minAvailable 50% of the scale (5), rounded up", { minAvailable: "50%" }, 5, 3],
    ["maxUnavailable int", { maxUnavailable: 1 }, 5, 4],
    ["maxUnavailable 30% of 5 rounds up to 2", { maxUnavailable: "30%" }, 5, 3],
    ["maxUnavailable above the scale: 0 desired", { maxUnavailable: 9 }, 5, 0],
    ["neither: nothing expected", {}, 0, 0]
  ]
  it.each(cases)("%s", (_what, spec, expectedPods, desiredHealthy) => {
    const out = Either.getOrThrow(Disruption.expected(pdb(spec), three, scales(5)))
    expect(out).toMatchObject({ expectedPods, desiredHealthy })
  })

  it("counts each controller once, skips unmanaged pods, and fails on a missing controller", () => {
    const twoOwners = [...three, pod("d", { owner: { ...rsRef, name: "web-2", uid: "rs-2" } })]
    const scaleOf = (ref: Record<string, unknown>) => (ref["uid"] === "rs-1" ? { uid: "a", replicas: 3 } : { uid: "b", replicas: 2 })
    expect(Either.getOrThrow(Disruption.expectedScale(twoOwners, scaleOf)).expectedPods).toBe(5)
    const unmanaged = Either.getOrThrow(Disruption.expected(pdb({ maxUnavailable: 1 }), [...three, pod("loose", { owner: null })], scales(3)))
    expect(unmanaged).toMatchObject({ expectedPods: 3, desiredHealthy: 2, unmanaged: ["loose"] })
    expect(Disruption.expected(pdb({ maxUnavailable: 1 }), three, () => undefined)).toEqual(Either.left('found no controllers for pod "a"'))
  })
})

describe("Disruption.disrupted and currentHealthy", () => {
  it("keeps fresh approvals of live pods, drops deleting and overdue ones, and does not count them healthy", () => {
    const budget = pdb({ minAvailable: 1 }, { disruptedPods: { a: at(T0 - 10_000), b: at(T0 - 3 * 60_000), gone: at(T0), d: at(T0) } })
    const pods = [pod("a"), pod("b"), pod("c"), pod("d", { deleting: true })]
    const d = Disruption.disrupted(budget, pods, T0)
    expect(d.pods).toEqual({ a: at(T0 - 10_000) })
    expect(d.notDeleted).toEqual(["b"])
    expect(d.recheckAtMs).toBe(T0 - 10_000 + Disruption.deletionTimeoutMs)
    expect(Disruption.currentHealthy(pods, d.pods, T0)).toBe(2)
  })
})

describe("Disruption.status", () => {
  const cases: ReadonlyArray<[string, number, number, number, number, string]> = [
    ["one to spare", 3, 2, 3, 1, "SufficientPods"],
    ["exactly enough", 2, 2, 3, 0, "InsufficientPods"],
    ["too few", 1, 2, 3, 0, "InsufficientPods"],
    ["nothing expected", 3, 0, 0, 0, "InsufficientPods"]
  ]
  it.each(cases)("%s", (_what, currentHealthy, desiredHealthy, expectedPods, allowed, reason) => {
    const s = Disruption.status(pdb({}), { currentHealthy, desiredHealthy, expectedPods, disruptedPods: {} }, T0) as any
    expect(s).toMatchObject({ disruptionsAllowed: allowed, currentHealthy, desiredHealthy, expectedPods, observedGeneration: 1 })
    expect(s.conditions).toEqual([{ type: "DisruptionAllowed", status: allowed > 0 ? "True" : "False", reason, message: "", observedGeneration: 1, lastTransitionTime: at(T0) }])
  })

  it("keeps the condition's transition time while its status holds", () => {
    const first = Disruption.status(pdb({}), { currentHealthy: 3, desiredHealthy: 2, expectedPods: 3, disruptedPods: {} }, T0)
    const again = Disruption.status(pdb({}, first), { currentHealthy: 4, desiredHealthy: 2, expectedPods: 4, disruptedPods: {} }, T0 + 60_000) as any
    expect(again.conditions[0].lastTransitionTime).toBe(at(T0))
    const fail = Disruption.failSafe(pdb({}, first), "boom", T0 + 60_000) as any
    expect(fail.disruptionsAllowed).toBe(0)
    expect(fail.conditions[0]).toMatchObject({ status: "False", reason: "SyncFailed", message: "boom", lastTransitionTime: at(T0 + 60_000) })
  })
})

describe("Disruption.eviction", () => {
  const allowing = pdb({ minAvailable: 2 }, { disruptionsAllowed: 1, currentHealthy: 3, desiredHealthy: 2, expectedPods: 3 })
  const blocking = pdb({ minAvailable: 3 }, { disruptionsAllowed: 0, currentHealthy: 3, desiredHealthy: 3, expectedPods: 3 })
  type Case = readonly [string, ReturnType<typeof pod>, ReadonlyArray<ReturnType<typeof pdb>>, string]
  const cases: ReadonlyArray<Case> = [
    ["no budget: delete", pod("a"), [], "Delete"],
    ["budget allows: decrement", pod("a"), [allowing], "Decrement"],
    ["budget exhausted: 429", pod("a"), [blocking], "TooManyRequests"],
    ["budget not observed yet: 429", pod("a"), [pdb({ minAvailable: 1 }, { disruptionsAllowed: 5 }, 2)], "TooManyRequests"],
    ["two budgets: 500", pod("a"), [allowing, { ...allowing, metadata: { ...allowing.metadata, name: "other" } }], "MultipleBudgets"],
    ["an empty selector guards nothing", pod("a"), [{ ...blocking, spec: { ...blocking.spec, selector: {} as never } }], "Delete"],
    ["other labels: not guarded", pod("a", { labels: { app: "db" } }), [blocking], "Delete"],
    ["succeeded pod: delete without a budget", pod("a", { phase: "Succeeded" }), [blocking], "Delete"],
    ["pending pod: delete without a budget", pod("a", { phase: "Pending", ready: false }), [blocking], "Delete"],
    ["deleting pod: delete without a budget", pod("a", { deleting: true }), [blocking], "Delete"],
    ["unready pod, budget satisfied: delete it", pod("a", { ready: false }), [blocking], "DeleteUnhealthy"],
    ["unready pod, budget not satisfied: 429", pod("a", { ready: false }), [pdb({ minAvailable: 3 }, { disruptionsAllowed: 0, currentHealthy: 2, desiredHealthy: 3 })], "TooManyRequests"],
    ["unready pod, AlwaysAllow: delete it", pod("a", { ready: false }), [pdb({ minAvailable: 3, unhealthyPodEvictionPolicy: "AlwaysAllow" }, { disruptionsAllowed: 0, currentHealthy: 2, desiredHealthy: 3 })], "DeleteUnhealthy"],
    ["negative allowance: 403", pod("a"), [pdb({ minAvailable: 1 }, { disruptionsAllowed: -1 })], "Forbidden"]
  ]
  it.each(cases)("%s", (_what, p, budgets, tag) => expect(Disruption.eviction(p, budgets, T0)._tag).toBe(tag))

  it("decrements, records the pod, and flips the condition when the last disruption is spent", () => {
    const d = Disruption.eviction(pod("a"), [allowing], T0)
    if (d._tag !== "Decrement") throw new Error(d._tag)
    expect(d.status).toMatchObject({ disruptionsAllowed: 0, disruptedPods: { a: at(T0) } })
    expect((d.status as any).conditions[0]).toMatchObject({ type: "DisruptionAllowed", status: "False", reason: "InsufficientPods" })
    const dry = Disruption.eviction(pod("a"), [allowing], T0, true)
    expect(dry._tag === "Decrement" && dry.status["disruptedPods"]).toBeUndefined()
    const refused = Disruption.eviction(pod("a"), [blocking], T0)
    expect(refused).toMatchObject({ cause: "The disruption budget budget needs 3 healthy pods and has 3 currently", retryAfterSeconds: 0 })
    expect(Disruption.eviction(pod("a", { phase: "Pending" }), [], T0)).toEqual({ _tag: "Delete", pinResourceVersion: true })
    expect(Disruption.eviction(pod("a", { phase: "Failed" }), [], T0)).toEqual({ _tag: "Delete", pinResourceVersion: false })
  })
})
