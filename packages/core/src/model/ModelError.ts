/**
 * The model layer's failures, as tagged errors: parsing the string forms of quantities and label
 * selectors. Decoding and validating objects report `FieldError`s instead (data, not failures).
 */
import { Data } from "effect"

/** A string that is not a valid quantity; `message` names the input and the reason. */
export class QuantityParseError extends Data.TaggedError("QuantityParseError")<{
  readonly input: string
  readonly reason: string
}> {
  override get message() {
    return `invalid quantity ${JSON.stringify(this.input)}: ${this.reason}`
  }
}

/** A `?labelSelector=` string that could not be parsed; `position` is the 0-based offset. */
export class LabelSelectorParseError extends Data.TaggedError("LabelSelectorParseError")<{
  readonly input: string
  readonly position: number
  readonly reason: string
}> {
  override get message() {
    return `unable to parse requirement: ${this.reason} at position ${this.position} in ${JSON.stringify(this.input)}`
  }
}
