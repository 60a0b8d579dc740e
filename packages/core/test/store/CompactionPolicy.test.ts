import { CompactionPolicy } from "@koder/fleet-core"
import { describe, expect, it } from "vitest"

const policy: CompactionPolicy.CompactionPolicy = { minRevisions: 100, minAgeMillis: 60_000, batchRevisions: 50, intervalMillis: 1_000 }

describe("CompactionPolicy.nextStep", () => {
  it.each([
    { name: "young store: nothing to discard", current: 80, compact: 0, expiredUpTo: 80, want: undefined },
    { name: "revision floor binds", current: 130, compact: 0, expiredUpTo: 130, want: 30 },
    { name: "age floor binds", current: 1_000, compact: 0, expiredUpTo: 20, want: 20 },
    { name: "a step never exceeds the batch", current: 1_000, compact: 0, expiredUpTo: 900, want: 50 },
    { name: "steps continue from the horizon", current: 1_000, compact: 850, expiredUpTo: 900, want: 900 },
    { name: "already at the allowed horizon", current: 1_000, compact: 900, expiredUpTo: 900, want: undefined },
    { name: "nothing old enough yet", current: 10_000, compact: 0, expiredUpTo: 0, want: undefined }
  ])("$name", ({ current, compact, expiredUpTo, want }) => {
    expect(CompactionPolicy.nextStep(policy, { currentRevision: current, compactRevision: compact, newestExpiredRevision: expiredUpTo })).toBe(want)
  })

  it("defaults to keeping 10,000 revisions and 5 minutes", () => {
    expect(CompactionPolicy.defaults.minRevisions).toBe(10_000)
    expect(CompactionPolicy.defaults.minAgeMillis).toBe(300_000)
  })
})
