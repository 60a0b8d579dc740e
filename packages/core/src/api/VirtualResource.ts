/**
 * A virtual resource: served by the registry (discovery, OpenAPI, routing) but answered by its own
 * handler, with nothing stored. The reviews and accessible namespaces are built with this.
 */
import { Effect, Either, type Schema } from "effect"
import { decodeObject } from "../model/Decode.js"
import * as Status from "../model/Status.js"
import * as ApiError from "./ApiError.js"
import * as Body from "./Body.js"
import type { ApiRequest, ApiResponse } from "./Http.js"
import { checkType } from "./Objects.js"
import type { JsonObject, PrinterColumn, Resource } from "./Registry.js"
import type { ResourceRoute } from "./Router.js"
import * as Strategies from "./Strategies.js"

/** What a virtual resource is. */
export interface VirtualOptions {
  readonly group: string
  readonly version: string
  readonly kind: string
  readonly plural: string
  readonly namespaced?: boolean
  readonly schema: Schema.Schema.AnyNoContext
  readonly printerColumns?: ReadonlyArray<PrinterColumn>
  readonly handle: (request: ApiRequest, route: ResourceRoute) => Effect.Effect<ApiResponse, ApiError.ApiError>
}

/** A virtual resource for the registry. */
export const virtual = (o: VirtualOptions): Resource => ({
  group: o.group,
  version: o.version,
  apiVersion: o.group === "" ? o.version : `${o.group}/${o.version}`,
  kind: o.kind,
  listKind: `${o.kind}List`,
  plural: o.plural,
  singular: o.kind.toLowerCase(),
  namespaced: o.namespaced ?? false,
  shortNames: [],
  categories: [],
  subresources: { status: false, scale: undefined },
  // A virtual resource's Schema is a Struct without context, so it decodes to an object.
  decode: (input, strict) => Either.map(decodeObject(o.schema as Schema.Schema<unknown, unknown, never>, input, { strict }), (x) => x as JsonObject),
  strategy: Strategies.neutral,
  openapi: { _tag: "Schema", schema: o.schema },
  printerColumns: o.printerColumns ?? [],
  crd: undefined,
  handle: o.handle
})

/** 405 unless the request is a create on the collection. */
export const createOnly = (resource: () => Resource, request: ApiRequest, route: ResourceRoute): Effect.Effect<void, ApiError.ApiError> =>
  request.method.toUpperCase() === "POST" && route.name === undefined && route.subresource === undefined
    ? Effect.void
    : Effect.fail(ApiError.of(Status.methodNotSupported({ group: resource().group, resource: resource().plural }, request.method.toLowerCase())))

/**
 * Read, type-check and decode a review body. Its `status` is the server's answer, so what the
 * client sent there is dropped unread, as kube-apiserver does: Go clients (`kubectl auth can-i
 * --list`) send `"resourceRules": null`, which the schema's lists would refuse with a 422.
 */
export const readBody = (resource: Resource, request: ApiRequest): Effect.Effect<JsonObject, ApiError.ApiError> =>
  Effect.gen(function* () {
    const { status: _output, ...body } = yield* Either.flatMap(Body.parse(request.body, request.headers["content-type"]), Body.asObject)
    const typed = yield* checkType(resource, body)
    return yield* Either.mapLeft(resource.decode(typed, false), (errors) => ApiError.of(Status.invalid({ group: resource.group, kind: resource.kind }, "", errors)))
  })
