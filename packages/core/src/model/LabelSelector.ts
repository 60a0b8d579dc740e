/**
 * Label selectors: the `LabelSelector` schema (`matchLabels` + `matchExpressions`), its
 * validation, a compiled matcher for hot loops (controllers and the scheduler match thousands
 * of objects per pass), and the string form used in `?labelSelector=` (`a=b,c!=d,e in (x,y)`).
 */
import { Either, Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional, StringMap } from "./internal/fields.js"
import { LabelSelectorParseError } from "./ModelError.js"
import * as Validation from "./Validation.js"

/** The set-based operators of a selector requirement. */
export const Operator = Schema.Literal("In", "NotIn", "Exists", "DoesNotExist")

/** A set-based operator. */
export type Operator = typeof Operator.Type

/** One requirement: `key` `operator` `values`. */
export const Requirement = Schema.Struct({
  key: Schema.String,
  operator: Operator,
  values: optional(Schema.Array(Schema.String))
})

/** One selector requirement. */
export type Requirement = typeof Requirement.Type

type Segment = string | number
interface Issue {
  readonly path: ReadonlyArray<Segment>
  readonly message: string
}

const collectIssues = (selector: {
  readonly matchLabels?: Readonly<Record<string, string>>
  readonly matchExpressions?: ReadonlyArray<Requirement>
}): ReadonlyArray<Issue> => {
  const issues: Array<Issue> = []
  if (selector.matchLabels !== undefined) {
    for (const e of Validation.validateLabels(selector.matchLabels, "")) issues.push({ path: ["matchLabels"], message: e.message })
  }
  selector.matchExpressions?.forEach((req, i) => {
    const at = (field: string) => ["matchExpressions", i, field]
    const count = req.values?.length ?? 0
    if ((req.operator === "In" || req.operator === "NotIn") && count === 0) {
      issues.push({ path: at("values"), message: FieldError.required("", "must be specified when `operator` is 'In' or 'NotIn'").message })
    }
    if ((req.operator === "Exists" || req.operator === "DoesNotExist") && count > 0) {
      issues.push({
        path: at("values"),
        message: FieldError.forbidden("", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'").message
      })
    }
    for (const d of Validation.isQualifiedName(req.key)) issues.push({ path: at("key"), message: FieldError.invalid("", req.key, d).message })
    req.values?.forEach((v, j) => {
      for (const d of Validation.isValidLabelValue(v)) {
        issues.push({ path: ["matchExpressions", i, "values", j], message: FieldError.invalid("", v, d).message })
      }
    })
  })
  return issues
}

const formatSegments = (base: string, path: ReadonlyArray<Segment>): string =>
  path.reduce<string>((acc, s) => FieldError.joinPath(acc, typeof s === "number" ? `[${s}]` : s), base)

/** A label selector; `{}` selects everything. */
export const LabelSelector = Schema.Struct({
  matchLabels: optional(StringMap),
  matchExpressions: optional(Schema.Array(Requirement))
}).pipe(Schema.filter((selector) => collectIssues(selector).map((i) => ({ path: i.path, message: i.message }))))

/** A label selector. */
export type LabelSelector = typeof LabelSelector.Type

/** Validation errors for a selector at `path` (e.g. `spec.selector`), worded as Kubernetes does. */
export const validate = (selector: LabelSelector, path = ""): ReadonlyArray<FieldError.FieldError> =>
  collectIssues(selector).map((i) => ({ path: formatSegments(path, i.path), message: i.message }))

/** Whether the selector is `{}` (no requirements): it selects every object. */
export const isEmpty = (selector: LabelSelector): boolean =>
  Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions?.length ?? 0) === 0

/** The selector's requirements in one list, `matchLabels` entries as single-value `In`. */
export const requirements = (selector: LabelSelector): ReadonlyArray<Requirement> => [
  ...Object.entries(selector.matchLabels ?? {}).map(([key, value]): Requirement => ({ key, operator: "In", values: [value] })),
  ...(selector.matchExpressions ?? [])
]

/** A compiled selector: tests one object's labels. */
export type Matcher = (labels: Readonly<Record<string, string>> | undefined) => boolean

/** Matches every object. */
export const everything: Matcher = () => true

/** Matches no object. */
export const nothing: Matcher = () => false

const hasOwn = Object.prototype.hasOwnProperty

interface Compiled {
  readonly key: string
  readonly op: Operator
  // A single value compares with ===; larger sets use a Set.
  readonly one: string | undefined
  readonly set: ReadonlySet<string> | undefined
}

