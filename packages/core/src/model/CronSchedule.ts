/**
 * CronJob schedules as Kubernetes reads them. kube-apiserver and the CronJob controller use
 * robfig/cron's `ParseStandard`: five fields (minute hour day-of-month month day-of-week), the
 * descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly` and
 * `@every <Go duration>`, and an optional `TZ=`/`CRON_TZ=` prefix. This module parses exactly that
 * grammar itself, so invalid schedules get robfig's error text, and hands the parsed fields to
 * `croner` only to compute activation times in a time zone (DST included).
 *
 * What is rejected although croner alone would accept it: six- and seven-field patterns (seconds,
 * years), `L`, `W`, `#` and `+`, day-of-week `7`, and `5/10`-style steps are accepted as robfig
 * does (`N/step` means `N-max/step`). Differences that remain: in a DST gap a fixed-time schedule
 * (`30 2 * * *`) runs at the first valid time after the gap with croner, where robfig skips it;
 * a schedule without a time zone runs in UTC (kube-controller-manager uses its process's local
 * zone, which is UTC in the usual images).
 */
import { Cron } from "croner"
import { Either, Option } from "effect"
import * as Duration from "./Duration.js"

/** A parsed schedule: `next(after)` is the first activation strictly after `after`. */
export interface Schedule {
  /** The schedule text as given. */
  readonly source: string
  /** The zone activations are computed in (`timeZone`, the `TZ=` prefix, or `UTC`). */
  readonly timeZone: string
  /** The first activation strictly after `after`; `undefined` when there is none. */
  readonly next: (after: Date) => Date | undefined
}

interface Bounds {
  readonly min: number
  readonly max: number
  readonly names?: Readonly<Record<string, number>>
}

const months = { jan: 1, feb: 2, mar: 3, apr: 4, may: 5, jun: 6, jul: 7, aug: 8, sep: 9, oct: 10, nov: 11, dec: 12 }
const days = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 }

// robfig's `minutes`, `hours`, `dom`, `months`, `dow` bounds, in field order.
const fields: ReadonlyArray<Bounds> = [
  { min: 0, max: 59 },
  { min: 0, max: 23 },
  { min: 1, max: 31 },
  { min: 1, max: 12, names: months },
  { min: 0, max: 6, names: days }
]

const descriptors: Readonly<Record<string, string>> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@hourly": "0 * * * *"
}

/** One parsed field: the values it matches, and whether it was a `*`/`?` (robfig's star bit). */
interface Field {
  readonly values: ReadonlySet<number>
  readonly star: boolean
}

// Go's strconv.Atoi, with robfig's wording around it.
const parseInt_ = (expr: string): Either.Either<number, string> => {
  if (!/^[+-]?\d+$/.test(expr)) return Either.left(`failed to parse int from ${expr}: strconv.Atoi: parsing ${JSON.stringify(expr)}: invalid syntax`)
  const n = Number(expr)
  if (!Number.isSafeInteger(n)) return Either.left(`failed to parse int from ${expr}: strconv.Atoi: parsing ${JSON.stringify(expr)}: value out of range`)
  if (n < 0) return Either.left(`negative number (${n}) not allowed: ${expr}`)
  return Either.right(n)
}

const parseIntOrName = (expr: string, bounds: Bounds): Either.Either<number, string> => {
  const named = bounds.names?.[expr.toLowerCase()]
  return named !== undefined ? Either.right(named) : parseInt_(expr)
}

// robfig's getRange: `*`, `?`, `N`, `N-M`, each optionally `/step` (`N/step` means `N-max/step`).
const parseRange = (expr: string, bounds: Bounds, into: Set<number>): Either.Either<boolean, string> => {
  const rangeAndStep = expr.split("/")
  const lowAndHigh = rangeAndStep[0]!.split("-")
  let start: number
  let end: number
  let star = false
  if (lowAndHigh[0] === "*" || lowAndHigh[0] === "?") {
    start = bounds.min
    end = bounds.max
    star = true
  } else {
    const s = parseIntOrName(lowAndHigh[0]!, bounds)
    if (Either.isLeft(s)) return Either.left(s.left)
    start = s.right
    if (lowAndHigh.length === 1) end = start
    else if (lowAndHigh.length === 2) {
      const e = parseIntOrName(lowAndHigh[1]!, bounds)
      if (Either.isLeft(e)) return Either.left(e.left)
      end = e.right
    } else return Either.left(`too many hyphens: ${expr}`)
  }
  let step = 1
  if (rangeAndStep.length === 2) {
    const s = parseInt_(rangeAndStep[1]!)
    if (Either.isLeft(s)) return Either.left(s.left)
    step = s.right
    if (lowAndHigh.length === 1) end = bounds.max
    if (step > 1) star = false
  } else if (rangeAndStep.length > 2) return Either.left(`too many slashes: ${expr}`)
  if (start < bounds.min) return Either.left(`beginning of range (${start}) below minimum (${bounds.min}): ${expr}`)
  if (end > bounds.max) return Either.left(`end of range (${end}) above maximum (${bounds.max}): ${expr}`)
  if (start > end) return Either.left(`beginning of range (${start}) beyond end of range (${end}): ${expr}`)
  if (step === 0) return Either.left(`step of range should be a positive number: ${expr}`)
  for (let v = start; v <= end; v += step) into.add(v)
  return Either.right(star)
}

