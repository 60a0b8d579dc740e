/**
 * RFC 6902 JSON Patch over RFC 6901 JSON Pointers, applied to a private copy of the document so
 * the input is never changed. Hand-written because no JSON Patch library is installed; the
 * messages follow evanphx/json-patch, the library kube-apiserver uses, so they read the same.
 *
 * A body that is not an array of objects is malformed (400); an operation that cannot be applied
 * (unknown op, missing member, failed `test`) is 422, as in kube-apiserver since 1.12.
 *
 * `copy` is the one operation that makes a document larger than the patch that grows it (40
 * copies of a member into itself double it 40 times), so, as json-patch's
 * `AccumulatedCopySizeLimit` does in kube-apiserver, the JSON size of everything copied is summed
 * and the patch fails with 422 once the sum passes `maxCopyBytes`.
 */
import { Either } from "effect"
import { malformed, notApplicable, type PatchError, tooLarge } from "./patchError.js"
import { clone, deepEqual, deleteOwn, getOwn, hasOwn, isObject, type JsonObject, jsonSizeAtMost, jsonType, setOwn } from "./patchValue.js"

/** kube-apiserver's limit on operations in one JSON Patch (`maxJSONPatchOperations`). */
export const maxOperations = 10000

/**
 * How many bytes of JSON the `copy` operations of one patch may copy in all: kube-apiserver sets
 * json-patch's `AccumulatedCopySizeLimit` to its request body limit, 3 MiB.
 */
export const maxCopyBytes = 3 * 1024 * 1024

/** Applies the JSON Patch `body` (parsed JSON) to `document`. */
export const applyJsonPatch = (document: unknown, body: unknown): Either.Either<unknown, PatchError> => {
  if (!Array.isArray(body)) {
    return Either.left(malformed(`json: cannot unmarshal ${jsonType(body)} into Go value of type jsonpatch.Patch`))
  }
  const operations: Array<JsonObject> = []
  for (const element of body) {
    if (!isObject(element)) {
      return Either.left(malformed(`json: cannot unmarshal ${jsonType(element)} into Go value of type jsonpatch.Operation`))
    }
    operations.push(element)
  }
  if (operations.length > maxOperations) {
    return Either.left(tooLarge(`The allowed maximum operations in a JSON patch is ${maxOperations}, got ${operations.length}`))
  }
  let doc = clone(document)
  const copied = { bytes: 0 }
  for (const operation of operations) {
    const next = applyOperation(doc, operation, copied)
    if (Either.isLeft(next)) return next
    doc = next.right
  }
  return Either.right(doc)
}

type Step = Either.Either<unknown, PatchError>

/** The running total of bytes the patch's `copy` operations have copied so far. */
interface CopyBudget {
  bytes: number
}

const applyOperation = (doc: unknown, operation: JsonObject, copied: CopyBudget): Step => {
  const op = getOwn(operation, "op")
  const kind = typeof op === "string" ? op : "unknown"
  const path = pointerMember(operation, kind, "path")
  if (Either.isLeft(path)) return path
  switch (kind) {
    case "add":
    case "replace":
    case "test": {
      if (!hasOwn(operation, "value")) return Either.left(notApplicable(`${kind} operation is missing the value field`))
      const value = operation["value"]
      if (kind === "add") return add(doc, path.right, clone(value), "add")
      if (kind === "replace") return replace(doc, path.right, clone(value))
      return test(doc, path.right, value)
    }
    case "remove":
      return remove(doc, path.right, "remove")
    case "move":
    case "copy": {
      const from = pointerMember(operation, kind, "from")
      if (Either.isLeft(from)) return from
      return kind === "move" ? move(doc, from.right, path.right) : copy(doc, from.right, path.right, copied)
    }
    default:
      return Either.left(notApplicable(`Unexpected kind: ${kind}`))
  }
}

/** A parsed pointer: its text (for messages) and its unescaped reference tokens. */
interface Pointer {
  readonly text: string
  readonly tokens: ReadonlyArray<string>
}

const pointerMember = (operation: JsonObject, kind: string, member: "path" | "from"): Either.Either<Pointer, PatchError> => {
  const text = getOwn(operation, member)
  if (typeof text !== "string") return Either.left(notApplicable(`${kind} operation is missing the ${member} field`))
  if (text === "") return Either.right({ text, tokens: [] })
  // RFC 6901: a pointer is empty or starts with "/", and "~" only escapes "0" or "1".
  if (!text.startsWith("/") || /~([^01]|$)/.test(text)) {
    return Either.left(notApplicable(`${kind} operation does not apply: invalid JSON pointer: ${JSON.stringify(text)}`))
  }
  const tokens = text
    .slice(1)
    .split("/")
    .map((token) => token.replace(/~1/g, "/").replace(/~0/g, "~"))
  return Either.right({ text, tokens })
}

