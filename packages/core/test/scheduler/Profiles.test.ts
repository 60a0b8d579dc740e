import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import type * as Framework from "../../src/scheduler/Framework.js"
import { success } from "../../src/scheduler/Framework.js"
import * as Profiles from "../../src/scheduler/Profiles.js"

// ── Fake plugins: each default name, implementing the points its upstream namesake does ──

type Point = Framework.ExtensionPoint
const methods: Record<Point, Record<string, unknown>> = {
  queueSort: { less: () => false },
  preFilter: { preFilter: () => ({ status: success }) },
  filter: { filter: () => success },
  postFilter: { postFilter: () => ({ status: success }) },
  preScore: { preScore: () => success },
  score: { score: () => 0 },
  reserve: { reserve: () => success, unreserve: () => undefined },
  permit: { permit: () => ({ status: success }) },
  bind: { bind: () => Effect.succeed(success) }
}

const shapes: Record<string, ReadonlyArray<Point>> = {
  PrioritySort: ["queueSort"],
  NodeUnschedulable: ["filter"],
  NodeName: ["preFilter", "filter"],
  TaintToleration: ["filter", "preScore", "score"],
  NodeAffinity: ["preFilter", "filter", "preScore", "score"],
  NodePorts: ["preFilter", "filter"],
  NodeResourcesFit: ["preFilter", "filter", "preScore", "score"],
  VolumeBinding: ["preFilter", "filter", "reserve"],
  PodTopologySpread: ["preFilter", "filter", "preScore", "score"],
  InterPodAffinity: ["preFilter", "filter", "preScore", "score"],
  DefaultPreemption: ["postFilter"],
  NodeResourcesBalancedAllocation: ["preScore", "score"],
  DefaultBinder: ["bind"],
  // Not defaults:
  Custom: ["filter", "score"],
  OtherSort: ["queueSort"],
  OtherBinder: ["bind"],
  Gang: ["permit"]
}

/** A registry of fakes that records every factory call (args and handle). */
const registry = () => {
  const calls: Array<{ name: string; args: unknown; handle: Framework.Handle }> = []
  const reg: Record<string, Framework.Factory> = {}
  for (const [name, points] of Object.entries(shapes)) {
    reg[name] = (args, handle) => {
      calls.push({ name, args, handle })
      // NodeResourcesFit checks its arguments, as the real one does.
      if (name === "NodeResourcesFit" && args !== undefined && (args as { scoringStrategy?: { type?: string } }).scoringStrategy?.type === "Bogus") {
        return 'scoringStrategy.type: Unsupported value: "Bogus"'
      }
      return Object.assign({ name, args }, ...points.map((p) => methods[p]))
    }
  }
  return { reg, calls }
}

const handle: Framework.Handle = { schedulerName: "default-scheduler" }

const build = (profile: Framework.Profile) => {
  const { reg, calls } = registry()
  const built = Profiles.build(profile, reg, handle)
  return { built, calls, fw: Either.isRight(built) ? built.right : undefined }
}

const ok = (profile: Framework.Profile) => {
  const { built, calls } = build(profile)
  if (Either.isLeft(built)) throw new Error(built.left)
  return { fw: built.right, calls }
}

const names = (list: ReadonlyArray<Framework.Plugin>) => list.map((p) => p.name)
const weights = (fw: Framework.Framework) => Object.fromEntries(fw.score.map((s) => [s.plugin.name, s.weight]))

const profile = (plugins: NonNullable<Framework.Profile["plugins"]>, extra: { percentageOfNodesToScore?: number } = {}): Framework.Profile => ({
  schedulerName: "default-scheduler",
  plugins,
  ...extra
})

