/**
 * The `pods/eviction` subresource through the real API (the test cluster's server, scheduler and
 * simulated kubelets). Budget statuses are written by hand here, so each case decides against
 * exactly the status it sets; the disruption controller's own tests cover computing them.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Pods from "../../src/object/Pods.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, any>

const ns = "default"
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }
const PdbRef: Client.ResourceRef = { apiVersion: "policy/v1", kind: "PodDisruptionBudget" }

const pod = (name: string, labels: Record<string, string> = { app: "web" }, annotations: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns, labels, annotations },
  spec: { containers: [{ name: "app", image: "web:1" }], terminationGracePeriodSeconds: 30 }
})

const cluster = (scheduler = true) => TestCluster.make({ nodes: 1, podStartupMs: 10, scheduler })

const check = (ok: boolean, why: () => string) => (ok ? Effect.void : Effect.fail(new Error(why())))

const running = (c: TestCluster.TestCluster, names: ReadonlyArray<string>, ready = true) =>
  c.eventually(
    Effect.forEach(names, (n) =>
      Effect.flatMap(c.client.get(PodRef, ns, n), (p) => check(Pods.phase(p) === "Running" && Pods.isReady(p) === ready, () => `${n}: ${Pods.phase(p)} ready=${Pods.isReady(p)}`))
    )
  )

/** A budget with its status set as the controller would have. */
const budget = (c: TestCluster.TestCluster, name: string, spec: Json, status: Json) =>
  Effect.gen(function* () {
    const created = (yield* c.client.create({ apiVersion: "policy/v1", kind: "PodDisruptionBudget", metadata: { name, namespace: ns }, spec: { selector: { matchLabels: { app: "web" } }, ...spec } })) as Json
    return (yield* c.client.update({ ...created, status: { observedGeneration: created.metadata.generation ?? 1, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0, disruptionsAllowed: 0, ...status } }, "status")) as Json
  })

const evict = (c: TestCluster.TestCluster, name: string, body: Json = {}) =>
  c.client.createSubresource(PodRef, ns, name, "eviction", { apiVersion: "policy/v1", kind: "Eviction", metadata: { name, namespace: ns }, ...body })

const gone = (c: TestCluster.TestCluster, name: string) =>
  Effect.map(Effect.either(c.client.get(PodRef, ns, name)), (e) => (e._tag === "Left" ? undefined : (e.right as Json)))

