/**
 * `IntOrString`: a field that holds either an integer or a string, such as a Service's
 * `targetPort` (`8080` or `"http"`) or a rollout's `maxSurge` (`1` or `"25%"`).
 */
import { Either, Schema } from "effect"
import { Int32 } from "./Scalars.js"

/** An integer or a string, decoded as the JSON type that was sent. */
export const IntOrString = Schema.Union(Int32, Schema.String)

/** An integer or a string. */
export type IntOrString = typeof IntOrString.Type

const percentRe = /^[0-9]+%$/

/**
 * A non-negative integer or a percentage string like `"25%"` (rollout `maxSurge`,
 * `maxUnavailable`, disruption budgets).
 */
export const IntOrPercent = Schema.Union(
  Int32.pipe(Schema.filter((n) => n >= 0 || "must be greater than or equal to 0")),
  Schema.String.pipe(
    Schema.filter(
      (s) =>
        percentRe.test(s) ||
        "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
    )
  )
)

/** A non-negative integer or a percentage string. */
export type IntOrPercent = typeof IntOrPercent.Type

/**
 * Resolves an int-or-percent against `total` like Kubernetes' `GetScaledValueFromIntOrPercent`:
 * integers pass through, percentages scale and round up or down (rollouts round surge up and
 * unavailability down so a rollout always makes progress).
 */
export const scaledValue = (value: IntOrString, total: number, roundUp: boolean): Either.Either<number, string> => {
  if (typeof value === "number") return Either.right(value)
  if (!value.endsWith("%")) return Either.left(`invalid value for IntOrString: invalid type: string is not a percentage`)
  const digits = value.slice(0, -1)
  if (!/^-?[0-9]+$/.test(digits)) return Either.left(`invalid value for IntOrString: invalid value "${value}"`)
  const scaled = (Number(digits) * total) / 100
  return Either.right(roundUp ? Math.ceil(scaled) : Math.floor(scaled))
}