describe("Profiles defaults", () => {
  it("expand kube-scheduler's default plugins to the points each implements, in upstream order", () => {
    const { fw, calls } = ok(Profiles.defaultProfile)
    expect(fw.queueSort?.name).toBe("PrioritySort")
    expect(names(fw.preFilter)).toEqual(["NodeName", "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread", "InterPodAffinity"])
    expect(names(fw.filter)).toEqual([
      "NodeUnschedulable",
      "NodeName",
      "TaintToleration",
      "NodeAffinity",
      "NodePorts",
      "NodeResourcesFit",
      "VolumeBinding",
      "PodTopologySpread",
      "InterPodAffinity"
    ])
    expect(names(fw.postFilter)).toEqual(["DefaultPreemption"])
    expect(names(fw.preScore)).toEqual(["TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity", "NodeResourcesBalancedAllocation"])
    expect(fw.score.map((s) => [s.plugin.name, s.weight])).toEqual([
      ["TaintToleration", 3],
      ["NodeAffinity", 2],
      ["NodeResourcesFit", 1],
      ["PodTopologySpread", 2],
      ["InterPodAffinity", 2],
      ["NodeResourcesBalancedAllocation", 1]
    ])
    expect(names(fw.reserve)).toEqual(["VolumeBinding"])
    expect(names(fw.permit)).toEqual([])
    expect(names(fw.bind)).toEqual(["DefaultBinder"])
    // One instance per plugin, shared by its points; built with the handle.
    expect(calls.map((c) => c.name).sort()).toEqual(Profiles.defaultPlugins.map((p) => p.name).sort())
    expect(fw.filter.find((p) => p.name === "NodeAffinity")).toBe(fw.preFilter.find((p) => p.name === "NodeAffinity"))
    expect(calls.every((c) => c.handle === handle)).toBe(true)
  })

  it("match upstream's names and weights", () => {
    expect(Profiles.defaultPlugins).toEqual([
      { name: "PrioritySort" },
      { name: "NodeUnschedulable" },
      { name: "NodeName" },
      { name: "TaintToleration", weight: 3 },
      { name: "NodeAffinity", weight: 2 },
      { name: "NodePorts" },
      { name: "NodeResourcesFit", weight: 1 },
      { name: "VolumeBinding" },
      { name: "PodTopologySpread", weight: 2 },
      { name: "InterPodAffinity", weight: 2 },
      { name: "DefaultPreemption" },
      { name: "NodeResourcesBalancedAllocation", weight: 1 },
      { name: "DefaultBinder" }
    ])
    expect(Profiles.defaultProfile.schedulerName).toBe("default-scheduler")
  })
})

describe("Profiles enabling and disabling", () => {
  it("disables a default at one point only", () => {
    const { fw } = ok(profile({ score: { disabled: [{ name: "TaintToleration" }] } }))
    expect(names(fw.score.map((s) => s.plugin))).not.toContain("TaintToleration")
    expect(names(fw.filter)).toContain("TaintToleration")
    expect(names(fw.preScore)).toContain("TaintToleration")
  })

  it("disables a default everywhere through multiPoint (and does not build it)", () => {
    const { fw, calls } = ok(profile({ multiPoint: { disabled: [{ name: "NodePorts" }] } }))
    expect(names(fw.preFilter)).not.toContain("NodePorts")
    expect(names(fw.filter)).not.toContain("NodePorts")
    expect(calls.map((c) => c.name)).not.toContain("NodePorts")
  })

  it("`*` at a point drops every default there; what is enabled there remains", () => {
    const { fw } = ok(profile({ filter: { disabled: [{ name: "*" }], enabled: [{ name: "NodeName" }, { name: "Custom" }] } }))
    expect(names(fw.filter)).toEqual(["NodeName", "Custom"])
    expect(names(fw.preFilter)).toContain("NodeAffinity")
    // Custom is enabled only at filter, so it does not score.
    expect(names(fw.score.map((s) => s.plugin))).not.toContain("Custom")
  })

  it("`*` at multiPoint keeps only what the profile lists", () => {
    const { fw } = ok(profile({ multiPoint: { disabled: [{ name: "*" }], enabled: [{ name: "OtherSort" }, { name: "Custom", weight: 4 }, { name: "OtherBinder" }] } }))
    expect(fw.queueSort?.name).toBe("OtherSort")
    expect(names(fw.filter)).toEqual(["Custom"])
    expect(fw.score.map((s) => [s.plugin.name, s.weight])).toEqual([["Custom", 4]])
    expect(names(fw.preFilter)).toEqual([])
    expect(names(fw.bind)).toEqual(["OtherBinder"])
  })

  it("a new multiPoint plugin joins every point it implements, after the defaults", () => {
    const { fw } = ok(profile({ multiPoint: { enabled: [{ name: "Custom", weight: 7 }] } }))
    expect(names(fw.filter).at(-1)).toBe("Custom")
    expect(fw.score.at(-1)).toEqual({ plugin: expect.objectContaining({ name: "Custom" }), weight: 7 })
  })

  it("re-configuring a default in multiPoint keeps its place and takes the new weight", () => {
    const { fw } = ok(profile({ multiPoint: { enabled: [{ name: "TaintToleration", weight: 10 }] } }))
    expect(fw.score[0]).toEqual({ plugin: expect.objectContaining({ name: "TaintToleration" }), weight: 10 })
    expect(names(fw.filter)[2]).toBe("TaintToleration")
  })

  it("a plugin named at a point overrides its multiPoint entry: listed first there, its weight wins", () => {
    const { fw } = ok(profile({ score: { enabled: [{ name: "NodeResourcesBalancedAllocation", weight: 5 }] } }))
    expect(fw.score[0]).toEqual({ plugin: expect.objectContaining({ name: "NodeResourcesBalancedAllocation" }), weight: 5 })
    expect(fw.score).toHaveLength(6)
    expect(weights(fw)["TaintToleration"]).toBe(3)
  })

  it("a plugin enabled only at one point goes after the multiPoint plugins there", () => {
    const { fw } = ok(profile({ permit: { enabled: [{ name: "Gang" }] }, filter: { enabled: [{ name: "Custom" }] } }))
    expect(names(fw.permit)).toEqual(["Gang"])
    expect(names(fw.filter).at(-1)).toBe("Custom")
  })

  it("weight 0 or unset counts as 1", () => {
    const { fw } = ok(profile({ multiPoint: { enabled: [{ name: "Custom", weight: 0 }] }, score: { enabled: [{ name: "NodeAffinity" }] } }))
    expect(weights(fw)["Custom"]).toBe(1)
    expect(weights(fw)["NodeAffinity"]).toBe(1)
  })

  it("keeps the merged plugin sets and the sampling percentage on the framework", () => {
    const { fw } = ok(profile({ filter: { disabled: [{ name: "NodePorts" }] } }, { percentageOfNodesToScore: 20 }))
    expect(fw.profile.percentageOfNodesToScore).toBe(20)
    expect(fw.profile.plugins?.filter?.disabled).toEqual([{ name: "NodePorts" }])
    expect(fw.profile.plugins?.multiPoint?.enabled).toEqual(Profiles.defaultPlugins)
  })
})

