/**
 * Go's `time.ParseDuration`, the one parser of Go duration strings in core: a possibly signed
 * sequence of decimal numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`,
 * `ms`, `s`, `m`, `h`), such as `300ms`, `-1.5h` or `2h45m`; `0` alone needs no unit. Values are
 * milliseconds (fractions of one for `us` and `ns`); errors carry Go's text.
 */
import { Either } from "effect"

const unitMs: Readonly<Record<string, number>> = { ns: 1e-6, us: 1e-3, "µs": 1e-3, "μs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** Milliseconds of a Go duration string, or Go's error text (`time: invalid duration "x"`). */
export const parse = (text: string): Either.Either<number, string> => {
  const quoted = JSON.stringify(text)
  let s = text
  let sign = 1
  if (s.startsWith("-") || s.startsWith("+")) {
    sign = s.startsWith("-") ? -1 : 1
    s = s.slice(1)
  }
  if (s === "0") return Either.right(0)
  if (s === "") return Either.left(`time: invalid duration ${quoted}`)
  let total = 0
  while (s !== "") {
    const m = /^(\d*)(?:\.(\d*))?/.exec(s)!
    const [number, whole = "", fraction] = m
    if (whole === "" && (fraction === undefined || fraction === "")) return Either.left(`time: invalid duration ${quoted}`)
    s = s.slice(number.length)
    const unit = /^[^\d.]*/.exec(s)![0]
    if (unit === "") return Either.left(`time: missing unit in duration ${quoted}`)
    const scale = unitMs[unit]
    if (scale === undefined) return Either.left(`time: unknown unit ${JSON.stringify(unit)} in duration ${quoted}`)
    total += Number(`${whole || "0"}.${fraction ?? ""}0`) * scale
    s = s.slice(unit.length)
  }
  return Either.right(sign * total)
}

/** Milliseconds of a Go duration string, or undefined when Go would refuse it. */
export const toMillis = (text: string): number | undefined => Either.getOrUndefined(parse(text))