// Array indices are decimal without leading zeros (RFC 6901 §4); "-" is handled by callers.
const arrayIndex = (token: string): number | undefined => (/^(0|[1-9][0-9]*)$/.test(token) ? Number(token) : undefined)

const missing = (kind: string, pointer: Pointer, what = "path"): Step =>
  Either.left(notApplicable(`${kind} operation does not apply: doc is missing ${what}: ${JSON.stringify(pointer.text)}`))

/** The value a pointer refers to, or `undefined` (JSON has no `undefined`, so that means absent). */
const resolve = (doc: unknown, tokens: ReadonlyArray<string>): unknown => {
  let current: unknown = doc
  for (const token of tokens) {
    if (Array.isArray(current)) {
      const index = arrayIndex(token)
      if (index === undefined || index >= current.length) return undefined
      current = current[index]
    } else if (isObject(current)) {
      if (!hasOwn(current, token)) return undefined
      current = current[token]
    } else {
      return undefined
    }
  }
  return current
}

/** The container holding the pointer's last token, if it exists and is an object or array. */
const parentOf = (doc: unknown, pointer: Pointer): { container: JsonObject | Array<unknown>; key: string } | undefined => {
  const key = pointer.tokens[pointer.tokens.length - 1]
  if (key === undefined) return undefined
  const container = resolve(doc, pointer.tokens.slice(0, -1))
  return Array.isArray(container) || isObject(container) ? { container, key } : undefined
}

const add = (doc: unknown, pointer: Pointer, value: unknown, kind: string): Step => {
  if (pointer.tokens.length === 0) return Either.right(value)
  const parent = parentOf(doc, pointer)
  if (parent === undefined) return missing(kind, pointer)
  const { container, key } = parent
  if (Array.isArray(container)) {
    const index = key === "-" ? container.length : arrayIndex(key)
    if (index === undefined || index > container.length) {
      return Either.left(notApplicable(`${kind} operation does not apply: index out of bounds: ${JSON.stringify(pointer.text)}`))
    }
    container.splice(index, 0, value)
  } else {
    setOwn(container, key, value)
  }
  return Either.right(doc)
}

const remove = (doc: unknown, pointer: Pointer, kind: string): Step => {
  const parent = parentOf(doc, pointer)
  if (parent === undefined) return missing(kind, pointer)
  const { container, key } = parent
  if (Array.isArray(container)) {
    const index = arrayIndex(key)
    if (index === undefined || index >= container.length) return missing(kind, pointer)
    container.splice(index, 1)
  } else {
    if (!hasOwn(container, key)) return missing(kind, pointer)
    deleteOwn(container, key)
  }
  return Either.right(doc)
}

const replace = (doc: unknown, pointer: Pointer, value: unknown): Step => {
  if (pointer.tokens.length === 0) return Either.right(value)
  const parent = parentOf(doc, pointer)
  if (parent === undefined) return missing("replace", pointer)
  const { container, key } = parent
  if (Array.isArray(container)) {
    const index = arrayIndex(key)
    if (index === undefined || index >= container.length) return missing("replace", pointer)
    container[index] = value
  } else {
    if (!hasOwn(container, key)) return missing("replace", pointer)
    setOwn(container, key, value)
  }
  return Either.right(doc)
}

const move = (doc: unknown, from: Pointer, path: Pointer): Step => {
  const value = resolve(doc, from.tokens)
  if (value === undefined) return missing("move", from, "from path")
  if (from.text === path.text) return Either.right(doc)
  // RFC 6902 §4.4: a location cannot be moved into one of its children.
  if (path.text.startsWith(`${from.text}/`)) {
    return Either.left(
      notApplicable(`move operation does not apply: cannot move ${JSON.stringify(from.text)} into its child ${JSON.stringify(path.text)}`)
    )
  }
  const removed = remove(doc, from, "move")
  if (Either.isLeft(removed)) return removed
  return add(removed.right, path, value, "move")
}

const copy = (doc: unknown, from: Pointer, path: Pointer, copied: CopyBudget): Step => {
  const value = resolve(doc, from.tokens)
  if (value === undefined) return missing("copy", from, "from path")
  // Measured before cloning, and only as far as the budget left, so a refused copy costs little.
  copied.bytes += jsonSizeAtMost(value, maxCopyBytes - copied.bytes)
  if (copied.bytes > maxCopyBytes) {
    return Either.left(
      notApplicable(
        `Unable to complete the copy, the accumulated size increase of copy is ${copied.bytes}, exceeding the limit ${maxCopyBytes}`
      )
    )
  }
  return add(doc, path, clone(value), "copy")
}

const test = (doc: unknown, pointer: Pointer, expected: unknown): Step => {
  const actual = resolve(doc, pointer.tokens)
  if (actual === undefined) return missing("test", pointer)
  return deepEqual(actual, expected)
    ? Either.right(doc)
    : Either.left(notApplicable(`testing value ${pointer.text} failed: test failed`))
}
