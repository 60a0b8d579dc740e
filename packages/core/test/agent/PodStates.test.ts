import { describe, expect, it } from "vitest"
import type * as NodeAdmission from "../../src/agent/NodeAdmission.js"
import * as PodStates from "../../src/agent/PodStates.js"
import type * as Pod from "../../src/model/Pod.js"
import type * as Runtime from "../../src/runtime/Runtime.js"

const pod = (name: string, requests: Record<string, string> = {}, limits: Record<string, string> = {}, status?: Pod.PodStatus): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", uid: name },
  spec: { containers: [{ name: "app", image: "node:20", resources: { requests, limits } }] },
  ...(status === undefined ? {} : { status })
})

const admission: PodStates.Admission = { allocatable: { cpu: "2", memory: "4Gi", pods: "110" }, allowUnenforcedLimits: false }
const enforcedNone: NodeAdmission.Enforced = { cpu: false, memory: false }
const T = Date.parse("2026-12-03T12:00:00Z")

describe("PodStates", () => {
  it("stateOf makes an empty record once and answers the same one after", () => {
    const table: PodStates.Table = new Map()
    const a = PodStates.stateOf(table, "u1")
    expect(a).toMatchObject({ admitted: false, fail: undefined, sandbox: undefined, volumesReady: false })
    expect(PodStates.stateOf(table, "u1")).toBe(a)
    expect(table.size).toBe(1)
  })

  interface Case {
    readonly name: string
    readonly pod: Pod.Pod
    /** Pods already admitted, with their phase. */
    readonly running?: ReadonlyArray<Pod.Pod>
    readonly hasContainers?: boolean
    readonly enforced?: NodeAdmission.Enforced
    readonly allowUnenforced?: boolean
    readonly admitted: boolean
    readonly fail?: string
    readonly event?: string
    readonly startTime?: string
  }
  const cases: ReadonlyArray<Case> = [
    { name: "fits: admitted, start time now", pod: pod("a", { cpu: "1" }), admitted: true, startTime: "2026-12-03T12:00:00Z" },
    { name: "does not fit beside the running pods", pod: pod("b", { cpu: "1500m" }), running: [pod("r", { cpu: "1" })], admitted: false, fail: "OutOfcpu" },
    {
      name: "finished pods hold no room",
      pod: pod("b", { cpu: "1500m" }),
      running: [pod("r", { cpu: "1" }, {}, { phase: "Succeeded" })],
      admitted: true
    },
    { name: "containers already there: adopted without a check", pod: pod("c", { cpu: "100" }), hasContainers: true, admitted: true },
    {
      name: "a start time in the API: adopted, and kept",
      pod: pod("d", { cpu: "100" }, {}, { startTime: "2026-12-03T11:00:00Z" }),
      admitted: true,
      startTime: "2026-12-03T11:00:00Z"
    },
    { name: "limits the node cannot enforce: refused with an Event", pod: pod("e", {}, { memory: "1Gi" }), enforced: enforcedNone, admitted: false, fail: "UnenforceableLimits", event: "UnenforceableLimits" },
    { name: "limits unenforced but allowed: admitted with an Event", pod: pod("f", {}, { memory: "1Gi" }), enforced: enforcedNone, allowUnenforced: true, admitted: true, event: "LimitsNotEnforced" },
    { name: "limits the node enforces: no Event", pod: pod("g", {}, { memory: "1Gi" }), enforced: { cpu: true, memory: true }, admitted: true }
  ]
  for (const c of cases) {
    it(`admit: ${c.name}`, () => {
      const table: PodStates.Table = new Map()
      for (const r of c.running ?? []) {
        const s = PodStates.stateOf(table, r.metadata.uid!)
        s.pod = r
        s.admitted = true
      }
      const state = PodStates.stateOf(table, c.pod.metadata.uid!)
      const event = PodStates.admit(table, c.pod.metadata.uid!, state, c.pod, c.hasContainers ?? false, T, c.enforced, { ...admission, allowUnenforcedLimits: c.allowUnenforced ?? false })
      expect(state.admitted).toBe(c.admitted)
      expect(state.fail?.reason).toBe(c.fail)
      expect(event?.reason).toBe(c.event)
      if (c.startTime !== undefined) expect(state.startTime).toBe(c.startTime)
      expect(state.startTimeMs).toBe(Date.parse(state.startTime!))
    })
  }

  it("admit decides once", () => {
    const table: PodStates.Table = new Map()
    const state = PodStates.stateOf(table, "a")
    PodStates.admit(table, "a", state, pod("a", { cpu: "100" }), false, T, undefined, admission)
    expect(state.fail).toBeDefined()
    const before = state.startTime
    expect(PodStates.admit(table, "a", state, pod("a"), false, T + 1000, undefined, admission)).toBeUndefined()
    expect(state.admitted).toBe(false)
    expect(state.startTime).toBe(before)
  })

  it("takenHostPorts and podIPOf", () => {
    const table: PodStates.Table = new Map()
    PodStates.stateOf(table, "a").hostPorts = [{ containerName: "app", containerPort: 80, protocol: "TCP", hostPort: 31000 }]
    PodStates.stateOf(table, "b").hostPorts = [{ containerName: "app", containerPort: 53, protocol: "UDP", hostPort: 31001 }]
    PodStates.stateOf(table, "c")
    expect([...PodStates.takenHostPorts(table)].sort()).toEqual([31000, 31001])
    const s = PodStates.stateOf(table, "a")
    expect(PodStates.podIPOf(s, "host", "10.0.0.1")).toBe("10.0.0.1")
    expect(PodStates.podIPOf(s, "pod", "10.0.0.1")).toBeUndefined()
    s.sandbox = { id: "sb", spec: { podUid: "a", name: "a", namespace: "default", hostname: "a", network: "pod", ports: [], labels: {} }, state: "ready", ip: "10.244.0.5", createdAt: "" } as Runtime.Sandbox
    expect(PodStates.podIPOf(s, "pod", "10.0.0.1")).toBe("10.244.0.5")
  })
})
