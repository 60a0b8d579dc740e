import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as EventRecorder from "../../src/client/EventRecorder.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

const EventRef = { apiVersion: "v1", kind: "Event" } as const

describe("EventRecorder", () => {
  it.live("aggregates a repeated event into one object with a count and first/last timestamps", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 0 })
        const cm = yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", namespace: "default" } })
        const recorder = EventRecorder.make(cluster.client, { component: "test-controller", host: "host-a" })
        for (let i = 0; i < 3; i++) yield* recorder.record(cm, "Warning", "BadThing", "it went wrong")
        yield* recorder.record(cm, "Normal", "GoodThing", "it went right")
        const list = (yield* cluster.client.list(EventRef, { namespace: "default" }))["items"] as Array<Record<string, any>>
        expect(list).toHaveLength(2)
        const bad = list.find((e) => e["reason"] === "BadThing")!
        expect(bad).toMatchObject({
          type: "Warning",
          message: "it went wrong",
          count: 3,
          involvedObject: { kind: "ConfigMap", name: "cfg", namespace: "default", uid: (cm["metadata"] as Record<string, unknown>)["uid"] },
          source: { component: "test-controller", host: "host-a" }
        })
        expect(Date.parse(bad["lastTimestamp"])).toBeGreaterThanOrEqual(Date.parse(bad["firstTimestamp"]))
        expect(list.find((e) => e["reason"] === "GoodThing")!["count"]).toBe(1)
        // A second recorder (another process, a restart) aggregates into the same object.
        yield* EventRecorder.make(cluster.client, { component: "test-controller", host: "host-a" }).record(cm, "Warning", "BadThing", "it went wrong")
        const again = (yield* cluster.client.list(EventRef, { namespace: "default" }))["items"] as Array<Record<string, any>>
        expect(again.find((e) => e["reason"] === "BadThing")!["count"]).toBe(4)
      })
    )
  )

  it.live("serial: events recorded at once are written one at a time, in the order recorded", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 0 })
        const cm = yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", namespace: "default" } })
        let inFlight = 0
        let most = 0
        const written: Array<string> = []
        // The real client, watched: how many event writes are open at once, and their order.
        const watched = {
          ...cluster.client,
          create: (o: Record<string, unknown>) =>
            Effect.gen(function* () {
              most = Math.max(most, ++inFlight)
              yield* Effect.sleep("5 millis")
              written.push(String(o["reason"]))
              return yield* cluster.client.create(o)
            }).pipe(Effect.ensuring(Effect.sync(() => inFlight--)))
        } as typeof cluster.client
        const recorder = EventRecorder.make(watched, { component: "kubelet", host: "n1" }, { serial: true })
        const reasons = Array.from({ length: 8 }, (_, i) => `Step${i}`)
        const fibers = yield* Effect.forEach(reasons, (r) => Effect.fork(recorder.record(cm, "Normal", r, r)))
        yield* Effect.forEach(fibers, (f) => f.await, { discard: true })
        expect(most).toBe(1)
        expect(written).toEqual(reasons)
        const list = (yield* cluster.client.list(EventRef, { namespace: "default" }))["items"] as Array<Record<string, any>>
        expect(list.map((e) => e["reason"]).sort()).toEqual(reasons)
        // Without `serial`, the same burst is written concurrently.
        most = 0
        const parallel = EventRecorder.make(watched, { component: "kubelet", host: "n2" })
        const more = yield* Effect.forEach(reasons, (r) => Effect.fork(parallel.record(cm, "Normal", r, r)))
        yield* Effect.forEach(more, (f) => f.await, { discard: true })
        expect(most).toBeGreaterThan(1)
      })
    )
  )

  it.live("whenIdle: an event is written once its owner is idle, with the time it was recorded at", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 0 })
        const cm = yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", namespace: "default" } })
        const idle = yield* Deferred.make<void>()
        const asked: Array<number> = []
        const recorder = EventRecorder.make(cluster.client, { component: "kubelet", host: "n1" }, {
          serial: true,
          whenIdle: (recordedAt) => Effect.zipRight(Effect.sync(() => asked.push(recordedAt)), Deferred.await(idle))
        })
        const before = Date.now()
        const fiber = yield* Effect.fork(recorder.record(cm, "Normal", "Started", "Started container app"))
        const events = () => Effect.map(cluster.client.list(EventRef, { namespace: "default" }), (l) => l["items"] as Array<Record<string, any>>)
        // Until its owner says it is idle, nothing is written.
        while (asked.length === 0) yield* Effect.sleep("1 millis")
        yield* Effect.sleep("1100 millis")
        expect(yield* events()).toEqual([])
        yield* Deferred.succeed(idle, undefined)
        yield* Fiber.join(fiber)
        const [event] = yield* events()
        expect(event).toMatchObject({ reason: "Started", count: 1 })
        // Recorded before the wait, not when written: the timestamps are from before the wait's second.
        expect(asked[0]).toBeGreaterThanOrEqual(before)
        expect(Date.parse(event!["firstTimestamp"])).toBe(Math.floor(asked[0]! / 1000) * 1000)
        expect(event!["lastTimestamp"]).toBe(event!["firstTimestamp"])
      })
    )
  )

  it.live("writes an event anew when the one it counted expired meanwhile", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 0 })
        const cm = yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", namespace: "default" } })
        const recorder = EventRecorder.make(cluster.client, { component: "test-controller" })
        yield* recorder.record(cm, "Normal", "Synced", "synced")
        yield* recorder.record(cm, "Normal", "Synced", "synced")
        const first = ((yield* cluster.client.list(EventRef, { namespace: "default" }))["items"] as Array<Record<string, any>>)[0]!
        expect(first["count"]).toBe(2)
        // The event TTL controller deletes it; the recorder still remembers its count.
        yield* cluster.client.delete(EventRef, "default", first["metadata"]["name"])
        yield* recorder.record(cm, "Normal", "Synced", "synced")
        const after = (yield* cluster.client.list(EventRef, { namespace: "default" }))["items"] as Array<Record<string, any>>
        expect(after).toHaveLength(1)
        expect(after[0]!["count"]).toBe(1)
      })
    )
  )

  it.live("never fails its caller, even when the event cannot be written", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 0 })
        const recorder = EventRecorder.make(cluster.client, { component: "test" })
        // The namespace does not exist: the write fails, the recording does not.
        yield* recorder.record({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", namespace: "missing", uid: "u" } }, "Normal", "R", "m")
      })
    )
  )
})
