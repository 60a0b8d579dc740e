/** The event TTL controller through the real API. */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as EventTtl from "../../src/controllers/EventTtl.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

const ns = "default"
const EventRef: Client.ResourceRef = { apiVersion: "v1", kind: "Event" }
const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")
const event = (name: string, lastMs: number) => ({
  apiVersion: "v1",
  kind: "Event",
  metadata: { name, namespace: ns },
  involvedObject: { kind: "Pod", namespace: ns, name: "p" },
  reason: "Test",
  message: name,
  type: "Normal",
  count: 1,
  firstTimestamp: at(lastMs),
  lastTimestamp: at(lastMs)
})

const names = (c: TestCluster.TestCluster) =>
  Effect.map(c.client.list(EventRef, { namespace: ns }), (l) => ((l["items"] as ReadonlyArray<Record<string, any>>) ?? []).map((e) => e["metadata"]["name"] as string).sort())

describe("EventTtl (integration)", () => {
  it.live(
    "deletes events older than the TTL and keeps fresh ones until they age",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* TestCluster.make({ nodes: 0, scheduler: false, controllers: [EventTtl.reconciler({ ttlMs: 3_000, resyncMs: 100 })] })
          const now = Date.now()
          yield* c.client.create(event("old", now - 600_000))
          yield* c.client.create(event("fresh", now))
          yield* c.eventually(Effect.flatMap(names(c), (n) => (n.includes("old") ? Effect.fail(new Error(n.join())) : Effect.succeed(n))))
          expect(yield* names(c)).toContain("fresh")
          yield* c.eventually(Effect.flatMap(names(c), (n) => (n.includes("fresh") ? Effect.fail(new Error(n.join())) : Effect.void)), { timeoutMs: 30_000 })
          expect(Date.now() - now).toBeGreaterThanOrEqual(2_000)
        })
      ),
    60_000
  )
})