/**
 * Compiles a selector once for matching many label sets. `{}` matches everything; an absent
 * selector (`undefined`) matches nothing, as Kubernetes treats a nil selector on workloads and
 * services. A selector that fails `validate` also matches nothing: it can never be admitted,
 * so failing closed is safe and keeps this function total.
 */
export const compile = (selector: LabelSelector | undefined): Matcher => {
  if (selector === undefined) return nothing
  if (collectIssues(selector).length > 0) return nothing
  const reqs: ReadonlyArray<Compiled> = requirements(selector).map((r) => {
    const values = r.values ?? []
    return {
      key: r.key,
      op: r.operator,
      one: values.length === 1 ? values[0] : undefined,
      set: values.length > 1 ? new Set(values) : undefined
    }
  })
  if (reqs.length === 0) return everything
  const n = reqs.length
  return (labels) => {
    const l = labels ?? {}
    for (let i = 0; i < n; i++) {
      const r = reqs[i]!
      const has = hasOwn.call(l, r.key)
      switch (r.op) {
        case "Exists":
          if (!has) return false
          break
        case "DoesNotExist":
          if (has) return false
          break
        case "In": {
          if (!has) return false
          const v = l[r.key]!
          if (r.set === undefined ? v !== r.one : !r.set.has(v)) return false
          break
        }
        case "NotIn": {
          if (!has) break
          const v = l[r.key]!
          if (r.set === undefined ? v === r.one : r.set.has(v)) return false
          break
        }
      }
    }
    return true
  }
}

// Selectors live inside stored objects that are replaced, never mutated, so caching by object
// identity is sound, and the WeakMap lets dropped objects take their matchers with them.
const cache = new WeakMap<LabelSelector, Matcher>()

/**
 * Whether `labels` satisfy `selector` (see `compile` for empty, absent and invalid selectors).
 * The compiled form is cached per selector object, so calling this in a loop compiles once.
 */
export const matches = (selector: LabelSelector | undefined, labels: Readonly<Record<string, string>> | undefined): boolean => {
  if (selector === undefined) return false
  let m = cache.get(selector)
  if (m === undefined) {
    m = compile(selector)
    cache.set(selector, m)
  }
  return m(labels)
}

// Defined in the model layer's error module; re-exported so `LabelSelector.LabelSelectorParseError` stays.
export { LabelSelectorParseError }

type TokenKind = "ident" | "in" | "notin" | "=" | "==" | "!=" | "!" | "(" | ")" | "," | "end"
interface Token {
  readonly kind: TokenKind
  readonly text: string
  readonly pos: number
}

const specials = new Set(["=", "!", "(", ")", ",", "<", ">"])
const isSpace = (c: string) => c === " " || c === "\t" || c === "\n" || c === "\r"

const tokenize = (input: string): Either.Either<ReadonlyArray<Token>, LabelSelectorParseError> => {
  const tokens: Array<Token> = []
  let i = 0
  while (i < input.length) {
    const c = input[i]!
    if (isSpace(c)) {
      i++
      continue
    }
    if (c === "=" || c === "!") {
      const two = input.slice(i, i + 2)
      if (two === "==" || two === "!=") {
        tokens.push({ kind: two, text: two, pos: i })
        i += 2
      } else {
        tokens.push({ kind: c, text: c, pos: i })
        i++
      }
      continue
    }
    if (c === "(" || c === ")" || c === ",") {
      tokens.push({ kind: c, text: c, pos: i })
      i++
      continue
    }
    if (c === "<" || c === ">") {
      return Either.left(
        new LabelSelectorParseError({ input, position: i, reason: `operator '${c}' is not supported in label selectors` })
      )
    }
    const start = i
    while (i < input.length && !isSpace(input[i]!) && !specials.has(input[i]!)) i++
    const text = input.slice(start, i)
    tokens.push({ kind: text === "in" ? "in" : text === "notin" ? "notin" : "ident", text, pos: start })
  }
  tokens.push({ kind: "end", text: "", pos: input.length })
  return Either.right(tokens)
}

/**
 * Parses the string form of a selector: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
 * `a` (exists) and `!a` (does not exist), comma-separated and all required (AND). The empty
 * string parses to `{}`, which selects everything. Keys and values are validated as labels.
 */
