/**
 * `Accept: application/json;as=Table;g=meta.k8s.io;v=v1`: the server-side rendering that
 * `kubectl get` prints. Columns come from the resource (built-in strategies or a CRD's
 * additionalPrinterColumns); Name is always first; dates render as ages like `5m` or `3d`.
 */
import { meta } from "./Objects.js"
import type { JsonObject, PrinterColumn, Resource } from "./Registry.js"

/** Whether an Accept header asks for a Table. */
export const wanted = (accept: string | undefined): boolean =>
  accept !== undefined && accept.split(",").some((part) => /;\s*as=Table/.test(part) && !/g=(?!meta\.k8s\.io)/.test(part))

/** The media type of a Table response. */
export const contentType = "application/json;as=Table;v=v1;g=meta.k8s.io"

/** A short age, as kubectl prints it (`45s`, `12m`, `5h`, `3d`). */
export const age = (from: string | undefined, now: number): string => {
  if (from === undefined) return "<unknown>"
  const seconds = Math.max(0, Math.floor((now - Date.parse(from)) / 1000))
  if (Number.isNaN(seconds)) return "<invalid>"
  if (seconds < 120) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 120) return `${minutes}m`
  const hours = Math.floor(minutes / 60)
  if (hours < 48) return `${hours}h`
  return `${Math.floor(hours / 24)}d`
}

const at = (o: unknown, path: string): unknown => {
  let v = o
  for (const part of path.replace(/^\./, "").split(".")) {
    if (part === "") continue
    if (typeof v !== "object" || v === null) return undefined
    v = Reflect.get(v, part)
  }
  return v
}

const cell = (column: PrinterColumn, o: JsonObject, now: number): unknown => {
  const v = typeof column.value === "string" ? at(o, column.value) : column.value(o)
  if (column.type === "date") return age(typeof v === "string" ? v : undefined, now)
  if (v === undefined || v === null) return column.type === "string" ? "" : null
  if (typeof v === "object") return JSON.stringify(v)
  return v
}

/** Render objects as a meta.k8s.io/v1 Table. `includeObject`: None, Metadata (default) or Object. */
export const render = (
  resource: Resource,
  objects: ReadonlyArray<JsonObject>,
  listMeta: Record<string, unknown>,
  now: number,
  includeObject: string | null
): JsonObject => ({
  kind: "Table",
  apiVersion: "meta.k8s.io/v1",
  metadata: listMeta,
  columnDefinitions: [
    { name: "Name", type: "string", format: "name", description: "Name must be unique within a namespace.", priority: 0 },
    ...resource.printerColumns.map((c) => ({
      name: c.name,
      type: c.type === "date" ? "string" : c.type,
      format: c.type === "date" ? "date" : "",
      description: c.description ?? "",
      priority: c.priority ?? 0
    }))
  ],
  rows: objects.map((o) => ({
    cells: [meta(o)["name"] ?? "", ...resource.printerColumns.map((c) => cell(c, o, now))],
    object:
      includeObject === "None"
        ? null
        : includeObject === "Object"
          ? o
          : { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: meta(o) }
  }))
})
