/**
 * Request bodies: JSON or YAML by Content-Type, bounded, parsed into plain JSON values. Malformed
 * input is a 400 naming what was wrong (YAML alias bombs and bodies nested deeper than
 * `maxBodyDepth` included); an unsupported media type is a 415. Nothing here throws.
 */
import { Either } from "effect"
import * as YAML from "yaml"
import * as Status from "../model/Status.js"
import { isJsonObject } from "../object/Json.js"
import * as ApiError from "./ApiError.js"
import { depthAtMost } from "./internal/patchValue.js"

/** The largest object the API stores (DESIGN §5: 1.5 MiB, as etcd's default request limit). */
export const maxObjectBytes = 1.5 * 1024 * 1024

/** Media types a create or update body may use. */
export const writeTypes = ["application/json", "application/yaml"] as const

/** The media type of a Content-Type header, lower-cased, without parameters. */
export const mediaType = (header: string | undefined): string =>
  (header ?? "application/json").split(";")[0]!.trim().toLowerCase() || "application/json"

const decoder = new TextDecoder("utf-8", { fatal: true })

/** Parse a body as JSON or YAML (by its media type); a missing body is a 400. */
export const parse = (
  body: Uint8Array | undefined,
  contentType: string | undefined,
  accepted: ReadonlyArray<string> = writeTypes
): Either.Either<unknown, ApiError.ApiError> => {
  const type = mediaType(contentType)
  if (!accepted.includes(type)) return Either.left(ApiError.of(Status.unsupportedMediaType(accepted)))
  if (body === undefined || body.length === 0) return Either.left(ApiError.badRequest("the request body is empty"))
  let text: string
  try {
    text = decoder.decode(body)
  } catch {
    return Either.left(ApiError.badRequest("the request body is not valid UTF-8"))
  }
  const parsed = type === "application/yaml" ? parseYaml(text) : parseJson(text)
  return Either.flatMap(parsed, (value) =>
    depthAtMost(value, maxBodyDepth)
      ? Either.right(value)
      : Either.left(ApiError.badRequest(`the request body nests deeper than ${maxBodyDepth} levels`))
  )
}

/**
 * How deeply a body's arrays and objects may nest. Every later step (decoding, defaulting,
 * patching, comparing) walks objects recursively, so a deeper body could overflow the stack;
 * Kubernetes objects nest about 20 levels, a CustomResourceDefinition's schema a few dozen.
 */
export const maxBodyDepth = 500

// Aliases may expand to at most this many nodes (the `yaml` library's guard against "billion
// laughs" bombs, which it reports by throwing).
const maxAliasCount = 100

/**
 * The most lexer tokens a YAML body may have (about a third as many nodes). The `yaml` library
 * spends about a kilobyte and many microseconds per node while parsing: a 3 MiB body of `[1,1,…]`
 * took 1.3 GB and tens of seconds. A large manifest has a few thousand tokens; big string values
 * are one token each. JSON bodies have no such limit (JSON.parse is cheap).
 */
export const maxYamlTokens = 100_000

/**
 * A first pass with the library's lexer, which is linear and keeps nothing: too many tokens, or
 * flow collections and compact block collections (`- - - x`) nested too deep, are refused before
 * the parser (whose cost grows with both) sees them. Stops at the first excess.
 */
const yamlShapeProblem = (text: string): string | undefined => {
  let tokens = 0
  let flow = 0
  let onLine = 0
  for (const source of new YAML.Lexer().lex(text)) {
    if (++tokens > maxYamlTokens) return `the YAML body has more than ${maxYamlTokens} tokens`
    switch (YAML.CST.tokenType(source)) {
      case "flow-map-start":
      case "flow-seq-start":
        flow++
        break
      case "flow-map-end":
      case "flow-seq-end":
        flow = Math.max(0, flow - 1)
        break
      case "seq-item-ind":
      case "explicit-key-ind":
      case "map-value-ind":
        onLine++
        break
      case "newline":
        onLine = 0
        break
    }
    if (flow + onLine > maxBodyDepth) return `the request body nests deeper than ${maxBodyDepth} levels`
  }
  return undefined
}

const parseYaml = (text: string): Either.Either<unknown, ApiError.ApiError> => {
  const problem = yamlShapeProblem(text)
  if (problem !== undefined) return Either.left(ApiError.badRequest(problem))
  try {
    const docs = YAML.parseAllDocuments(text)
    const list = Array.isArray(docs) ? docs : [docs]
    if (list.length !== 1) return Either.left(ApiError.badRequest(`the YAML body must hold exactly one document, found ${list.length}`))
    const doc = list[0]!
    if (doc.errors.length > 0) return Either.left(yamlError(doc.errors[0]!.message))
    return Either.right(doc.toJS({ maxAliasCount }))
  } catch (e) {
    // An alias bomb (ReferenceError), or nesting deep enough to overflow the library's recursion.
    return Either.left(yamlError(e instanceof Error ? e.message : String(e)))
  }
}

const yamlError = (message: string) => ApiError.badRequest(`error converting YAML to JSON: ${message.split("\n")[0]}`)

const parseJson = (text: string): Either.Either<unknown, ApiError.ApiError> => {
  try {
    return Either.right(JSON.parse(text))
  } catch (e) {
    return Either.left(ApiError.badRequest(`the request body is not valid JSON: ${(e as Error).message}`))
  }
}

/** A JSON object (not an array or a scalar), or a 400. */
export const asObject = (value: unknown): Either.Either<Record<string, unknown>, ApiError.ApiError> =>
  isJsonObject(value)
    ? Either.right(value)
    : Either.left(ApiError.badRequest("the request body must be a JSON object"))
