/**
 * `explain`'s text from an OpenAPI v3 document, pure: find the kind's schema by its
 * `x-kubernetes-group-version-kind`, walk the field path through `properties` (and `$ref`,
 * `allOf`, array `items`), then print kubectl's layout: KIND, VERSION, FIELD, DESCRIPTION and the
 * FIELDS with their types (nested with `--recursive`).
 */
import { arr, obj, str } from "./Cli.js"

type Json = Record<string, unknown>

const resolve = (doc: Json, schema: Json): Json => {
  let s = schema
  for (let i = 0; i < 20; i++) {
    const ref = str(s["$ref"])
    if (ref !== "") {
      const found = obj(obj(obj(doc["components"])["schemas"])[ref.replace("#/components/schemas/", "")])
      s = { ...found, ...(s["description"] !== undefined ? { description: s["description"] } : {}) }
      continue
    }
    const all = arr(s["allOf"])
    if (all.length === 1) {
      s = { ...obj(all[0]), ...(s["description"] !== undefined ? { description: s["description"] } : {}) }
      continue
    }
    return s
  }
  return s
}

/** kubectl's type names: `<string>`, `<[]Container>`, `<map[string]string>`, `<Object>`. */
export const typeName = (doc: Json, raw: Json): string => {
  const ref = str(raw["$ref"]) || str(obj(arr(raw["allOf"])[0])["$ref"])
  if (ref !== "") return ref.split(".").pop()!
  const s = resolve(doc, raw)
  if (s["type"] === "array") return `[]${typeName(doc, obj(s["items"]))}`
  if (s["type"] === "object" && s["additionalProperties"] !== undefined) return `map[string]${typeName(doc, obj(s["additionalProperties"]))}`
  if (s["type"] === "object" || s["properties"] !== undefined) return "Object"
  if (s["x-kubernetes-int-or-string"] === true) return "IntOrString"
  return str(s["type"]) || "Object"
}

const indent = (text: string, by: string) => text.split("\n").map((l) => (l === "" ? l : `${by}${l}`)).join("\n")

const fieldLines = (doc: Json, schema: Json, depth: number, recursive: boolean, seen: ReadonlySet<Json>): Array<string> => {
  const s = resolve(doc, schema)
  const required = new Set(arr(s["required"]).map(str))
  return Object.entries(obj(s["properties"])).flatMap(([name, raw]) => {
    const pad = "  ".repeat(depth + 1)
    const t = typeName(doc, obj(raw))
    const header = `${pad}${name}\t<${t}>${required.has(name) ? " -required-" : ""}`
    if (recursive) {
      let child = resolve(doc, obj(raw))
      if (child["type"] === "array") child = resolve(doc, obj(child["items"]))
      if (seen.has(child) || child["properties"] === undefined) return [header]
      return [header, ...fieldLines(doc, child, depth + 1, true, new Set([...seen, child]))]
    }
    const description = str(resolve(doc, obj(raw))["description"])
    return [header, ...(description === "" ? [] : [indent(description, `${pad}  `)]), ""]
  })
}

/** The explanation, or an error (pure). */
export const render = (
  doc: Json,
  gvk: { readonly group: string; readonly version: string; readonly kind: string },
  path: ReadonlyArray<string>,
  recursive: boolean
): string | { readonly error: string } => {
  const schemas = obj(obj(doc["components"])["schemas"])
  const root = Object.values(schemas)
    .map(obj)
    .find((s) => arr(s["x-kubernetes-group-version-kind"]).some((g) => str(obj(g)["group"]) === gvk.group && str(obj(g)["version"]) === gvk.version && str(obj(g)["kind"]) === gvk.kind))
  if (root === undefined) return { error: `the server's OpenAPI has no schema for ${gvk.kind}` }
  let current = root
  let fieldType = ""
  for (const field of path) {
    let s = resolve(doc, current)
    if (s["type"] === "array") s = resolve(doc, obj(s["items"]))
    const next = obj(s["properties"])[field]
    if (next === undefined) return { error: `field "${field}" does not exist` }
    fieldType = typeName(doc, obj(next))
    current = obj(next)
  }
  let target = resolve(doc, current)
  const description = str(target["description"])
  if (target["type"] === "array") target = resolve(doc, obj(target["items"]))
  const lines = [
    `GROUP:      ${gvk.group}`,
    `KIND:       ${gvk.kind}`,
    `VERSION:    ${gvk.version}`,
    "",
    ...(path.length > 0 ? [`FIELD: ${path[path.length - 1]} <${fieldType}>`, ""] : []),
    "DESCRIPTION:",
    indent(description === "" ? "<empty>" : description, "    "),
    ""
  ]
  if (target["properties"] !== undefined) lines.push("FIELDS:", ...fieldLines(doc, target, 0, recursive, new Set([target])))
  return `${lines.join("\n").replace(/\n+$/, "")}\n`.replace(/^GROUP: {6}\n/, "")
}
