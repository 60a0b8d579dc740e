/**
 * The store benchmark: one driver, every backend. `run("sqlite", layer)` measures create
 * throughput (64 in flight and serial), compare-and-swap update throughput, the time to list
 * 10,000 objects, and watch delivery latency with 100 watchers, printing one JSON line per
 * result: `{"bench":"store.sqlite.create","unit":"ops/s","value":21000,"params":{...}}`.
 *
 * Each measurement gets a fresh store (`Layer.fresh`). Runtime-agnostic: timing is
 * `performance.now()` and output is `console.log`.
 */
import { Effect, Layer, Stream } from "effect"
import { Store, type StoreService } from "../store/Store.js"

/** Sizes of one run (defaults keep a run of one backend to several seconds). */
export interface Params {
  /** Bytes per value (default 1,024). */
  readonly valueBytes?: number
  /** Writes in flight for the concurrent benchmarks (default 64). */
  readonly inflight?: number
  /** Creates timed with `inflight` in flight (default 40,000). */
  readonly creates?: number
  /** Creates timed one at a time (default 2,000). */
  readonly serialCreates?: number
  /** CAS updates timed with `inflight` in flight, over `inflight * 16` keys (default 40,000). */
  readonly updates?: number
  /** Objects listed (default 10,000). */
  readonly listObjects?: number
  /** Timed lists; the median is reported (default 5). */
  readonly listRepeats?: number
  /** Concurrent watchers (default 100). */
  readonly watchers?: number
  /** Writes observed by every watcher (default 2,000). */
  readonly watchWrites?: number
  /** Write rate while watching, in writes per second (default 1,000). */
  readonly watchRate?: number
}

/** One measurement, as printed. */
export interface Result {
  readonly bench: string
  readonly unit: "ops/s" | "ms"
  readonly value: number
  readonly params: Record<string, number | string>
}

const defaults: Required<Params> = {
  valueBytes: 1024,
  inflight: 64,
  creates: 40_000,
  serialCreates: 2_000,
  updates: 40_000,
  listObjects: 10_000,
  listRepeats: 5,
  watchers: 100,
  watchWrites: 2_000,
  watchRate: 1_000
}

const print = (result: Result) => Effect.sync(() => console.log(JSON.stringify(result)))

const valueOf = (bytes: number, seed: number) => {
  const head = `{"seed":${seed},"pad":"`
  return head + "x".repeat(Math.max(0, bytes - head.length - 2)) + '"}'
}

/** Run `n` tasks with `inflight` workers pulling the next index. */
const pool = <E>(n: number, inflight: number, task: (i: number) => Effect.Effect<unknown, E>) => {
  let next = 0
  const worker = Effect.suspend(function loop(): Effect.Effect<void, E> {
    if (next >= n) return Effect.void
    return Effect.zipRight(task(next++), Effect.suspend(loop))
  })
  return Effect.all(Array.from({ length: Math.min(inflight, n) }, () => worker), { concurrency: "unbounded", discard: true })
}

/** Time an effect in milliseconds. */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const start = performance.now()
    return Effect.map(effect, (a) => [performance.now() - start, a] as const)
  })

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!

const round = (value: number, digits: number) => Number(value.toFixed(digits))

const createThroughput = (store: StoreService, prefix: string, count: number, inflight: number, bytes: number) => {
  const value = valueOf(bytes, 0)
  return Effect.map(
    timed(pool(count, inflight, (i) => store.create(`${prefix}${i}`, value))),
    ([ms]) => (count / ms) * 1000
  )
}

const updateThroughput = (store: StoreService, count: number, inflight: number, bytes: number) =>
  Effect.gen(function* () {
    // Worker w owns keys w, w + inflight, …, so every CAS is expected to succeed.
    const keys = inflight * 16
    const revisions = new Array<number>(keys)
    const value = valueOf(bytes, 1)
    yield* pool(keys, inflight, (i) => Effect.map(store.create(`/bench/update/${i}`, value), (kv) => (revisions[i] = kv.modRevision)))
    const perWorker = Math.ceil(count / inflight)
    const worker = (w: number) =>
      Effect.suspend(function loop(n = 0): Effect.Effect<void, unknown> {
        if (n >= perWorker) return Effect.void
        const k = w + inflight * (n % 16)
        return Effect.flatMap(store.update(`/bench/update/${k}`, value, revisions[k]!), (kv) => {
          revisions[k] = kv.modRevision
          return loop(n + 1)
        })
      })
    const [ms] = yield* timed(
      Effect.all(Array.from({ length: inflight }, (_, w) => worker(w)), { concurrency: "unbounded", discard: true })
    )
    return ((perWorker * inflight) / ms) * 1000
  })

const listTime = (store: StoreService, objects: number, repeats: number, bytes: number) =>
  Effect.gen(function* () {
    yield* pool(objects, 64, (i) => store.create(`/bench/list/${String(i).padStart(6, "0")}`, valueOf(bytes, i)))
    // Unrelated keys on both sides of the prefix, as in a real registry.
    yield* pool(1_000, 64, (i) => store.create(`/bench/other/${i}`, "x"))
    const times: Array<number> = []
    for (let r = 0; r < repeats + 1; r++) {
      const [ms, result] = yield* timed(store.list("/bench/list/"))
      if (result.items.length !== objects) {
        return yield* Effect.dieMessage(`listed ${result.items.length} objects, expected ${objects}`)
      }
      if (r > 0) times.push(ms) // the first list warms caches
    }
    return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!
  })

