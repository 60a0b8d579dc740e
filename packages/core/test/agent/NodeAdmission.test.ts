import { describe, expect, it } from "vitest"
import * as NodeAdmission from "../../src/agent/NodeAdmission.js"

type Json = Record<string, unknown>

const pod = (requests: Record<string, string>, o: { inits?: ReadonlyArray<Record<string, string>>; overhead?: Record<string, string> } = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "default" },
  spec: {
    containers: [{ name: "app", image: "i", resources: { requests } }],
    ...(o.inits === undefined ? {} : { initContainers: o.inits.map((r, i) => ({ name: `init-${i}`, image: "i", resources: { requests: r } })) }),
    ...(o.overhead === undefined ? {} : { overhead: o.overhead })
  }
})

const allocatable = { cpu: "2", memory: "4Gi", pods: "3" }

const cases: ReadonlyArray<[string, Json, ReadonlyArray<Json>, NodeAdmission.Verdict]> = [
  ["fits an empty node", pod({ cpu: "1", memory: "1Gi" }), [], { admit: true }],
  ["fits exactly", pod({ cpu: "1500m" }), [pod({ cpu: "500m" })], { admit: true }],
  [
    "too much cpu beside what runs",
    pod({ cpu: "1600m" }),
    [pod({ cpu: "500m" })],
    { admit: false, reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 1600, used: 500, capacity: 2000" }
  ],
  [
    "too much memory (bytes)",
    pod({ memory: "5Gi" }),
    [],
    { admit: false, reason: "OutOfmemory", message: "Pod was rejected: Node didn't have enough resource: memory, requested: 5368709120, used: 0, capacity: 4294967296" }
  ],
  [
    "pods count is checked first",
    pod({ cpu: "5" }),
    [pod({}), pod({}), pod({})],
    { admit: false, reason: "OutOfpods", message: "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3" }
  ],
  ["an init container's request counts when larger", pod({ cpu: "100m" }, { inits: [{ cpu: "3" }] }), [], { admit: false, reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000" }],
  ["overhead counts", pod({ cpu: "1900m" }, { overhead: { cpu: "200m" } }), [], { admit: false, reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 2100, used: 0, capacity: 2000" }],
  ["a pod without requests always fits the resources", pod({}), [pod({ cpu: "2", memory: "4Gi" })], { admit: true }],
  [
    "extended resources the node lacks",
    pod({ "example.com/gpu": "1" }),
    [],
    { admit: false, reason: "OutOfexample.com/gpu", message: "Pod was rejected: Node didn't have enough resource: example.com/gpu, requested: 1, used: 0, capacity: 0" }
  ]
]

describe("NodeAdmission.decide", () => {
  it.each(cases)("%s", (_name, p, running, want) => {
    expect(NodeAdmission.decide(p, allocatable, running)).toEqual(want)
  })
})

describe("NodeAdmission.limits", () => {
  const withLimits = (limits: Record<string, string>, init: Record<string, string> = {}): Json => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "default" },
    spec: { initContainers: [{ name: "i", image: "i", resources: { limits: init } }], containers: [{ name: "app", image: "i", resources: { limits, requests: { cpu: "1" } } }] }
  })
  const none = { cpu: false, memory: false }
  const cases: ReadonlyArray<[string, Json, { cpu: boolean; memory: boolean }, boolean, ReadonlyArray<string>, boolean]> = [
    ["no limits: admitted anywhere", withLimits({}), none, false, [], true],
    ["requests alone are not limits", withLimits({}), none, false, [], true],
    ["a memory limit without a memory controller: refused", withLimits({ memory: "64Mi" }), none, false, ["memory"], false],
    ["an init container's cpu limit counts", withLimits({}, { cpu: "100m" }), { cpu: false, memory: true }, false, ["cpu"], false],
    ["enforced limits: admitted", withLimits({ memory: "64Mi", cpu: "1" }), { cpu: true, memory: true }, false, [], true],
    ["unenforced but allowed: admitted", withLimits({ memory: "64Mi", cpu: "1" }), none, true, ["cpu", "memory"], true]
  ]
  it.each(cases)("%s", (_name, p, enforced, allow, missing, admit) => {
    expect(NodeAdmission.unenforced(p, enforced)).toEqual(missing)
    const verdict = NodeAdmission.limits(p, enforced, allow)
    expect(verdict.admit).toBe(admit)
    if (!verdict.admit) {
      expect(verdict.reason).toBe("UnenforceableLimits")
      expect(verdict.message).toContain(`cannot enforce the pod's ${missing.join(" and ")} limits`)
    }
  })
})
