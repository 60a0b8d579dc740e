/**
 * The OpenAPI documents kube-apiserver publishes, generated from the registry: `/openapi/v2`
 * (Swagger 2.0, every kind) and `/openapi/v3` (an index of group versions, then one OpenAPI 3.0
 * document per group version). Built-in kinds' schemas come from their effect Schemas through
 * `JSONSchema.make`, rewritten into the dialect each spec allows and named as Kubernetes names
 * them (`io.k8s.api.core.v1.Pod`); CRDs bring their own OpenAPI v3 schema. kubectl reads these for
 * `explain` and for the merge keys of client-side apply, so list fields carry
 * `x-kubernetes-patch-merge-key` like Kubernetes' own. Documents are memoized per registry change.
 */
import { Either, JSONSchema, type Schema } from "effect"
import { ListMeta, ObjectMeta } from "../model/Meta.js"
import { Status } from "../model/Status.js"
import * as ApiError from "./ApiError.js"
import * as Discovery from "./Discovery.js"
import type { Registry, Resource } from "./Registry.js"

/** A JSON object. */
export type Json = Record<string, unknown>

type Target = "v2" | "v3"

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

// ---- Names ---------------------------------------------------------------------------------

const metaPrefix = "io.k8s.apimachinery.pkg.apis.meta.v1"

/** Definition names of the shared types every document references. */
export const names = {
  objectMeta: `${metaPrefix}.ObjectMeta`,
  listMeta: `${metaPrefix}.ListMeta`,
  status: `${metaPrefix}.Status`,
  deleteOptions: `${metaPrefix}.DeleteOptions`,
  patch: `${metaPrefix}.Patch`,
  scale: "io.k8s.api.autoscaling.v1.Scale"
} as const

/**
 * The definition name Kubernetes gives a kind: its Go package for built-ins
 * (`io.k8s.api.core.v1.Pod`, `io.k8s.api.coordination.v1.Lease`), the reversed group for CRDs
 * (`com.example.stable.v1.CronTab`).
 */
export const definitionName = (r: Pick<Resource, "group" | "version" | "kind" | "crd">): string => {
  if (r.crd !== undefined) return `${r.group.split(".").reverse().join(".")}.${r.version}.${r.kind}`
  if (r.group === "") return `io.k8s.api.core.${r.version}.${r.kind}`
  if (r.group === "apiextensions.k8s.io") return `io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.${r.version}.${r.kind}`
  return `io.k8s.api.${r.group.split(".")[0] ?? r.group}.${r.version}.${r.kind}`
}

/** The definition name of a kind's list (`io.k8s.api.core.v1.PodList`). */
export const listDefinitionName = (r: Pick<Resource, "group" | "version" | "listKind" | "crd">): string =>
  definitionName({ group: r.group, version: r.version, kind: r.listKind, crd: r.crd })

/** The key of a group version in `/openapi/v3`: `api/v1`, `apis/apps/v1`. */
export const groupVersionKey = (group: string, version: string): string => (group === "" ? `api/${version}` : `apis/${group}/${version}`)

const gvk = (group: string, version: string, kind: string) => [{ group, kind, version }]

// ---- Schema dialects -----------------------------------------------------------------------

// Kubernetes' strategic-merge list fields: field → candidate merge keys (the first the item
// schema has wins, so `ports` is keyed by containerPort in containers and by port in services).
const mergeKeys: Readonly<Record<string, ReadonlyArray<string>>> = {
  containers: ["name"],
  initContainers: ["name"],
  ephemeralContainers: ["name"],
  env: ["name"],
  volumes: ["name"],
  volumeMounts: ["mountPath"],
  volumeDevices: ["devicePath"],
  ports: ["containerPort", "port"],
  imagePullSecrets: ["name"],
  conditions: ["type"],
  addresses: ["type"],
  hostAliases: ["ip"],
  topologySpreadConstraints: ["topologyKey"],
  ownerReferences: ["uid"]
}

const patchExtensions = (field: string, schema: Json): Json => {
  if (schema["type"] !== "array") return schema
  const items = isObject(schema["items"]) ? schema["items"] : {}
  if (field === "finalizers" && items["type"] === "string") return { ...schema, "x-kubernetes-patch-strategy": "merge" }
  const itemProps = isObject(items["properties"]) ? items["properties"] : {}
  const key = mergeKeys[field]?.find((k) => k in itemProps)
  return key === undefined ? schema : { ...schema, "x-kubernetes-patch-merge-key": key, "x-kubernetes-patch-strategy": "merge" }
}

