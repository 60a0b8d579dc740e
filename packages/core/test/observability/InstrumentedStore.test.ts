import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as InstrumentedStore from "../../src/observability/InstrumentedStore.js"
import * as MetricRegistry from "../../src/observability/MetricRegistry.js"
import * as Exposition from "../../src/observability/Exposition.js"
import * as Store from "../../src/store/Store.js"

describe("InstrumentedStore", () => {
  it.effect("times every operation by name, failures included, and behaves as the store it wraps", () =>
    Effect.gen(function* () {
      const registry = MetricRegistry.make()
      const store = InstrumentedStore.make(Store.makeMemory(), registry)
      const created = yield* store.create("/a", "1")
      yield* store.update("/a", "2", created.modRevision)
      expect((yield* store.get("/a")).value).toBe("2")
      expect(Either.isLeft(yield* Effect.either(store.get("/missing")))).toBe(true)
      expect((yield* store.list("/")).items).toHaveLength(1)
      const text = Exposition.render(registry.snapshot())
      expect(text).toContain('fleet_store_operation_duration_seconds_count{operation="get"} 2')
      expect(text).toContain('fleet_store_operation_duration_seconds_count{operation="create"} 1')
      expect(text).toContain('fleet_store_operation_duration_seconds_count{operation="update"} 1')
      expect(text).toContain('fleet_store_operation_duration_seconds_count{operation="list"} 1')
    })
  )
})
