/**
 * Kubernetes resource quantities (`100m`, `1.5Gi`, `1e3`): exact parsing, arithmetic and
 * canonical formatting, plus the schema for `resources.requests`/`limits` and node capacity.
 *
 * A quantity is held as a bigint count of nano-units. Kubernetes itself rounds every parsed
 * quantity up to nano precision, so this is exact for every value Kubernetes can represent:
 * decimal fractions times any SI or binary suffix from `n` to `Ei` are whole numbers of nanos.
 */
import { Either, ParseResult, Schema } from "effect"
import { stringMap } from "./internal/fields.js"
import { QuantityParseError } from "./ModelError.js"

// Defined in the model layer's error module; re-exported so `Quantity.QuantityParseError` stays.
export { QuantityParseError }

/** How a quantity was written, which decides how `format` writes it back. */
export type Format = "DecimalSI" | "BinarySI" | "DecimalExponent"

/** A parsed quantity: `nanos` × 10⁻⁹ units, and the notation to format it in. */
export interface Quantity {
  readonly nanos: bigint
  readonly format: Format
}

const decimalSuffixes: Readonly<Record<string, number>> = {
  n: -9,
  u: -6,
  m: -3,
  "": 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18
}
const binarySuffixes: Readonly<Record<string, number>> = { Ki: 1, Mi: 2, Gi: 3, Ti: 4, Pi: 5, Ei: 6 }
const binarySuffixByPower = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"] as const
const decimalSuffixByExponent: Readonly<Record<number, string>> = {
  [-9]: "n",
  [-6]: "u",
  [-3]: "m",
  0: "",
  3: "k",
  6: "M",
  9: "G",
  12: "T",
  15: "P",
  18: "E"
}

// Exponents beyond this would only build enormous bigints from a short hostile string; no real
// resource needs more than 10^1000 of anything.
const maxExponent = 1000

const numberRe = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$/s
const exponentRe = /^[eE]([+-]?[0-9]+)$/

const pow10 = (n: number): bigint => 10n ** BigInt(n)
const nanoUnit = 1_000_000_000n

/** Parses a quantity string exactly, rounding below-nano precision up as Kubernetes does. */
export const parse = (input: string): Either.Either<Quantity, QuantityParseError> => {
  const fail = (reason: string) => Either.left(new QuantityParseError({ input, reason }))
  if (input.length === 0) return fail("quantity is empty")
  const m = numberRe.exec(input)
  const sign = m?.[1] ?? ""
  const whole = m?.[2] ?? ""
  const fraction = m?.[3] ?? ""
  const suffix = m?.[4] ?? ""
  if (m === null || whole.length + fraction.length === 0) return fail("unable to parse numeric part of quantity")

  let exponent: number
  let binaryPower = 0
  let format: Format
  const decimal = decimalSuffixes[suffix]
  const binary = binarySuffixes[suffix]
  if (decimal !== undefined) {
    exponent = decimal
    format = "DecimalSI"
  } else if (binary !== undefined) {
    exponent = 0
    binaryPower = binary
    format = "BinarySI"
  } else {
    const e = exponentRe.exec(suffix)
    if (e === null) {
      return /^[0-9.]/.test(suffix)
        ? fail("unable to parse numeric part of quantity")
        : fail("unable to parse quantity's suffix")
    }
    exponent = Number(e[1])
    if (Math.abs(exponent) > maxExponent) return fail(`exponent must be between -${maxExponent} and ${maxExponent}`)
    format = "DecimalExponent"
  }

  // value = digits × 10^(shift - 9) nanos; shift folds the fraction and the decimal exponent.
  const digits = BigInt(whole + fraction) * 1024n ** BigInt(binaryPower)
  const shift = exponent + 9 - fraction.length
  let nanos: bigint
  if (shift >= 0) {
    nanos = digits * pow10(shift)
  } else {
    const divisor = pow10(-shift)
    nanos = digits / divisor
    // Round up rather than to nearest, so a tiny non-zero request never becomes zero.
    if (nanos * divisor !== digits) nanos += 1n
  }
  return Either.right({ nanos: sign === "-" ? -nanos : nanos, format })
}

/** A quantity from a whole number of milli-units (CPU millicores, the scheduler's unit). */
export const fromMilli = (milli: number | bigint, format: Format = "DecimalSI"): Quantity => ({
  nanos: BigInt(milli) * 1_000_000n,
  format
})