// JSON Schema keywords neither Swagger 2.0 nor OpenAPI 3.0 know (or that only describe JSON Schema documents).
const dropped = new Set([
  "$schema",
  "$id",
  "$comment",
  "$defs",
  "definitions",
  "examples",
  "additionalItems",
  "patternProperties",
  "propertyNames",
  "contains",
  "dependencies",
  "contentEncoding",
  "contentMediaType",
  "if",
  "then",
  "else"
])

const isNullSchema = (s: unknown) => isObject(s) && s["type"] === "null"
const isIntOrString = (members: ReadonlyArray<Json>) =>
  members.length === 2 &&
  members.some((m) => m["type"] === "string" && m["enum"] === undefined) &&
  members.some((m) => (m["type"] === "number" || m["type"] === "integer") && m["enum"] === undefined)

/** A plain JSON value, or undefined for anything JSON cannot carry (functions, bigints, NaN). */
const plainJson = (v: unknown): unknown => {
  if (v === null || typeof v === "string" || typeof v === "boolean") return v
  if (typeof v === "number") return Number.isFinite(v) ? v : undefined
  if (Array.isArray(v)) return v.map(plainJson).filter((x) => x !== undefined)
  if (isObject(v)) {
    const out: Json = {}
    for (const [k, x] of Object.entries(v)) {
      const p = plainJson(x)
      if (p !== undefined) out[k] = p
    }
    return out
  }
  return undefined
}

/**
 * Rewrite a JSON Schema (draft-07 from effect, or a CRD's OpenAPI v3 schema) into the dialect of
 * `target`: nullable unions collapse to their type (Kubernetes treats null as absent), string|number
 * unions become `int-or-string`, closed objects open (kube-apiserver drops unknown fields instead),
 * `$defs` references point into the document's definitions (`defPath` + `defPrefix` + name).
 */
const convert = (node: unknown, target: Target, defPath: string, defPrefix: string): Json => {
  if (!isObject(node)) return {}
  const out: Json = {}
  let members: Array<Json> | undefined
  for (const [key, value] of Object.entries(node)) {
    if (dropped.has(key)) continue
    switch (key) {
      case "$ref":
        if (typeof value === "string") out["$ref"] = value.startsWith("#/$defs/") ? `${defPath}${defPrefix}${value.slice(8)}` : value
        break
      case "type":
        if (typeof value === "string") {
          if (value !== "null") out["type"] = value
        } else if (Array.isArray(value)) {
          const types = value.filter((t) => t !== "null")
          if (types.length === 1) out["type"] = types[0]
        }
        break
      case "const":
        out["enum"] = [plainJson(value)]
        break
      case "required":
        if (Array.isArray(value) && value.length > 0) out["required"] = value.filter((v) => typeof v === "string")
        break
      case "properties":
        if (isObject(value) && Object.keys(value).length > 0) {
          const props: Json = {}
          for (const [name, prop] of Object.entries(value)) props[name] = patchExtensions(name, convert(prop, target, defPath, defPrefix))
          out["properties"] = props
        }
        break
      case "additionalProperties":
        if (value === true) out["additionalProperties"] = true
        else if (isObject(value)) out["additionalProperties"] = convert(value, target, defPath, defPrefix)
        break
      case "items":
        if (isObject(value)) out["items"] = convert(value, target, defPath, defPrefix)
        else if (Array.isArray(value)) out["items"] = {}
        break
      case "anyOf":
      case "oneOf":
        if (Array.isArray(value)) members = [...(members ?? []), ...value.filter((m) => !isNullSchema(m)).map((m) => convert(m, target, defPath, defPrefix))]
        break
      case "allOf":
        if (Array.isArray(value)) out["allOf"] = value.map((m) => convert(m, target, defPath, defPrefix))
        break
      case "not":
        if (target === "v3") out["not"] = convert(value, target, defPath, defPrefix)
        break
      case "nullable":
        if (target === "v3" && value === true) out["nullable"] = true
        break
      case "exclusiveMinimum":
      case "exclusiveMaximum":
        // draft-07 puts the bound here; Swagger 2.0 and OpenAPI 3.0 put it in minimum/maximum.
        if (typeof value === "number") {
          out[key === "exclusiveMinimum" ? "minimum" : "maximum"] = value
          out[key] = true
        } else if (typeof value === "boolean") out[key] = value
        break
      default: {
        const plain = plainJson(value)
        if (plain !== undefined) out[key] = plain
      }
    }
  }
  if (members !== undefined) {
    // A CRD's structural int-or-string: OpenAPI 3.0 keeps its anyOf; Swagger 2.0 has no anyOf, the extension says it.
    if (node["x-kubernetes-int-or-string"] === true) return target === "v3" ? { ...out, anyOf: members } : out
    if (members.length === 1) return { ...members[0], ...out }
    if (isIntOrString(members)) return { ...out, type: "string", format: "int-or-string" }
    if (target === "v3" && members.length > 1) return { ...out, anyOf: members }
  }
  return out
}

