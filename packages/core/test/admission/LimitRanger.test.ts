import { describe, expect, it } from "vitest"
import * as LimitRanger from "../../src/admission/LimitRanger.js"

const range = (...limits: Array<Record<string, unknown>>) => ({ spec: { limits } })
const pod = (...containers: Array<Record<string, unknown>>) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p" },
  spec: { containers: containers.map((resources, i) => ({ name: `c${i}`, image: "x", resources })) }
})

describe("LimitRanger.applyDefaults", () => {
  const items = LimitRanger.items([range({ type: "Container", default: { cpu: "500m", memory: "512Mi" }, defaultRequest: { cpu: "250m", memory: "256Mi" } })])
  const cases: ReadonlyArray<[string, Record<string, unknown>, Record<string, unknown>, string | undefined]> = [
    ["nothing given", {}, { limits: { cpu: "500m", memory: "512Mi" }, requests: { cpu: "250m", memory: "256Mi" } }, "cpu, memory request for container c0; cpu, memory limit for container c0"],
    ["a limit given: its request follows it", { limits: { cpu: "2" } }, { limits: { cpu: "2", memory: "512Mi" }, requests: { cpu: "2", memory: "256Mi" } }, "memory request for container c0; memory limit for container c0"],
    ["everything given", { limits: { cpu: "1", memory: "1Gi" }, requests: { cpu: "1", memory: "1Gi" } }, { limits: { cpu: "1", memory: "1Gi" }, requests: { cpu: "1", memory: "1Gi" } }, undefined]
  ]
  it.each(cases)("%s", (_what, given, want, note) => {
    const out = LimitRanger.applyDefaults(pod(given), items) as any
    expect(out.spec.containers[0].resources).toEqual(want)
    expect(out.metadata.annotations?.[LimitRanger.annotation]).toBe(note === undefined ? undefined : `LimitRanger plugin set: ${note}`)
  })

  it("does nothing without Container items", () => {
    const p = pod({})
    expect(LimitRanger.applyDefaults(p, LimitRanger.items([range({ type: "Pod", max: { cpu: "1" } })]))).toBe(p)
  })
})

describe("LimitRanger.violations", () => {
  const cases: ReadonlyArray<[string, Record<string, unknown>, Array<Record<string, unknown>>, ReadonlyArray<string>]> = [
    ["within bounds", { type: "Container", min: { cpu: "100m" }, max: { cpu: "1" } }, [{ requests: { cpu: "200m" }, limits: { cpu: "500m" } }], []],
    ["under min", { type: "Container", min: { cpu: "100m" } }, [{ requests: { cpu: "50m" } }], ["minimum cpu usage per Container is 100m, but request is 50m"]],
    ["no request for min", { type: "Container", min: { memory: "1Mi" } }, [{}], ["minimum memory usage per Container is 1Mi.  No request is specified"]],
    ["limit under min", { type: "Container", min: { cpu: "100m" } }, [{ requests: { cpu: "100m" }, limits: { cpu: "50m" } }], ["minimum cpu usage per Container is 100m, but limit is 50m"]],
    ["over max", { type: "Container", max: { memory: "1Gi" } }, [{ limits: { memory: "2Gi" } }], ["maximum memory usage per Container is 1Gi, but limit is 2Gi"]],
    ["no limit for max", { type: "Container", max: { cpu: "1" } }, [{}], ["maximum cpu usage per Container is 1.  No limit is specified"]],
    ["request over max", { type: "Container", max: { cpu: "1" } }, [{ requests: { cpu: "2" }, limits: { cpu: "1" } }], ["maximum cpu usage per Container is 1, but request is 2"]],
    ["ratio", { type: "Container", maxLimitRequestRatio: { cpu: "2" } }, [{ requests: { cpu: "100m" }, limits: { cpu: "300m" } }], ["cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000"]],
    ["ratio within", { type: "Container", maxLimitRequestRatio: { cpu: "2" } }, [{ requests: { cpu: "100m" }, limits: { cpu: "200m" } }], []],
    ["pod total over max", { type: "Pod", max: { cpu: "1" } }, [{ limits: { cpu: "600m" } }, { limits: { cpu: "600m" } }], ["maximum cpu usage per Pod is 1, but limit is 1200m"]],
    ["two containers, two errors", { type: "Container", max: { cpu: "1" } }, [{ limits: { cpu: "2" } }, { limits: { cpu: "3" } }], ["maximum cpu usage per Container is 1, but limit is 2", "maximum cpu usage per Container is 1, but limit is 3"]]
  ]
  it.each(cases)("%s", (_what, item, containers, want) => {
    expect(LimitRanger.violations(pod(...containers), LimitRanger.items([range(item)]))).toEqual(want)
  })

  it("aggregates several messages as kube does", () => {
    expect(LimitRanger.aggregate(["a"])).toBe("a")
    expect(LimitRanger.aggregate(["a", "b"])).toBe("[a, b]")
  })
})
