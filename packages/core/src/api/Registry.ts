/**
 * The registry of served resources: for each, its names (group, version, plural, kind, short
 * names), scope, subresources, how to decode and validate a body, and its strategy (defaulting,
 * update rules). Built-in kinds come from `model/Kinds`; CustomResourceDefinitions add and remove
 * entries at run time, so routing and discovery always read the registry, never a fixed table.
 */
import { type Effect, Either, Schema } from "effect"
import type { ApiError } from "./ApiError.js"
import type { ApiRequest, ApiResponse } from "./Http.js"
import type { ResourceRoute } from "./Router.js"
import { decodeObject } from "../model/Decode.js"
import type * as FieldError from "../model/FieldError.js"
import * as Kinds from "../model/Kinds.js"
import * as Strategies from "./Strategies.js"

/** A JSON object as the API stores and serves it. */
export type { JsonObject } from "../object/Json.js"
import type { JsonObject } from "../object/Json.js"

/** A kind's behaviour, Table columns and `/scale` paths (defined apart so the strategies need not import the registry). */
export type { PrinterColumn, ScaleSpec, Strategy } from "./Strategy.js"
import type { PrinterColumn, ScaleSpec, Strategy } from "./Strategy.js"

/** One served resource. */
export interface Resource {
  readonly group: string
  readonly version: string
  readonly apiVersion: string
  readonly kind: string
  readonly listKind: string
  readonly plural: string
  readonly singular: string
  readonly namespaced: boolean
  readonly shortNames: ReadonlyArray<string>
  readonly categories: ReadonlyArray<string>
  readonly subresources: { readonly status: boolean; readonly scale: ScaleSpec | undefined }
  /** Decode an untrusted body; strict mode reports unknown fields as `Unknown field` errors. */
  readonly decode: (input: unknown, strict: boolean) => Either.Either<JsonObject, ReadonlyArray<FieldError.FieldError>>
  /**
   * Decode only the `status` of an untrusted body (`{status}` in, `{status}` out), for writes of
   * the status subresource, which keep everything else of the stored object: a kubelet's status
   * update decoded and validated its pod's whole spec for nothing. Absent: `decode` the whole.
   */
  readonly decodeStatus?: (input: unknown, strict: boolean) => Either.Either<JsonObject, ReadonlyArray<FieldError.FieldError>>
  readonly strategy: Strategy
  /** The schema, for OpenAPI: an effect Schema (built-ins) or an OpenAPI v3 schema (CRDs). */
  readonly openapi: { readonly _tag: "Schema"; readonly schema: Schema.Schema.AnyNoContext } | { readonly _tag: "JsonSchema"; readonly schema: JsonObject }
  readonly printerColumns: ReadonlyArray<PrinterColumn>
  /** Set for resources defined by a CustomResourceDefinition (its name). */
  readonly crd: string | undefined
  /**
   * Set for virtual resources (SelfSubjectAccessReview, computed lists): the handler answers every
   * request on the resource itself, after authentication and authorization; nothing is stored.
   */
  readonly handle?: (request: ApiRequest, route: ResourceRoute) => Effect.Effect<ApiResponse, ApiError>
  /** The verbs discovery lists, when fewer than `verbs` (read-only virtual resources). */
  readonly verbs?: ReadonlyArray<string>
}

/** The verbs every resource supports (and `watch`), as discovery lists them. */
export const verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"] as const

/** `decodeStatus` for a kind whose schema is a struct with a `status` field. */
const statusDecoder = (schema: Schema.Schema.AnyNoContext): Pick<Resource, "decodeStatus"> => {
  const fields = (schema as { readonly fields?: Readonly<Record<string, Schema.Struct.Field>> }).fields
  const status = fields?.["status"]
  if (status === undefined) return {}
  // Typed as a decoder of unknown input, as `decodeObject` takes it.
  const only = Schema.Struct({ status }) as unknown as Schema.Schema<unknown, unknown, never>
  return { decodeStatus: (input, strict) => Either.map(decodeObject(only, input, { strict }), (o) => o as JsonObject) } // a Struct decodes to an object
}

/** A built-in kind as a served resource. */
export const builtIn = (info: Kinds.KindInfo): Resource => {
  const strategy = Strategies.forKind(info.apiVersion, info.kind)
  return {
    group: info.group,
    version: info.version,
    apiVersion: info.apiVersion,
    kind: info.kind,
    listKind: info.listKind,
    plural: info.plural,
    singular: info.singular,
    namespaced: info.namespaced,
    shortNames: info.shortNames,
    categories: Strategies.categories(info.kind),
    subresources: Strategies.subresources(info.kind),
    decode: (input, strict) =>
      // Every built-in kind's Schema is a Struct without context, so it decodes to an object.
      Either.map(decodeObject(info.schema as Schema.Schema<unknown, unknown, never>, input, { strict }), (o) => o as JsonObject),
    ...statusDecoder(info.schema),
    strategy,
    openapi: { _tag: "Schema", schema: info.schema },
    printerColumns: Strategies.printerColumns(info.kind),
    crd: undefined
  }
}

/** The served resources; mutable so CRDs can come and go. */
export interface Registry {
  readonly all: () => ReadonlyArray<Resource>
  /** By group, version and plural (`""`, `"v1"`, `"pods"`). */
  readonly byResource: (group: string, version: string, plural: string) => Resource | undefined
  /** By apiVersion and kind. */
  readonly byKind: (apiVersion: string, kind: string) => Resource | undefined
  /** Add or replace a resource (CRDs). */
  readonly put: (resource: Resource) => void
  /** Remove a resource (CRD deleted). */
  readonly remove: (group: string, version: string, plural: string) => void
  /** Called after every change, e.g. to drop cached discovery documents. */
  readonly onChange: (listener: () => void) => () => void
}

/** A registry holding the built-in kinds. */
export const make = (options: { readonly federation?: boolean } = {}): Registry => {
  const resources = new Map<string, Resource>()
  const kinds = new Map<string, Resource>()
  const listeners = new Set<() => void>()
  const rkey = (g: string, v: string, p: string) => `${g}/${v}/${p}`
  const put = (r: Resource) => {
    resources.set(rkey(r.group, r.version, r.plural), r)
    kinds.set(`${r.apiVersion}/${r.kind}`, r)
  }
  for (const info of Kinds.all) put(builtIn(info))
  if (options.federation === true) for (const info of Kinds.federation) put(builtIn(info))
  const changed = () => {
    for (const l of listeners) l()
  }
  return {
    all: () => [...resources.values()],
    byResource: (g, v, p) => resources.get(rkey(g, v, p)),
    byKind: (apiVersion, kind) => kinds.get(`${apiVersion}/${kind}`),
    put: (r) => {
      put(r)
      changed()
    },
    remove: (g, v, p) => {
      const r = resources.get(rkey(g, v, p))
      if (!r) return
      resources.delete(rkey(g, v, p))
      kinds.delete(`${r.apiVersion}/${r.kind}`)
      changed()
    },
    onChange: (listener) => {
      listeners.add(listener)
      return () => listeners.delete(listener)
    }
  }
}
