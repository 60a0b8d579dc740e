/**
 * Scheduling profiles, as kube-scheduler configures them: the default plugin set (upstream's
 * `getDefaultPlugins`, one `multiPoint` list that each plugin joins at every extension point it
 * implements), a profile's own enabled/disabled sets merged into it (upstream's `mergePlugins`),
 * and `build`, which instantiates the plugins from a registry and orders them per extension point
 * (upstream's `NewFramework` and `expandMultiPointPlugins`). `parseConfig` reads a
 * `kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration; `schedulerName` on a pod picks the
 * profile.
 *
 * The registry is passed in, so this module knows plugin names, never plugin code. Departures:
 * the defaults omit the plugins Fleet does not have (SchedulingGates, VolumeRestrictions, the
 * volume limits, VolumeZone, ImageLocality); the `preEnqueue`, `preBind` and `postBind` points
 * and scheduler extenders are refused; a `pluginConfig` for an unregistered plugin is an error
 * (upstream ignores it), as is a negative or fractional weight.
 */
import { Either } from "effect"
import * as YAML from "yaml"
import { isJsonObject } from "../object/Json.js"
import type {
  BindPlugin,
  Enabled,
  ExtensionPoint,
  FilterPlugin,
  Framework,
  Handle,
  PermitPlugin,
  Plugin,
  PostFilterPlugin,
  PreFilterPlugin,
  PreScorePlugin,
  Profile,
  QueueSortPlugin,
  Registry,
  ReservePlugin,
  ScorePlugin
} from "./Framework.js"
import { ExtensionPoints } from "./Framework.js"

/** The profile a pod without `spec.schedulerName` gets. */
export const DefaultSchedulerName = "default-scheduler"

/** kube-scheduler v1's default plugins, in upstream order, with upstream's score weights. */
export const defaultPlugins: ReadonlyArray<Enabled> = [
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
]

/** The default profile: every default plugin, default arguments. */
export const defaultProfile: Profile = { schedulerName: DefaultSchedulerName }

/** A profile key for plugins: `multiPoint` or an extension point. */
export type Point = ExtensionPoint | "multiPoint"

/** Every key a profile's `plugins` may have, `multiPoint` first. */
export const Points: ReadonlyArray<Point> = ["multiPoint", ...ExtensionPoints]

/** One point's plugins after merging with the defaults. */
export interface PluginSet {
  readonly enabled: ReadonlyArray<Enabled>
  readonly disabled: ReadonlyArray<{ readonly name: string }>
}

type PluginSetLike = { readonly enabled?: ReadonlyArray<Enabled>; readonly disabled?: ReadonlyArray<{ readonly name: string }> }

// Upstream's mergePluginSet: a custom plugin that is also a default takes the default's place
// (keeping the order), `*` drops every default, and the remaining custom plugins follow.
const mergeSet = (defaults: PluginSet, custom: PluginSetLike | undefined): PluginSet => {
  const disabled = [...(custom?.disabled ?? []), ...defaults.disabled].map((d) => ({ name: d.name }))
  const disabledNames = new Set(disabled.map((d) => d.name))
  const customEnabled = custom?.enabled ?? []
  const customIndex = new Map<string, number>()
  customEnabled.forEach((p, i) => customIndex.set(p.name, i))
  const replaced = new Set<number>()
  const enabled: Array<Enabled> = []
  if (!disabledNames.has("*")) {
    for (const d of defaults.enabled) {
      if (disabledNames.has(d.name)) continue
      const i = customIndex.get(d.name)
      if (i === undefined) {
        enabled.push(d)
      } else {
        enabled.push(customEnabled[i]!)
        replaced.add(i)
      }
    }
  }
  customEnabled.forEach((p, i) => {
    if (!replaced.has(i)) enabled.push(p)
  })
  return { enabled, disabled }
}

const emptySet: PluginSet = { enabled: [], disabled: [] }

/** The profile's plugin sets merged into the defaults, per point (upstream's mergePlugins). */
export const effectivePlugins = (profile: Profile): Readonly<Record<Point, PluginSet>> => {
  const out = {} as Record<Point, PluginSet>
  for (const point of Points) out[point] = mergeSet(point === "multiPoint" ? { enabled: defaultPlugins, disabled: [] } : emptySet, profile.plugins?.[point])
  return out
}

/** Whether a plugin implements an extension point (has its method). */
export const implementsPoint = (plugin: Plugin, point: ExtensionPoint): boolean => {
  // A plugin's extension points are its methods, looked up here by name.
  const p = plugin as unknown as Record<string, unknown>
  switch (point) {
    case "queueSort":
      return typeof p["less"] === "function"
    case "reserve":
      return typeof p["reserve"] === "function" && typeof p["unreserve"] === "function"
    default:
      return typeof p[point] === "function"
  }
}

