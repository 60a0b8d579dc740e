/**
 * Field selectors (`?fieldSelector=metadata.name=foo,status.phase!=Running`): parsing and
 * escaping exactly as the Kubernetes `fields` package does, the per-kind set of selectable
 * fields kube-apiserver supports (anything else is a 400 `field label not supported: ...`),
 * and the extractors that compute those fields from a stored object for the watch cache.
 */
import { Either } from "effect"
import type { KindInfo } from "../model/Kinds.js"
import * as ApiError from "./ApiError.js"
import { asArray, asObject, asString, type JsonObject } from "../object/Json.js"
import * as Metadata from "../object/Metadata.js"
import * as Views from "../object/Views.js"

/** One term: `field=value` (also written `==`) or `field!=value`. */
export interface Requirement {
  readonly field: string
  readonly operator: "=" | "!="
  readonly value: string
}

/** A parsed selector: every requirement must hold (AND). No requirements selects everything. */
export interface FieldSelector {
  readonly requirements: ReadonlyArray<Requirement>
}

/** The selectable fields of one object, e.g. `{ "metadata.name": "web", "status.phase": "Running" }`. */
export type Fields = Readonly<Record<string, string>>

/** A compiled selector: tests one object's fields (a missing field counts as `""`, as in Kubernetes). */
export type Matcher = (fields: Fields) => boolean

/** Matches every object. */
export const everything: Matcher = () => true

/** A kind as the field tables name it: a registered `KindInfo` or its `apiVersion` + `kind`. */
export type KindRef = KindInfo | { readonly apiVersion: string; readonly kind: string }

// Splits on commas not preceded by a backslash; the backslash stays in the term (k8s `splitTerms`).
const splitTerms = (input: string): Array<string> => {
  if (input.length === 0) return []
  const terms: Array<string> = []
  let start = 0
  let inSlash = false
  for (let i = 0; i < input.length; i++) {
    const c = input[i]
    if (inSlash) inSlash = false
    else if (c === "\\") inSlash = true
    else if (c === ",") {
      terms.push(input.slice(start, i))
      start = i + 1
    }
  }
  terms.push(input.slice(start))
  return terms
}

// `!=` and `==` are tried before `=` so that `a==b` does not leave `=b` as the value.
const operators = ["!=", "==", "="] as const

const splitTerm = (term: string): { lhs: string; op: (typeof operators)[number]; rhs: string } | undefined => {
  for (let i = 0; i < term.length; i++) {
    for (const op of operators) {
      if (term.startsWith(op, i)) return { lhs: term.slice(0, i), op, rhs: term.slice(i + op.length) }
    }
  }
  return undefined
}

/**
 * Undoes `escapeValue`: `\\`, `\,` and `\=` stand for the character; any other escape, a trailing
 * backslash, or a bare `,` or `=` is an error worded as the Kubernetes `fields` package words it.
 */
export const unescapeValue = (s: string): Either.Either<string, string> => {
  if (!/[\\,=]/.test(s)) return Either.right(s)
  let out = ""
  let inSlash = false
  for (const c of s) {
    if (inSlash) {
      if (c === "\\" || c === "," || c === "=") out += c
      else return Either.left(`invalid field selector: invalid escape sequence: \\${c}`)
      inSlash = false
    } else if (c === "\\") {
      inSlash = true
    } else if (c === "," || c === "=") {
      // Go formats the rune with %v, which prints its code point.
      return Either.left(`invalid field selector: unescaped character in value: ${c.codePointAt(0)}`)
    } else {
      out += c
    }
  }
  if (inSlash) return Either.left("invalid field selector: invalid escape sequence: \\")
  return Either.right(out)
}

/** Escapes `\`, `,` and `=` in a value so it can be placed in a selector string. */
export const escapeValue = (s: string): string => s.replace(/[\\,=]/g, (c) => `\\${c}`)

/**
 * Parses a selector string (syntax only; see `parseFor` to also check the fields against a
 * kind). Terms are sorted as Kubernetes sorts them, empty terms are skipped, and the empty
 * string selects everything. Failures are 400 BadRequest with kube-apiserver's message.
 */
