/**
 * What the server serves, from aggregated discovery (`/api` and `/apis` as
 * `APIGroupDiscoveryList`, two requests), and how a user's word names a resource: plural
 * (`deployments`), singular (`deployment`), short name (`deploy`), kind (`Deployment`), each
 * optionally qualified by group (`deployments.apps`) or version (`deployments.v1.apps`), and the
 * categories kubectl knows (`all`). Parsing and lookup are pure.
 */
import { Effect } from "effect"
import type { ApiError } from "@koder/fleet-core"
import { usage } from "./CliError.js"
import type { Connection } from "./Connection.js"

type Json = Record<string, unknown>

/** One served resource. */
export interface ResourceInfo {
  readonly group: string
  readonly version: string
  /** `v1`, `apps/v1`. */
  readonly apiVersion: string
  readonly kind: string
  readonly plural: string
  readonly singular: string
  readonly namespaced: boolean
  readonly shortNames: ReadonlyArray<string>
  readonly categories: ReadonlyArray<string>
  readonly verbs: ReadonlyArray<string>
  /** Whether this is the group's preferred version (the first listed). */
  readonly preferred: boolean
}

const obj = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])
const strs = (v: unknown): ReadonlyArray<string> => arr(v).map(String)

/** The resources of aggregated discovery documents (pure). */
export const fromAggregated = (docs: ReadonlyArray<Json>): ReadonlyArray<ResourceInfo> =>
  docs.flatMap((doc) =>
    arr(doc["items"]).flatMap((g) => {
      const group = String(obj(obj(g)["metadata"])["name"] ?? "")
      return arr(obj(g)["versions"]).flatMap((v, index) => {
        const version = String(obj(v)["version"])
        return arr(obj(v)["resources"]).map((raw): ResourceInfo => {
          const r = obj(raw)
          const plural = String(r["resource"])
          return {
            group,
            version,
            apiVersion: group === "" ? version : `${group}/${version}`,
            kind: String(obj(r["responseKind"])["kind"] ?? ""),
            plural,
            singular: String(r["singularResource"] ?? "") || plural.replace(/s$/, ""),
            namespaced: r["scope"] === "Namespaced",
            shortNames: strs(r["shortNames"]),
            categories: strs(r["categories"]),
            verbs: strs(r["verbs"]),
            preferred: index === 0
          }
        })
      })
    })
  )

/** The resources a word names: one, or several for a category such as `all` (pure). */
export const lookup = (resources: ReadonlyArray<ResourceInfo>, word: string): ReadonlyArray<ResourceInfo> => {
  const lower = word.toLowerCase()
  const [name, ...rest] = lower.split(".")
  const qualifier = rest.join(".")
  const matchesQualifier = (r: ResourceInfo) => {
    if (qualifier === "") return true
    if (qualifier === r.group) return true
    return qualifier === `${r.version}.${r.group}` || (r.group === "" && qualifier === r.version)
  }
  const named = (r: ResourceInfo) =>
    matchesQualifier(r) && (r.plural === name || r.singular === name || r.kind.toLowerCase() === name || r.shortNames.includes(name!))
  const found = resources.filter(named)
  if (found.length > 0) {
    // Prefer the preferred version; among groups, the core and built-in ones come first in discovery.
    const preferred = found.filter((r) => r.preferred)
    return [(preferred.length > 0 ? preferred : found)[0]!]
  }
  if (qualifier === "") {
    const category = resources.filter((r) => r.preferred && r.categories.includes(lower))
    if (category.length > 0) return category
  }
  return []
}

/** A ResourceInfo from a manifest's apiVersion and kind (pure). */
export const forKind = (resources: ReadonlyArray<ResourceInfo>, apiVersion: string, kind: string): ResourceInfo | undefined =>
  resources.find((r) => r.apiVersion === apiVersion && r.kind === kind)

/** `kind.group` as `-o name` and apply print it: `deployment.apps`, `pod`. */
export const typeName = (r: Pick<ResourceInfo, "kind" | "group">): string => (r.group === "" ? r.kind.toLowerCase() : `${r.kind.toLowerCase()}.${r.group}`)

/** A resource argument list split into (type, names) pairs: `pods a b`, `pod/a deploy/b`, `pods,svc` (pure). */
export const parseArgs = (args: ReadonlyArray<string>): ReadonlyArray<{ readonly type: string; readonly names: ReadonlyArray<string> }> => {
  if (args.length === 0) return []
  if (args.every((a) => a.includes("/"))) {
    return args.map((a) => {
      const i = a.indexOf("/")
      return { type: a.slice(0, i), names: [a.slice(i + 1)] }
    })
  }
  if (args.some((a) => a.includes("/"))) throw usage("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form")
  const [types, ...names] = args
  return types!.split(",").filter((t) => t !== "").map((type) => ({ type, names }))
}

/** Fetch discovery once. */
export const discover = (c: Connection): Effect.Effect<ReadonlyArray<ResourceInfo>, ApiError.ApiError> =>
  Effect.map(
    Effect.all(
      ["/api", "/apis"].map((p) => c.json("GET", p, { accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json" })),
      { concurrency: 2 }
    ),
    fromAggregated
  )

/** The one resource a word names, or the kubectl error. */
export const resolveOne = (resources: ReadonlyArray<ResourceInfo>, word: string): ResourceInfo => {
  const found = lookup(resources, word)
  if (found.length !== 1) throw usage(`the server doesn't have a resource type "${word}"`)
  return found[0]!
}
