/**
 * CustomResourceDefinitions: turning a CRD into served resources, and keeping the registry in
 * step with the CRDs in the store. Custom objects are pruned to their OpenAPI v3 schema (unless
 * it preserves unknown fields) and validated with Ajv, a well-kept JSON Schema validator; errors
 * come back as Kubernetes field errors. Deleting a CRD deletes its objects first (the
 * `customresourcecleanup` finalizer), as kube-apiserver does.
 */
import Ajv, { type ErrorObject, type ValidateFunction } from "ajv"
import addFormats from "ajv-formats"
import { Effect, Either, Schedule, Stream } from "effect"
import { decodeObject } from "../model/Decode.js"
import * as FieldError from "../model/FieldError.js"
import * as Meta from "../model/Meta.js"
import * as Keys from "../store/Keys.js"
import type { StoreService } from "../store/Store.js"
import { isJsonObject } from "../object/Json.js"
import * as Objects from "./Objects.js"
import type { JsonObject, PrinterColumn, Registry, Resource, Strategy } from "./Registry.js"
import * as Strategies from "./Strategies.js"

/** The finalizer that makes a CRD's deletion wait until its objects are gone. */
export const cleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

/** Where CRDs live in the store. */
export const crdPrefix = Keys.prefix("apiextensions.k8s.io", "customresourcedefinitions")

// CRD schemas and custom objects are arbitrary JSON: `obj` tells an absent part from an empty one.
type Json = JsonObject
const obj = (v: unknown): Json | undefined => (isJsonObject(v) ? v : undefined)

/** Kubernetes' x-kubernetes-* extensions, rewritten into plain JSON Schema for Ajv. */
const toJsonSchema = (schema: unknown): unknown => {
  const s = obj(schema)
  if (!s) return schema
  const out: Json = {}
  for (const [k, v] of Object.entries(s)) {
    if (k.startsWith("x-kubernetes-")) continue
    if (k === "properties" || k === "patternProperties" || k === "definitions") {
      out[k] = Object.fromEntries(Object.entries(obj(v) ?? {}).map(([p, sub]) => [p, toJsonSchema(sub)]))
    } else if (k === "items" || k === "additionalProperties" || k === "not") {
      out[k] = typeof v === "boolean" ? v : toJsonSchema(v)
    } else if (k === "allOf" || k === "anyOf" || k === "oneOf") {
      out[k] = Array.isArray(v) ? v.map(toJsonSchema) : v
    } else {
      out[k] = v
    }
  }
  if (s["x-kubernetes-int-or-string"] === true) {
    delete out["type"]
    out["anyOf"] = [{ type: "integer" }, { type: "string" }]
  }
  return out
}

/** Drop fields the schema does not declare; report their paths. */
export const prune = (value: unknown, schema: unknown, path: string, unknown: Array<string>, root = false): unknown => {
  const s = obj(schema)
  if (!s || s["x-kubernetes-preserve-unknown-fields"] === true && !s["properties"]) return value
  if (Array.isArray(value)) {
    return s["items"] ? value.map((v, i) => prune(v, s["items"], `${path}[${i}]`, unknown)) : value
  }
  const o = obj(value)
  if (!o) return value
  const properties = obj(s["properties"])
  const additional = s["additionalProperties"]
  const preserve = s["x-kubernetes-preserve-unknown-fields"] === true
  const out: Json = {}
  for (const [k, v] of Object.entries(o)) {
    const child = path === "" ? k : `${path}.${k}`
    if (root && (k === "apiVersion" || k === "kind" || k === "metadata")) out[k] = v
    else if (properties && k in properties) out[k] = prune(v, properties[k], child, unknown)
    else if (obj(additional)) out[k] = prune(v, additional, `${path}[${k}]`, unknown)
    else if (additional === true || preserve || (!properties && !s["type"])) out[k] = v
    else unknown.push(child)
  }
  return out
}

const ajv = new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: false })
// `format:` keywords (date-time, email, uuid, ipv4, ...) are checked, as kube-apiserver checks them.
addFormats(ajv)