export const parse = (input: string): Either.Either<FieldSelector, ApiError.ApiError> => {
  const parts = splitTerms(input).sort()
  const requirements: Array<Requirement> = []
  for (const part of parts) {
    if (part === "") continue
    const term = splitTerm(part)
    if (term === undefined) {
      return Either.left(ApiError.badRequest(`invalid selector: '${input}'; can't understand '${part}'`))
    }
    const value = unescapeValue(term.rhs)
    if (Either.isLeft(value)) return Either.left(ApiError.badRequest(value.left))
    requirements.push({ field: term.lhs, operator: term.op === "!=" ? "!=" : "=", value: value.right })
  }
  return Either.right({ requirements })
}

/** The string form of a selector (values escaped), e.g. `metadata.name=web,status.phase!=Failed`. */
export const format = (selector: FieldSelector): string =>
  selector.requirements.map((r) => `${r.field}${r.operator}${escapeValue(r.value)}`).join(",")

// ---------------------------------------------------------------------------------------------
// Per-kind selectable fields, as kube-apiserver's field label conversion functions and
// `ToSelectableFields` define them (pkg/apis/core/v1/conversion.go, pkg/registry/*/strategy.go).

const bool = (v: unknown): string => (v === true ? "true" : "false")
const int = (v: unknown): string => (typeof v === "number" ? String(Math.trunc(v)) : "0")

interface KindFields {
  /** Field labels accepted in a selector; `aliases` maps legacy labels to current ones. */
  readonly supported: ReadonlySet<string>
  readonly aliases?: Readonly<Record<string, string>>
  /** The kind-specific fields (metadata fields are added for every kind). */
  readonly extract?: (o: JsonObject) => Record<string, string>
}

const meta = ["metadata.name", "metadata.namespace"] as const

const tables: Readonly<Record<string, KindFields>> = {
  "v1/Pod": {
    supported: new Set([
      ...meta,
      "spec.nodeName",
      "spec.restartPolicy",
      "spec.schedulerName",
      "spec.serviceAccountName",
      "spec.hostNetwork",
      "status.phase",
      "status.podIP",
      "status.nominatedNodeName"
    ]),
    // Old v1 clients sent `spec.host`; kube-apiserver still converts it.
    aliases: { "spec.host": "spec.nodeName" },
    extract: (o) => {
      const { spec, status } = Views.pod(o)
      const podIPs = asArray(status?.podIPs)
      // Kubernetes derives status.podIP from the first entry of status.podIPs.
      const podIP = podIPs.length > 0 ? asString(asObject(podIPs[0])["ip"]) : asString(status?.podIP)
      return {
        "spec.nodeName": asString(spec?.nodeName),
        "spec.restartPolicy": asString(spec?.restartPolicy),
        "spec.schedulerName": asString(spec?.schedulerName),
        "spec.serviceAccountName": asString(spec?.serviceAccountName),
        "spec.hostNetwork": bool(spec?.hostNetwork),
        "status.phase": asString(status?.phase),
        "status.podIP": podIP,
        "status.nominatedNodeName": asString(status?.nominatedNodeName)
      }
    }
  },
  // Cluster-scoped kinds with their own conversion function do not accept metadata.namespace.
  "v1/Node": {
    supported: new Set(["metadata.name", "spec.unschedulable"]),
    extract: (o) => ({ "spec.unschedulable": bool(Views.node(o).spec?.unschedulable) })
  },
  "v1/Namespace": {
    supported: new Set(["metadata.name", "status.phase"]),
    extract: (o) => ({ "status.phase": asString(Views.namespace(o).status?.phase) })
  },
  "v1/Event": {
    supported: new Set([
      ...meta,
      "involvedObject.kind",
      "involvedObject.namespace",
      "involvedObject.name",
      "involvedObject.uid",
      "involvedObject.apiVersion",
      "involvedObject.resourceVersion",
      "involvedObject.fieldPath",
      "reason",
      "reportingComponent",
      "source",
      "type"
    ]),
    extract: (o) => {
      const event = Views.event(o)
      const ref = asObject(event.involvedObject)
      // `source` is source.component, falling back to the reporting controller.
      const component = asString(event.source?.component)
      return {
        "involvedObject.kind": asString(ref["kind"]),
        "involvedObject.namespace": asString(ref["namespace"]),
        "involvedObject.name": asString(ref["name"]),
        "involvedObject.uid": asString(ref["uid"]),
        "involvedObject.apiVersion": asString(ref["apiVersion"]),
        "involvedObject.resourceVersion": asString(ref["resourceVersion"]),
        "involvedObject.fieldPath": asString(ref["fieldPath"]),
        reason: asString(o["reason"]),
        reportingComponent: asString(o["reportingComponent"]),
        source: component === "" ? asString(o["reportingComponent"]) : component,
        type: asString(o["type"])
      }
    }
  },
  "v1/Secret": {
    supported: new Set([...meta, "type"]),
    extract: (o) => ({ type: asString(o["type"]) })
  },
  "v1/Service": {
    supported: new Set([...meta, "spec.clusterIP", "spec.type"]),
    extract: (o) => {
      const spec = Views.service(o).spec
      return { "spec.clusterIP": asString(spec?.clusterIP), "spec.type": asString(spec?.type) }
    }
  },
  "apps/v1/ReplicaSet": {
    supported: new Set([...meta, "status.replicas"]),
    extract: (o) => ({ "status.replicas": int(Views.replicaSet(o).status?.replicas) })
  }
}

