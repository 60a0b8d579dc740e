/**
 * `apply`'s per-object step, as kubectl's client-side apply: find the resource the manifest's
 * apiVersion and kind name, default its namespace, then create it (recording the
 * last-applied annotation) or patch it with the three-way merge patch (`ThreeWayMerge`), or leave
 * it `unchanged` when the patch is empty. `--dry-run=client` writes nothing; `--dry-run=server`
 * sends the writes with `dryRun=All` so admission and validation still run.
 *
 *   manifest ─▶ resource (discovery) ─▶ GET live ─┬─ 404 ─▶ POST (annotated)        created
 *                                                 └─ found ─▶ patch = 3-way(...) ─┬─ {} ─▶ unchanged
 *                                                                                 └─ PATCH  configured
 */
import type { ApiError} from "@koder/fleet-core";
import { Client } from "@koder/fleet-core"
import { Effect } from "effect"
import { CliError } from "./CliError.js"
import { meta, obj, refOf } from "./Cli.js"
import type { Connection } from "./Connection.js"
import type { Manifest } from "./Manifests.js"
import * as Resources from "./Resources.js"
import * as ThreeWayMerge from "./ThreeWayMerge.js"

type Json = Record<string, unknown>

/** `--dry-run`. */
export type DryRun = "none" | "client" | "server"

/** Parse `--dry-run[=...]` (kubectl: a bare flag means client). */
export const parseDryRun = (v: string | boolean | undefined): DryRun => {
  if (v === undefined || v === false || v === "none") return "none"
  if (v === true || v === "client") return "client"
  if (v === "server") return "server"
  throw new CliError({ message: `Invalid dry-run value (${String(v)}). Must be "none", "server", or "client".` })
}

/** The line suffix kubectl prints for a dry run. */
export const dryRunSuffix = (d: DryRun): string => (d === "client" ? " (dry run)" : d === "server" ? " (server dry run)" : "")

/** Where a manifest goes: its resource and namespace. */
export interface Placed {
  readonly info: Resources.ResourceInfo
  readonly namespace: string | undefined
  readonly name: string
  readonly object: Json
  readonly source: string
}

/** Resolve a manifest's resource and namespace (pure; a CliError when it cannot). */
export const place = (resources: ReadonlyArray<Resources.ResourceInfo>, m: Manifest, namespace: string, explicitNamespace: boolean): Placed => {
  const apiVersion = String(m.object["apiVersion"])
  const kind = String(m.object["kind"])
  const info = Resources.forKind(resources, apiVersion, kind)
  const name = String(meta(m.object)["name"] ?? "")
  if (info === undefined) {
    throw new CliError({ message: `resource mapping not found for name: "${name}" namespace: "${String(meta(m.object)["namespace"] ?? "")}" from "${m.source}": no matches for kind "${kind}" in version "${apiVersion}"` })
  }
  const own = meta(m.object)["namespace"]
  if (info.namespaced && typeof own === "string" && own !== "" && explicitNamespace && own !== namespace) {
    throw new CliError({
      message: `the namespace from the provided object "${own}" does not match the namespace "${namespace}". You must pass '--namespace=${own}' to perform this operation.`
    })
  }
  const ns = info.namespaced ? (typeof own === "string" && own !== "" ? own : namespace) : undefined
  const object = ns === undefined ? m.object : { ...m.object, metadata: { ...meta(m.object), namespace: ns } }
  return { info, namespace: ns, name, object, source: m.source }
}

const dryRunQuery = (d: DryRun) => (d === "server" ? "?dryRun=All" : "")

/** What one apply did. */
export interface Outcome {
  readonly placed: Placed
  readonly action: "created" | "configured" | "unchanged"
  /** The object after the write (or as it would be). */
  readonly result: Json
}

const context = (verb: string, p: Placed) => (e: ApiError.ApiError) =>
  new CliError({ message: `error when ${verb} "${p.source}": ${e.message}` })

/** Apply one placed manifest. */
export const applyOne = (conn: Connection, p: Placed, dryRun: DryRun): Effect.Effect<Outcome, CliError> =>
  Effect.gen(function* () {
    if (p.name === "") return yield* Effect.fail(new CliError({ message: `error when retrieving current configuration of "${p.source}": the ${p.info.kind} has no metadata.name (apply needs a name; use create for generateName)` }))
    const ref = refOf(p.info)
    const live = yield* Effect.either(conn.client.get(ref, p.namespace, p.name))
    if (live._tag === "Left") {
      if (live.left.status.code !== 404) return yield* Effect.fail(context("retrieving current configuration of", p)(live.left))
      const body = ThreeWayMerge.withLastApplied(p.object)
      if (dryRun === "client") return { placed: p, action: "created", result: body }
      const created = yield* conn.json("POST", `${Client.path(ref, p.namespace)}${dryRunQuery(dryRun)}`, { body }).pipe(Effect.mapError(context("creating", p)))
      return { placed: p, action: "created", result: created }
    }
    const patch = ThreeWayMerge.applyPatch(p.object, live.right)
    if (Object.keys(patch).length === 0) return { placed: p, action: "unchanged", result: live.right }
    if (dryRun === "client") return { placed: p, action: "configured", result: live.right }
    const patched = yield* conn
      .json("PATCH", `${Client.path(ref, p.namespace, p.name)}${dryRunQuery(dryRun)}`, { body: patch, contentType: "application/merge-patch+json" })
      .pipe(Effect.mapError(context("patching", p)))
    return { placed: p, action: "configured", result: patched }
  })

/** The line `apply` prints for an outcome: `deployment.apps/hello configured`. */
export const line = (o: Outcome, dryRun: DryRun): string => `${Resources.typeName(o.placed.info)}/${o.placed.name} ${o.action}${dryRunSuffix(dryRun)}`

/** The objects `--prune` removes: applied before (annotated), selected, and not in this apply (pure). */
export const pruneCandidates = (live: ReadonlyArray<Json>, applied: ReadonlySet<string>): ReadonlyArray<Json> =>
  live.filter((o) => {
    const m = meta(o)
    const key = `${String(m["namespace"] ?? "")}/${String(m["name"])}`
    return obj(m["annotations"])[ThreeWayMerge.lastAppliedAnnotation] !== undefined && !applied.has(key) && m["deletionTimestamp"] === undefined
  })