// ---- Schemas of kinds ----------------------------------------------------------------------

interface Converted {
  readonly schema: Json
  /** Named sub-schemas the schema references (effect `identifier` annotations), by full name. */
  readonly defs: Readonly<Record<string, Json>>
}

// Effect schemas are shared by every registry, so their JSON Schemas and conversions are kept
// per schema object: `JSONSchema.make` is the slow step (tens of ms for a Pod).
const made = new WeakMap<object, Json | undefined>()
const converted: Record<Target, WeakMap<object, Converted>> = { v2: new WeakMap(), v3: new WeakMap() }

const defPathOf = (target: Target) => (target === "v2" ? "#/definitions/" : "#/components/schemas/")
const refTo = (target: Target, name: string) => ({ $ref: `${defPathOf(target)}${name}` })

const fleetPrefix = "io.k8s.fleet."

const jsonSchemaOf = (schema: Schema.Schema.AnyNoContext): Json | undefined => {
  if (made.has(schema)) return made.get(schema)
  // JSONSchema.make throws on schemas it cannot express (declarations without annotations);
  // such a kind is published as an open object rather than failing the whole document.
  const result = Either.try(() => JSONSchema.make(schema) as unknown)
  const root = Either.isRight(result) && isObject(result.right) ? result.right : undefined
  made.set(schema, root)
  return root
}

const convertEffect = (schema: Schema.Schema.AnyNoContext, target: Target): Converted => {
  const root = jsonSchemaOf(schema)
  if (root === undefined) return { schema: { type: "object" }, defs: {} }
  const rawDefs = isObject(root["$defs"]) ? root["$defs"] : {}
  const defs: Record<string, Json> = {}
  for (const [name, def] of Object.entries(rawDefs)) defs[`${fleetPrefix}${name}`] = convert(def, target, defPathOf(target), fleetPrefix)
  // A top-level identifier makes the root itself a reference; inline it.
  const ref = root["$ref"]
  const body = typeof ref === "string" && ref.startsWith("#/$defs/") && isObject(rawDefs[ref.slice(8)]) ? rawDefs[ref.slice(8)] : root
  return { schema: convert(body, target, defPathOf(target), fleetPrefix), defs }
}

const cachedEffect = (schema: Schema.Schema.AnyNoContext, target: Target): Converted => {
  const hit = converted[target].get(schema)
  if (hit) return hit
  const result = convertEffect(schema, target)
  converted[target].set(schema, result)
  return result
}

const cachedJson = (schema: Json, target: Target): Converted => {
  const hit = converted[target].get(schema)
  if (hit) return hit
  const result = { schema: convert(schema, target, defPathOf(target), fleetPrefix), defs: {} }
  converted[target].set(schema, result)
  return result
}

const withTypeMeta = (schema: Json, target: Target): Json => {
  const properties = isObject(schema["properties"]) ? schema["properties"] : {}
  return {
    ...schema,
    type: "object",
    properties: {
      ...properties,
      apiVersion: { ...(isObject(properties["apiVersion"]) ? properties["apiVersion"] : { type: "string" }) },
      kind: { ...(isObject(properties["kind"]) ? properties["kind"] : { type: "string" }) },
      // Every kind shares one ObjectMeta definition, as in Kubernetes (kubectl explain names it).
      metadata: refTo(target, names.objectMeta)
    }
  }
}

