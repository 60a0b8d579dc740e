/**
 * `Accept: application/json;as=Table;g=meta.k8s.io;v=v1`: the server-side rendering that
 * `kubectl get` prints. Columns come from the resource (built-in strategies or a CRD's
 * additionalPrinterColumns); Name is always first; dates render as ages like `5m` or `3d`.
 * Watches too (`kubectl get -w`): each event's object is a one-row Table.
 */
import { meta } from "./Objects.js"
import * as Storage from "../model/Storage.js"
import * as Views from "../object/Views.js"
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

// kube-apiserver's printer marks the default StorageClass in its name cell.
const nameCell = (resource: Resource, o: JsonObject): unknown => {
  const name = meta(o)["name"] ?? ""
  return resource.kind === "StorageClass" && Storage.isDefault(Views.storageClass(o)) ? `${String(name)} (default)` : name
}

const columnDefinitions = (resource: Resource) => [
  { name: "Name", type: "string", format: "name", description: "Name must be unique within a namespace.", priority: 0 },
  ...resource.printerColumns.map((c) => ({
    name: c.name,
    type: c.type === "date" ? "string" : c.type,
    format: c.type === "date" ? "date" : "",
    description: c.description ?? "",
    priority: c.priority ?? 0
  }))
]

/**
 * Render objects as a meta.k8s.io/v1 Table. `includeObject`: None, Metadata (default) or Object.
 * `headers: false` leaves the column definitions out (a watch's later events).
 */
export const render = (
  resource: Resource,
  objects: ReadonlyArray<JsonObject>,
  listMeta: Record<string, unknown>,
  now: number,
  includeObject: string | null,
  headers = true
): JsonObject => ({
  kind: "Table",
  apiVersion: "meta.k8s.io/v1",
  metadata: listMeta,
  columnDefinitions: headers ? columnDefinitions(resource) : [],
  rows: objects.map((o) => ({
    cells: [nameCell(resource, o), ...resource.printerColumns.map((c) => cell(c, o, now))],
    object:
      includeObject === "None"
        ? null
        : includeObject === "Object"
          ? o
          : { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: meta(o) }
  }))
})

/** A watch event as the watch cache delivers it. */
export interface WatchEvent {
  readonly type: string
  readonly object: object
}

const utf8 = new TextEncoder()

/**
 * The encoder of one watch asked for Tables, as kube-apiserver's watch with `as=Table`: each
 * ADDED, MODIFIED and DELETED event carries its object as a one-row Table, and only the first
 * such Table has the column definitions (kubectl prints the header once and lays later rows out
 * with the columns it kept). BOOKMARK and ERROR events keep their objects. The state (headers sent)
 * is this watch's: unlike plain events, these lines are not shared between watchers.
 */
export const watchEncoder = (resource: Resource, includeObject: string | null): ((event: WatchEvent, now: number) => Uint8Array) => {
  let headers = true
  return (event, now) => {
    if (event.type === "BOOKMARK" || event.type === "ERROR") return utf8.encode(`${JSON.stringify(event)}\n`)
    const object = event.object as JsonObject // a stored object of this resource (the watch cache holds nothing else)
    const table = render(resource, [object], { resourceVersion: meta(object)["resourceVersion"] }, now, includeObject, headers)
    headers = false
    return utf8.encode(`${JSON.stringify({ type: event.type, object: table })}\n`)
  }
}
