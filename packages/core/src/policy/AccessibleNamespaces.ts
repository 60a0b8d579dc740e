/**
 * Scoped namespace discovery: `GET /apis/fleet.koder.dev/v1/accessiblenamespaces` lists the
 * namespaces the caller reaches through RoleBindings (every namespace when the caller may list
 * namespaces cluster-wide), for users who may not list namespaces themselves, e.g. a customer
 * whose console needs a namespace picker. Every authenticated user may call it
 * (`fleet:namespace-discovery`).
 *
 * The answer is an `AccessibleNamespaceList` (apiVersion `fleet.koder.dev/v1`) of minimal
 * Namespace-like `AccessibleNamespace` items: `metadata` (name, uid, creationTimestamp, labels,
 * resourceVersion) and `status.phase`. Only existing namespaces are listed; `GET .../{name}` answers
 * one or 404; `kubectl get accessiblenamespaces` gets a Table. Nothing is stored; there is no watch.
 */
import { Effect, Schema } from "effect"
import { optional } from "../model/internal/fields.js"
import { ObjectMeta } from "../model/Meta.js"
import * as Status from "../model/Status.js"
import * as Keys from "../store/Keys.js"
import type { KeyValue, StoreService } from "../store/Store.js"
import * as ApiError from "../api/ApiError.js"
import { json } from "../api/Http.js"
import * as Objects from "../api/Objects.js"
import type { JsonObject, Resource } from "../api/Registry.js"
import * as Table from "../api/Table.js"
import type { Evaluator } from "./RbacEvaluator.js"
import { virtual } from "../api/VirtualResource.js"
import { asObject } from "../object/Json.js"

/** The group and version of Fleet's own API. */
export const Group = "fleet.koder.dev"
export const Version = "v1"

/** One namespace the caller can reach. */
export const AccessibleNamespace = Schema.Struct({
  apiVersion: Schema.Literal(`${Group}/${Version}`),
  kind: Schema.Literal("AccessibleNamespace"),
  metadata: ObjectMeta,
  status: optional(Schema.Struct({ phase: optional(Schema.String) }))
})

/** An AccessibleNamespace. */
export type AccessibleNamespace = typeof AccessibleNamespace.Type

type Json = Record<string, unknown>

const minimal = (ns: JsonObject): JsonObject => {
  const m = Objects.meta(ns)
  const metadata: Json = {}
  for (const k of ["name", "uid", "creationTimestamp", "labels", "resourceVersion"]) if (m[k] !== undefined) metadata[k] = m[k]
  const phase = asObject(ns["status"])["phase"]
  return { apiVersion: `${Group}/${Version}`, kind: "AccessibleNamespace", metadata, ...(phase === undefined ? {} : { status: { phase } }) }
}

const readNamespaces = (store: StoreService) =>
  Effect.gen(function* () {
    const prefix = Keys.prefix("", "namespaces")
    const first = yield* store.list(prefix, { limit: 1000 })
    const items: Array<KeyValue> = [...first.items]
    let token = first.continue
    while (token !== undefined) {
      const next = yield* store.list(prefix, { limit: 1000, continue: token })
      items.push(...next.items)
      token = next.continue
    }
    const objects: Array<JsonObject> = []
    for (const kv of items) {
      try {
        objects.push(Objects.fromStored(kv))
      } catch {
        // An unreadable value names no namespace a caller could use.
      }
    }
    return { revision: first.revision, objects }
  }).pipe(Effect.mapError((e) => ApiError.fromStore(e, { resource: "namespaces", name: "" })))

/** The `accessiblenamespaces` virtual resource. */
export const accessibleNamespaces = (evaluator: Evaluator, store: StoreService): Resource => {
  const resource: Resource = virtual({
    group: Group,
    version: Version,
    kind: "AccessibleNamespace",
    plural: "accessiblenamespaces",
    schema: AccessibleNamespace,
    printerColumns: [{ name: "Status", type: "string", value: ".status.phase" }, { name: "Age", type: "date", value: ".metadata.creationTimestamp" }],
    handle: (request, route) =>
      Effect.gen(function* () {
        const watching = route.watchPath || request.query.get("watch") === "true" || request.query.get("watch") === "1"
        if (request.method.toUpperCase() !== "GET" || route.subresource !== undefined || watching) {
          return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group: Group, resource: "accessiblenamespaces" }, watching ? "watch" : request.method.toLowerCase())))
        }
        const reach = evaluator.namespaces(request.user)
        const allowed = new Set(reach.namespaces)
        const { revision, objects } = yield* readNamespaces(store)
        const items = objects.filter((ns) => reach.all || allowed.has(String(Objects.meta(ns)["name"]))).map(minimal)
        if (route.name !== undefined) {
          const one = items.find((ns) => Objects.meta(ns)["name"] === route.name)
          if (one === undefined) return yield* Effect.fail(ApiError.of(Status.notFound({ group: Group, resource: "accessiblenamespaces" }, route.name)))
          return json(200, one)
        }
        const listMeta = { resourceVersion: String(revision) }
        if (Table.wanted(request.headers["accept"])) {
          const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
          return json(200, Table.render(resource, items, listMeta, now, request.query.get("includeObject")), { "content-type": Table.contentType })
        }
        return json(200, { apiVersion: `${Group}/${Version}`, kind: "AccessibleNamespaceList", metadata: listMeta, items })
      })
  })
  return resource
}
