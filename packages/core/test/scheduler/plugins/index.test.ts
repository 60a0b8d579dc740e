import { describe, expect, it } from "vitest"
import * as Plugins from "../../../src/scheduler/plugins/index.js"

describe("plugins registry", () => {
  it("maps every upstream plugin name to its factory", () => {
    expect(Object.keys(Plugins.registry).sort()).toEqual(
      [
        "DefaultBinder",
        "DefaultPreemption",
        "InterPodAffinity",
        "NodeAffinity",
        "NodeName",
        "NodePorts",
        "NodeResourcesBalancedAllocation",
        "NodeResourcesFit",
        "NodeUnschedulable",
        "PodTopologySpread",
        "PrioritySort",
        "TaintToleration",
        "VolumeBinding"
      ].sort()
    )
  })

  it.each([
    ["PrioritySort", ["less"]],
    ["NodeName", ["preFilter", "filter"]],
    ["NodeUnschedulable", ["preFilter", "filter"]],
    ["NodeAffinity", ["preFilter", "filter", "preScore", "score", "normalize"]],
    ["TaintToleration", ["preFilter", "filter", "preScore", "score", "normalize"]],
    ["NodePorts", ["preFilter", "filter"]],
    ["NodeResourcesFit", ["preFilter", "filter", "preScore", "score"]],
    ["NodeResourcesBalancedAllocation", ["preScore", "score"]],
    ["DefaultBinder", ["bind"]]
  ] as const)("%s builds from default arguments with its extension points and its own name", (name, points) => {
    const plugin = Plugins.registry[name]!(undefined, { schedulerName: "default-scheduler" })
    expect(typeof plugin).not.toBe("string")
    expect((plugin as { name: string }).name).toBe(name)
    for (const point of points) expect(typeof (plugin as unknown as Record<string, unknown>)[point]).toBe("function")
  })
})
