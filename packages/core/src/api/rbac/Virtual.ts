/**
 * A virtual resource: served by the registry (discovery, OpenAPI, routing) but answered by its own
 * handler, with nothing stored. The reviews and accessible namespaces are built with this.
 */
import { type Effect, Either, type Schema } from "effect"
import { decodeObject } from "../../model/Decode.js"
import type * as ApiError from "../ApiError.js"
import type { ApiRequest, ApiResponse } from "../Http.js"
import type { JsonObject, PrinterColumn, Resource } from "../Registry.js"
import type { ResourceRoute } from "../Router.js"
import * as Strategies from "../Strategies.js"

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
  decode: (input, strict) => Either.map(decodeObject(o.schema as Schema.Schema<unknown, unknown, never>, input, { strict }), (x) => x as JsonObject),
  strategy: Strategies.neutral,
  openapi: { _tag: "Schema", schema: o.schema },
  printerColumns: o.printerColumns ?? [],
  crd: undefined,
  handle: o.handle
})
