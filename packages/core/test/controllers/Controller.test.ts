import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Controller from "../../src/controllers/Controller.js"
import * as ControllerManager from "../../src/controllers/ControllerManager.js"
import * as Informer from "../../src/informer/Informer.js"
import * as ApiError from "../../src/api/ApiError.js"
import { makeMemory, Store } from "../../src/store/Store.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import { ApiClient } from "../../src/client/ApiClient.js"

const CmRef = { apiVersion: "v1", kind: "ConfigMap" } as const

const cm = (name: string, data: Record<string, string> = {}) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: "default" }, data })

/** Copies `<name>` to `<name>-copy` (cache-driven: creates only when the cache lacks the copy). */
const copier = (stats: { created: number; duplicates: number; maxInFlight: number }, delayMs = 0): Controller.Reconciler => {
  const inFlight = new Map<string, number>()
  return {
    name: "copier",
    primary: CmRef,
    workers: 4,
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const { namespace, name } = Informer.splitKey(key)
        if (name.endsWith("-copy")) return
        const n = (inFlight.get(key) ?? 0) + 1
        inFlight.set(key, n)
        stats.maxInFlight = Math.max(stats.maxInFlight, n)
        if (delayMs > 0) yield* Effect.sleep(delayMs)
        const copies = ctx.informers.for(CmRef)
        if (copies.get(namespace, `${name}-copy`) === undefined) {
          const made = yield* Effect.either(ctx.client.create(cm(`${name}-copy`)))
          if (made._tag === "Left" && made.left.status.code === 409) stats.duplicates++
          else stats.created++
        }
        inFlight.set(key, (inFlight.get(key) ?? 1) - 1)
      })
  }
}

describe("Controller runner", () => {
  it.live("reconciles each key once at a time and sees its own writes before deciding again", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const stats = { created: 0, duplicates: 0, maxInFlight: 0 }
        const cluster = yield* TestCluster.make({ nodes: 0, controllers: [copier(stats, 5)] })
        for (let i = 0; i < 5; i++) yield* cluster.client.create(cm(`c${i}`))
        // Many changes to the same objects while they are being reconciled.
        for (let round = 0; round < 5; round++) {
          for (let i = 0; i < 5; i++) yield* cluster.client.patch(CmRef, "default", `c${i}`, "merge", { data: { round: String(round) } })
        }
        yield* cluster.eventually(Effect.suspend(() => (stats.created === 5 ? Effect.void : Effect.fail(new Error(`created ${stats.created}`)))))
        yield* cluster.idle
        expect(stats.duplicates).toBe(0)
        expect(stats.maxInFlight).toBe(1)
        const metrics = cluster.metrics().find((m) => m.name === "copier")!
        expect(metrics.reconciles).toBeGreaterThanOrEqual(10)
        expect(metrics.latency.count).toBe(metrics.reconciles)
        expect(metrics.depth).toBe(0)
      })
    )
  )

  it.live("retries failures with backoff, drops terminal errors, and honours requeueAfter", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const calls = new Map<string, number>()
        const reconciler: Controller.Reconciler = {
          name: "moody",
          primary: CmRef,
          reconcile: (key) =>
            Effect.suspend((): Effect.Effect<Controller.Result | void, Controller.ReconcileError> => {
              const n = (calls.get(key) ?? 0) + 1
              calls.set(key, n)
              if (key === "default/flaky" && n <= 3) return Effect.fail(apiError())
              if (key === "default/broken") return Effect.fail(new Controller.TerminalError({ message: "spec is bad" }))
              if (key === "default/ticker" && n < 4) return Effect.succeed({ requeueAfterMs: 30 })
              return Effect.void
            })
        }
        const cluster = yield* TestCluster.make({ nodes: 0, controllers: [reconciler] })
        yield* cluster.client.create(cm("flaky"))
        yield* cluster.client.create(cm("broken"))
        yield* cluster.client.create(cm("ticker"))
        yield* cluster.eventually(Effect.suspend(() => ((calls.get("default/flaky") ?? 0) >= 4 ? Effect.void : Effect.fail(new Error("flaky not retried")))))
        yield* cluster.eventually(Effect.suspend(() => ((calls.get("default/ticker") ?? 0) >= 4 ? Effect.void : Effect.fail(new Error("ticker not requeued")))))
        yield* Effect.sleep(200)
        expect(calls.get("default/flaky")).toBe(4)
        expect(calls.get("default/broken")).toBe(1)
        expect(calls.get("default/ticker")).toBe(4)
        const metrics = cluster.metrics().find((m) => m.name === "moody")!
        expect(metrics.retries).toBe(3)
        expect(metrics.errors).toBe(4)
      })
    )
  )

  it.live("runs controllers only while holding the lease; a successor takes over when the leader goes", () =>
    Effect.gen(function* () {
      const electionStore = makeMemory()
      const leaders: Array<string> = []
      yield* Effect.scoped(
        Effect.gen(function* () {
          const c = yield* TestCluster.make({ nodes: 0 })
          const seen: Record<string, Array<string>> = { a: [], b: [] }
          const manager = (id: "a" | "b") =>
            ControllerManager.run({
              reconcilers: [
                {
                  name: `record-${id}`,
                  primary: CmRef,
                  reconcile: (key) => Effect.sync(() => void seen[id]!.push(key))
                }
              ],
              election: { namespace: "kube-system", name: "controllers", identity: id, leaseDuration: "600 millis", renewDeadline: "400 millis", retryPeriod: "100 millis" },
              onTerm: (running) => {
                if (running !== undefined) leaders.push(id)
              }
            }).pipe(Effect.provideService(ApiClient, c.client), Effect.provideService(Store, electionStore))
          const a = yield* Effect.fork(manager("a"))
          yield* c.eventually(Effect.suspend(() => (leaders.length === 1 ? Effect.void : Effect.fail(new Error("no leader")))))
          const b = yield* Effect.fork(manager("b"))
          yield* c.client.create(cm("one"))
          const first = leaders[0] as "a" | "b"
          yield* c.eventually(Effect.suspend(() => (seen[first]!.includes("default/one") ? Effect.void : Effect.fail(new Error("leader did not reconcile")))))
          const other = first === "a" ? "b" : "a"
          expect(seen[other]).toEqual([])
          // The leader goes away; the follower takes over and reconciles from a fresh list.
          yield* Fiber.interrupt(first === "a" ? a : b)
          yield* c.eventually(Effect.suspend(() => (leaders.includes(other) ? Effect.void : Effect.fail(new Error("no takeover")))))
          yield* c.client.create(cm("two"))
          yield* c.eventually(Effect.suspend(() => (seen[other]!.includes("default/two") ? Effect.void : Effect.fail(new Error("successor idle")))))
          expect(seen[other]).toContain("default/one")
          yield* Fiber.interrupt(first === "a" ? b : a)
        })
      )
      electionStore.close()
    })
  )
})

const apiError = () => ApiError.of({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "conflict", reason: "Conflict", code: 409 })
