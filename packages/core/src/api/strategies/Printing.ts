/**
 * What the built-in Table columns share, as kubectl's printers (`pkg/printers/internalversion`)
 * share it: the Age column, kubectl's human durations, and the wide Containers/Images/Selector
 * columns of workloads. Columns read stored objects through typed views; the leaf readers here
 * stay total (a value of an unexpected type prints as kubectl prints a zero value) because a
 * mutating webhook's output is stored without a second decode.
 */
import * as LabelSelector from "../../model/LabelSelector.js"
import { asArray, asObject, isJsonObject, type JsonObject } from "../../object/Json.js"
import type { PrinterColumn } from "../Strategy.js"

/** The Age column every kind has. */
export const age: PrinterColumn = { name: "Age", type: "date", value: ".metadata.creationTimestamp" }

/** A value as printed text ("" when absent). */
export const str = (v: unknown): string => (typeof v === "string" ? v : v === undefined || v === null ? "" : String(v))

/** A count as printed (0 unless a number). */
export const num = (v: unknown): number => (typeof v === "number" ? v : 0)

/** kubectl's `duration.HumanDuration` (`45s`, `3m20s`, `5h10m`, `3d4h`, `2y30d`). */
export const humanDuration = (ms: number): string => {
  const seconds = Math.trunc(ms / 1000)
  if (seconds < -1) return "<invalid>"
  if (seconds < 0) return "0s"
  if (seconds < 120) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`
  if (minutes < 180) return `${minutes}m`
  const hours = Math.floor(minutes / 60)
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`
  if (hours < 48) return `${hours}h`
  if (hours < 24 * 8) return hours % 24 === 0 ? `${hours / 24}d` : `${Math.floor(hours / 24)}d${hours % 24}h`
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`
  const years = Math.floor(hours / 24 / 365)
  const days = Math.floor(hours / 24) % 365
  if (hours < 24 * 365 * 8) return days === 0 ? `${years}y` : `${years}y${days}d`
  return `${years}y`
}

// Printer values get no clock; like kubectl's printers (time.Since), the few that need "now"
// (a running Job's duration, a CronJob's last schedule) read the wall clock.
/** The human duration since an RFC 3339 time, or undefined when there is none. */
export const sinceTimestamp = (t: unknown): string | undefined => (typeof t === "string" ? humanDuration(Date.now() - Date.parse(t)) : undefined)

/** `Terminating` while the object is being deleted, else its phase. */
export const phaseOrTerminating = (o: JsonObject, phase: unknown): string =>
  asObject(o["metadata"])["deletionTimestamp"] ? "Terminating" : str(phase)

/** A label selector as kubectl prints it (`<none>` when absent or empty). */
export const selectorText = (selector: unknown): string =>
  isJsonObject(selector) ? LabelSelector.formatSelector(selector as LabelSelector.LabelSelector) || "<none>" : "<none>" // an object here passed the LabelSelector schema when written

/** A label map as `k=v,…` sorted by key (`<none>` when empty). */
export const labelsText = (labels: unknown): string =>
  Object.entries(asObject(labels))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${str(v)}`)
    .join(",") || "<none>"

const containerNames = (podSpec: JsonObject) => asArray(podSpec["containers"]).map((c) => str(asObject(c)["name"])).join(",")
const containerImages = (podSpec: JsonObject) => asArray(podSpec["containers"]).map((c) => str(asObject(c)["image"])).join(",")

/** The pod spec of a workload's `spec.template` ({} when absent). */
export const podTemplateSpec = (o: JsonObject): JsonObject => asObject(asObject(asObject(o["spec"])["template"])["spec"])

/** `kubectl get -o wide`'s Containers, Images and Selector columns of a workload. */
export const workloadWide = (podSpec: (o: JsonObject) => JsonObject, withSelector = true): ReadonlyArray<PrinterColumn> => [
  { name: "Containers", type: "string", value: (o) => containerNames(podSpec(o)), priority: 1 },
  { name: "Images", type: "string", value: (o) => containerImages(podSpec(o)), priority: 1 },
  ...(withSelector ? [{ name: "Selector", type: "string", value: (o: JsonObject) => selectorText(asObject(o["spec"])["selector"]), priority: 1 } as const] : [])
]
