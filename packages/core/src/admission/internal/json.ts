/**
 * What the admission plugins share beyond `object/`: label maps read as strings only, and
 * reading stored objects straight from the store (plugins need revisions for compare-and-swap).
 */
import { Effect, Either } from "effect"
import * as Keys from "../../store/Keys.js"
import type { KeyValue, StoreService } from "../../store/Store.js"
import * as ApiError from "../../api/ApiError.js"
import { asObject, isJsonObject, type JsonObject } from "../../object/Json.js"
import { metadataOf } from "../../object/Metadata.js"
import type { Transformer } from "../../api/Transformer.js"

/** `v` as a string map, keeping only its string entries (a webhook's patch may have written others). */
export const strings = (v: unknown): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, x] of Object.entries(asObject(v))) if (typeof x === "string") out[k] = x
  return out
}

/** The string-valued labels of an object (a copy; see `strings`). */
export const labels = (o: unknown): Record<string, string> => strings(metadataOf(asObject(o))["labels"])

/** Parse JSON without throwing. */
export const parse = (text: string): Either.Either<unknown, string> =>
  Either.try({ try: () => JSON.parse(text) as unknown, catch: (e) => (e instanceof Error ? e.message : String(e)) })

/** A stored object with its revision (the CAS token). */
export interface Stored {
  readonly key: string
  readonly revision: number
  readonly object: JsonObject
}

const decodeKv = (codec: Transformer, group: string, plural: string, kv: KeyValue): Stored | undefined => {
  // fromStore throws only for an unreadable envelope: such an object is skipped, not fatal.
  const text = Either.try(() => codec.fromStore({ group, plural }, kv.value))
  if (Either.isLeft(text)) return undefined
  const parsed = parse(text.right)
  const o = Either.isRight(parsed) ? parsed.right : undefined
  return !isJsonObject(o) ? undefined : { key: kv.key, revision: kv.modRevision, object: o }
}

const unavailable = (group: string, plural: string, name: string) => (e: { readonly _tag: string }) =>
  ApiError.fromStore(e as never, { resource: { group, resource: plural }, name })

/** One stored object, or undefined when absent. */
export const getObject = (
  store: StoreService,
  codec: Transformer,
  ref: { readonly group: string; readonly plural: string; readonly namespace?: string | undefined; readonly name: string }
): Effect.Effect<Stored | undefined, ApiError.ApiError> =>
  store.get(Keys.object({ group: ref.group, resource: ref.plural, namespace: ref.namespace, name: ref.name })).pipe(
    Effect.map((kv) => decodeKv(codec, ref.group, ref.plural, kv)),
    Effect.catchTag("NotFound", () => Effect.succeed(undefined)),
    Effect.mapError(unavailable(ref.group, ref.plural, ref.name))
  )

/** Every stored object of a resource (in one namespace when given), at one revision. */
export const listObjects = (
  store: StoreService,
  codec: Transformer,
  group: string,
  plural: string,
  namespace?: string
): Effect.Effect<ReadonlyArray<Stored>, ApiError.ApiError> =>
  store.list(Keys.prefix(group, plural, namespace)).pipe(
    Effect.map((page) => page.items.flatMap((kv) => decodeKv(codec, group, plural, kv) ?? [])),
    Effect.mapError(unavailable(group, plural, ""))
  )

/** How many objects of a resource a namespace holds. */
export const countObjects = (store: StoreService, group: string, plural: string, namespace: string): Effect.Effect<number, ApiError.ApiError> =>
  store.count(Keys.prefix(group, plural, namespace)).pipe(Effect.mapError(unavailable(group, plural, "")))
