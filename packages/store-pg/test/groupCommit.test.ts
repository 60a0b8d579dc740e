// The write path under contention: mutations batched together are still checked one by one
// (a failing one takes no revision and does not hurt its neighbours), two store instances (two
// pools, as two processes would have) keep compare-and-swap exact and revisions dense, and
// closing a store drains the writes it has accepted.
import { Effect, Either, Scope, Exit } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { PgStore } from "../src/index.js"
import { adminQuery, randomName, testUrl } from "./pgTest.js"

const schemas: Array<string> = []
const fresh = () => {
  const s = randomName("fleet_test_gc")
  schemas.push(s)
  return s
}

afterAll(async () => {
  for (const s of schemas) await adminQuery(`DROP SCHEMA IF EXISTS ${s} CASCADE`)
})

const run = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Effect.runPromise(Effect.scoped(effect))

describe("PostgreSQL store group commit", () => {
  it("checks each mutation of a batch on its own", () =>
    run(
      Effect.gen(function* () {
        const store = yield* PgStore.make({ url: testUrl, schema: fresh(), applicationName: "fleet-test-gc" })
        yield* store.create("lease", "l")
        // All submitted in one turn of the event loop: they share a batch.
        const results = yield* Effect.all(
          [
            Effect.either(store.create("x", "1")),
            Effect.either(store.create("x", "2")),
            Effect.either(store.txn([{ op: "check", key: "lease", expectedRevision: 99 }, { op: "create", key: "y", value: "no" }])),
            Effect.either(store.txn([{ op: "create", key: "z", value: "1" }, { op: "update", key: "z", value: "2", expectedRevision: 3 }])),
            Effect.either(store.update("x", "3", 2)),
            Effect.either(store.delete("missing"))
          ],
          { concurrency: "unbounded" }
        )
        expect(results.map((r: Either.Either<unknown, { readonly _tag: string }>) => (Either.isLeft(r) ? r.left._tag : "ok"))).toEqual(["ok", "AlreadyExists", "Conflict", "ok", "ok", "NotFound"])
        expect(yield* store.currentRevision).toBe(5)
        expect((yield* store.list("")).items.map((i) => `${i.key}=${i.value}@${i.modRevision}`)).toEqual(["lease=l@1", "x=3@5", "z=2@4"])
        const stats = yield* store.stats
        expect(stats.commits).toBeLessThanOrEqual(3)
      })
    ))

  it("keeps compare-and-swap exact and revisions dense with two store instances racing on one key", async () => {
    const schema = fresh()
    await run(
      Effect.gen(function* () {
        const stores = [
          yield* PgStore.make({ url: testUrl, schema, applicationName: "fleet-test-gc" }),
          yield* PgStore.make({ url: testUrl, schema, applicationName: "fleet-test-gc" })
        ]
        yield* stores[0]!.create("counter", "0")
        const perWorker = 10
        let conflicts = 0
        yield* Effect.forEach(
          Array.from({ length: 16 }, (_, w) => w),
          (w) =>
            Effect.gen(function* () {
              const store = stores[w % 2]!
              for (let done = 0; done < perWorker; ) {
                const kv = yield* store.get("counter")
                const r = yield* Effect.either(store.update("counter", String(Number(kv.value) + 1), kv.modRevision))
                if (Either.isRight(r)) done++
                else if (r.left._tag === "Conflict") conflicts++
                else return yield* Effect.fail(r.left)
                // Unrelated creates from both instances interleave with the increments.
                yield* stores[(w + 1) % 2]!.create(`noise/${w}/${done}/${conflicts}`, "n")
              }
            }),
          { concurrency: "unbounded", discard: true }
        )
        const counter = yield* stores[1]!.get("counter")
        expect(counter.value).toBe(String(16 * perWorker))
        expect(counter.version).toBe(16 * perWorker + 1)
        expect(conflicts).toBeGreaterThan(0)
        const head = yield* stores[0]!.currentRevision
        const rows = yield* Effect.promise(() => adminQuery(`SELECT revision FROM ${schema}.kv ORDER BY revision`))
        expect(rows.rows.map((r) => Number(r.revision))).toEqual(Array.from({ length: head }, (_, i) => i + 1))
        const [a, b] = [yield* stores[0]!.stats, yield* stores[1]!.stats]
        // Each saw the other's commits in between its own and re-read under the lock.
        expect(a.reReads + b.reReads).toBeGreaterThan(0)
      })
    )
  })

  it("drains accepted writes when the store closes", async () => {
    const schema = fresh()
    const scope = await Effect.runPromise(Scope.make())
    const store = await Effect.runPromise(Scope.extend(PgStore.make({ url: testUrl, schema, applicationName: "fleet-test-gc" }), scope))
    const writes = Array.from({ length: 200 }, (_, i) => Effect.runPromise(Effect.either(store.create(`d/${i}`, "v"))))
    await Effect.runPromise(Scope.close(scope, Exit.void))
    const outcomes = await Promise.all(writes)
    expect(outcomes.filter(Either.isRight).length).toBe(200)
    expect((await adminQuery(`SELECT count(*)::int AS n FROM ${schema}.kv`)).rows[0].n).toBe(200)
    expect(await Effect.runPromise(Effect.either(store.get("d/0")))).toMatchObject({ _tag: "Left", left: { _tag: "Unavailable", retryable: false } })
  })
})