export const parse = (input: string): Either.Either<LabelSelector, LabelSelectorParseError> => {
  const lexed = tokenize(input)
  if (Either.isLeft(lexed)) return Either.left(lexed.left)
  const tokens = lexed.right
  let p = 0
  const peek = (): Token => tokens[p] ?? tokens[tokens.length - 1]!
  const next = (): Token => {
    const t = peek()
    if (t.kind !== "end") p++
    return t
  }
  const fail = (position: number, reason: string) => Either.left(new LabelSelectorParseError({ input, position, reason }))
  const describe = (t: Token) => (t.kind === "end" ? "end of input" : `'${t.text}'`)

  const checkKey = (t: Token) => {
    const errs = Validation.isQualifiedName(t.text)
    return errs.length === 0 ? undefined : fail(t.pos, `invalid label key ${JSON.stringify(t.text)}: ${errs.join("; ")}`)
  }
  const checkValue = (value: string, pos: number) => {
    const errs = Validation.isValidLabelValue(value)
    return errs.length === 0 ? undefined : fail(pos, `invalid label value ${JSON.stringify(value)}: ${errs.join("; ")}`)
  }

  const expressions: Array<Requirement> = []
  if (peek().kind === "end") return Either.right({})
  for (;;) {
    const first = next()
    if (first.kind === "!") {
      const key = next()
      if (key.kind !== "ident") return fail(key.pos, `found ${describe(key)}, expected: identifier`)
      const bad = checkKey(key)
      if (bad !== undefined) return bad
      expressions.push({ key: key.text, operator: "DoesNotExist" })
    } else if (first.kind === "ident") {
      const bad = checkKey(first)
      if (bad !== undefined) return bad
      const op = peek()
      if (op.kind === "," || op.kind === "end") {
        expressions.push({ key: first.text, operator: "Exists" })
      } else if (op.kind === "=" || op.kind === "==" || op.kind === "!=") {
        next()
        const v = peek()
        let value = ""
        if (v.kind === "ident") {
          next()
          value = v.text
        } else if (v.kind !== "," && v.kind !== "end") {
          return fail(v.pos, `found ${describe(v)}, expected: identifier`)
        }
        const badValue = checkValue(value, v.pos)
        if (badValue !== undefined) return badValue
        expressions.push({ key: first.text, operator: op.kind === "!=" ? "NotIn" : "In", values: [value] })
      } else if (op.kind === "in" || op.kind === "notin") {
        next()
        const open = next()
        if (open.kind !== "(") return fail(open.pos, `found ${describe(open)}, expected: '('`)
        const values: Array<string> = []
        if (peek().kind === ")") {
          return fail(peek().pos, `for 'in', 'notin' operators, values set can't be empty`)
        }
        for (;;) {
          const v = peek()
          let value = ""
          if (v.kind === "ident") {
            next()
            value = v.text
          } else if (v.kind !== "," && v.kind !== ")") {
            return fail(v.pos, `found ${describe(v)}, expected: identifier`)
          }
          const badValue = checkValue(value, v.pos)
          if (badValue !== undefined) return badValue
          values.push(value)
          const sep = next()
          if (sep.kind === ")") break
          if (sep.kind !== ",") return fail(sep.pos, `found ${describe(sep)}, expected: ',' or ')'`)
        }
        expressions.push({ key: first.text, operator: op.kind === "in" ? "In" : "NotIn", values })
      } else {
        return fail(op.pos, `found ${describe(op)}, expected: '=', '!=', '==', 'in', 'notin'`)
      }
    } else {
      return fail(first.pos, `found ${describe(first)}, expected: '!', identifier`)
    }
    const sep = next()
    if (sep.kind === "end") break
    if (sep.kind !== ",") return fail(sep.pos, `found ${describe(sep)}, expected: ','`)
  }
  return Either.right({ matchExpressions: expressions })
}

const formatRequirement = (r: Requirement): string => {
  const values = [...(r.values ?? [])].sort()
  switch (r.operator) {
    case "Exists":
      return r.key
    case "DoesNotExist":
      return `!${r.key}`
    case "In":
      return values.length === 1 ? `${r.key}=${values[0]}` : `${r.key} in (${values.join(",")})`
    case "NotIn":
      return values.length === 1 ? `${r.key}!=${values[0]}` : `${r.key} notin (${values.join(",")})`
  }
}

/**
 * The string form of a selector, requirements sorted by key as kube-apiserver prints them
 * (e.g. Deployment `status.selector`). Single-value `In`/`NotIn` print as `=`/`!=`, which
 * parse back to the same requirement; `{}` prints as the empty string.
 */
export const formatSelector = (selector: LabelSelector): string =>
  [...requirements(selector)]
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map(formatRequirement)
    .join(",")