const toFieldErrors = (errors: ReadonlyArray<ErrorObject>, value: unknown): Array<FieldError.FieldError> =>
  errors.map((e) => {
    const parts = e.instancePath.split("/").slice(1).map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
    const path = parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc === "" ? p : `${acc}.${p}`), "")
    if (e.keyword === "required") {
      const missing = String((e.params as { missingProperty?: string }).missingProperty)
      return FieldError.required(path === "" ? missing : `${path}.${missing}`)
    }
    const actual = parts.reduce<unknown>((v, p) => (typeof v === "object" && v !== null ? Reflect.get(v, p) : undefined), value)
    if (e.keyword === "enum") {
      return FieldError.notSupported(path, actual, ((e.params as { allowedValues?: Array<unknown> }).allowedValues ?? []).map(String))
    }
    return FieldError.invalid(path, actual, `${path} in body ${e.message ?? "is invalid"}`)
  })

const compile = (schema: unknown): ValidateFunction | undefined => {
  if (!obj(schema)) return undefined
  return ajv.compile(toJsonSchema(schema) as object)
}

/** Evaluate a simple printer-column JSONPath (`.spec.replicas`, `.status.conditions[0].type`). */
const jsonPath = (path: string) => (o: JsonObject): unknown => {
  const parts = path.replace(/^\{?\.?/, "").replace(/\}$/, "").split(/\.|\[(\d+)\]/).filter((p) => p !== undefined && p !== "")
  return parts.reduce<unknown>((v, p) => (typeof v === "object" && v !== null ? Reflect.get(v, p) : undefined), o)
}

const crStrategy = (hasStatus: boolean): Strategy => ({
  ...Strategies.neutral,
  tracksGeneration: true,
  prepareForCreate: (o) => (hasStatus ? (({ status: _s, ...rest }) => rest)(o) : o)
})

/** The resources a CRD serves: one per served version (none while its names are not valid). */
export const resourcesOf = (crd: JsonObject): ReadonlyArray<Resource> => {
  const spec = obj(crd["spec"])
  const names = obj(spec?.["names"])
  if (!spec || !names) return []
  const group = String(spec["group"])
  const kind = String(names["kind"])
  const plural = String(names["plural"])
  return ((spec["versions"] as Array<Json> | undefined) ?? [])
    .filter((v) => v["served"] === true)
    .map((v): Resource => {
      const schema = obj(obj(v["schema"])?.["openAPIV3Schema"]) ?? { type: "object", "x-kubernetes-preserve-unknown-fields": true }
      const validate = compile(schema)
      const sub = obj(v["subresources"])
      const scale = obj(sub?.["scale"])
      const hasStatus = obj(sub?.["status"]) !== undefined
      const strip = (p: unknown) => String(p).replace(/^\./, "")
      const columns: Array<PrinterColumn> = ((v["additionalPrinterColumns"] as Array<Json> | undefined) ?? []).map((c) => ({
        name: String(c["name"]),
        type: c["type"] as PrinterColumn["type"],
        value: jsonPath(String(c["jsonPath"])),
        description: String(c["description"] ?? ""),
        priority: Number(c["priority"] ?? 0)
      }))
      return {
        group,
        version: String(v["name"]),
        apiVersion: `${group}/${String(v["name"])}`,
        kind,
        listKind: String(names["listKind"] ?? `${kind}List`),
        plural,
        singular: String(names["singular"] ?? kind.toLowerCase()),
        namespaced: spec["scope"] === "Namespaced",
        shortNames: (names["shortNames"] as Array<string> | undefined) ?? [],
        categories: (names["categories"] as Array<string> | undefined) ?? [],
        subresources: {
          status: hasStatus,
          scale: scale
            ? {
                specReplicasPath: strip(scale["specReplicasPath"]),
                statusReplicasPath: strip(scale["statusReplicasPath"]),
                labelSelectorPath: scale["labelSelectorPath"] === undefined ? undefined : strip(scale["labelSelectorPath"])
              }
            : undefined
        },
        decode: (input, strict) => {
          const o = obj(input)
          if (!o) return Either.left([FieldError.invalid("", input, "must be an object")])
          const unknown: Array<string> = []
          const pruned = prune(o, schema, "", unknown, true) as Json // pruning an object yields an object
          const errors: Array<FieldError.FieldError> = []
          if (strict) errors.push(...unknown.map(FieldError.unknownField))
          const metadata = decodeObject(Meta.ObjectMeta, pruned["metadata"] ?? {}, { strict })
          if (Either.isLeft(metadata)) errors.push(...FieldError.prefix("metadata", metadata.left))
          const body: Json = { ...pruned }
          delete body["apiVersion"]
          delete body["kind"]
          delete body["metadata"]
          if (validate && !validate(body)) errors.push(...toFieldErrors(validate.errors ?? [], body))
          if (errors.length > 0) return Either.left(errors)
          return Either.right<JsonObject>({ apiVersion: o["apiVersion"], kind: o["kind"], ...body, metadata: Either.getOrThrow(metadata) })
        },
        strategy: crStrategy(hasStatus),
        openapi: { _tag: "JsonSchema", schema },
        printerColumns: columns,
        crd: String(Objects.meta(crd)["name"])
      }
    })
}

