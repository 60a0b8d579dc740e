/**
 * How far the JavaScript heap may grow past what was live at the last full collection before the
 * next one. V8 sizes that by the machine's memory, up to several times the live heap on a large
 * host, and a control plane's heap is then mostly garbage that survived a young-generation
 * collection or two on its way through a request. Fleet caps the growth at 2× by default: the
 * peak RSS falls by about a third for a throughput cost within the benchmark's noise (the
 * measurements: docs/performance.md, "V8: heap growth cap").
 *
 * `FLEET_HEAP_GROWTH_PERCENT` changes the cap (0: V8's own sizing). V8 reads the setting at each
 * full collection, so it applies from the process's first one on.
 */
import { setFlagsFromString } from "node:v8"
import * as V8Setting from "./V8Setting.js"

/** The default cap: the heap may grow to twice its live size (100% more). */
export const DefaultPercent = 100

/** The cap from `FLEET_HEAP_GROWTH_PERCENT`, or the default; undefined when it is 0 (V8 decides). */
export const percentFrom = (value: string | undefined): number | undefined => V8Setting.parse(value, DefaultPercent)

/** Apply the cap to this process (once, before the heap grows). */
export const limit = (env: NodeJS.ProcessEnv = process.env): number | undefined => {
  const percent = percentFrom(env["FLEET_HEAP_GROWTH_PERCENT"])
  if (percent !== undefined) setFlagsFromString(`--heap-growing-percent=${percent}`)
  return percent
}
