/**
 * How `get` and friends print objects, all pure: aligned tables from the server's
 * `meta.k8s.io/v1` Tables (kubectl's server-side printing: columns of priority 0, all of them
 * with `-o wide`, NAMESPACE first with `-A`), `-o yaml|json` (a `List` for several objects),
 * `-o name` (`deployment.apps/web`), `-o jsonpath=...` and `-o custom-columns=...`.
 */
import { stringify } from "yaml"
import { usage } from "./CliError.js"
import * as JsonPath from "./JsonPath.js"

type Json = Record<string, unknown>

const obj = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

/** An output format, parsed from `-o`. */
export type Format =
  | { readonly _tag: "Table"; readonly wide: boolean }
  | { readonly _tag: "Yaml" }
  | { readonly _tag: "Json" }
  | { readonly _tag: "Name" }
  | { readonly _tag: "JsonPath"; readonly template: string }
  | { readonly _tag: "CustomColumns"; readonly columns: ReadonlyArray<{ readonly header: string; readonly path: string }> }

/** Parse `-o` (pure). */
export const parseFormat = (o: string | undefined): Format => {
  if (o === undefined || o === "") return { _tag: "Table", wide: false }
  if (o === "wide") return { _tag: "Table", wide: true }
  if (o === "yaml") return { _tag: "Yaml" }
  if (o === "json") return { _tag: "Json" }
  if (o === "name") return { _tag: "Name" }
  const eq = o.indexOf("=")
  const kind = eq < 0 ? o : o.slice(0, eq)
  const arg = eq < 0 ? "" : o.slice(eq + 1)
  if (kind === "jsonpath" || kind === "jsonpath-as-json") {
    if (arg === "") throw usage("template format specified but no template given")
    JsonPath.parse(arg)
    return { _tag: "JsonPath", template: arg }
  }
  if (kind === "custom-columns") {
    if (arg === "") throw usage("custom-columns format specified but no custom columns given")
    return {
      _tag: "CustomColumns",
      columns: arg.split(",").map((spec) => {
        const i = spec.indexOf(":")
        if (i < 0) throw usage(`unexpected custom-columns spec: ${spec}, expected <header>:<json-path-expr>`)
        return { header: spec.slice(0, i), path: spec.slice(i + 1).replace(/^\{(.*)\}$/, "$1") }
      })
    }
  }
  throw usage(`unable to match a printer suitable for the output format "${o}", allowed formats are: custom-columns,json,jsonpath,name,wide,yaml`)
}

/** Columns padded to their widest cell, three spaces apart, as kubectl's tabwriter (pure). */
export const align = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths: Array<number> = []
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)))
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join("   ").trimEnd()).join("\n")
}

/** A `meta.k8s.io/v1` Table as the server sends it. */
export interface ServerTable {
  readonly columnDefinitions: ReadonlyArray<{ readonly name: string; readonly priority?: number }>
  readonly rows: ReadonlyArray<{ readonly cells: ReadonlyArray<unknown>; readonly object?: unknown }>
}

/** How to print a table. */
export interface TableOptions {
  readonly wide?: boolean
  readonly withNamespace?: boolean
  readonly noHeaders?: boolean
  /** `pod/`, when several types are printed together. */
  readonly namePrefix?: string
  readonly showLabels?: boolean
}

const cellText = (v: unknown): string => (v === null || v === undefined ? "<none>" : typeof v === "object" ? JSON.stringify(v) : String(v))

/** The rows (header first unless `noHeaders`) of a server Table (pure). */
export const tableRows = (table: ServerTable, options: TableOptions = {}): Array<Array<string>> => {
  const shown = table.columnDefinitions.map((c, i) => ({ c, i })).filter(({ c }) => options.wide === true || (c.priority ?? 0) === 0)
  const header = [...(options.withNamespace ? ["NAMESPACE"] : []), ...shown.map(({ c }) => c.name.toUpperCase()), ...(options.showLabels ? ["LABELS"] : [])]
  const rows = table.rows.map((row) => {
    const m = obj(obj(row.object)["metadata"])
    const cells = shown.map(({ i }) => cellText(row.cells[i]))
    if (options.namePrefix && cells.length > 0) cells[0] = `${options.namePrefix}${cells[0]}`
    const labels = Object.entries(obj(m["labels"])).map(([k, v]) => `${k}=${String(v)}`).join(",") || "<none>"
    return [...(options.withNamespace ? [String(m["namespace"] ?? "")] : []), ...cells, ...(options.showLabels ? [labels] : [])]
  })
  return options.noHeaders ? rows : [header, ...rows]
}

/** Several objects as one document: the object itself when there is one and `single` holds. */
export const asList = (items: ReadonlyArray<Json>, single: boolean): Json =>
  single && items.length === 1 ? items[0]! : { apiVersion: "v1", kind: "List", metadata: { resourceVersion: "" }, items }

/** YAML as kubectl prints it (block style, no line folding). */
export const yaml = (o: unknown): string => stringify(o, { lineWidth: 0, aliasDuplicateObjects: false })

/** JSON as kubectl prints it (4-space indent). */
export const json = (o: unknown): string => `${JSON.stringify(o, null, 4)}\n`

/** `-o name`: `deployment.apps/web`. */
export const name = (typeName: string, o: Json): string => `${typeName}/${String(obj(o["metadata"])["name"] ?? "")}`

/** `-o custom-columns` rows (pure). */
export const customColumns = (
  columns: ReadonlyArray<{ readonly header: string; readonly path: string }>,
  objects: ReadonlyArray<Json>,
  noHeaders = false
): Array<Array<string>> => {
  const rows = objects.map((o) =>
    columns.map(({ path }) => {
      const values = JsonPath.evaluate(path, o).filter((v) => v !== undefined && v !== null)
      return values.length === 0 ? "<none>" : values.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(",")
    })
  )
  return noHeaders ? rows : [columns.map((c) => c.header), ...rows]
}

/** Print objects in a non-table format (pure); `typeName` gives `-o name` its prefix. */
export const objects = (format: Exclude<Format, { _tag: "Table" }>, items: ReadonlyArray<Json>, typeName: (o: Json) => string, single: boolean, noHeaders = false): string => {
  switch (format._tag) {
    case "Yaml":
      return yaml(asList(items, single))
    case "Json":
      return json(asList(items, single))
    case "Name":
      return items.map((o) => `${name(typeName(o), o)}\n`).join("")
    case "JsonPath":
      return JsonPath.render(format.template, asList(items, single))
    case "CustomColumns":
      return `${align(customColumns(format.columns, items, noHeaders))}\n`
  }
}

/** Items of a List (pure). */
export const itemsOf = (list: unknown): ReadonlyArray<Json> => arr(obj(list)["items"]).map(obj)
