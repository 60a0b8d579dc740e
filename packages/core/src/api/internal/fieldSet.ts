/**
 * Field sets of server-side apply: which fields of an object a manager owns, as structured-merge-
 * diff counts them, and their FieldsV1 form in `metadata.managedFields`.
 *
 * A path is a list of elements: `f:<field>` (a map's field), `k:{"name":"web"}` (the item of a
 * map-list with those key values; keys sorted), `v:<json>` (the item of a set-list). Owned are the
 * leaves (scalars, atomic lists and maps, empty maps and lists) and every list item itself (its
 * `.` in FieldsV1). Internally a set is a `Set` of paths joined with `\n` (no element can hold
 * one: field names with a newline are invalid, JSON escapes it). Plain TS: this runs on every write.
 */
import { byValue, type MergeKeys } from "./patchStrategic.js"

type Json = unknown
type JsonMap = Record<string, Json>

/** How the lists (and atomic maps) of one kind merge, by dotted path with `[]` per list crossed. */
export interface Schema {
  /** A list's keys (a map-list), or `byValue` (a set). Lists not named are atomic. */
  readonly lists: MergeKeys
  /** Paths of maps that are atomic (`x-kubernetes-map-type: atomic`). */
  readonly atomicMaps?: ReadonlySet<string>
}

/** A set of owned paths. */
export type FieldSet = Set<string>

const sep = "\n"

const isMap = (v: Json): v is JsonMap => typeof v === "object" && v !== null && !Array.isArray(v)

const child = (schemaPath: string, field: string) => (schemaPath === "" ? field : `${schemaPath}.${field}`)

const sortedKeys = (item: JsonMap, keys: ReadonlyArray<string>): JsonMap => {
  const out: JsonMap = {}
  for (const k of [...keys].sort()) out[k] = item[k]
  return out
}

/** The keys of a map-list item, or undefined when it lacks one (the list is then taken as atomic). */
const keyOf = (item: Json, keys: ReadonlyArray<string>): string | undefined =>
  isMap(item) && keys.every((k) => item[k] !== undefined) ? `k:${JSON.stringify(sortedKeys(item, keys))}` : undefined

const listKeys = (schema: Schema, schemaPath: string): ReadonlyArray<string> | "set" | undefined => {
  const k = schema.lists[schemaPath]
  if (k === undefined) return undefined
  return k === byValue ? "set" : k.split(",")
}

/** The paths `value` sets, under `prefix` (pure). */
export const fieldsOf = (value: Json, schema: Schema, schemaPath = "", prefix = ""): FieldSet => {
  const out: FieldSet = new Set()
  const walk = (v: Json, sp: string, path: string) => {
    if (isMap(v) && !(schema.atomicMaps?.has(sp) ?? false)) {
      const entries = Object.entries(v)
      if (entries.length === 0) {
        if (path !== "") out.add(path)
        return
      }
      for (const [k, c] of entries) walk(c, child(sp, k), path === "" ? `f:${k}` : `${path}${sep}f:${k}`)
      return
    }
    if (Array.isArray(v) && v.length > 0) {
      const keys = listKeys(schema, sp)
      if (keys === "set") {
        for (const item of v) out.add(`${path}${sep}v:${JSON.stringify(item)}`)
        return
      }
      if (keys !== undefined) {
        const ids = v.map((item) => keyOf(item, keys))
        if (ids.every((id) => id !== undefined)) {
          v.forEach((item, i) => {
            const itemPath = `${path}${sep}${ids[i]!}`
            out.add(itemPath)
            for (const [k, c] of Object.entries(item as JsonMap)) walk(c, child(`${sp}[]`, k), `${itemPath}${sep}f:${k}`)
          })
          return
        }
      }
    }
    if (path !== "") out.add(path)
  }
  walk(value, schemaPath, prefix)
  return out
}

/** The value at `path` in `object`, and whether there is one. */
export const valueAt = (object: Json, path: string): { readonly found: boolean; readonly value?: Json } => {
  let v: Json = object
  for (const pe of path.split(sep)) {
    if (pe.startsWith("f:")) {
      if (!isMap(v) || !Object.hasOwn(v, pe.slice(2))) return { found: false }
      v = v[pe.slice(2)]
    } else if (pe.startsWith("k:")) {
      const want = JSON.parse(pe.slice(2)) as JsonMap
      if (!Array.isArray(v)) return { found: false }
      const item = v.find((i) => isMap(i) && Object.entries(want).every(([k, w]) => JSON.stringify(i[k]) === JSON.stringify(w)))
      if (item === undefined) return { found: false }
      v = item
    } else if (pe.startsWith("v:")) {
      const want = pe.slice(2)
      if (!Array.isArray(v) || !v.some((i) => JSON.stringify(i) === want)) return { found: false }
      v = JSON.parse(want) as Json
    } else return { found: false }
  }
  return { found: true, value: v }
}

