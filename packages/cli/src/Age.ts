/**
 * Durations as kubectl prints them: short ages in tables (`45s`, `12m`, `5h`, `3d`) and the
 * finer human form `describe` uses (`5m30s`, `2d3h`). Pure: "now" is an argument.
 */

/** kubectl's `HumanDuration`: two units of precision below a day or so. */
export const human = (ms: number): string => {
  const seconds = Math.floor(Math.max(0, ms) / 1000)
  if (seconds < 60 * 2) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`
  if (minutes < 60 * 3) return `${minutes}m`
  const hours = Math.floor(minutes / 60)
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`
  if (hours < 48) return `${hours}h`
  if (hours < 24 * 8) return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`
  return `${Math.floor(hours / 24 / 365)}y`
}

/** The age of an RFC 3339 timestamp at `now`, or `<unknown>`. */
export const since = (timestamp: unknown, now: number): string => {
  if (typeof timestamp !== "string" || timestamp === "") return "<unknown>"
  const t = Date.parse(timestamp)
  return Number.isNaN(t) ? "<invalid>" : human(now - t)
}

/** A `--since` style duration (`10s`, `5m`, `1h30m`) in seconds, or undefined when malformed. */
export const parseDuration = (text: string): number | undefined => {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy
  let total = 0
  let m: RegExpExecArray | null
  let consumed = 0
  while ((m = re.exec(text)) !== null) {
    const n = Number(m[1])
    total += m[2] === "ms" ? n / 1000 : m[2] === "s" ? n : m[2] === "m" ? n * 60 : n * 3600
    consumed = re.lastIndex
  }
  if (text === "0") return 0
  return consumed === text.length && consumed > 0 ? total : undefined
}
