import { describe, expect, it } from "vitest"
import type { QueuedPodInfo } from "../../../src/scheduler/Framework.js"
import * as PrioritySort from "../../../src/scheduler/plugins/PrioritySort.js"
import { pod } from "./fixtures.js"

const queued = (name: string, priority: number | undefined, timestampMs: number): QueuedPodInfo => ({
  pod: pod({ name, spec: priority === undefined ? {} : { priority } }),
  initialAttemptMs: 0,
  timestampMs,
  attempts: 1,
  unschedulablePlugins: new Set()
})

describe("PrioritySort", () => {
  const plugin = PrioritySort.make()

  it.each([
    { case: "higher priority first", a: [10, 5], b: [1, 1], less: true },
    { case: "lower priority after, even if earlier", a: [1, 1], b: [10, 5], less: false },
    { case: "equal priority: earlier first", a: [3, 1], b: [3, 2], less: true },
    { case: "equal priority: later after", a: [3, 2], b: [3, 1], less: false },
    { case: "equal priority and time: neither before", a: [3, 1], b: [3, 1], less: false },
    { case: "unset priority is 0", a: [undefined, 5], b: [-1, 1], less: true },
    { case: "negative priorities order too", a: [-1, 5], b: [-2, 1], less: true }
  ] as const)("$case", ({ a, b, less }) => {
    expect(plugin.less(queued("a", a[0], a[1]), queued("b", b[0], b[1]))).toBe(less)
  })

  it("sorts a queue by priority, then arrival", () => {
    const pods = [queued("low-early", 0, 1), queued("high-late", 100, 9), queued("high-early", 100, 2), queued("mid", 50, 0)]
    const sorted = [...pods].sort((x, y) => (plugin.less(x, y) ? -1 : plugin.less(y, x) ? 1 : 0))
    expect(sorted.map((q) => q.pod.name)).toEqual(["high-early", "high-late", "mid", "low-early"])
  })

  it("is registered under its upstream name and builds without arguments", () => {
    expect(PrioritySort.name).toBe("PrioritySort")
    expect(PrioritySort.factory(undefined, { schedulerName: "default-scheduler" })).toMatchObject({ name: "PrioritySort" })
  })

  it("sorts 5,000 queued pods", () => {
    const pods = Array.from({ length: 5000 }, (_, i) => queued(`p${i}`, i % 7, 5000 - i))
    const sorted = [...pods].sort((x, y) => (plugin.less(x, y) ? -1 : plugin.less(y, x) ? 1 : 0))
    expect(sorted[0]!.pod.priority).toBe(6)
    expect(sorted.at(-1)!.pod.priority).toBe(0)
  })
})