/**
 * Remove `path` from `object` in place (the caller's own copy): a field, a map-list item or a set
 * item. Maps left empty by the removal stay (as structured-merge-diff leaves them).
 */
export const removeAt = (object: JsonMap, path: string): void => {
  const pes = path.split(sep)
  let v: Json = object
  for (let i = 0; i < pes.length - 1; i++) {
    const next = valueAt(v, pes[i]!)
    if (!next.found) return
    v = next.value
  }
  const last = pes[pes.length - 1]!
  if (last.startsWith("f:") && isMap(v)) delete v[last.slice(2)]
  else if ((last.startsWith("k:") || last.startsWith("v:")) && Array.isArray(v)) {
    const target = valueAt(v, last)
    if (!target.found) return
    const i = last.startsWith("v:") ? v.findIndex((x) => JSON.stringify(x) === last.slice(2)) : v.indexOf(target.value)
    if (i >= 0) v.splice(i, 1)
  }
}

/** A set as FieldsV1 (`{"f:spec":{"f:replicas":{}}}`, `.` for an owned node with owned children). */
export const toFieldsV1 = (set: FieldSet): JsonMap => {
  const root: JsonMap = {}
  for (const path of [...set].sort()) {
    let node = root
    for (const pe of path.split(sep)) node = (node[pe] ??= {}) as JsonMap
  }
  // A path that is owned and also has owned children carries `.`.
  for (const path of set) {
    let node = root
    for (const pe of path.split(sep)) node = node[pe] as JsonMap
    if (Object.keys(node).some((k) => k !== ".")) node["."] = {}
  }
  return root
}

/** FieldsV1 as a set (unknown shapes are ignored: a client's own managedFields may be anything). */
export const fromFieldsV1 = (fields: Json): FieldSet => {
  const out: FieldSet = new Set()
  const walk = (node: Json, path: string) => {
    if (!isMap(node)) return
    const keys = Object.keys(node)
    if (keys.length === 0 && path !== "") out.add(path)
    for (const k of keys) {
      if (k === ".") {
        if (path !== "") out.add(path)
      } else walk(node[k], path === "" ? k : `${path}${sep}${k}`)
    }
  }
  walk(fields, "")
  return out
}

/** A path as Kubernetes prints it in conflicts: `.spec.containers[name="web"].image`. */
export const describe = (path: string): string =>
  path
    .split(sep)
    .map((pe) => {
      if (pe.startsWith("f:")) return `.${pe.slice(2)}`
      if (pe.startsWith("v:")) return `[=${pe.slice(2)}]`
      const keys = JSON.parse(pe.slice(2)) as JsonMap
      return `[${Object.entries(keys)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(",")}]`
    })
    .join("")

/** Whether `path` is `prefix` or lies under it. */
export const under = (path: string, prefix: string): boolean => path === prefix || path.startsWith(`${prefix}${sep}`)

/**
 * Merge an applied configuration into the live object (pure): maps field by field, map-lists item
 * by key (live items keep their place, new ones follow), set-lists as a union, anything else (a
 * scalar, an atomic list or map) replaced by the applied value.
 */
export const merge = (live: Json, applied: Json, schema: Schema, schemaPath = ""): Json => {
  if (isMap(live) && isMap(applied) && !(schema.atomicMaps?.has(schemaPath) ?? false)) {
    const out: JsonMap = { ...live }
    for (const [k, v] of Object.entries(applied)) out[k] = merge(live[k], v, schema, child(schemaPath, k))
    return out
  }
  if (Array.isArray(live) && Array.isArray(applied)) {
    const keys = listKeys(schema, schemaPath)
    if (keys === "set") {
      const seen = new Set(live.map((x) => JSON.stringify(x)))
      return [...live, ...applied.filter((x) => !seen.has(JSON.stringify(x)))]
    }
    if (keys !== undefined && [...live, ...applied].every((i) => keyOf(i, keys) !== undefined)) {
      const byKey = new Map(applied.map((i) => [keyOf(i, keys)!, i]))
      const out = live.map((i) => {
        const a = byKey.get(keyOf(i, keys)!)
        if (a === undefined) return i
        byKey.delete(keyOf(i, keys)!)
        return merge(i, a, schema, `${schemaPath}[]`)
      })
      return [...out, ...byKey.values()]
    }
  }
  return applied
}