/** A quantity from a whole number of units (bytes, pods). */
export const fromUnits = (units: number | bigint, format: Format = "DecimalSI"): Quantity => ({
  nanos: BigInt(units) * nanoUnit,
  format
})

/** -1, 0 or 1 as `a` is less than, equal to or greater than `b`. */
export const compare = (a: Quantity, b: Quantity): -1 | 0 | 1 => (a.nanos < b.nanos ? -1 : a.nanos > b.nanos ? 1 : 0)

/** Whether two quantities are numerically equal, whatever their notation. */
export const equals = (a: Quantity, b: Quantity): boolean => a.nanos === b.nanos

/** The sum, in `a`'s notation (as Kubernetes' `Add` keeps the receiver's format). */
export const add = (a: Quantity, b: Quantity): Quantity => ({ nanos: a.nanos + b.nanos, format: a.format })

/** The difference `a - b`, in `a`'s notation. */
export const sub = (a: Quantity, b: Quantity): Quantity => ({ nanos: a.nanos - b.nanos, format: a.format })

/** Whether the quantity is zero. */
export const isZero = (q: Quantity): boolean => q.nanos === 0n

/** The zero quantity. */
export const zero: Quantity = { nanos: 0n, format: "DecimalSI" }

// Kubernetes' ScaledValue rounds away from zero, so converting never under-reports a request.
const scaledUp = (nanos: bigint, unit: bigint): bigint => {
  const q = nanos / unit
  return q * unit === nanos ? q : nanos < 0n ? q - 1n : q + 1n
}

/** The value in milli-units, rounded away from zero (Kubernetes `MilliValue`), as a number. */
export const toMilli = (q: Quantity): number => Number(scaledUp(q.nanos, 1_000_000n))

/** The value in whole units, rounded away from zero (Kubernetes `Value`), as a number. */
export const toUnits = (q: Quantity): number => Number(scaledUp(q.nanos, nanoUnit))

const abs = (n: bigint): bigint => (n < 0n ? -n : n)

/**
 * The canonical string Kubernetes serialises: `1500m`, `1Gi`, `1536Mi`, `1e3`. Binary notation
 * is kept only for whole values of at least 1024 (smaller or fractional ones would need
 * rounding, so they switch to decimal), and decimal mantissas use exponents in steps of 3.
 */
export const format = (q: Quantity): string => {
  if (q.nanos === 0n) return "0"
  if (q.format === "BinarySI" && abs(q.nanos) >= 1024n * nanoUnit && q.nanos % nanoUnit === 0n) {
    let value = q.nanos / nanoUnit
    let power = 0
    while (power < 6 && value % 1024n === 0n) {
      value /= 1024n
      power++
    }
    return `${value}${binarySuffixByPower[power] ?? ""}`
  }
  let mantissa = q.nanos
  let exponent = -9
  while (mantissa % 10n === 0n) {
    mantissa /= 10n
    exponent++
  }
  while (exponent % 3 !== 0) {
    mantissa *= 10n
    exponent--
  }
  if (q.format === "DecimalExponent") return exponent === 0 ? `${mantissa}` : `${mantissa}e${exponent}`
  if (exponent > 18) {
    // No SI suffix beyond E: widen the mantissa instead.
    mantissa *= pow10(exponent - 18)
    exponent = 18
  }
  return `${mantissa}${decimalSuffixByExponent[exponent] ?? ""}`
}

/**
 * A quantity field: accepts a JSON string or number, rejects invalid quantities, and decodes
 * to the canonical string (as kube-apiserver echoes `0.5` back as `500m`). Objects stay plain
 * JSON; callers `parse` when they need arithmetic.
 */
export const QuantitySchema = Schema.transformOrFail(Schema.Union(Schema.String, Schema.Number), Schema.String, {
  strict: true,
  decode: (input, _options, ast) =>
    Either.match(parse(typeof input === "number" ? String(input) : input), {
      onLeft: (e) => ParseResult.fail(new ParseResult.Type(ast, input, e.reason)),
      onRight: (q) => ParseResult.succeed(format(q))
    }),
  encode: (s) => ParseResult.succeed(s)
})

/** A map of resource name (`cpu`, `memory`, `nvidia.com/gpu`) to quantity. */
export const ResourceList = stringMap(QuantitySchema)

/** A map of resource name to canonical quantity string. */
export type ResourceList = typeof ResourceList.Type