describe("Profiles plugin arguments", () => {
  it("hands each plugin its pluginConfig args (undefined when none)", () => {
    const args = { scoringStrategy: { type: "MostAllocated", resources: [{ name: "cpu", weight: 1 }] } }
    const { fw, calls } = ok({ schedulerName: "binpack", pluginConfig: [{ name: "NodeResourcesFit", args }] })
    expect(calls.find((c) => c.name === "NodeResourcesFit")?.args).toEqual(args)
    expect(calls.find((c) => c.name === "NodeAffinity")?.args).toBeUndefined()
    expect((fw.filter.find((p) => p.name === "NodeResourcesFit") as unknown as { args: unknown }).args).toBe(args)
  })
})

describe("Profiles errors", () => {
  // [what, profile, message]
  const cases: ReadonlyArray<[string, Framework.Profile, string]> = [
    ["an unknown plugin at a point", profile({ filter: { enabled: [{ name: "Nope" }] } }), 'filter plugin "Nope" does not exist'],
    ["an unknown plugin in multiPoint", profile({ multiPoint: { enabled: [{ name: "Nope" }] } }), 'plugin "Nope" does not exist'],
    ["a point the plugin does not implement", profile({ filter: { enabled: [{ name: "DefaultBinder" }] } }), 'plugin "DefaultBinder" does not extend filter plugin'],
    ["twice at one point", profile({ permit: { enabled: [{ name: "Gang" }, { name: "Gang" }] } }), 'plugin "Gang" already registered as permit plugin'],
    [
      "twice in multiPoint",
      profile({ multiPoint: { enabled: [{ name: "Custom" }, { name: "Custom" }] } }),
      'plugin "Custom" already registered as filter plugin'
    ],
    [
      "args the plugin refuses",
      { schedulerName: "s", pluginConfig: [{ name: "NodeResourcesFit", args: { scoringStrategy: { type: "Bogus" } } }] },
      'initializing plugin "NodeResourcesFit": scoringStrategy.type: Unsupported value: "Bogus"'
    ],
    [
      "args given twice",
      { schedulerName: "s", pluginConfig: [{ name: "NodeAffinity" }, { name: "NodeAffinity" }] },
      "repeated config for plugin NodeAffinity"
    ],
    ["args for an unknown plugin", { schedulerName: "s", pluginConfig: [{ name: "Nope", args: {} }] }, 'pluginConfig names plugin "Nope", which does not exist'],
    [
      "no queue sort",
      profile({ multiPoint: { disabled: [{ name: "PrioritySort" }] } }),
      'only one queue sort plugin required for profile with scheduler name "default-scheduler", but got 0'
    ],
    [
      "two queue sorts",
      profile({ queueSort: { enabled: [{ name: "OtherSort" }] }, multiPoint: { enabled: [{ name: "OtherSort" }] } }),
      'only one queue sort plugin required for profile with scheduler name "default-scheduler", but got 2'
    ],
    ["no binder", profile({ bind: { disabled: [{ name: "*" }] } }), 'at least one bind plugin is needed for profile with scheduler name "default-scheduler"'],
    ["a negative weight", profile({ score: { enabled: [{ name: "NodeAffinity", weight: -1 }] } }), 'plugin "NodeAffinity" has invalid score weight -1: must be a positive integer']
  ]
  it.each(cases)("refuses %s", (_what, p, message) => {
    expect(build(p).built).toEqual(Either.left(message))
  })
})