const hasOwn = (o: object, key: string): boolean => Object.prototype.hasOwnProperty.call(o, key)

/**
 * Instantiate and order a profile's plugins: refuses unknown plugins, a plugin enabled at a point
 * it does not implement, double registration, a profile without exactly one QueueSort or without
 * a Bind plugin, and factory errors (a bad `pluginConfig` argument).
 */
export const build = (profile: Profile, registry: Registry, handle: Handle): Either.Either<Framework, string> => {
  const sets = effectivePlugins(profile)
  const fail = (message: string) => Either.left(message)

  const args = new Map<string, unknown>()
  for (const c of profile.pluginConfig ?? []) {
    if (args.has(c.name)) return fail(`repeated config for plugin ${c.name}`)
    if (!hasOwn(registry, c.name)) return fail(`pluginConfig names plugin "${c.name}", which does not exist`)
    args.set(c.name, c.args)
  }

  // One instance per plugin, shared by every point it is enabled at (as upstream's pluginsMap).
  const instances = new Map<string, Plugin>()
  for (const point of Points) {
    for (const e of sets[point].enabled) {
      if (instances.has(e.name)) continue
      const factory = hasOwn(registry, e.name) ? registry[e.name] : undefined
      if (factory === undefined) return fail(`${point === "multiPoint" ? "" : `${point} `}plugin "${e.name}" does not exist`)
      const made = factory(args.get(e.name), handle)
      if (typeof made === "string") return fail(`initializing plugin "${e.name}": ${made}`)
      instances.set(e.name, made)
    }
  }
  const instance = (name: string): Plugin => instances.get(name)!

  const order = {} as Record<ExtensionPoint, Array<string>>
  for (const point of ExtensionPoints) {
    const explicit: Array<string> = []
    for (const e of sets[point].enabled) {
      if (!implementsPoint(instance(e.name), point)) return fail(`plugin "${e.name}" does not extend ${point} plugin`)
      if (explicit.includes(e.name)) return fail(`plugin "${e.name}" already registered as ${point} plugin`)
      explicit.push(e.name)
    }
    const disabled = new Set(sets[point].disabled.map((d) => d.name))
    if (disabled.has("*")) {
      order[point] = explicit
      continue
    }
    // multiPoint expansion: a plugin also named at this point keeps its explicit place there
    // (an override, listed first); the other multiPoint plugins come next; then the explicit rest.
    const overrides = new Set<string>()
    const multi: Array<string> = []
    for (const e of sets.multiPoint.enabled) {
      if (!implementsPoint(instance(e.name), point) || disabled.has(e.name)) continue
      if (explicit.includes(e.name)) {
        overrides.add(e.name)
        continue
      }
      if (multi.includes(e.name)) return fail(`plugin "${e.name}" already registered as ${point} plugin`)
      multi.push(e.name)
    }
    order[point] = [...explicit.filter((n) => overrides.has(n)), ...multi, ...explicit.filter((n) => !overrides.has(n))]
  }

  if (order.queueSort.length !== 1) {
    return fail(`only one queue sort plugin required for profile with scheduler name "${profile.schedulerName}", but got ${order.queueSort.length}`)
  }
  if (order.bind.length === 0) return fail(`at least one bind plugin is needed for profile with scheduler name "${profile.schedulerName}"`)

  // A point's own weight wins over multiPoint's; unset or 0 means 1 (upstream's getScoreWeights).
  const weights = new Map<string, number>()
  for (const e of [...sets.score.enabled, ...sets.multiPoint.enabled]) {
    if (weights.has(e.name) || !implementsPoint(instance(e.name), "score")) continue
    const w = e.weight ?? 0
    if (!Number.isInteger(w) || w < 0) return fail(`plugin "${e.name}" has invalid score weight ${w}: must be a positive integer`)
    weights.set(e.name, w === 0 ? 1 : w)
  }

  const pick = <P extends Plugin>(point: ExtensionPoint): Array<P> => order[point].map((n) => instance(n) as P)
  return Either.right({
    profile: { ...profile, plugins: sets },
    queueSort: pick<QueueSortPlugin>("queueSort")[0],
    preFilter: pick<PreFilterPlugin>("preFilter"),
    filter: pick<FilterPlugin>("filter"),
    postFilter: pick<PostFilterPlugin>("postFilter"),
    preScore: pick<PreScorePlugin>("preScore"),
    score: order.score.map((n) => ({ plugin: instance(n) as ScorePlugin, weight: weights.get(n) ?? 1 })),
    reserve: pick<ReservePlugin>("reserve"),
    permit: pick<PermitPlugin>("permit"),
    bind: pick<BindPlugin>("bind")
  })
}

