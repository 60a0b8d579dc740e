// Benchmarks of the PostgreSQL store, one JSON line per result (the format of scripts/bench.mjs):
//   store.pg.create          creates/s, 64 in flight, 1 KiB values
//   store.pg.create.serial   creates/s, 1 in flight
//   store.pg.watch.p99       ms from a commit's ack in this process to its delivery to a watcher in a
//                            child process (its own store, pool and LISTEN connection); both sides
//                            stamp performance.timeOrigin + performance.now() on the same machine
// Each bench runs on a fresh schema of FLEET_TEST_PG_URL, dropped afterwards; FLEET_BENCH_SCALE
// (default 1) scales the counts. core's StoreBench is not used: its watch latency is in-process
// and cannot be skipped, and this package's watch number must be cross-process.
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import pg from "pg"
import { PgStore } from "../src/index.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const url = process.env.FLEET_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const scale = Number(process.env.FLEET_BENCH_SCALE ?? 1)
const seconds = 3 * scale
const value = "x".repeat(1024)

const emit = (bench: string, unit: string, v: number, params: Record<string, unknown>) =>
  console.log(JSON.stringify({ bench, unit, value: Math.round(v * 100) / 100, params }))

const withSchema = async <A>(f: (schema: string) => Promise<A>): Promise<A> => {
  const schema = `fleet_bench_${randomBytes(4).toString("hex")}`
  try {
    return await f(schema)
  } finally {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await client.end()
  }
}

/** `count` creates with `inflight` callers pulling the next index; ops/s and mutations per commit. */
const creates = (count: number, inflight: number) =>
  withSchema((schema) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* PgStore.make({ url, schema, applicationName: "fleet-bench" })
          // Warm up the pool and the server's caches.
          yield* Effect.forEach(Array.from({ length: 500 }, (_, i) => i), (i) => store.create(`/bench/warmup/${i}`, value), {
            concurrency: 64,
            discard: true
          })
          const before = yield* store.stats
          let next = 0
          const worker = Effect.suspend(function loop(): Effect.Effect<void, unknown> {
            if (next >= count) return Effect.void
            return Effect.zipRight(store.create(`/bench/create/${next++}`, value), Effect.suspend(loop))
          })
          const start = performance.now()
          yield* Effect.all(Array.from({ length: inflight }, () => worker), { concurrency: "unbounded", discard: true })
          const ms = performance.now() - start
          const after = yield* store.stats
          return { rate: (count / ms) * 1000, perCommit: (after.committed - before.committed) / Math.max(1, after.commits - before.commits) }
        })
      )
    )
  )

/** Cross-process watch latency: acks in this process vs. deliveries in a watcher child process. */
const watchLatency = (inFlight: number) =>
  withSchema((schema) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const writer = yield* PgStore.make({ url, schema, applicationName: "fleet-bench-writer" })
          const from = yield* writer.currentRevision
          const child = spawn(process.execPath, ["--conditions=@koder/source", "--import", "tsx", path.join(here, "watchChild.ts"), url, schema, String(from)], {
            stdio: ["pipe", "pipe", "inherit"]
          })
          yield* Effect.addFinalizer(() => Effect.sync(() => child.kill()))
          const delivered = new Map<number, number>()
          let ready = false
          readline.createInterface({ input: child.stdout! }).on("line", (line) => {
            if (line === "READY") ready = true
            const [tag, rev, at] = line.split(" ")
            if (tag === "E") delivered.set(Number(rev), Number(at))
          })
          while (!ready) yield* Effect.sleep("20 millis")
          const acked = new Map<number, number>()
          const deadline = performance.now() + seconds * 1000
          yield* Effect.forEach(
            Array.from({ length: inFlight }, (_, w) => w),
            (w) =>
              Effect.gen(function* () {
                for (let i = 0; performance.now() < deadline; i++) {
                  const kv = yield* writer.create(`lat/${w}/${i}`, value)
                  acked.set(kv.modRevision, performance.timeOrigin + performance.now())
                  // Paced: a steady stream of commits rather than a saturating burst.
                  yield* Effect.sleep("5 millis")
                }
              }),
            { concurrency: "unbounded", discard: true }
          )
          const until = performance.now() + 10_000
          while (delivered.size < acked.size && performance.now() < until) yield* Effect.sleep("10 millis")
          const latencies = [...acked].map(([rev, at]) => Math.max(0, (delivered.get(rev) ?? Infinity) - at)).sort((a, b) => a - b)
          const p = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!
          return { p50: p(0.5), p99: p(0.99), count: latencies.length }
        })
      )
    )
  )

const many = await creates(Math.round(20_000 * scale), 64)
emit("store.pg.create", "ops/s", many.rate, { count: Math.round(20_000 * scale), inflight: 64, valueBytes: 1024, mutationsPerCommit: Math.round(many.perCommit * 10) / 10 })
const serial = await creates(Math.round(1_000 * scale), 1)
emit("store.pg.create.serial", "ops/s", serial.rate, { count: Math.round(1_000 * scale), inflight: 1, valueBytes: 1024 })
const latency = await watchLatency(8)
emit("store.pg.watch.p99", "ms", latency.p99, {
  writers: 8,
  paceMs: 5,
  seconds,
  valueBytes: 1024,
  events: latency.count,
  p50: Math.round(latency.p50 * 100) / 100,
  crossProcess: "true"
})
