import { describe, expect, it } from "@effect/vitest"
import type { Entry } from "../../../src/scheduler/queue/QueueEntry.js"
import { anyPlugin, UnschedulablePods } from "../../../src/scheduler/queue/UnschedulablePods.js"
import { entry, manual } from "./fixtures.js"

const setup = (maxParkedMs = 1000) => {
  const clock = manual()
  const due: Array<string> = []
  const pods = new UnschedulablePods(maxParkedMs, clock.timer, clock.now, (e: Entry) => due.push(e.info.pod.name))
  return { clock, due, pods }
}
const names = (s: Set<Entry>) => [...s].map((e) => e.info.pod.name).sort()

describe("UnschedulablePods", () => {
  it.each([
    { name: "by one rejecting plugin", interested: ["NodeResourcesFit"], moved: ["fit", "fit-and-taint"] },
    { name: "by another", interested: ["TaintToleration"], moved: ["fit-and-taint"] },
    { name: "errors (no plugin) for any interest", interested: [anyPlugin], moved: ["error"] },
    { name: "none", interested: [], moved: [] }
  ])("finds the parked pods a plugin may help: $name", ({ interested, moved }) => {
    const { pods } = setup()
    pods.park(entry("fit", 0, ["NodeResourcesFit"]))
    pods.park(entry("fit-and-taint", 0, ["NodeResourcesFit", "TaintToleration"]))
    pods.park(entry("error", 0, []))
    const gated = entry("gated", 0, ["NodeResourcesFit"])
    gated.gated = true
    pods.park(gated)
    expect(pods.size).toBe(4)
    expect(names(pods.movable((p) => interested.includes(p)))).toEqual(moved)
  })

  it("unpark takes a pod out of every index", () => {
    const { pods } = setup()
    const e = entry("a", 0, ["NodeResourcesFit", "NodePorts"])
    pods.park(e)
    expect(e.place).toBe("unschedulable")
    pods.unpark(e)
    expect(pods.size).toBe(0)
    expect(names(pods.movable(() => true))).toEqual([])
  })

  it("flushes pods parked longer than the limit, oldest first; gated pods stay; no timer while nothing is due", () => {
    const { clock, due, pods } = setup(1000)
    pods.park(entry("old", 0, ["NodeName"]))
    clock.advance(500)
    pods.park(entry("young", 500, ["NodeName"]))
    const gated = entry("gated", 0, ["SchedulingGates"])
    gated.gated = true
    pods.park(gated)
    clock.advance(500)
    expect(due).toEqual(["old"])
    clock.advance(500)
    expect(due).toEqual(["old", "young"])
    expect(pods.size).toBe(1)
    expect(clock.live()).toBe(0)
    pods.close()
    pods.park(entry("after", clock.now(), ["NodeName"]))
    expect(clock.live()).toBe(0)
  })
})