/** Build every profile, keyed by scheduler name (each plugin's handle names its profile). */
export const buildAll = (
  profiles: ReadonlyArray<Profile>,
  registry: Registry,
  handle: Omit<Handle, "schedulerName">
): Either.Either<ReadonlyMap<string, Framework>, string> => {
  const out = new Map<string, Framework>()
  for (const profile of profiles) {
    if (out.has(profile.schedulerName)) return Either.left(`duplicate profile with scheduler name "${profile.schedulerName}"`)
    const built = build(profile, registry, { ...handle, schedulerName: profile.schedulerName })
    if (Either.isLeft(built)) return Either.left(`profile "${profile.schedulerName}": ${built.left}`)
    out.set(profile.schedulerName, built.right)
  }
  return Either.right(out)
}

/** A KubeSchedulerConfiguration as Fleet uses it. */
export interface Configuration {
  /** Profiles as written (merged with the defaults by `build`); the default profile when none is given. */
  readonly profiles: ReadonlyArray<Profile>
  readonly percentageOfNodesToScore?: number
  readonly podInitialBackoffSeconds?: number
  readonly podMaxBackoffSeconds?: number
}

/** The only configuration version read. */
export const ConfigApiVersion = "kubescheduler.config.k8s.io/v1"

// Fields kube-scheduler has that Fleet reads elsewhere or has no use for: accepted and ignored
// (the server owns leader election and the client connection; filtering is single-threaded).
const ignoredFields = new Set([
  "parallelism",
  "leaderElection",
  "clientConnection",
  "healthzBindAddress",
  "metricsBindAddress",
  "enableProfiling",
  "enableContentionProfiling",
  "delayCacheUntilActive"
])
const unsupportedPoints = new Set(["preEnqueue", "preBind", "postBind"])

// A strict decoder that records the first problem and carries on with harmless placeholders, so
// the decoding reads straight through without exceptions; the caller checks `problem` at the end.
class Decoder {
  problem: string | undefined = undefined

  fail(message: string): void {
    this.problem ??= message
  }

  record(v: unknown, path: string): Record<string, unknown> {
    if (v === undefined || v === null) return {}
    if (isJsonObject(v)) return v
    this.fail(`${path}: must be an object`)
    return {}
  }

  list(v: unknown, path: string): ReadonlyArray<unknown> {
    if (v === undefined || v === null) return []
    if (Array.isArray(v)) return v
    this.fail(`${path}: must be a list`)
    return []
  }

  onlyFields(o: Record<string, unknown>, allowed: ReadonlyArray<string>, path: string): void {
    for (const key of Object.keys(o)) if (!allowed.includes(key)) this.fail(`${path}: unknown field "${key}"`)
  }

  name(v: unknown, path: string): string {
    if (typeof v === "string" && v !== "") return v
    this.fail(`${path}.name: must be a non-empty string`)
    return ""
  }

  percentage(v: unknown, path: string): number | undefined {
    if (v === undefined || v === null) return undefined
    if (typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 100) return v
    this.fail(`${path}: ${JSON.stringify(v)} is not in valid range [0-100]`)
    return undefined
  }

  positiveInt(v: unknown, path: string): number | undefined {
    if (v === undefined || v === null) return undefined
    if (typeof v === "number" && Number.isInteger(v) && v > 0) return v
    this.fail(`${path}: must be a positive integer`)
    return undefined
  }

  pluginSet(v: unknown, path: string): PluginSetLike {
    const o = this.record(v, path)
    this.onlyFields(o, ["enabled", "disabled"], path)
    const enabled = this.list(o["enabled"], `${path}.enabled`).map((e, i): Enabled => {
      const p = `${path}.enabled[${i}]`
      const item = this.record(e, p)
      this.onlyFields(item, ["name", "weight"], p)
      const name = this.name(item["name"], p)
      const weight = item["weight"]
      if (weight === undefined || weight === null) return { name }
      if (typeof weight === "number" && Number.isInteger(weight) && weight >= 0) return { name, weight }
      this.fail(`${p}.weight: must be a non-negative integer`)
      return { name }
    })
    const disabled = this.list(o["disabled"], `${path}.disabled`).map((d, i) => {
      const p = `${path}.disabled[${i}]`
      const item = this.record(d, p)
      this.onlyFields(item, ["name"], p)
      return { name: this.name(item["name"], p) }
    })
    return { ...(enabled.length > 0 ? { enabled } : {}), ...(disabled.length > 0 ? { disabled } : {}) }
  }

