// Connection loss under load: the store's backends are terminated (twice, LISTEN connection
// included) and then PostgreSQL becomes unreachable for a while (a proxy in front of it drops
// everything). Operations meanwhile fail with retryable Unavailable or succeed; afterwards the
// store works again by itself, every acknowledged write is there, revisions are dense, and a
// watcher that was open resumes with no gap and no duplicate.
import { Effect, Fiber, Stream } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import type { StoreError } from "@koder/fleet-core"
import { PgStore } from "../src/index.js"
import { adminQuery, eventually, randomName, testUrl } from "./pgTest.js"
import * as TcpProxy from "./tcpProxy.js"

const schema = randomName("fleet_test_restart")
const app = randomName("fleet-test-restart")

afterAll(async () => {
  await adminQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
})

const terminateBackends = async (): Promise<number> => {
  const r = await adminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [app])
  return r.rowCount ?? 0
}

describe("PostgreSQL store under connection loss", () => {
  it("fails retryably while PostgreSQL is gone, recovers by itself, and loses no acknowledged write or event", async () => {
    const target = new URL(testUrl)
    const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 5432) })
    const viaProxy = new URL(testUrl)
    viaProxy.hostname = "127.0.0.1"
    viaProxy.port = String(proxy.port)

    try {
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            // A small ring, so that the slow watcher below falls behind it and reads history.
            const store = yield* PgStore.make({ url: viaProxy.toString(), schema, applicationName: app, poolSize: 8, watchRingEvents: 64 })

            /** A watcher that resumes from its last revision whenever its stream fails. */
            const resumingWatcher = (perEvent: Effect.Effect<void>) =>
              Effect.gen(function* () {
                const state = { seen: [] as Array<number>, last: 0, restarts: 0 }
                const fiber = yield* Effect.fork(
                  Effect.forever(
                    Effect.zipRight(
                      Effect.either(
                        Stream.runForEach(Stream.suspend(() => store.watch("r/", state.last)), (e) =>
                          Effect.zipRight(
                            Effect.sync(() => {
                              state.seen.push(e.revision)
                              state.last = e.revision
                            }),
                            perEvent
                          )
                        )
                      ).pipe(Effect.tap(() => Effect.sync(() => state.restarts++))),
                      Effect.sleep("50 millis")
                    )
                  )
                )
                return { state, fiber }
              })
            const live = yield* resumingWatcher(Effect.void)
            const slow = yield* resumingWatcher(Effect.sleep("1 millis"))

            // Load: 16 writers creating keys until told to stop.
            const acks = new Map<number, string>()
            const failures: Array<StoreError.StoreError> = []
            let stop = false
            const load = yield* Effect.fork(
              Effect.forEach(
                Array.from({ length: 16 }, (_, w) => w),
                (w) =>
                  Effect.gen(function* () {
                    for (let i = 0; !stop; i++) {
                      const key = `r/${w}/${i}`
                      const result = yield* Effect.either(store.create(key, `v${i}`))
                      if (result._tag === "Right") acks.set(result.right.modRevision, key)
                      else {
                        failures.push(result.left)
                        yield* Effect.sleep("20 millis")
                      }
                    }
                  }),
                { concurrency: "unbounded", discard: true }
              )
            )
            const progress = (n: number, what: string) =>
              Effect.promise(() => {
                const goal = acks.size + n
                return eventually(() => acks.size >= goal, 20_000, what)
              })

            yield* progress(200, "writes before the first termination")
            expect(yield* Effect.promise(terminateBackends)).toBeGreaterThan(0)
            yield* progress(200, "writes after the first termination")
            expect(yield* Effect.promise(terminateBackends)).toBeGreaterThan(0)
            yield* progress(200, "writes after the second termination")

            // PostgreSQL unreachable: every operation fails retryably, clearly.
            const before = failures.length
            yield* Effect.promise(() => proxy.cut())
            yield* Effect.promise(() => eventually(() => failures.length >= before + 20, 10_000, "failures during the outage"))
            const outage = failures.slice(before)
            console.log(`an operation during the outage: ${outage[0]?.message}`)
            expect((yield* Effect.either(store.get("r/0/0")))._tag).toBe("Left")
            yield* Effect.promise(() => proxy.restore())
            yield* progress(200, "writes after PostgreSQL is back")

            stop = true
            yield* Fiber.join(load)

            for (const f of failures) expect(f).toMatchObject({ _tag: "Unavailable", retryable: true })
            expect(outage.some((f) => /unreachable|connection lost|outcome unknown/.test(f.message))).toBe(true)

            // Every acknowledged write is present; revisions are dense.
            const head = yield* store.currentRevision
            const rows = yield* Effect.promise(() =>
              adminQuery(`SELECT revision, key FROM ${schema}.kv WHERE tenant = '' ORDER BY revision`)
            )
            const stored = new Map(rows.rows.map((r) => [Number(r.revision), r.key as string]))
            expect([...stored.keys()]).toEqual(Array.from({ length: head }, (_, i) => i + 1))
            for (const [rev, key] of acks) expect(stored.get(rev)).toBe(key)

            // Both watchers saw each revision once, in order, through all of it.
            for (const w of [live, slow]) {
              yield* Effect.promise(() => eventually(() => w.state.last >= head, 15_000, "a watcher to catch up"))
              expect(w.state.seen).toEqual(Array.from({ length: head }, (_, i) => i + 1))
              yield* Fiber.interrupt(w.fiber)
            }

            const stats = yield* store.stats
            expect(stats.listens).toBeGreaterThanOrEqual(3)
            console.log(
              `restart: ${acks.size} acks, ${failures.length} failures (${outage.length} during the outage), head ${head}, ` +
                `watch restarts ${live.state.restarts} (live) ${slow.state.restarts} (slow), listens ${stats.listens}, unknown outcomes ${stats.unknownOutcomes}`
            )
          })
        )
      )
    } finally {
      await proxy.close()
    }
  }, 60_000)
})