// robfig's getField: comma-separated ranges (empty items are skipped, as strings.FieldsFunc does).
const parseField = (text: string, bounds: Bounds): Either.Either<Field, string> => {
  const values = new Set<number>()
  let star = false
  for (const expr of text.split(",").filter((e) => e !== "")) {
    const r = parseRange(expr, bounds, values)
    if (Either.isLeft(r)) return Either.left(r.left)
    star ||= r.right
  }
  return Either.right({ values, star })
}

// https://data.iana.org/time-zones/theory.html#naming, as kube-apiserver checks it.
const timeZonePartRe = /^[A-Za-z.\-_0-9+]{1,14}$/

/**
 * Why `timeZone` is not usable for `spec.timeZone`, worded like kube-apiserver (Go's
 * `time.LoadLocation` says `unknown time zone X`); `undefined` when it is a known IANA zone.
 */
export const validateTimeZone = (timeZone: string): string | undefined => {
  if (timeZone === "") return "timeZone must be nil or non-empty string"
  for (const part of timeZone.split("/")) {
    if (part === "." || part === ".." || part.startsWith("-") || !timeZonePartRe.test(part)) return `unknown time zone ${timeZone}`
  }
  if (timeZone.toLowerCase() === "local") return "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
  return knownZone(timeZone) ? undefined : `unknown time zone ${timeZone}`
}

const knownZone = (timeZone: string): boolean => {
  try {
    const resolved = new Intl.DateTimeFormat("en-US", { timeZone }).resolvedOptions().timeZone
    // Intl matches names case-insensitively; Go reads zoneinfo files, whose names are exact.
    return !(resolved !== timeZone && resolved.toLowerCase() === timeZone.toLowerCase())
  } catch {
    return false
  }
}

const formatField = (f: Field): string => (f.star ? "*" : [...f.values].sort((a, b) => a - b).join(","))

/**
 * Parses a schedule as `cron.ParseStandard` does; `timeZone` is `spec.timeZone` (a `TZ=` prefix in
 * the schedule wins, as in robfig). The error is robfig's message, ready for a field error.
 */
export const parse = (schedule: string, timeZone?: string): Either.Either<Schedule, string> => {
  if (schedule === "") return Either.left("empty spec string")
  let spec = schedule
  let zone = timeZone ?? "UTC"
  if (spec.startsWith("TZ=") || spec.startsWith("CRON_TZ=")) {
    const space = spec.indexOf(" ")
    const name = spec.slice(spec.indexOf("=") + 1, space < 0 ? undefined : space)
    if (space < 0 || !knownZone(name) || name === "") {
      return Either.left(`provided bad location ${name}: unknown time zone ${name}`)
    }
    zone = name
    spec = spec.slice(space).trim()
  }
  if (timeZone !== undefined && !knownZone(timeZone)) return Either.left(`unknown time zone ${timeZone}`)
  if (spec.startsWith("@")) {
    if (spec.startsWith("@every ")) {
      const d = Duration.parse(spec.slice("@every ".length))
      if (Either.isLeft(d)) return Either.left(`failed to parse duration ${spec}: ${d.left}`)
      // robfig: at least one second, truncated to whole seconds, from the second of `after`.
      const delay = Math.max(1000, d.right) - (Math.max(1000, d.right) % 1000)
      return Either.right({ source: schedule, timeZone: zone, next: (after) => new Date(Math.floor(after.getTime() / 1000) * 1000 + delay) })
    }
    const expanded = descriptors[spec]
    if (expanded === undefined) return Either.left(`unrecognized descriptor: ${spec}`)
    spec = expanded
  }
  const parts = spec.split(/\s+/).filter((p) => p !== "")
  if (parts.length !== 5) return Either.left(`expected exactly 5 fields, found ${parts.length}: [${parts.join(" ")}]`)
  const parsed: Array<Field> = []
  for (const [i, part] of parts.entries()) {
    const f = parseField(part, fields[i]!)
    if (Either.isLeft(f)) return Either.left(f.left)
    parsed.push(f.right)
  }
  // croner gets a canonical pattern: a star stays `*` (so its day-of-month/day-of-week rule,
  // AND when either is a star and OR otherwise, is robfig's), everything else an explicit list.
  let cron: Cron
  try {
    cron = new Cron(parsed.map(formatField).join(" "), { mode: "5-part", timezone: zone })
  } catch (e) {
    // Not expected for a pattern that passed the parser above; croner throws, this module does not.
    return Either.left(e instanceof Error ? e.message : String(e))
  }
  return Either.right({ source: schedule, timeZone: zone, next: (after) => nextRun(cron, after) })
}

const nextRun = (cron: Cron, after: Date): Date | undefined => {
  try {
    return cron.nextRun(after) ?? undefined
  } catch {
    return undefined
  }
}

/** robfig's error for an invalid schedule, or `undefined` when it parses. */
export const validate = (schedule: string): string | undefined => {
  const r = parse(schedule)
  return Either.isLeft(r) ? r.left : undefined
}

/**
 * The first activation of `schedule` strictly after `date`, in `timeZone` (UTC when unset);
 * `None` when the schedule is invalid or never fires again (e.g. `0 0 30 2 *`).
 */
export const nextAfter = (schedule: string, timeZone: string | undefined, date: Date): Option.Option<Date> =>
  Either.match(parse(schedule, timeZone), { onLeft: () => Option.none(), onRight: (s) => Option.fromNullable(s.next(date)) })
