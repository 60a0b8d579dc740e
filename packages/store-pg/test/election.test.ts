// Leader election across OS processes sharing PostgreSQL: SIGKILL the leader, a successor must
// act within lease duration + retry period, and an invariant checker watching the store must
// never see a write accepted from anyone but the holder of the current term.
import { LeaderElection, Store } from "@koder/fleet-core"
import { Effect, Fiber, ManagedRuntime, Stream } from "effect"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { PgStore } from "../src/index.js"
import * as ElectionCluster from "./fixtures/ElectionCluster.js"

const url = process.env.FLEET_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const schema = `fleet_election_${process.pid}_${Date.now().toString(36)}`
const timing = { leaseMs: 2_000, renewMs: 1_500, retryMs: 250 }
// Process start-up and scheduling on a loaded CI machine; the bound itself is lease + retry.
const jitterMs = 1_000

afterAll(async () => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await client.end()
})

describe("leader election on PostgreSQL, three processes", () => {
  it("fails over after SIGKILL within lease + retry, and accepts writes only from the current term's holder", async () => {
    const checker = ManagedRuntime.make(PgStore.layer({ url, schema, applicationName: "fleet-election-checker" }))
    // The checker watches live, from another process than the writers.
    const seen: Array<Store.WatchEvent> = []
    const watcher = checker.runFork(
      Effect.flatMap(Store.Store, (store) => Stream.runForEach(store.watch("/registry/", 0), (e) => Effect.sync(() => seen.push(e))))
    )
    const candidates = ElectionCluster.start(url, schema, 3, timing)
    const failovers: Array<number> = []
    try {
      let previousTerm = -1
      for (let round = 0; round < 2; round++) {
        const { term, failoverMs } = await ElectionCluster.killLeader(candidates, previousTerm, 60_000)
        failovers.push(failoverMs)
        previousTerm = term
      }
      // Let the last leader write a little, then stop everyone.
      const last = ElectionCluster.currentLeader(candidates)!
      const before = last.wrote.length
      await ElectionCluster.until("the last leader to write", () => (last.wrote.length > before + 3 ? true : undefined), 10_000)
    } finally {
      await ElectionCluster.stopAll(candidates)
    }

    for (const ms of failovers) expect(ms).toBeLessThanOrEqual(timing.leaseMs + timing.retryMs + jitterMs)

    const head = await checker.runPromise(Effect.flatMap(Store.Store, (s) => s.currentRevision))
    await ElectionCluster.until("the checker to see every revision", () => ((seen.at(-1)?.revision ?? 0) >= head ? true : undefined), 10_000)
    await checker.runPromise(Fiber.interrupt(watcher))
    await checker.dispose()
    expect(seen.map((e) => e.revision)).toEqual(Array.from({ length: head }, (_, i) => i + 1))

    const termKey = LeaderElection.termKey({ namespace: "kube-system", name: "fleet-test" })
    let current: { holder: string; term: number } | undefined
    const terms: Array<number> = []
    let writes = 0
    for (const e of seen) {
      if (e.key === termKey && e.type !== "DELETED") {
        current = JSON.parse(e.value)
        terms.push(current!.term)
      } else if (e.key.startsWith("/registry/test/writes/")) {
        writes++
        // Every accepted write belongs to the term in force at its revision.
        expect(JSON.parse(e.value)).toEqual(current)
      }
    }
    expect(terms).toEqual([...terms].sort((a, b) => a - b))
    expect(new Set(terms).size).toBe(terms.length)
    expect(terms.length).toBeGreaterThanOrEqual(3)
    expect(writes).toBeGreaterThan(0)
    // Every write a candidate saw acknowledged is in the store.
    const revisions = new Set(seen.map((e) => e.revision))
    for (const c of candidates) for (const r of c.wrote) expect(revisions.has(r)).toBe(true)
    console.log(`election failovers (ms): ${failovers.join(", ")}`)
  }, 90_000)
})
