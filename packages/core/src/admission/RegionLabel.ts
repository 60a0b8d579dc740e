/**
 * RegionLabel admission: every object carries `fleet.koder.dev/region` (DESIGN §3), defaulted to
 * the server's region on create and immutable afterwards. `Objects.prepareCreate` and
 * `prepareUpdate` apply the same rules for servers that run without admission, and before any
 * plugin runs; this plugin sits after the mutating webhooks, so it is the last word: a label a
 * webhook dropped is restored, and a webhook that changes it gets the request refused.
 */
import { Effect, Either } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import * as FieldError from "../model/FieldError.js"
import * as Meta from "../model/Meta.js"
import * as Status from "../model/Status.js"
import type { JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import { labels } from "./internal/json.js"

/** The plugin's name. */
export const name = "RegionLabel"

const withLabel = (o: JsonObject, region: string): JsonObject => ({
  ...o,
  metadata: { ...metadataOf(o), labels: { ...labels(o), [Meta.RegionLabel]: region } }
})

/** The admitted object (pure): the label defaulted on create, kept on update, never changed. */
export const decide = (
  request: Pick<Admission.Request, "operation" | "object" | "oldObject">,
  region: string
): Either.Either<JsonObject, FieldError.FieldError> => {
  const current = labels(request.object)[Meta.RegionLabel]
  if (request.operation === "CREATE") return Either.right(current === undefined ? withLabel(request.object, region) : request.object)
  if (request.operation !== "UPDATE" || request.oldObject === undefined) return Either.right(request.object)
  const old = labels(request.oldObject)[Meta.RegionLabel]
  if (old === undefined) return Either.right(current === undefined ? withLabel(request.object, region) : request.object)
  if (current === undefined) return Either.right(withLabel(request.object, old))
  if (current !== old) return Either.left(FieldError.invalid(`metadata.labels[${Meta.RegionLabel}]`, current, "field is immutable"))
  return Either.right(request.object)
}

/** The plugin for a server in `region`. */
export const make = (options: { readonly region: string }): Admission.Plugin => ({
  name,
  mutate: (request) => {
    const decided = decide(request, options.region)
    return Either.isRight(decided)
      ? Effect.succeed(decided.right)
      : Effect.fail(ApiError.of(Status.invalid({ group: request.resource.group, kind: request.resource.kind }, request.name, [decided.left])))
  }
})
