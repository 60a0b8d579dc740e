/**
 * A store that times every operation of another into `fleet_store_operation_duration_seconds`
 * (by operation), whatever the backend: the server wraps the store it opened, so SQLite and
 * PostgreSQL are measured the same way, from the caller's side (queueing for a group commit
 * included, which is what a request waits for). Watches are streams and are not timed.
 *
 *   API, controllers ─▶ InstrumentedStore ─(time)─▶ SqliteStore | PgStore | memory
 */
import { Effect } from "effect"
import type { StoreService } from "../store/Store.js"
import * as FleetMetrics from "./FleetMetrics.js"
import type { Registry } from "./MetricRegistry.js"

/** `store`, with its operations timed into `registry`. */
export const make = (store: StoreService, registry: Registry): StoreService => {
  const duration = FleetMetrics.store(registry).duration
  const time = {
    get: duration.labels("get"),
    list: duration.labels("list"),
    count: duration.labels("count"),
    create: duration.labels("create"),
    update: duration.labels("update"),
    delete: duration.labels("delete"),
    txn: duration.labels("txn"),
    compact: duration.labels("compact")
  }
  const around = <A, E>(series: { readonly observe: (v: number) => void }, effect: () => Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      const t0 = performance.now()
      return Effect.onExit(effect(), () => Effect.sync(() => series.observe((performance.now() - t0) / 1000)))
    })
  return {
    currentRevision: store.currentRevision,
    compactRevision: store.compactRevision,
    get: (key) => around(time.get, () => store.get(key)),
    list: (prefix, options) => around(time.list, () => store.list(prefix, options)),
    count: (prefix) => around(time.count, () => store.count(prefix)),
    create: (key, value) => around(time.create, () => store.create(key, value)),
    update: (key, value, expected) => around(time.update, () => store.update(key, value, expected)),
    delete: (key, expected) => around(time.delete, () => store.delete(key, expected)),
    txn: (ops) => around(time.txn, () => store.txn(ops)),
    watch: store.watch,
    compact: (revision) => around(time.compact, () => store.compact(revision))
  }
}
