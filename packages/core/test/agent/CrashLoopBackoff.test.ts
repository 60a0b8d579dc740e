import { describe, expect, it } from "vitest"
import * as CrashLoopBackoff from "../../src/agent/CrashLoopBackoff.js"

describe("CrashLoopBackoff", () => {
  it("restarts at once the first time, then waits 10 s doubling to 5 min", () => {
    let entry: CrashLoopBackoff.Entry | undefined
    let now = 0
    const waits: Array<number> = []
    for (let i = 0; i < 8; i++) {
      // The container runs 1 s and fails again.
      const finished = now + 1_000
      now = finished
      const wait = CrashLoopBackoff.remaining(entry, finished, now)
      waits.push(wait)
      now += wait
      entry = CrashLoopBackoff.next(entry, finished, now)
    }
    expect(waits).toEqual([0, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000])
  })

  const cases: ReadonlyArray<[string, CrashLoopBackoff.Entry | undefined, number, number, number]> = [
    ["no entry: now", undefined, 1_000, 1_000, 0],
    ["inside the delay: the rest of it", { delayMs: 20_000, lastUpdateMs: 0 }, 5_000, 8_000, 17_000],
    ["delay passed: now", { delayMs: 10_000, lastUpdateMs: 0 }, 5_000, 16_000, 0],
    ["ran 10 min since the last restart: starts over", { delayMs: 300_000, lastUpdateMs: 0 }, 600_001, 600_001, 0]
  ]
  it.each(cases)("remaining: %s", (_name, entry, finished, now, want) => {
    expect(CrashLoopBackoff.remaining(entry, finished, now)).toBe(want)
  })

  it("resets the delay to 10 s after a long run", () => {
    const entry = CrashLoopBackoff.next({ delayMs: 300_000, lastUpdateMs: 0 }, 700_000, 700_000)
    expect(entry).toEqual({ delayMs: 10_000, lastUpdateMs: 700_000 })
  })

  it("says what the kubelet says", () => {
    expect(CrashLoopBackoff.message({ delayMs: 80_000, lastUpdateMs: 0 }, "app", { name: "web", namespace: "default", uid: "u1" })).toBe(
      "back-off 1m20s restarting failed container=app pod=web_default(u1)"
    )
    expect(CrashLoopBackoff.goDuration(300_000)).toBe("5m0s")
  })
})
