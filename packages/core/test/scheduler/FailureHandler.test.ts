import { describe, expect, it } from "@effect/vitest"
import * as FailureHandler from "../../src/scheduler/FailureHandler.js"

const now = "2026-12-03T00:00:00Z"
const scheduledFalse = (message: string) => ({ type: "PodScheduled", status: "False", reason: "Unschedulable", message, lastTransitionTime: "2026-12-01T00:00:00Z" })

describe("FailureHandler.failurePatch", () => {
  it.each([
    { name: "a first failure sets the condition", pod: {}, nominate: undefined, patch: { conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message: "m", lastTransitionTime: now }] } },
    { name: "the same failure again writes nothing", pod: { status: { conditions: [scheduledFalse("m")] } }, nominate: undefined, patch: undefined },
    { name: "a new nomination", pod: { status: { conditions: [scheduledFalse("m")] } }, nominate: "n1", patch: { nominatedNodeName: "n1" } },
    { name: "the nomination it has", pod: { status: { conditions: [scheduledFalse("m")], nominatedNodeName: "n1" } }, nominate: "n1", patch: undefined },
    { name: "clearing a nomination", pod: { status: { conditions: [scheduledFalse("m")], nominatedNodeName: "n1" } }, nominate: null, patch: { nominatedNodeName: null } },
    { name: "clearing none", pod: { status: { conditions: [scheduledFalse("m")] } }, nominate: null, patch: undefined }
  ])("$name", ({ pod, nominate, patch }) => {
    expect(FailureHandler.failurePatch(pod, "Unschedulable", "m", nominate, now)).toEqual(patch)
  })
})
