/**
 * Schema building blocks shared by the kind modules; not part of the public model API.
 */
import { Schema } from "effect"

/**
 * An optional field as Kubernetes clients send it: absent, or `null` (kubectl emits
 * `creationTimestamp: null`), both decode to an absent key, so `exactOptionalPropertyTypes`
 * types stay `field?: T` without `| undefined`.
 */
export const optional = <S extends Schema.Schema.All>(schema: S) =>
  Schema.optionalWith(schema, { exact: true, nullable: true })

/** A record of string keys to `value`, the shape of labels, nodeSelector, data maps. */
export const stringMap = <V extends Schema.Schema.Any>(value: V) => Schema.Record({ key: Schema.String, value })

/** A string map with plain string values. */
export const StringMap = stringMap(Schema.String)

/** Turns detail strings from a validator into filter failures at the filtered value itself. */
export const details = (messages: ReadonlyArray<string>): ReadonlyArray<string> | true =>
  messages.length === 0 ? true : messages

/** An array that must have at least one element; Kubernetes reports an empty one as required. */
export const nonEmptyArray = <S extends Schema.Schema.Any>(item: S) =>
  Schema.Array(item).pipe(Schema.filter((a) => a.length > 0 || "Required value"))

/** A string that must not be empty; Kubernetes reports `""` as a missing value. */
export const RequiredString = Schema.String.pipe(Schema.filter((s) => s.length > 0 || "Required value"))
