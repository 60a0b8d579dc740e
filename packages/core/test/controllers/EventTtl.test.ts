import { describe, expect, it } from "vitest"
import * as EventTtl from "../../src/controllers/EventTtl.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")
const event = (fields: Record<string, unknown>) => ({ apiVersion: "v1", kind: "Event", metadata: { name: "e", namespace: "a", creationTimestamp: at(T0 - 7_200_000) }, involvedObject: {}, ...fields })

describe("EventTtl.decide", () => {
  const hour = 3_600_000
  const cases: ReadonlyArray<[string, Record<string, unknown>, boolean]> = [
    ["last seen 2 h ago: expired", { lastTimestamp: at(T0 - 2 * hour) }, true],
    ["last seen 10 min ago, first seen 3 h ago: kept", { firstTimestamp: at(T0 - 3 * hour), lastTimestamp: at(T0 - 600_000) }, false],
    ["exactly one hour: expired", { lastTimestamp: at(T0 - hour) }, true],
    ["series still running: kept", { eventTime: "2024-05-01T07:00:00.000000Z", series: { count: 4, lastObservedTime: "2024-05-01T09:59:00.000000Z" } }, false],
    ["eventTime only, old: expired", { eventTime: "2024-05-01T07:00:00.000000Z" }, true],
    ["no time but the creation (2 h): expired", {}, true]
  ]
  it.each(cases)("%s", (_what, fields, expired) => expect(EventTtl.decide(event(fields), T0)).toBe(expired))

  it("honours a custom TTL and leaves events without any time alone", () => {
    expect(EventTtl.decide(event({ lastTimestamp: at(T0 - 2_000) }), T0, 1_000)).toBe(true)
    expect(EventTtl.decide(event({ lastTimestamp: at(T0 - 2_000) }), T0, 5_000)).toBe(false)
    expect(EventTtl.decide({ metadata: {} }, T0, 0)).toBe(false)
  })
})
