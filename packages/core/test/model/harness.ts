// The API server's create and update pipeline for one object, without a store: strict decoding,
// server metadata, defaults, prepareForCreate and validation, as `Rest.create` runs them.
import { Either } from "effect"
import * as Objects from "../../src/api/Objects.js"
import * as Registry from "../../src/api/Registry.js"
import type { JsonObject } from "../../src/api/Registry.js"

const registry = Registry.make()

const resourceOf = (o: Record<string, unknown>): Registry.Resource => {
  const r = registry.byKind(String(o["apiVersion"]), String(o["kind"]))
  if (r === undefined) throw new Error(`not a built-in kind: ${String(o["apiVersion"])}/${String(o["kind"])}`)
  return r
}

const lines = (e: { status: { message?: string; details?: { causes?: ReadonlyArray<{ field?: string; message?: string }> } } }) =>
  e.status.details?.causes?.map((c) => `${c.field}: ${c.message}`) ?? [e.status.message ?? ""]

/** Creation time of every object made here. */
export const now = Date.parse("2024-05-01T10:00:00Z")

/** The stored object a create would write, or its errors as `path: message` lines. */
export const create = (object: Record<string, unknown>, uid = "0b5e7a36-1111-4c1d-9c4e-000000000001"): Either.Either<JsonObject, ReadonlyArray<string>> => {
  const r = resourceOf(object)
  const decoded = r.decode(object, true)
  if (Either.isLeft(decoded)) return Either.left(decoded.left.map((e) => `${e.path}: ${e.message}`))
  const namespace = r.namespaced ? String((object["metadata"] as Record<string, unknown> | undefined)?.["namespace"] ?? "default") : undefined
  const prepared = Objects.prepareCreate(r, decoded.right, { namespace, now, uid, region: "local", random: () => 0 })
  return Either.mapLeft(prepared, lines)
}

/** The created object; fails the test with the errors otherwise. */
export const created = (object: Record<string, unknown>, uid?: string): any => {
  const r = create(object, uid)
  if (Either.isLeft(r)) throw new Error(`expected a valid object, got:\n${r.left.join("\n")}`)
  return r.right
}

/** The errors of creating `object` (empty when it is valid). */
export const createErrors = (object: Record<string, unknown>): ReadonlyArray<string> => {
  const r = create(object)
  return Either.isLeft(r) ? r.left : []
}

/** The errors of updating `old` (a stored object) to `object` (empty when allowed). */
export const updateErrors = (object: Record<string, unknown>, old: JsonObject, target: Objects.UpdateTarget = "main"): ReadonlyArray<string> => {
  const r = resourceOf(object)
  const decoded = r.decode(object, true)
  if (Either.isLeft(decoded)) return decoded.left.map((e) => `${e.path}: ${e.message}`)
  const next = Objects.prepareUpdate(r, decoded.right, old, target)
  if (Either.isLeft(next)) return lines(next.left)
  // Rest.commitUpdate validates again after admission; a status update is only checked there.
  const errors = [...r.strategy.validate(next.right), ...r.strategy.validateUpdate(next.right, old)]
  return errors.map((e) => `${e.path}: ${e.message}`)
}
