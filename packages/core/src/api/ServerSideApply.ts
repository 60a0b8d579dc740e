/**
 * Server-side apply and field ownership (`metadata.managedFields`), as kube-apiserver's
 * structured-merge-diff does it, over the list types Fleet knows: the strategic merge keys of the
 * built-in kinds (a merge key is a map-list's key, a primitive merge list a set) and a CRD's
 * `x-kubernetes-list-type`/`-list-map-keys`/`-map-type` markers. Pure: Rest.ts calls it on writes.
 *
 *   apply(live, config, manager, force):
 *     conflicts = config's fields that another manager owns and whose value differs ─▶ 409 unless force
 *     object    = live merged with config; fields the manager applied before, no longer in config
 *                 and owned by nobody else, removed
 *     managers  = the manager's Apply entry = config's fields; force takes them from the others
 *   update(old, next, manager): every other write; the fields it changed become the manager's
 *     (an Update entry), fields it removed leave every entry
 *
 * Fields never owned: apiVersion, kind, and metadata's name, namespace, uid, resourceVersion,
 * generation, creationTimestamp, deletion*, managedFields, selfLink. A write of the main resource
 * owns no status field and a write of `status` owns only status fields (`subresource: status`).
 */
import * as FieldSet from "./internal/fieldSet.js"
import { builtInMergeKeys } from "./internal/patchMergeKeys.js"
import { byValue } from "./internal/patchStrategic.js"

type Json = unknown
type JsonMap = Record<string, Json>

/** One `metadata.managedFields` entry. */
export interface Entry {
  readonly manager: string
  readonly operation: "Apply" | "Update"
  readonly apiVersion: string
  readonly time: string
  readonly fieldsType: "FieldsV1"
  readonly fieldsV1: JsonMap
  readonly subresource?: string
}

/** A field two managers disagree on. */
export interface Conflict {
  readonly manager: string
  readonly apiVersion: string
  /** `.spec.replicas` */
  readonly field: string
}

export type Schema = FieldSet.Schema

const isMap = (v: Json): v is JsonMap => typeof v === "object" && v !== null && !Array.isArray(v)

const unowned = ["apiVersion", "kind"].map((f) => `f:${f}`)
const unownedMeta = ["name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName"].map(
  (f) => `f:metadata\nf:${f}`
)

/** The fields of `object` a write of `subresource` may own. */
export const ownedFields = (object: Json, schema: Schema, subresource = ""): FieldSet.FieldSet => {
  const out = FieldSet.fieldsOf(object, schema)
  for (const p of [...out]) {
    const status = FieldSet.under(p, "f:status")
    if (unowned.some((u) => FieldSet.under(p, u)) || unownedMeta.some((u) => FieldSet.under(p, u)) || (subresource === "status" ? !status : status)) out.delete(p)
  }
  return out
}

/** The list types of a built-in kind (`apps/v1/Deployment`); none for an unknown one. */
export const builtInSchema = (apiVersionKind: string): Schema => ({ lists: builtInMergeKeys[apiVersionKind] ?? {} })

/**
 * The list types a CRD version's `openAPIV3Schema` declares: `x-kubernetes-list-type: map` with
 * its `x-kubernetes-list-map-keys`, `set`, and `x-kubernetes-map-type: atomic` maps.
 */
export const crdSchema = (openAPIV3Schema: Json): Schema => {
  const lists: Record<string, string> = { "metadata.finalizers": byValue, "metadata.ownerReferences": "uid" }
  const atomicMaps = new Set<string>()
  const walk = (node: Json, path: string) => {
    if (!isMap(node)) return
    if (node["x-kubernetes-map-type"] === "atomic" && path !== "") atomicMaps.add(path)
    if (node["type"] === "array") {
      const type = node["x-kubernetes-list-type"]
      const keys = node["x-kubernetes-list-map-keys"]
      if (type === "set") lists[path] = byValue
      else if (type === "map" && Array.isArray(keys) && keys.length > 0 && keys.every((k) => typeof k === "string")) lists[path] = keys.join(",")
      walk(node["items"], `${path}[]`)
      return
    }
    const props = node["properties"]
    if (isMap(props)) for (const [k, v] of Object.entries(props)) walk(v, path === "" ? k : `${path}.${k}`)
  }
  walk(openAPIV3Schema, "")
  return { lists, atomicMaps }
}