/** A kind's schema in `target`'s dialect, with its GVK extension, plus the definitions it references. */
const kindSchema = (r: Resource, target: Target): Converted => {
  const c = r.openapi._tag === "Schema" ? cachedEffect(r.openapi.schema, target) : cachedJson(r.openapi.schema, target)
  return {
    schema: { ...withTypeMeta(c.schema, target), "x-kubernetes-group-version-kind": gvk(r.group, r.version, r.kind) },
    defs: c.defs
  }
}

const listSchema = (r: Resource, target: Target): Json => ({
  description: `${r.listKind} is a list of ${r.kind}.`,
  type: "object",
  required: ["items"],
  properties: {
    apiVersion: { type: "string" },
    kind: { type: "string" },
    metadata: refTo(target, names.listMeta),
    items: { type: "array", items: refTo(target, definitionName(r)) }
  },
  "x-kubernetes-group-version-kind": gvk(r.group, r.version, r.listKind)
})

const metaSchemas = (target: Target): Record<string, Json> => {
  const objectMeta = cachedEffect(ObjectMeta, target)
  const listMeta = cachedEffect(ListMeta, target)
  const status = cachedEffect(Status, target)
  return {
    ...objectMeta.defs,
    ...listMeta.defs,
    ...status.defs,
    [names.objectMeta]: objectMeta.schema,
    [names.listMeta]: listMeta.schema,
    [names.status]: { ...status.schema, "x-kubernetes-group-version-kind": gvk("", "v1", "Status") },
    [names.patch]: { description: "A patch: JSON Patch, JSON Merge Patch or strategic merge patch, by content type.", type: "object" },
    [names.deleteOptions]: {
      description: "Options of a DELETE.",
      type: "object",
      properties: {
        apiVersion: { type: "string" },
        kind: { type: "string" },
        gracePeriodSeconds: { type: "integer", format: "int64" },
        propagationPolicy: { type: "string", enum: ["Orphan", "Background", "Foreground"] },
        preconditions: { type: "object", properties: { resourceVersion: { type: "string" }, uid: { type: "string" } } },
        orphanDependents: { type: "boolean" },
        dryRun: { type: "array", items: { type: "string" } }
      },
      "x-kubernetes-group-version-kind": gvk("", "v1", "DeleteOptions")
    }
  }
}

const scaleSchema = (target: Target): Json => ({
  description: "Scale represents a scaling request for a resource.",
  type: "object",
  properties: {
    apiVersion: { type: "string" },
    kind: { type: "string" },
    metadata: refTo(target, names.objectMeta),
    spec: { type: "object", properties: { replicas: { type: "integer", format: "int32" } } },
    status: {
      type: "object",
      required: ["replicas"],
      properties: { replicas: { type: "integer", format: "int32" }, selector: { type: "string" } }
    }
  },
  "x-kubernetes-group-version-kind": gvk("autoscaling", "v1", "Scale")
})

/** The definitions for a set of resources: their kinds, lists, and the shared meta types. */
const definitionsFor = (resources: ReadonlyArray<Resource>, target: Target): Record<string, Json> => {
  const defs: Record<string, Json> = metaSchemas(target)
  for (const r of resources) {
    const k = kindSchema(r, target)
    Object.assign(defs, k.defs)
    defs[definitionName(r)] = k.schema
    defs[listDefinitionName(r)] = listSchema(r, target)
    if (r.subresources.scale) defs[names.scale] = scaleSchema(target)
  }
  return defs
}

// ---- Paths ---------------------------------------------------------------------------------

interface Param {
  readonly name: string
  readonly in: "path" | "query"
  readonly type: "string" | "integer" | "boolean"
  readonly description: string
}

interface Operation {
  readonly method: "get" | "post" | "put" | "patch" | "delete"
  readonly operationId: string
  readonly description: string
  readonly action: "get" | "list" | "post" | "put" | "patch" | "delete" | "deletecollection"
  readonly params: ReadonlyArray<Param>
  readonly body: { readonly def: string; readonly required: boolean; readonly contentTypes: ReadonlyArray<string> } | undefined
  readonly responses: ReadonlyArray<readonly [code: string, description: string, def: string]>
  readonly produces: ReadonlyArray<string>
  readonly gvk: { readonly group: string; readonly version: string; readonly kind: string }
}

