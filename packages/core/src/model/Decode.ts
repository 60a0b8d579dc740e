/**
 * Decodes untrusted JSON into a kind's schema and reports every problem as a Kubernetes-style
 * `FieldError` (`spec.containers[0].image: Required value`), so the API server can answer with
 * the same `Invalid` Status kube-apiserver would. Unknown fields are dropped, or reported as
 * `Unknown field` in strict mode (`?fieldValidation=Strict`).
 */
import { Either, ParseResult, Schema, type SchemaAST as AST } from "effect"
import * as FieldError from "./FieldError.js"

/** Decoding options. */
export interface DecodeOptions {
  /** Report fields the schema does not know instead of dropping them. */
  readonly strict?: boolean
}

const lenient: AST.ParseOptions = { errors: "all", onExcessProperty: "ignore" }
const strictOptions: AST.ParseOptions = { errors: "all", onExcessProperty: "error" }
const lenientFirst: AST.ParseOptions = { errors: "first", onExcessProperty: "ignore" }
const strictFirst: AST.ParseOptions = { errors: "first", onExcessProperty: "error" }

/**
 * Inputs with more arrays, objects and scalars than this report only their first error: effect
 * spends about 1.5 KB per issue collecting every one, and a 3 MB body of a million wrongly typed
 * list items took 2 GB and half a minute.
 */
export const maxNodesForAllErrors = 20_000

// Counts nodes iteratively, stopping once past `max`.
const moreNodesThan = (value: unknown, max: number): boolean => {
  let count = 0
  const stack: Array<unknown> = [value]
  for (let top = stack.pop(); ; top = stack.pop()) {
    if (++count > max) return true
    if (Array.isArray(top)) for (const item of top) stack.push(item)
    else if (typeof top === "object" && top !== null) for (const item of Object.values(top)) stack.push(item)
    if (stack.length === 0) return false
  }
}

/**
 * Decodes `input` with `schema`, collecting all errors (only the first for inputs of more than
 * `maxNodesForAllErrors` nodes). Strict mode differs only in rejecting unknown fields; both
 * ignore nothing else.
 */
export const decodeObject = <A, I>(
  schema: Schema.Schema<A, I, never>,
  input: unknown,
  options?: DecodeOptions
): Either.Either<A, ReadonlyArray<FieldError.FieldError>> => {
  const strict = options?.strict === true
  // The first error costs little to find; all of them are collected only for inputs of a size
  // whose every error is affordable (a valid input decodes the same either way).
  const first = Schema.decodeUnknownEither(schema, strict ? strictFirst : lenientFirst)(input)
  if (Either.isRight(first)) return Either.right(first.right)
  const result = moreNodesThan(input, maxNodesForAllErrors) ? first : Schema.decodeUnknownEither(schema, strict ? strictOptions : lenient)(input)
  if (Either.isRight(result)) return Either.right(result.right)
  return Either.left(toFieldErrors(schema.ast, input, ParseResult.ArrayFormatter.formatErrorSync(result.left)))
}

type Path = ReadonlyArray<PropertyKey>

/** Converts effect's flattened issues into Kubernetes field errors (one or more per path). */
export const toFieldErrors = (
  ast: AST.AST,
  input: unknown,
  issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>
): ReadonlyArray<FieldError.FieldError> => {
  const keyOf = (path: Path) => JSON.stringify(path.map((s) => (typeof s === "symbol" ? String(s) : s)))
  const keys = issues.map((i) => keyOf(i.path))
  // A union reports a type mismatch for every member it tried. When some member got far
  // enough to report something deeper, the value had the right shape and the deeper issue
  // is the real one; the shallow "Expected null"-style mismatches are noise.
  // Every issue's path in a trie, so the question is one walk down it: asked of each issue
  // against all others, it was quadratic (100,000 wrongly typed list items took minutes).
  const paths = pathTrie(issues.map((i) => i.path))
  const hasDeeper = (path: Path) => (nodeAt(paths, path)?.size ?? 0) > 0

  const groups = new Map<string, { path: Path; issues: Array<ParseResult.ArrayFormatterIssue> }>()
  issues.forEach((issue, i) => {
    if (isTypeMismatch(issue) && hasDeeper(issue.path)) return
    const key = keys[i]!
    const group = groups.get(key)
    if (group === undefined) groups.set(key, { path: issue.path, issues: [issue] })
    else group.issues.push(issue)
  })

  const out: Array<FieldError.FieldError> = []
  const seen = new Set<string>()
  const push = (e: FieldError.FieldError) => {
    const k = `${e.path}\u0000${e.message}`
    if (!seen.has(k)) {
      seen.add(k)
      out.push(e)
    }
  }
  for (const { path, issues: group } of groups.values()) {
    const { text, ast: at } = resolvePath(ast, path)
    const actual = valueAt(input, path)
    let mismatch: ParseResult.ArrayFormatterIssue | undefined
    for (const issue of group) {
      if (issue._tag === "Missing") push(FieldError.required(text))
      else if (issue._tag === "Unexpected") push(FieldError.unknownField(text))
      else if (issue._tag === "Forbidden") push(FieldError.forbidden(text))
      else if (isTypeMismatch(issue)) mismatch ??= issue
      else if (FieldError.isKubeMessage(issue.message)) push({ path: text, message: issue.message })
      else push(FieldError.invalid(text, actual, issue.message))
    }
    // As above: if some union member accepted the shape and failed a finer check here, that
    // check is the real error and the other members' type mismatches are noise.
    if (mismatch !== undefined && group.every(isTypeMismatch)) push(describeMismatch(text, at, actual, group))
  }
  return out
}