/** The entries of an object's metadata (entries of unknown shape are dropped). */
export const entriesOf = (object: Json): ReadonlyArray<Entry> => {
  const meta = isMap(object) ? object["metadata"] : undefined
  const list = isMap(meta) ? meta["managedFields"] : undefined
  if (!Array.isArray(list)) return []
  return list.filter(
    (e): e is Entry =>
      isMap(e) && typeof e["manager"] === "string" && (e["operation"] === "Apply" || e["operation"] === "Update") && isMap(e["fieldsV1"])
  )
}

const sameManager = (e: Entry, manager: string, operation: Entry["operation"], subresource: string) =>
  e.manager === manager && e.operation === operation && (e.subresource ?? "") === subresource

interface Working {
  readonly entry: Entry
  fields: FieldSet.FieldSet
  changed: boolean
}

const finish = (working: ReadonlyArray<Working>): ReadonlyArray<Entry> =>
  working
    .filter((w) => w.fields.size > 0)
    .map((w) => (w.changed ? { ...w.entry, fieldsV1: FieldSet.toFieldsV1(w.fields) } : w.entry))

const entry = (manager: string, operation: Entry["operation"], apiVersion: string, time: string, subresource: string): Entry => ({
  manager,
  operation,
  apiVersion,
  time,
  fieldsType: "FieldsV1",
  fieldsV1: {},
  ...(subresource === "" ? {} : { subresource })
})

/** What a write is: who makes it, in which version, when, to which subresource. */
export interface Write {
  readonly manager: string
  readonly apiVersion: string
  /** RFC 3339, seconds. */
  readonly time: string
  readonly subresource?: string
}

/**
 * The entries after a write that is not an apply (create, update, patch): the fields it changed
 * go to `write.manager`'s Update entry and leave everyone else's; removed fields leave every entry.
 */
export const update = (old: Json | undefined, next: Json, entries: ReadonlyArray<Entry>, schema: Schema, write: Write): ReadonlyArray<Entry> => {
  const subresource = write.subresource ?? ""
  const before = old === undefined ? new Set<string>() : ownedFields(old, schema, subresource)
  const after = ownedFields(next, schema, subresource)
  const changed = new Set<string>()
  for (const p of after) {
    if (!before.has(p)) changed.add(p)
    else if (isLeafChanged(old, next, p)) changed.add(p)
  }
  const removed = new Set([...before].filter((p) => !after.has(p)))
  if (changed.size === 0 && removed.size === 0) return entries
  const working: Array<Working> = entries.map((e) => ({ entry: e, fields: FieldSet.fromFieldsV1(e.fieldsV1), changed: false }))
  for (const w of working) {
    for (const p of [...removed, ...changed]) if (w.fields.delete(p)) w.changed = true
  }
  let own = working.find((w) => sameManager(w.entry, write.manager, "Update", subresource))
  if (own === undefined && changed.size > 0) {
    own = { entry: entry(write.manager, "Update", write.apiVersion, write.time, subresource), fields: new Set(), changed: true }
    working.push(own)
  }
  if (own !== undefined && changed.size > 0) {
    for (const p of changed) own.fields.add(p)
    own.changed = true
    ;(own as { entry: Entry }).entry = { ...own.entry, time: write.time, apiVersion: write.apiVersion }
  }
  return finish(working)
}

