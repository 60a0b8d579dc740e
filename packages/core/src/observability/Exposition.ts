/**
 * Prometheus' text exposition format (version 0.0.4), what `/metrics` answers: per family a
 * `# HELP` and a `# TYPE` line, then one line per sample; histograms as cumulative `_bucket`
 * series with an `le` label ending in `+Inf`, then `_sum` and `_count`.
 *
 *   Family[] ─▶ render ─▶ "# HELP x …\n# TYPE x counter\nx{verb=\"GET\"} 3\n…"
 *
 * Escaping follows the format: in HELP text a backslash and a newline; in label values a
 * backslash, a double quote and a newline.
 */
import type { Family } from "./MetricRegistry.js"

/** The `Content-Type` of the text format. */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

/** Escape HELP text. */
export const escapeHelp = (text: string): string => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

/** Escape a label value. */
export const escapeLabelValue = (text: string): string => text.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

/** A sample value as the format writes it (`+Inf`, `-Inf`, `NaN`, else the shortest decimal). */
export const formatValue = (value: number): string =>
  Number.isNaN(value) ? "NaN" : value === Number.POSITIVE_INFINITY ? "+Inf" : value === Number.NEGATIVE_INFINITY ? "-Inf" : String(value)

const labelText = (labels: ReadonlyArray<readonly [string, string]>): string =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(",")}}`

/** Render families in the text format (ends with a newline). */
export const render = (families: ReadonlyArray<Family>): string => {
  const lines: Array<string> = []
  for (const f of families) {
    lines.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`)
    if (f.type === "histogram") {
      for (const s of f.series) {
        for (const [le, count] of s.buckets) lines.push(`${f.name}_bucket${labelText([...s.labels, ["le", formatValue(le)]])} ${count}`)
        const l = labelText(s.labels)
        lines.push(`${f.name}_sum${l} ${formatValue(s.sum)}`, `${f.name}_count${l} ${s.count}`)
      }
    } else for (const s of f.series) lines.push(`${f.name}${labelText(s.labels)} ${formatValue(s.value)}`)
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`
}