/**
 * Latency from commit to delivery, with writes paced at `rate` per second. A write's commit time is the first moment it is visible:
 * its acknowledgement to the writer or its first delivery to any watcher, whichever is earlier.
 */
const watchLatency = (store: StoreService, watchers: number, writes: number, rate: number, bytes: number) =>
  Effect.gen(function* () {
    const from = yield* store.currentRevision
    const seen = new Float64Array(writes).fill(Infinity)
    const deliveries: Array<Float64Array> = []
    const fibers = []
    for (let w = 0; w < watchers; w++) {
      const at = new Float64Array(writes)
      deliveries.push(at)
      fibers.push(
        yield* Effect.fork(
          Stream.runForEach(Stream.take(store.watch("/bench/watch/", from), writes), (event) =>
            Effect.sync(() => {
              const i = event.revision - from - 1
              const now = performance.now()
              at[i] = now
              if (now < seen[i]!) seen[i] = now
            })
          )
        )
      )
    }
    // Let every watch subscribe before writing.
    yield* Effect.sleep(50)
    const value = valueOf(bytes, 2)
    // Paced writes: a burst every 5 ms, each write on its own fiber (many may be in flight).
    const burst = Math.max(1, Math.round(rate / 200))
    const start = performance.now()
    const writers = []
    for (let i = 0; i < writes; i += burst) {
      const due = start + (i / rate) * 1000
      const wait = due - performance.now()
      if (wait > 0) yield* Effect.sleep(wait)
      for (let j = i; j < Math.min(writes, i + burst); j++) {
        writers.push(
          yield* Effect.fork(
            Effect.map(store.create(`/bench/watch/${j}`, value), (kv) => {
              const now = performance.now()
              const k = kv.modRevision - from - 1
              if (now < seen[k]!) seen[k] = now
            })
          )
        )
      }
    }
    for (const f of writers) yield* f.await
    for (const f of fibers) yield* f.await
    const latencies: Array<number> = []
    for (const at of deliveries) for (let i = 0; i < writes; i++) latencies.push(at[i]! - seen[i]!)
    latencies.sort((a, b) => a - b)
    return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) }
  })

/** Run every store benchmark against `layer`, printing one JSON line per result. */
export const run = (name: string, layer: Layer.Layer<Store, unknown>, params: Params = {}): Effect.Effect<void, unknown> => {
  const p = { ...defaults, ...params }
  const fresh = <A, E>(f: (store: StoreService) => Effect.Effect<A, E>) =>
    Effect.scoped(Effect.flatMap(Store, f).pipe(Effect.provide(Layer.fresh(layer))))
  const warmup = (store: StoreService) => createThroughput(store, "/bench/warmup/", 2_000, p.inflight, p.valueBytes)
  return Effect.gen(function* () {
    const create = yield* fresh((store) =>
      Effect.zipRight(warmup(store), createThroughput(store, "/bench/create/", p.creates, p.inflight, p.valueBytes))
    )
    yield* print({
      bench: `store.${name}.create`,
      unit: "ops/s",
      value: Math.round(create),
      params: { count: p.creates, inflight: p.inflight, valueBytes: p.valueBytes }
    })

    const serial = yield* fresh((store) =>
      Effect.zipRight(warmup(store), createThroughput(store, "/bench/serial/", p.serialCreates, 1, p.valueBytes))
    )
    yield* print({
      bench: `store.${name}.create.serial`,
      unit: "ops/s",
      value: Math.round(serial),
      params: { count: p.serialCreates, inflight: 1, valueBytes: p.valueBytes }
    })

    const update = yield* fresh((store) => Effect.zipRight(warmup(store), updateThroughput(store, p.updates, p.inflight, p.valueBytes)))
    yield* print({
      bench: `store.${name}.update`,
      unit: "ops/s",
      value: Math.round(update),
      params: { count: Math.ceil(p.updates / p.inflight) * p.inflight, inflight: p.inflight, keys: p.inflight * 16, valueBytes: p.valueBytes }
    })

    const list = yield* fresh((store) => listTime(store, p.listObjects, p.listRepeats, p.valueBytes))
    yield* print({
      bench: `store.${name}.list`,
      unit: "ms",
      value: round(list, 2),
      params: { objects: p.listObjects, valueBytes: p.valueBytes, repeats: p.listRepeats, statistic: "median" }
    })

    const watch = yield* fresh((store) =>
      Effect.zipRight(warmup(store), watchLatency(store, p.watchers, p.watchWrites, p.watchRate, p.valueBytes))
    )
    const watchParams = { watchers: p.watchers, writes: p.watchWrites, writesPerSecond: p.watchRate, valueBytes: p.valueBytes }
    yield* print({ bench: `store.${name}.watch.p50`, unit: "ms", value: round(watch.p50, 3), params: watchParams })
    yield* print({ bench: `store.${name}.watch.p99`, unit: "ms", value: round(watch.p99, 3), params: watchParams })
  })
}