describe("Profiles.buildAll", () => {
  it("builds every profile keyed by scheduler name, each plugin told its profile", () => {
    const { reg, calls } = registry()
    const built = Profiles.buildAll([Profiles.defaultProfile, { schedulerName: "batch", plugins: { score: { disabled: [{ name: "*" }] } } }], reg, {})
    if (Either.isLeft(built)) throw new Error(built.left)
    expect([...built.right.keys()]).toEqual(["default-scheduler", "batch"])
    expect(built.right.get("batch")?.score).toEqual([])
    expect(new Set(calls.map((c) => c.handle.schedulerName))).toEqual(new Set(["default-scheduler", "batch"]))
  })

  it("names the profile that fails, and refuses duplicates", () => {
    const { reg } = registry()
    expect(Profiles.buildAll([{ schedulerName: "x", plugins: { filter: { enabled: [{ name: "Nope" }] } } }], reg, {})).toEqual(
      Either.left('profile "x": filter plugin "Nope" does not exist')
    )
    expect(Profiles.buildAll([Profiles.defaultProfile, Profiles.defaultProfile], reg, {})).toEqual(Either.left('duplicate profile with scheduler name "default-scheduler"'))
  })
})

describe("Profiles.parseConfig", () => {
  const twoProfiles = `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: default-scheduler
  - schedulerName: bin-packing
    percentageOfNodesToScore: 50
    plugins:
      multiPoint:
        enabled:
          - name: Custom
            weight: 4
      score:
        disabled:
          - name: NodeResourcesBalancedAllocation
        enabled:
          - name: NodeResourcesFit
            weight: 5
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources:
              - name: cpu
                weight: 1
`

  it("reads a configuration with two profiles, and they build", () => {
    const parsed = Profiles.parseConfig(twoProfiles)
    if (Either.isLeft(parsed)) throw new Error(parsed.left)
    const config = parsed.right
    expect(config.percentageOfNodesToScore).toBe(30)
    expect(config.podInitialBackoffSeconds).toBe(2)
    expect(config.podMaxBackoffSeconds).toBe(20)
    expect(config.profiles).toEqual([
      { schedulerName: "default-scheduler" },
      {
        schedulerName: "bin-packing",
        percentageOfNodesToScore: 50,
        plugins: {
          multiPoint: { enabled: [{ name: "Custom", weight: 4 }] },
          score: { disabled: [{ name: "NodeResourcesBalancedAllocation" }], enabled: [{ name: "NodeResourcesFit", weight: 5 }] }
        },
        pluginConfig: [{ name: "NodeResourcesFit", args: { scoringStrategy: { type: "MostAllocated", resources: [{ name: "cpu", weight: 1 }] } } }]
      }
    ])
    const { reg, calls } = registry()
    const built = Profiles.buildAll(config.profiles, reg, {})
    if (Either.isLeft(built)) throw new Error(built.left)
    const binPacking = built.right.get("bin-packing")!
    expect(binPacking.score.map((s) => [s.plugin.name, s.weight])).toEqual([
      ["NodeResourcesFit", 5],
      ["TaintToleration", 3],
      ["NodeAffinity", 2],
      ["PodTopologySpread", 2],
      ["InterPodAffinity", 2],
      ["Custom", 4]
    ])
    expect(calls.find((c) => c.name === "NodeResourcesFit" && c.handle.schedulerName === "bin-packing")?.args).toEqual({
      scoringStrategy: { type: "MostAllocated", resources: [{ name: "cpu", weight: 1 }] }
    })
    expect(weights(built.right.get("default-scheduler")!)["NodeResourcesBalancedAllocation"]).toBe(1)
  })

  it("reads JSON too, and gives the default profile when none is listed", () => {
    expect(Profiles.parseConfig('{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"KubeSchedulerConfiguration"}')).toEqual(
      Either.right({ profiles: [Profiles.defaultProfile] })
    )
  })

  const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
  // [what, document, message]
  const errors: ReadonlyArray<[string, string, string]> = [
    ["another version", "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n", 'apiVersion: want "kubescheduler.config.k8s.io/v1", got "kubescheduler.config.k8s.io/v1beta3"'],
    ["another kind", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Pod\n", 'kind: want "KubeSchedulerConfiguration", got "Pod"'],
    ["an unknown field", `${head}percentOfNodes: 3\n`, 'unknown field "percentOfNodes"'],
    ["a percentage over 100", `${head}percentageOfNodesToScore: 101\n`, "percentageOfNodesToScore: 101 is not in valid range [0-100]"],
    ["a profile's bad percentage", `${head}profiles:\n  - percentageOfNodesToScore: -1\n`, "profiles[0].percentageOfNodesToScore: -1 is not in valid range [0-100]"],
    ["an unknown profile field", `${head}profiles:\n  - name: x\n`, 'profiles[0]: unknown field "name"'],
    ["an unknown extension point", `${head}profiles:\n  - plugins:\n      filters: {}\n`, 'profiles[0].plugins: unknown field "filters"'],
    [
      "an unsupported extension point",
      `${head}profiles:\n  - plugins:\n      preBind:\n        enabled: [{name: X}]\n`,
      "profiles[0].plugins.preBind: the preBind extension point is not supported"
    ],
    ["a plugin without a name", `${head}profiles:\n  - plugins:\n      filter:\n        enabled: [{weight: 1}]\n`, "profiles[0].plugins.filter.enabled[0].name: must be a non-empty string"],
    ["a fractional weight", `${head}profiles:\n  - plugins:\n      score:\n        enabled: [{name: A, weight: 1.5}]\n`, "profiles[0].plugins.score.enabled[0].weight: must be a non-negative integer"],
    ["enabled that is not a list", `${head}profiles:\n  - plugins:\n      score:\n        enabled: A\n`, "profiles[0].plugins.score.enabled: must be a list"],
    [
      "two profiles of one name",
      `${head}profiles:\n  - schedulerName: a\n  - schedulerName: a\n`,
      'profiles[1].schedulerName: duplicate profile with scheduler name "a"'
    ],
    [
      "profiles that sort the queue differently",
      `${head}profiles:\n  - schedulerName: a\n  - schedulerName: b\n    plugins:\n      queueSort:\n        enabled: [{name: OtherSort}]\n`,
      "profiles[1].plugins.queueSort: must be the same for all profiles"
    ],
    ["extenders", `${head}extenders:\n  - urlPrefix: http://x\n`, "extenders: scheduler extenders are not supported"],
    ["backoff limits the wrong way round", `${head}podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n`, "podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds"],
    ["two documents", `${head}---\n${head}`, "the configuration must be exactly one YAML document, found 2"],
    ["broken YAML", "profiles: [\n", "invalid YAML: "],
    ["not an object", "- 1\n", "configuration: must be an object"]
  ]
  it.each(errors)("refuses %s", (_what, text, message) => {
    const parsed = Profiles.parseConfig(text)
    expect(Either.isLeft(parsed)).toBe(true)
    // The YAML parser's own wording follows the prefix; every other message is exact.
    if (Either.isLeft(parsed)) expect(message.endsWith(": ") ? parsed.left.slice(0, message.length) : parsed.left).toBe(message)
  })
})
