import { describe, expect, it } from "@effect/vitest"
import * as PendingPods from "../../src/scheduler/PendingPods.js"

const names = new Set(["default-scheduler", "batch"])

describe("PendingPods", () => {
  it.each([
    { name: "unbound, ours by default", pod: { spec: {} }, bound: false, pending: true },
    { name: "named profile", pod: { spec: { schedulerName: "batch" } }, bound: false, pending: true },
    { name: "another scheduler's", pod: { spec: { schedulerName: "other" } }, bound: false, pending: false },
    { name: "bound", pod: { spec: { nodeName: "n1" } }, bound: true, pending: false },
    { name: "finished", pod: { spec: {}, status: { phase: "Failed" } }, bound: false, pending: false },
    { name: "deleting", pod: { metadata: { deletionTimestamp: "2026-01-01T00:00:00Z" }, spec: {} }, bound: false, pending: false }
  ])("$name", ({ pod, bound, pending }) => {
    expect(PendingPods.isBound(pod)).toBe(bound)
    expect(PendingPods.isPending(pod, names)).toBe(pending)
  })

  it("reads the scheduler name and the nomination, empty when absent", () => {
    expect(PendingPods.schedulerNameOf({ spec: { schedulerName: "" } })).toBe("default-scheduler")
    expect(PendingPods.nominatedNodeOf({ status: { nominatedNodeName: "n1" } })).toBe("n1")
    expect(PendingPods.nominatedNodeOf({})).toBe("")
    expect(PendingPods.isFinished({ status: { phase: "Succeeded" } })).toBe(true)
  })
})
