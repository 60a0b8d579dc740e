// Benchmark: leader fail-over time across processes sharing PostgreSQL. Three candidates; the
// leader is SIGKILLed and the time until a successor starts leading is measured, several times.
// Prints {"bench":"election.failover.ms",...}: the mean, with the max and timings in params.
import pg from "pg"
import * as ElectionCluster from "../test/fixtures/ElectionCluster.js"

const url = process.env.FLEET_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const schema = `fleet_bench_election_${process.pid}`
const timing = { leaseMs: 3_000, renewMs: 2_000, retryMs: 500 }
const rounds = 3

const candidates = ElectionCluster.start(url, schema, rounds + 1, timing)
const failovers: Array<number> = []
try {
  let previousTerm = -1
  for (let round = 0; round < rounds; round++) {
    const { term, failoverMs } = await ElectionCluster.killLeader(candidates, previousTerm)
    failovers.push(failoverMs)
    previousTerm = term
  }
} finally {
  await ElectionCluster.stopAll(candidates)
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await client.end()
}
const mean = failovers.reduce((a, b) => a + b, 0) / failovers.length
console.log(
  JSON.stringify({
    bench: "election.failover.ms",
    unit: "ms",
    value: Math.round(mean),
    params: { ...timing, rounds, max: Math.max(...failovers), processes: rounds + 1 }
  })
)