const isTypeMismatch = (issue: ParseResult.ArrayFormatterIssue) =>
  (issue._tag === "Type" || issue._tag === "Refinement" || issue._tag === "Transformation") &&
  issue.message.startsWith("Expected ")

/** A trie of paths: each node maps the next path segment to its subtree. */
type PathTrie = Map<PropertyKey, PathTrie>

const pathTrie = (paths: ReadonlyArray<Path>): PathTrie => {
  const root: PathTrie = new Map()
  for (const path of paths) {
    let node = root
    for (const segment of path) {
      let next = node.get(segment)
      if (next === undefined) node.set(segment, (next = new Map()))
      node = next
    }
  }
  return root
}

const nodeAt = (trie: PathTrie, path: Path): PathTrie | undefined => {
  let node: PathTrie | undefined = trie
  for (const segment of path) node = node?.get(segment)
  return node
}

const valueAt = (input: unknown, path: Path): unknown => {
  let v: unknown = input
  for (const s of path) {
    if (v === null || typeof v !== "object") return undefined
    v = (v as Record<PropertyKey, unknown>)[s]
  }
  return v
}

// Looks through wrappers to the structural node: refinements check a value of the same shape,
// and a transformation's `from` side is the shape the JSON input must have.
const unwrap = (ast: AST.AST): AST.AST => {
  for (;;) {
    switch (ast._tag) {
      case "Refinement":
        ast = ast.from
        break
      case "Transformation":
        ast = ast.from
        break
      case "Suspend":
        ast = ast.f()
        break
      default:
        return ast
    }
  }
}

interface Child {
  readonly next: AST.AST
  readonly recordKey: boolean
}

const childOf = (ast: AST.AST | undefined, key: PropertyKey): Child | undefined => {
  if (ast === undefined) return undefined
  const node = unwrap(ast)
  switch (node._tag) {
    case "TypeLiteral": {
      const ps = node.propertySignatures.find((p) => p.name === key)
      if (ps !== undefined) return { next: ps.type, recordKey: false }
      const is = node.indexSignatures[0]
      return is === undefined ? undefined : { next: is.type, recordKey: true }
    }
    case "TupleType": {
      if (typeof key !== "number") return undefined
      const t = node.elements[key]?.type ?? node.rest[0]?.type
      return t === undefined ? undefined : { next: t, recordKey: false }
    }
    case "Union": {
      // Prefer a member that declares the key as a field over one that merely accepts any key.
      let fallback: Child | undefined
      for (const member of node.types) {
        const c = childOf(member, key)
        if (c !== undefined && !c.recordKey) return c
        fallback ??= c
      }
      return fallback
    }
    default:
      return undefined
  }
}

const identifierRe = /^[A-Za-z_$][A-Za-z0-9_$]*$/

/**
 * Formats a path as Kubernetes does: fields dotted, indices and map keys in brackets
 * (`spec.containers[0].resources.limits[nvidia.com/gpu]`), and finds the schema node there.
 */
const resolvePath = (root: AST.AST, path: Path): { text: string; ast: AST.AST | undefined } => {
  let text = ""
  let ast: AST.AST | undefined = root
  for (const seg of path) {
    const child = childOf(ast, seg)
    ast = child?.next
    if (typeof seg === "number") text += `[${seg}]`
    else {
      const s = String(seg)
      // Without a schema node to ask, fall back on the key's shape.
      const bracket = child === undefined ? !identifierRe.test(s) : child.recordKey
      text = bracket ? `${text}[${s}]` : text === "" ? s : `${text}.${s}`
    }
  }
  return { text, ast }
}

interface Expected {
  readonly literals: Array<AST.LiteralValue>
  readonly types: Array<string>
}

const collectExpected = (ast: AST.AST, out: Expected): void => {
  const node = unwrap(ast)
  switch (node._tag) {
    case "Union":
      for (const t of node.types) collectExpected(t, out)
      return
    case "Literal":
      // `null` is how optional fields accept JSON null; it is never what the user meant to send.
      if (node.literal !== null) out.literals.push(node.literal)
      return
    case "UndefinedKeyword":
      return
    case "StringKeyword":
      out.types.push("string")
      return
    case "NumberKeyword":
      out.types.push("number")
      return
    case "BooleanKeyword":
      out.types.push("boolean")
      return
    case "TypeLiteral":
      out.types.push("object")
      return
    case "TupleType":
      out.types.push("array")
      return
    default:
      out.types.push(String(node))
  }
}

const jsonType = (v: unknown): string =>
  v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "object" ? "object" : typeof v

const describeMismatch = (
  path: string,
  ast: AST.AST | undefined,
  actual: unknown,
  group: ReadonlyArray<ParseResult.ArrayFormatterIssue>
): FieldError.FieldError => {
  const expected: Expected = { literals: [], types: [] }
  if (ast !== undefined) collectExpected(ast, expected)
  const types = [...new Set(expected.types)]
  if (types.length === 0 && expected.literals.length > 0) {
    return FieldError.notSupported(path, actual, expected.literals.map(String))
  }
  if (types.length > 0 && !types.includes(jsonType(actual))) {
    const all = [...types, ...expected.literals.map((l) => JSON.stringify(l))]
    return FieldError.invalid(path, actual, `expected ${all.join(" or ")}`)
  }
  // The shape was right but a built-in refinement failed: reuse effect's own expectation.
  const m = /^Expected (.*), actual /s.exec(group.find(isTypeMismatch)?.message ?? "")
  return FieldError.invalid(path, actual, m === null ? "invalid value" : `expected ${m[1]}`)
}
