import { Effect, TestClock } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as ObjectCache from "../../src/agent/ObjectCache.js"
import * as ApiError from "../../src/api/ApiError.js"
import type * as Client from "../../src/client/Client.js"
import * as Status from "../../src/model/Status.js"
import * as ResourceRefs from "../../src/object/ResourceRefs.js"

// A client answering GETs from a table (absent: 404, "boom": 500), counting them.
const tableClient = (objects: Map<string, Record<string, unknown>>) => {
  const gets: Array<string> = []
  const client = {
    get: (_ref: Client.ResourceRef, namespace: string | undefined, name: string) =>
      Effect.suspend(() => {
        gets.push(`${namespace ?? ""}/${name}`)
        if (name === "boom") return Effect.fail(ApiError.of(Status.badRequest("boom")))
        const o = objects.get(name)
        return o === undefined ? Effect.fail(ApiError.of(Status.notFound("configmaps", name))) : Effect.succeed(o)
      })
  } as unknown as Client.Client
  return { client, gets }
}

describe("ObjectCache", () => {
  it.effect("reuses an answer, a 404 too, for the TTL; reads again after it", () =>
    Effect.gen(function* () {
      const objects = new Map<string, Record<string, unknown>>([["cm", { data: { a: "1" } }]])
      const { client, gets } = tableClient(objects)
      const cache = ObjectCache.make(client, 5_000)
      expect(yield* cache.get(ResourceRefs.ConfigMap, "default", "cm")).toEqual({ data: { a: "1" } })
      expect(yield* cache.get(ResourceRefs.ConfigMap, "default", "gone")).toBeUndefined()
      objects.set("cm", { data: { a: "2" } })
      objects.set("gone", { data: {} })
      yield* TestClock.adjust("4999 millis")
      expect(yield* cache.get(ResourceRefs.ConfigMap, "default", "cm")).toEqual({ data: { a: "1" } })
      expect(yield* cache.get(ResourceRefs.ConfigMap, "default", "gone")).toBeUndefined()
      expect(gets).toEqual(["default/cm", "default/gone"])
      yield* TestClock.adjust("1 millis")
      expect(yield* cache.get(ResourceRefs.ConfigMap, "default", "cm")).toEqual({ data: { a: "2" } })
      expect(yield* cache.get(ResourceRefs.ConfigMap, "default", "gone")).toEqual({ data: {} })
      expect(gets).toHaveLength(4)
    })
  )

  it.effect("keys by kind and namespace; a TTL of 0 always reads; other errors fail and are not cached", () =>
    Effect.gen(function* () {
      const { client, gets } = tableClient(new Map([["x", {}]]))
      const cache = ObjectCache.make(client, 0)
      yield* cache.get(ResourceRefs.ConfigMap, "a", "x")
      yield* cache.get(ResourceRefs.ConfigMap, "a", "x")
      expect(gets).toHaveLength(2)
      const keyed = ObjectCache.make(client, 60_000)
      yield* keyed.get(ResourceRefs.ConfigMap, "a", "x")
      yield* keyed.get(ResourceRefs.Secret, "a", "x")
      yield* keyed.get(ResourceRefs.ConfigMap, "b", "x")
      yield* keyed.get(ResourceRefs.PersistentVolume, undefined, "x")
      expect([...keyed.state.entries.keys()]).toEqual(["ConfigMap/a/x", "Secret/a/x", "ConfigMap/b/x", "PersistentVolume//x"])
      const failed = yield* Effect.either(keyed.get(ResourceRefs.ConfigMap, "a", "boom"))
      expect(failed._tag).toBe("Left")
      expect(keyed.state.entries.has("ConfigMap/a/boom")).toBe(false)
    })
  )
})