/** Make the registry serve exactly the CRDs in the store; returns the CRDs read. */
export const sync = (store: StoreService, registry: Registry) =>
  Effect.gen(function* () {
    const crds: Array<JsonObject> = []
    let token: string | undefined
    do {
      const page = yield* store.list(crdPrefix, token === undefined ? { limit: 500 } : { limit: 500, continue: token })
      for (const kv of page.items) crds.push(Objects.fromStored(kv))
      token = page.continue
    } while (token)
    const wanted = crds.flatMap(resourcesOf)
    const key = (r: Resource) => `${r.group}/${r.version}/${r.plural}`
    const wantedKeys = new Set(wanted.map(key))
    for (const r of registry.all()) if (r.crd !== undefined && !wantedKeys.has(key(r))) registry.remove(r.group, r.version, r.plural)
    for (const r of wanted) {
      const existing = registry.byResource(r.group, r.version, r.plural)
      if (existing?.crd === undefined && existing !== undefined) continue // never shadow a built-in
      if (!existing || JSON.stringify(existing.openapi) !== JSON.stringify(r.openapi) || existing.printerColumns.length !== r.printerColumns.length || existing.subresources.status !== r.subresources.status || existing.namespaced !== r.namespaced) {
        registry.put(r)
      }
    }
    return crds
  })

/** Delete the objects of CRDs being deleted, then let the CRDs go. */
export const cleanup = (store: StoreService, crds: ReadonlyArray<JsonObject>) =>
  Effect.forEach(
    crds.filter((c) => Objects.meta(c)["deletionTimestamp"] !== undefined && Objects.finalizers(c).includes(cleanupFinalizer)),
    (crd) =>
      Effect.gen(function* () {
        const spec = obj(crd["spec"]) ?? {}
        const prefix = Keys.prefix(String(spec["group"]), String(obj(spec["names"])?.["plural"]))
        for (;;) {
          const page = yield* store.list(prefix, { limit: 500 })
          if (page.items.length === 0) break
          yield* Effect.forEach(page.items, (kv) => Effect.ignore(store.delete(kv.key)), { concurrency: 16 })
        }
        const name = String(Objects.meta(crd)["name"])
        const key = Keys.object({ group: "apiextensions.k8s.io", resource: "customresourcedefinitions", name })
        const current = yield* store.get(key)
        const rest = Objects.finalizers(Objects.fromStored(current)).filter((f) => f !== cleanupFinalizer)
        if (rest.length === 0) yield* store.delete(key, current.modRevision)
        else {
          const o = Objects.fromStored(current)
          const stored = Objects.toStored(Objects.withMeta(o, { ...Objects.meta(o), finalizers: rest }))
          if (Either.isRight(stored)) yield* store.update(key, stored.right, current.modRevision)
        }
      }).pipe(Effect.ignore),
    { discard: true }
  )

/** Keep the registry in step with CRDs for as long as the effect runs (in the server's scope). */
export const run = (store: StoreService, registry: Registry) =>
  Effect.gen(function* () {
    const from = yield* store.currentRevision
    const crds = yield* sync(store, registry)
    yield* cleanup(store, crds)
    yield* store.watch(crdPrefix, from).pipe(
      Stream.debounce("20 millis"),
      Stream.runForEach(() => Effect.flatMap(sync(store, registry), (all) => cleanup(store, all)))
    )
  }).pipe(Effect.retry(Schedule.spaced("1 second")), Effect.ignore)