const isLeafChanged = (old: Json, next: Json, path: string) => {
  const a = FieldSet.valueAt(old, path)
  const b = FieldSet.valueAt(next, path)
  // Items of lists (maps with children) are owned by being there; their fields say what changed.
  if (isMap(a.value) && isMap(b.value) && Object.keys(b.value).length > 0) return false
  return JSON.stringify(a.value) !== JSON.stringify(b.value)
}

/** The outcome of an apply. */
export type Applied =
  | { readonly _tag: "Applied"; readonly object: JsonMap; readonly entries: ReadonlyArray<Entry> }
  | { readonly _tag: "Conflicts"; readonly conflicts: ReadonlyArray<Conflict> }

/** Apply `config` as `write.manager` over `live` (undefined: the object does not exist yet). */
export const apply = (live: JsonMap | undefined, config: JsonMap, schema: Schema, write: Write, force: boolean): Applied => {
  const subresource = write.subresource ?? ""
  const entries = live === undefined ? [] : entriesOf(live)
  const working: Array<Working> = entries.map((e) => ({ entry: e, fields: FieldSet.fromFieldsV1(e.fieldsV1), changed: false }))
  const applied = ownedFields(config, schema, subresource)
  const mine = working.find((w) => sameManager(w.entry, write.manager, "Apply", subresource))
  const conflicts: Array<Conflict> = []
  if (live !== undefined) {
    for (const w of working) {
      if (w === mine) continue
      for (const p of applied) {
        if (!w.fields.has(p)) continue
        if (!isLeafChanged(live, config, p)) continue
        if (force) {
          w.fields.delete(p)
          w.changed = true
        } else conflicts.push({ manager: w.entry.manager, apiVersion: w.entry.apiVersion, field: FieldSet.describe(p) })
      }
    }
  }
  if (conflicts.length > 0) return { _tag: "Conflicts", conflicts }
  const merged = structuredClone(FieldSet.merge(live ?? {}, config, schema)) as JsonMap
  // What this manager applied before and now leaves out goes, unless someone else still owns it.
  if (mine !== undefined) {
    const others = new Set(working.filter((w) => w !== mine).flatMap((w) => [...w.fields]))
    const dropped = [...mine.fields].filter((p) => !applied.has(p) && !others.has(p) && ![...others].some((o) => FieldSet.under(o, p)))
    // Only the topmost of what goes: an item's fields go with it (its key fields find it).
    const droppedSet = new Set(dropped)
    const ancestorDropped = (p: string) => p.split("\n").some((_, i, pes) => i < pes.length - 1 && droppedSet.has(pes.slice(0, i + 1).join("\n")))
    for (const p of dropped) if (!ancestorDropped(p)) FieldSet.removeAt(merged, p)
  }
  const next = mine ?? { entry: entry(write.manager, "Apply", write.apiVersion, write.time, subresource), fields: new Set<string>(), changed: true }
  const same = next.fields.size === applied.size && [...applied].every((p) => next.fields.has(p))
  if (!same || next.entry.apiVersion !== write.apiVersion) {
    next.fields = applied
    next.changed = true
    ;(next as { entry: Entry }).entry = { ...next.entry, time: write.time, apiVersion: write.apiVersion }
  }
  if (mine === undefined) working.push(next)
  return { _tag: "Applied", object: merged, entries: finish(working) }
}

/** The 409 message kube-apiserver gives for conflicts. */
export const conflictMessage = (conflicts: ReadonlyArray<Conflict>): string => {
  const byManager = new Map<string, Array<string>>()
  for (const c of conflicts) {
    const who = `"${c.manager}"${c.apiVersion === "" ? "" : ` using ${c.apiVersion}`}`
    byManager.set(who, [...(byManager.get(who) ?? []), c.field])
  }
  const parts = [...byManager].map(([who, fields]) => (fields.length === 1 ? `conflict with ${who}: ${fields[0]}` : `conflicts with ${who}:\n${fields.map((f) => `- ${f}`).join("\n")}`))
  return `Apply failed with ${conflicts.length} conflict${conflicts.length === 1 ? "" : "s"}: ${parts.join("\n")}`
}
