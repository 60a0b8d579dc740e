// Background compaction: with a short policy the store compacts by itself in small batches,
// keeping the newest revisions and the current state whole, and watchers behind it get Compacted.
import { Effect, Stream } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { PgStore } from "../src/index.js"
import { adminQuery, eventually, randomName, testUrl } from "./pgTest.js"

const schema = randomName("fleet_test_compact")

afterAll(async () => {
  await adminQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
})

describe("PostgreSQL store compaction", () => {
  it("compacts in the background by policy, in batches, keeping the current state", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* PgStore.make({
            url: testUrl,
            schema,
            applicationName: "fleet-test-compact",
            compaction: { minRevisions: 20, minAgeMillis: 0, batchRevisions: 15, intervalMillis: 50 }
          })
          for (let i = 0; i < 10; i++) yield* store.create(`c/${i}`, "0")
          for (let round = 1; round <= 9; round++) {
            for (let i = 0; i < 10; i++) {
              const kv = yield* store.get(`c/${i}`)
              if (round === 9 && i % 2 === 0) yield* store.delete(`c/${i}`)
              else yield* store.update(`c/${i}`, String(round), kv.modRevision)
            }
          }
          // 100 revisions; the policy keeps the newest 20.
          yield* Effect.promise(() =>
            eventually(async () => (await Effect.runPromise(store.compactRevision)) === 80, 10_000, "compaction to revision 80")
          )
          const stats = yield* store.stats
          expect(stats.compactions).toBeGreaterThanOrEqual(6)
          expect((yield* store.list("c/")).items.map((i) => `${i.key}=${i.value}`)).toEqual(
            ["c/1=9", "c/3=9", "c/5=9", "c/7=9", "c/9=9"]
          )
          expect((yield* store.list("c/", { atRevision: 80 })).items.length).toBe(10)
          expect(yield* Effect.either(Stream.runDrain(Stream.take(store.watch("c/", 79), 1)))).toMatchObject({
            _tag: "Left",
            left: { _tag: "Compacted", compactRevision: 80 }
          })
          const events = yield* Stream.runCollect(Stream.take(store.watch("c/", 80), 20))
          expect([...events].map((e) => e.revision)).toEqual(Array.from({ length: 20 }, (_, i) => 81 + i))
          // Superseded rows are gone: per key, its newest row at or below 80 plus the newer ones.
          const rows = yield* Effect.promise(() => adminQuery(`SELECT count(*)::int AS n FROM ${schema}.kv`))
          expect(rows.rows[0].n).toBe(10 + 20)
        })
      )
    ))
})