const q = (name: string, type: Param["type"], description: string): Param => ({ name, in: "query", type, description })
const pathParam = (name: string, description: string): Param => ({ name, in: "path", type: "string", description })

const namespaceParam = pathParam("namespace", "object name and auth scope, such as for teams and projects")
const nameParam = (kind: string) => pathParam("name", `name of the ${kind}`)
const dryRun = q("dryRun", "string", "When present, modifications are not persisted. Valid value: All")
const fieldManager = q("fieldManager", "string", "a name associated with the actor or entity that is making these changes")
const fieldValidation = q("fieldValidation", "string", "how to handle unknown fields: Ignore, Warn (default) or Strict")
const listParams: ReadonlyArray<Param> = [
  q("labelSelector", "string", "A selector to restrict the list of returned objects by their labels."),
  q("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields."),
  q("limit", "integer", "The maximum number of objects to return; continue with the returned continue token."),
  q("continue", "string", "The continue token of a previous paginated list."),
  q("resourceVersion", "string", "Which resource version to list or watch from."),
  q("resourceVersionMatch", "string", "How resourceVersion applies to a list: Exact or NotOlderThan."),
  q("timeoutSeconds", "integer", "Timeout for the list/watch call."),
  q("watch", "boolean", "Watch for changes and return them as a stream of add, update, and remove notifications."),
  q("allowWatchBookmarks", "boolean", "Ask for BOOKMARK watch events.")
]
const deleteParams: ReadonlyArray<Param> = [
  dryRun,
  q("gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted."),
  q("propagationPolicy", "string", "Whether and how garbage collection will be performed: Orphan, Background or Foreground.")
]

const json = ["application/json"]
const patchTypes = (r: Resource) =>
  r.crd === undefined
    ? ["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
    : ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]

const pascal = (s: string) => s.charAt(0).toUpperCase() + s.slice(1)

// kube-openapi's operation ids: verb, group (core, apps, rbacAuthorization), version, scope, kind.
const groupId = (r: Resource) =>
  r.group === ""
    ? "Core"
    : (r.crd === undefined ? r.group.replace(/\.k8s\.io$/, "") : r.group)
        .split(/[.-]/)
        .filter((p) => p !== "")
        .map(pascal)
        .join("")

