import { describe, expect, it } from "vitest"
import * as Probes from "../../src/agent/Probes.js"
import type * as Pod from "../../src/model/Pod.js"

const container = (probes: Partial<Pick<Pod.Container, "livenessProbe" | "readinessProbe" | "startupProbe">>): Pod.Container => ({ name: "app", image: "i", ...probes })
const exec: Pod.Probe = { exec: { command: ["true"] } }

type Step = readonly [Probes.Kind, "success" | "failure", number]

const run = (c: Pod.Container, steps: ReadonlyArray<Step>) => {
  let state = Probes.start("c1", c, 0)
  for (const [kind, outcome, at] of steps) state = Probes.record(state, kind, outcome, at)
  return state
}

describe("Probes", () => {
  it("starts as the kubelet does: live, not ready, not started", () => {
    const v = Probes.verdict(Probes.start("c1", container({ livenessProbe: exec, readinessProbe: exec, startupProbe: exec }), 0))
    expect(v).toEqual({ started: false, ready: false, livenessFailed: false, startupFailed: false })
    expect(Probes.verdict(Probes.start("c1", container({ livenessProbe: exec }), 0))).toEqual({ started: true, ready: true, livenessFailed: false, startupFailed: false })
  })

  const cases: ReadonlyArray<[string, Pod.Container, ReadonlyArray<Step>, Partial<Probes.Verdict>]> = [
    ["readiness: one success makes ready", container({ readinessProbe: exec }), [["readiness", "success", 0]], { ready: true }],
    [
      "readiness: failures below the threshold keep it ready",
      container({ readinessProbe: exec }),
      [["readiness", "success", 0], ["readiness", "failure", 10_000], ["readiness", "failure", 20_000]],
      { ready: true }
    ],
    [
      "readiness: the third failure in a row makes it unready",
      container({ readinessProbe: exec }),
      [["readiness", "success", 0], ["readiness", "failure", 10_000], ["readiness", "failure", 20_000], ["readiness", "failure", 30_000]],
      { ready: false }
    ],
    [
      "readiness: successThreshold 2 needs two in a row",
      container({ readinessProbe: { ...exec, successThreshold: 2 } }),
      [["readiness", "success", 0], ["readiness", "failure", 10_000], ["readiness", "success", 20_000]],
      { ready: false }
    ],
    ["liveness: failureThreshold 1 fails at once", container({ livenessProbe: { ...exec, failureThreshold: 1 } }), [["liveness", "failure", 0]], { livenessFailed: true }],
    [
      "liveness: a success in between resets the count",
      container({ livenessProbe: exec }),
      [["liveness", "failure", 0], ["liveness", "failure", 1], ["liveness", "success", 2], ["liveness", "failure", 3], ["liveness", "failure", 4]],
      { livenessFailed: false }
    ],
    ["startup: success starts the container", container({ startupProbe: exec, readinessProbe: exec }), [["startup", "success", 0]], { started: true, ready: false }],
    [
      "startup: failing its threshold fails it",
      container({ startupProbe: { ...exec, failureThreshold: 2 } }),
      [["startup", "failure", 0], ["startup", "failure", 10_000]],
      { started: false, startupFailed: true }
    ]
  ]
  it.each(cases)("%s", (_name, c, steps, want) => {
    expect(Probes.verdict(run(c, steps))).toMatchObject(want)
  })

  it("fires after the initial delay, then every period", () => {
    const state = Probes.start("c1", container({ readinessProbe: { ...exec, initialDelaySeconds: 5, periodSeconds: 2 } }), 1_000)
    expect(Probes.due(state, 5_999)).toEqual([])
    expect(Probes.nextDueMs(state)).toBe(6_000)
    expect(Probes.due(state, 6_000)).toEqual(["readiness"])
    expect(Probes.nextDueMs(Probes.record(state, "readiness", "success", 6_000))).toBe(8_000)
  })

  it("gates liveness and readiness behind the startup probe, and stops startup once it passed", () => {
    let state = Probes.start("c1", container({ startupProbe: exec, livenessProbe: exec, readinessProbe: exec }), 0)
    expect(Probes.due(state, 0)).toEqual(["startup"])
    state = Probes.record(state, "startup", "success", 3_000)
    expect([...Probes.due(state, 3_000)].sort()).toEqual(["liveness", "readiness"])
  })

  it("puts a failed liveness worker on hold: nothing is due until the container restarts", () => {
    const state = run(container({ livenessProbe: { ...exec, failureThreshold: 1 } }), [["liveness", "failure", 0]])
    expect(Probes.nextDueMs(state)).toBeUndefined()
  })

  it("applies Kubernetes' defaults", () => {
    expect(Probes.settings({})).toEqual({ initialDelayMs: 0, periodMs: 10_000, timeoutMs: 1_000, successThreshold: 1, failureThreshold: 3 })
  })
})