describe("pods/eviction", () => {
  it.live("evicts a pod no budget guards: 201 Success, DisruptionTarget, then deleted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(pod("a"))
        yield* running(c, ["a"])
        const response = yield* Effect.promise(() =>
          c.fetch(`http://fleet.test/api/v1/namespaces/${ns}/pods/a/eviction`, {
            method: "POST",
            headers: { authorization: `Bearer ${c.adminToken}`, "content-type": "application/json" },
            body: JSON.stringify({ apiVersion: "policy/v1", kind: "Eviction", metadata: { name: "a", namespace: ns } })
          })
        )
        expect(response.status).toBe(201)
        expect(yield* Effect.promise(() => response.json())).toMatchObject({ kind: "Status", status: "Success" })
        // Terminating with its grace period (the simulated kubelet then confirms the deletion).
        const after = yield* gone(c, "a")
        if (after !== undefined) {
          expect(Metadata.isTerminating(after)).toBe(true)
          expect(after.metadata.deletionGracePeriodSeconds).toBe(30)
          expect(Pods.condition(after, "DisruptionTarget")).toMatchObject({ status: "True", reason: "EvictionByEvictionAPI", message: "Eviction API: evicting" })
        }
        yield* c.eventually(Effect.flatMap(gone(c, "a"), (p) => check(p === undefined, () => "still there")))
      })
    )
  )

  it.live("refuses with 429 when the budget allows no disruption, and spends one allowed disruption atomically", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        for (const n of ["a", "b", "c"]) yield* c.client.create(pod(n))
        yield* running(c, ["a", "b", "c"])
        yield* budget(c, "web", { minAvailable: 2 }, { currentHealthy: 3, desiredHealthy: 2, expectedPods: 3, disruptionsAllowed: 1 })

        yield* evict(c, "a")
        const pdb = (yield* c.client.get(PdbRef, ns, "web")) as Json
        expect(pdb.status.disruptionsAllowed).toBe(0)
        expect(Object.keys(pdb.status.disruptedPods)).toEqual(["a"])
        expect(pdb.status.conditions).toEqual([expect.objectContaining({ type: "DisruptionAllowed", status: "False", reason: "InsufficientPods" })])

        const refused = yield* Effect.flip(evict(c, "b"))
        expect(refused.status).toMatchObject({
          code: 429,
          reason: "TooManyRequests",
          message: "Cannot evict pod as it would violate the pod's disruption budget.",
          details: { causes: [{ reason: "DisruptionBudget", message: "The disruption budget web needs 2 healthy pods and has 3 currently" }] }
        })
        const b = (yield* c.client.get(PodRef, ns, "b")) as Json
        expect(Metadata.isTerminating(b)).toBe(false)
      })
    )
  )

  it.live("answers 500 when two budgets guard the pod, 429 while a budget is not observed yet, 400 on a name mismatch", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(pod("a"))
        yield* running(c, ["a"])
        yield* budget(c, "one", { minAvailable: 1 }, { disruptionsAllowed: 0, observedGeneration: 0 })
        const pending = yield* Effect.flip(evict(c, "a"))
        expect(pending.status.code).toBe(429)
        expect(pending.status.details?.causes?.[0]?.message).toBe("The disruption budget one is still being processed by the server.")
        yield* budget(c, "two", { maxUnavailable: 1 }, { disruptionsAllowed: 5 })
        const two = yield* Effect.flip(evict(c, "a"))
        expect(two.status).toMatchObject({ code: 500, message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support." })
        const mismatch = yield* Effect.flip(c.client.createSubresource(PodRef, ns, "a", "eviction", { apiVersion: "policy/v1", kind: "Eviction", metadata: { name: "b", namespace: ns } }))
        expect(mismatch.status).toMatchObject({ code: 400, message: "name in URL does not match name in Eviction object" })
        const missing = yield* Effect.flip(evict(c, "nope"))
        expect(missing.status.code).toBe(404)
      })
    )
  )

  it.live("evicts an unready pod while the budget is satisfied, or always with AlwaysAllow, without spending the budget", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(pod("ok1"))
        yield* c.client.create(pod("sick", { app: "web" }, { "sim.fleet.koder.dev/ready": "false" }))
        yield* running(c, ["ok1"])
        yield* running(c, ["sick"], false)
        yield* budget(c, "web", { minAvailable: 1 }, { currentHealthy: 1, desiredHealthy: 1, expectedPods: 2, disruptionsAllowed: 0 })
        yield* evict(c, "sick")
        const pdb = (yield* c.client.get(PdbRef, ns, "web")) as Json
        expect(pdb.status.disruptionsAllowed).toBe(0)
        expect(pdb.status.disruptedPods).toBeUndefined()
        yield* c.eventually(Effect.flatMap(gone(c, "sick"), (p) => check(p === undefined || Metadata.isTerminating(p), () => "not evicted")))

        // Not satisfied: the default policy refuses, AlwaysAllow lets it go.
        yield* c.client.create(pod("sick2", { app: "web" }, { "sim.fleet.koder.dev/ready": "false" }))
        yield* running(c, ["sick2"], false)
        const current = (yield* c.client.get(PdbRef, ns, "web")) as Json
        yield* c.client.update({ ...current, status: { ...current.status, currentHealthy: 0, desiredHealthy: 1 } }, "status")
        const refused = yield* Effect.flip(evict(c, "sick2"))
        expect(refused.status.code).toBe(429)
        const again = (yield* c.client.get(PdbRef, ns, "web")) as Json
        yield* c.client.update({ ...again, spec: { ...again.spec, unhealthyPodEvictionPolicy: "AlwaysAllow" } })
        const bumped = (yield* c.client.get(PdbRef, ns, "web")) as Json
        yield* c.client.update({ ...bumped, status: { ...bumped.status, observedGeneration: bumped.metadata.generation } }, "status")
        yield* evict(c, "sick2")
        yield* c.eventually(Effect.flatMap(gone(c, "sick2"), (p) => check(p === undefined || Metadata.isTerminating(p), () => "not evicted")))
      })
    )
  )

  it.live("honours dryRun and deleteOptions, and deletes pending pods without consulting budgets", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(pod("a"))
        yield* c.client.create(pod("b"))
        yield* c.client.create(pod("x", { app: "other" }))
        yield* running(c, ["a", "b", "x"])
        yield* budget(c, "web", { minAvailable: 1 }, { currentHealthy: 2, desiredHealthy: 1, expectedPods: 2, disruptionsAllowed: 1 })
        yield* evict(c, "a", { deleteOptions: { dryRun: ["All"] } })
        const a = (yield* c.client.get(PodRef, ns, "a")) as Json
        expect(Metadata.isTerminating(a)).toBe(false)
        expect(((yield* c.client.get(PdbRef, ns, "web")) as Json).status.disruptionsAllowed).toBe(1)
        // The caller's preconditions hold (no budget guards x): a stale resourceVersion is a 409.
        const stale = yield* Effect.flip(evict(c, "x", { deleteOptions: { preconditions: { resourceVersion: "1" } } }))
        expect(stale.status.code).toBe(409)
        yield* evict(c, "a", { deleteOptions: { gracePeriodSeconds: 0 } })
        // Grace 0: gone at once, not Terminating.
        expect(yield* gone(c, "a")).toBeUndefined()
      })
    ).pipe(
      Effect.zipRight(
        Effect.scoped(
          Effect.gen(function* () {
            const c = yield* cluster(false)
            yield* c.client.create(pod("p"))
            const created = (yield* c.client.create({ apiVersion: "policy/v1", kind: "PodDisruptionBudget", metadata: { name: "web", namespace: ns }, spec: { minAvailable: 5, selector: { matchLabels: { app: "web" } } } })) as Json
            expect(created.metadata.name).toBe("web")
            yield* evict(c, "p")
            expect(yield* gone(c, "p")).toBeUndefined()
          })
        )
      )
    )
  )
})