const operationsOf = (r: Resource): ReadonlyArray<readonly [path: string, ops: ReadonlyArray<Operation>]> => {
  const prefix = r.group === "" ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`
  const def = definitionName(r)
  const listDef = listDefinitionName(r)
  const scope = r.namespaced ? "Namespaced" : ""
  const gvId = `${groupId(r)}${pascal(r.version)}`
  const id = (verb: string, suffix = "") => `${verb}${gvId}${scope}${r.kind}${suffix}`
  const collection = r.namespaced ? `${prefix}/namespaces/{namespace}/${r.plural}` : `${prefix}/${r.plural}`
  const scopeParams = r.namespaced ? [namespaceParam] : []
  const objectParams = [...scopeParams, nameParam(r.kind)]
  const kindGvk = { group: r.group, version: r.version, kind: r.kind }
  const op = (o: Omit<Operation, "gvk" | "produces"> & { readonly produces?: ReadonlyArray<string> }): Operation => ({
    gvk: kindGvk,
    produces: json,
    ...o
  })
  const read = (suffix: string, target: string, kind: string): Operation =>
    op({
      method: "get",
      operationId: id("read", suffix),
      description: `read ${kind} of the specified ${r.kind}`,
      action: "get",
      params: objectParams,
      body: undefined,
      responses: [["200", "OK", target]]
    })
  const replace = (suffix: string, target: string, kind: string): Operation =>
    op({
      method: "put",
      operationId: id("replace", suffix),
      description: `replace ${kind} of the specified ${r.kind}`,
      action: "put",
      params: [...objectParams, dryRun, fieldManager, fieldValidation],
      body: { def: target, required: true, contentTypes: json },
      responses: [["200", "OK", target], ["201", "Created", target]]
    })
  const patch = (suffix: string, target: string, kind: string): Operation =>
    op({
      method: "patch",
      operationId: id("patch", suffix),
      description: `partially update ${kind} of the specified ${r.kind}`,
      action: "patch",
      params: [...objectParams, dryRun, fieldManager, fieldValidation],
      body: { def: names.patch, required: true, contentTypes: patchTypes(r) },
      responses: [["200", "OK", target], ["201", "Created", target]]
    })
  const paths: Array<readonly [string, ReadonlyArray<Operation>]> = [
    [
      collection,
      [
        op({
          method: "get",
          operationId: id("list"),
          description: `list or watch objects of kind ${r.kind}`,
          action: "list",
          params: [...scopeParams, ...listParams],
          body: undefined,
          responses: [["200", "OK", listDef]],
          produces: [...json, "application/json;stream=watch"]
        }),
        op({
          method: "post",
          operationId: id("create"),
          description: `create a ${r.kind}`,
          action: "post",
          params: [...scopeParams, dryRun, fieldManager, fieldValidation],
          body: { def, required: true, contentTypes: json },
          responses: [["200", "OK", def], ["201", "Created", def], ["202", "Accepted", def]]
        }),
        op({
          method: "delete",
          operationId: `delete${gvId}Collection${scope}${r.kind}`,
          description: `delete collection of ${r.kind}`,
          action: "deletecollection",
          params: [...scopeParams, ...deleteParams, ...listParams.filter((p) => p.name !== "watch" && p.name !== "allowWatchBookmarks")],
          body: { def: names.deleteOptions, required: false, contentTypes: json },
          responses: [["200", "OK", names.status]]
        })
      ]
    ],
    [
      `${collection}/{name}`,
      [
        read("", def, r.kind),
        replace("", def, r.kind),
        patch("", def, r.kind),
        op({
          method: "delete",
          operationId: id("delete"),
          description: `delete a ${r.kind}`,
          action: "delete",
          params: [...objectParams, ...deleteParams],
          body: { def: names.deleteOptions, required: false, contentTypes: json },
          responses: [["200", "OK", names.status], ["202", "Accepted", names.status]]
        })
      ]
    ]
  ]
  if (r.namespaced) {
    paths.push([
      `${prefix}/${r.plural}`,
      [
        op({
          method: "get",
          operationId: `list${gvId}${r.kind}ForAllNamespaces`,
          description: `list or watch objects of kind ${r.kind} in all namespaces`,
          action: "list",
          params: listParams,
          body: undefined,
          responses: [["200", "OK", listDef]],
          produces: [...json, "application/json;stream=watch"]
        })
      ]
    ])
  }
  if (r.subresources.status) {
    paths.push([`${collection}/{name}/status`, [read("Status", def, "status"), replace("Status", def, "status"), patch("Status", def, "status")]])
  }
  if (r.subresources.scale) {
    const scaleOps = [read("Scale", names.scale, "scale"), replace("Scale", names.scale, "scale"), patch("Scale", names.scale, "scale")]
    paths.push([`${collection}/{name}/scale`, scaleOps.map((o) => ({ ...o, gvk: { group: "autoscaling", version: "v1", kind: "Scale" } }))])
  }
  return paths
}

const tagOf = (r: Resource) => {
  const g = groupId(r)
  return `${g.charAt(0).toLowerCase()}${g.slice(1)}_${r.version}`
}

const renderParam = (p: Param, target: Target): Json => {
  const base = { name: p.name, in: p.in, description: p.description, ...(p.in === "path" ? { required: true } : {}) }
  return target === "v2" ? { ...base, type: p.type, ...(p.in === "path" ? { uniqueItems: true } : {}) } : { ...base, schema: { type: p.type } }
}

const renderOperation = (o: Operation, tag: string, target: Target): Json => {
  const common = {
    description: o.description,
    operationId: o.operationId,
    tags: [tag],
    "x-kubernetes-action": o.action,
    "x-kubernetes-group-version-kind": o.gvk
  }
  const unauthorized = { description: "Unauthorized" }
  if (target === "v2") {
    const params = o.params.map((p) => renderParam(p, target))
    if (o.body) params.push({ name: "body", in: "body", required: o.body.required, schema: refTo(target, o.body.def) })
    return {
      ...common,
      consumes: o.body?.contentTypes ?? ["*/*"],
      produces: o.produces,
      schemes: ["https"],
      parameters: params,
      responses: {
        ...Object.fromEntries(o.responses.map(([code, description, def]) => [code, { description, schema: refTo(target, def) }])),
        "401": unauthorized
      }
    }
  }
  const body = o.body
  return {
    ...common,
    parameters: o.params.map((p) => renderParam(p, target)),
    ...(body
      ? { requestBody: { required: body.required, content: Object.fromEntries(body.contentTypes.map((t) => [t, { schema: refTo(target, body.def) }])) } }
      : {}),
    responses: {
      ...Object.fromEntries(
        o.responses.map(([code, description, def]) => [
          code,
          { description, content: Object.fromEntries(o.produces.map((t) => [t, { schema: refTo(target, def) }])) }
        ])
      ),
      "401": unauthorized
    }
  }
}

const pathsFor = (resources: ReadonlyArray<Resource>, target: Target): Record<string, Json> => {
  const paths: Record<string, Json> = {}
  for (const r of resources) {
    for (const [path, ops] of operationsOf(r)) {
      const item: Json = { ...(paths[path] ?? {}) }
      for (const o of ops) item[o.method] = renderOperation(o, tagOf(r), target)
      paths[path] = item
    }
  }
  return Object.fromEntries(Object.entries(paths).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
}

// ---- Documents -----------------------------------------------------------------------------

const info = { title: "Kubernetes", version: `v${Discovery.kubernetesVersion.major}.${Discovery.kubernetesVersion.minor}.${Discovery.kubernetesVersion.patch}` }

const bearer = { type: "apiKey", description: "Bearer token: `Authorization: Bearer <token>`", name: "authorization", in: "header" }

const servedResources = (registry: Registry) => Discovery.groupVersions(registry).flatMap((gv) => gv.resources)

const v2Memo = Discovery.memoizeByRegistry((registry): Json => {
  const resources = servedResources(registry)
  return {
    swagger: "2.0",
    info,
    paths: pathsFor(resources, "v2"),
    definitions: definitionsFor(resources, "v2"),
    securityDefinitions: { BearerToken: bearer },
    security: [{ BearerToken: [] }]
  }
})

/** `/openapi/v2`: one Swagger 2.0 document for every served kind. */
export const v2 = (registry: Registry): Json => v2Memo(registry, "")

/** 32-bit FNV-1a and a second, differently seeded multiply-xor lane: a cheap content hash for cache busting. */
const contentHash = (text: string): string => {
  let a = 0x811c9dc5
  let b = 0x9e3779b9
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x5bd1e995)
    b ^= b >>> 15
  }
  const hex = (n: number) => (n >>> 0).toString(16).padStart(8, "0")
  return `${hex(a)}${hex(b)}`.toUpperCase()
}

interface V3Doc {
  readonly doc: Json
  readonly hash: string
}

const v3Memo = Discovery.memoizeByRegistry((registry): ReadonlyMap<string, V3Doc> => {
  const docs = new Map<string, V3Doc>()
  for (const gv of Discovery.groupVersions(registry)) {
    const doc: Json = {
      openapi: "3.0.0",
      info,
      paths: pathsFor(gv.resources, "v3"),
      components: { schemas: definitionsFor(gv.resources, "v3"), securitySchemes: { BearerToken: bearer } },
      security: [{ BearerToken: [] }]
    }
    docs.set(groupVersionKey(gv.group, gv.version), { doc, hash: contentHash(JSON.stringify(doc)) })
  }
  return docs
})

/** `/openapi/v3`: each group version's document path, with a content hash clients cache by. */
export const v3Index = (registry: Registry): { readonly paths: Record<string, { readonly serverRelativeURL: string }> } => ({
  paths: Object.fromEntries(
    [...v3Memo(registry, "")].map(([key, { hash }]) => [key, { serverRelativeURL: `/openapi/v3/${key}?hash=${hash}` }])
  )
})

/** `/openapi/v3/{api/v1 | apis/{group}/{version}}`: that group version's OpenAPI 3.0 document; unknown → 404. */
export const v3 = (registry: Registry, groupVersion: string): Either.Either<Json, ApiError.ApiError> => {
  const found = v3Memo(registry, "").get(groupVersion.replace(/^\/+|\/+$/g, ""))
  return found ? Either.right(found.doc) : Either.left(ApiError.of(Discovery.notFound))
}

/** The content hash of a group version's v3 document (what `v3Index` links with), if served. */
export const v3Hash = (registry: Registry, groupVersion: string): string | undefined => v3Memo(registry, "").get(groupVersion)?.hash