// Every other kind (ConfigMap, Deployment, Lease, custom resources...) selects on metadata only.
const defaultFields: KindFields = { supported: new Set(meta) }

const tableFor = (kind: KindRef): KindFields => tables[`${kind.apiVersion}/${kind.kind}`] ?? defaultFields

/** The field labels a selector may use for `kind` (aliases such as Pod `spec.host` not included). */
export const supportedFields = (kind: KindRef): ReadonlyArray<string> => [...tableFor(kind).supported]

/**
 * Maps each requirement's field to the one the kind selects on, or fails 400 with
 * kube-apiserver's `field label not supported: <field>` for the first unsupported one.
 */
export const validateFor = (selector: FieldSelector, kind: KindRef): Either.Either<FieldSelector, ApiError.ApiError> => {
  const table = tableFor(kind)
  const requirements: Array<Requirement> = []
  for (const r of selector.requirements) {
    const field = table.aliases?.[r.field] ?? r.field
    if (!table.supported.has(field)) return Either.left(ApiError.badRequest(`field label not supported: ${r.field}`))
    requirements.push(field === r.field ? r : { ...r, field })
  }
  return Either.right({ requirements })
}

/** `parse` then `validateFor`: what the API layer does with `?fieldSelector=`. */
export const parseFor = (input: string, kind: KindRef): Either.Either<FieldSelector, ApiError.ApiError> =>
  Either.flatMap(parse(input), (selector) => validateFor(selector, kind))

/** Compiles a selector for matching many objects' fields; no requirements matches everything. */
export const compile = (selector: FieldSelector): Matcher => {
  const reqs = selector.requirements
  const n = reqs.length
  if (n === 0) return everything
  if (n === 1) {
    const { field, operator, value } = reqs[0]!
    return operator === "=" ? (f) => (f[field] ?? "") === value : (f) => (f[field] ?? "") !== value
  }
  return (f) => {
    for (let i = 0; i < n; i++) {
      const r = reqs[i]!
      const equal = (f[r.field] ?? "") === r.value
      if (equal !== (r.operator === "=")) return false
    }
    return true
  }
}

/** Whether `fields` satisfy `selector`. */
export const matches = (selector: FieldSelector, fields: Fields): boolean => compile(selector)(fields)

/**
 * The value a selector on `field` must equal for any object to match, if the selector pins it
 * (e.g. `metadata.name=web`), so callers can narrow a scan before matching.
 */
export const exactValue = (selector: FieldSelector, field: string): string | undefined =>
  selector.requirements.find((r) => r.field === field && r.operator === "=")?.value

/**
 * The selectable fields of objects of `kind`: `metadata.name` and `metadata.namespace` (`""`
 * for cluster-scoped objects) plus the kind's extras. Returns a function to call per object,
 * so the kind lookup happens once per watch cache rather than once per event.
 */
export const extractor = (kind: KindRef): ((object: unknown) => Fields) => {
  const extract = tableFor(kind).extract
  return (object) => {
    const o = asObject(object)
    const m = Metadata.metadataOf(o)
    const base = { "metadata.name": asString(m["name"]), "metadata.namespace": asString(m["namespace"]) }
    return extract === undefined ? base : { ...base, ...extract(o) }
  }
}

/** The selectable fields of one object of `kind` (see `extractor`). */
export const fieldsOf = (kind: KindRef, object: unknown): Fields => extractor(kind)(object)