  profile(v: unknown, path: string): Profile {
    const o = this.record(v, path)
    this.onlyFields(o, ["schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"], path)
    let schedulerName = o["schedulerName"] ?? DefaultSchedulerName
    if (typeof schedulerName !== "string" || schedulerName === "") {
      this.fail(`${path}.schedulerName: must be a non-empty string`)
      schedulerName = DefaultSchedulerName
    }
    const plugins: Partial<Record<Point, PluginSetLike>> = {}
    for (const [point, set] of Object.entries(this.record(o["plugins"], `${path}.plugins`))) {
      const p = `${path}.plugins.${point}`
      if (unsupportedPoints.has(point)) {
        if (this.list(this.record(set, p)["enabled"], `${p}.enabled`).length > 0) this.fail(`${p}: the ${point} extension point is not supported`)
      } else if ((Points as ReadonlyArray<string>).includes(point)) {
        plugins[point as Point] = this.pluginSet(set, p)
      } else {
        this.fail(`${path}.plugins: unknown field "${point}"`)
      }
    }
    const pluginConfig = this.list(o["pluginConfig"], `${path}.pluginConfig`).map((c, i) => {
      const p = `${path}.pluginConfig[${i}]`
      const item = this.record(c, p)
      this.onlyFields(item, ["name", "args"], p)
      const name = this.name(item["name"], p)
      return item["args"] === undefined ? { name } : { name, args: item["args"] }
    })
    const pct = this.percentage(o["percentageOfNodesToScore"], `${path}.percentageOfNodesToScore`)
    return {
      schedulerName: schedulerName as string,
      ...(Object.keys(plugins).length > 0 ? { plugins } : {}),
      ...(pluginConfig.length > 0 ? { pluginConfig } : {}),
      ...(pct === undefined ? {} : { percentageOfNodesToScore: pct })
    }
  }

  configuration(doc: unknown): Configuration {
    const o = this.record(doc, "configuration")
    if (o["apiVersion"] !== ConfigApiVersion) this.fail(`apiVersion: want "${ConfigApiVersion}", got ${JSON.stringify(o["apiVersion"] ?? "")}`)
    if (o["kind"] !== "KubeSchedulerConfiguration") this.fail(`kind: want "KubeSchedulerConfiguration", got ${JSON.stringify(o["kind"] ?? "")}`)
    const known = ["apiVersion", "kind", "profiles", "extenders", "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds"]
    for (const key of Object.keys(o)) if (!known.includes(key) && !ignoredFields.has(key)) this.fail(`unknown field "${key}"`)
    if (this.list(o["extenders"], "extenders").length > 0) this.fail("extenders: scheduler extenders are not supported")
    const profiles = this.list(o["profiles"], "profiles").map((p, i) => this.profile(p, `profiles[${i}]`))
    const names = new Set<string>()
    profiles.forEach((p, i) => {
      if (names.has(p.schedulerName)) this.fail(`profiles[${i}].schedulerName: duplicate profile with scheduler name "${p.schedulerName}"`)
      names.add(p.schedulerName)
    })
    // The queue is shared by all profiles, so they must order it alike (upstream's validateCommonQueueSort).
    const queueSort = (p: Profile) => JSON.stringify(p.plugins?.queueSort ?? {})
    profiles.forEach((p, i) => {
      if (i > 0 && queueSort(p) !== queueSort(profiles[0]!)) this.fail(`profiles[${i}].plugins.queueSort: must be the same for all profiles`)
    })
    const pct = this.percentage(o["percentageOfNodesToScore"], "percentageOfNodesToScore")
    const initial = this.positiveInt(o["podInitialBackoffSeconds"], "podInitialBackoffSeconds")
    const max = this.positiveInt(o["podMaxBackoffSeconds"], "podMaxBackoffSeconds")
    if (max !== undefined && max < (initial ?? 1)) this.fail("podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds")
    return {
      profiles: profiles.length > 0 ? profiles : [defaultProfile],
      ...(pct === undefined ? {} : { percentageOfNodesToScore: pct }),
      ...(initial === undefined ? {} : { podInitialBackoffSeconds: initial }),
      ...(max === undefined ? {} : { podMaxBackoffSeconds: max })
    }
  }
}

/** Read a `kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration (YAML or JSON), strictly. */
export const parseConfig = (text: string): Either.Either<Configuration, string> => {
  const docs = YAML.parseAllDocuments(text)
  const all = Array.isArray(docs) ? docs : [docs]
  if (all.length !== 1) return Either.left(`the configuration must be exactly one YAML document, found ${all.length}`)
  const doc = all[0]!
  if (doc.errors.length > 0) return Either.left(`invalid YAML: ${doc.errors[0]!.message.split("\n")[0]}`)
  const decoder = new Decoder()
  const config = decoder.configuration(doc.toJS())
  return decoder.problem === undefined ? Either.right(config) : Either.left(decoder.problem)
}
