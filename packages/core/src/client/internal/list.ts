/** Lists: one page, or every page by following the `continue` token. */
import { Effect } from "effect"
import type * as ApiError from "../../api/ApiError.js"
import { type JsonObject, asString } from "../../object/Json.js"
import { metadataOf, resourceVersionOf } from "../../object/Metadata.js"
import type { ResourceRef } from "../../object/ResourceRefs.js"
import type { ListOptions } from "../Client.js"
import { type Rest, path, query, request } from "./rest.js"

/** LIST one page. */
export const list = (
  rest: Rest,
  ref: ResourceRef,
  options: ListOptions = {}
): Effect.Effect<JsonObject, ApiError.ApiError> =>
  request(rest, "GET", `${path(ref, options.namespace)}${query(options)}`)

/** Every item across pages (following `continue`), and the resourceVersion of the last page. */
export const listAll = (
  rest: Rest,
  ref: ResourceRef,
  options: ListOptions = {}
): Effect.Effect<{ items: Array<JsonObject>; resourceVersion: string }, ApiError.ApiError> =>
  Effect.gen(function* () {
    const items: Array<JsonObject> = []
    let token: string | undefined
    let resourceVersion = ""
    do {
      const page = yield* list(rest, ref, { ...options, ...(token ? { continue: token } : {}) })
      items.push(...((page["items"] as Array<JsonObject> | undefined) ?? []))
      token = asString(metadataOf(page)["continue"]) || undefined
      resourceVersion = resourceVersionOf(page)
    } while (token)
    return { items, resourceVersion }
  })
