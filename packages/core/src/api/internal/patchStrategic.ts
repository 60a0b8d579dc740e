/**
 * Kubernetes strategic merge patch, server side: a port of apimachinery's
 * `strategicpatch.StrategicMergeMapPatch` (mergeMap / mergeSlice / normalizeElementOrder) that
 * reads list strategies from a `MergeKeys` table instead of Go struct tags.
 *
 * Like JSON merge patch, except for lists tagged `patchStrategy:"merge"`: lists of objects merge
 * element-wise by their merge key, lists of primitives merge as sets. Directives: `$patch`
 * (replace / delete / merge), `$retainKeys`, `$deleteFromPrimitiveList/<field>`,
 * `$setElementOrder/<field>`. Element order follows Kubernetes exactly: patch items keep the
 * patch's order, server-only items keep the server's, and the two are interleaved by
 * `mergeSortedSlice`, so an item new to the list lands before the server-only items that follow
 * the last patch item that already existed (adding one container to `[a]` gives `[new, a]`).
 *
 * Deliberate differences from Kubernetes, all where it returns an odd result or a 500:
 * - A value the patch adds where the object had nothing is itself merged into an empty value,
 *   so directives and `null`s inside it are applied, not stored verbatim.
 * - `$patch: merge` is accepted as "the default" on maps and list elements (Kubernetes rejects it).
 * - `$deleteFromPrimitiveList` on an absent list is a no-op (Kubernetes stores the deletion list).
 * - `$setElementOrder` for a list without a merge strategy is ignored, and `$patch` elements in
 *   such a list are dropped rather than stored as (empty) items.
 * - Malformed directives are 400 (Kubernetes answers some of them with 500).
 */
import { Either } from "effect"
import { malformed, notApplicable, type PatchError } from "./patchError.js"
import { clone, deleteOwn, getOwn, hasOwn, isObject, type JsonObject, jsonType, setOwn, show } from "./patchValue.js"

/**
 * List merge strategies of one kind: a dotted field path, with `[]` after each list crossed
 * (`spec.containers[].env`), mapped to the list's merge key (`name`), or to `byValue` for a list
 * of primitives merged as a set (`metadata.finalizers`). Lists not named here are replaced.
 */
export type MergeKeys = Readonly<Record<string, string>>

/** The `MergeKeys` value for a list of primitives that merges as a set. */
export const byValue = "$value"

const directiveMarker = "$patch"
const retainKeysDirective = "$retainKeys"
const deleteFromPrimitiveListPrefix = "$deleteFromPrimitiveList"
const setElementOrderPrefix = "$setElementOrder"

// apimachinery's mergepatch error texts, so clients see the same words.
const badPrimitiveList = "invalid patch format of primitive list"
const badRetainKeys = "invalid patch format of retainKeys"
const badSetElementOrder = "invalid patch format of setElementOrder list"
const noMergeKey = (item: unknown, key: string) => malformed(`map: ${show(item)} does not contain declared merge key: ${key}`)
const badPatchType = (directive: unknown, item: unknown) =>
  malformed(`unknown patch type: ${show(directive)} in map: ${show(item)}`)

type Result<A> = Either.Either<A, PatchError>

const fail = <A>(error: PatchError): Result<A> => Either.left(error)

/** Applies a strategic merge patch (an object) to `document`; neither input is changed. */
export const applyStrategicMergePatch = (document: unknown, patch: unknown, keys: MergeKeys): Result<unknown> => {
  if (!isObject(patch)) return fail(malformed(`invalid JSON document: a strategic merge patch is a JSON object, not ${jsonType(patch)}`))
  const base = isObject(document) ? (clone(document) as JsonObject) : {} // a clone of an object is an object
  // Both are private copies from here on, so the merge may change them in place as Go's does.
  return mergeMap(base, clone(patch) as JsonObject, "", keys) // likewise
}

const childPath = (path: string, field: string) => (path === "" ? field : `${path}.${field}`)
const elementPath = (path: string) => `${path}[]`

/** The field a `$prefix/field` directive names. */
const directiveField = (key: string, prefix: string): string | undefined => {
  const slash = key.indexOf("/")
  return slash < 0 || key.slice(0, slash) !== prefix ? undefined : key.slice(slash + 1)
}

const mergeMap = (original: JsonObject, patch: JsonObject, path: string, keys: MergeKeys): Result<JsonObject> => {
  if (hasOwn(patch, directiveMarker)) {
    const directive = patch[directiveMarker]
    deleteOwn(patch, directiveMarker)
    if (directive === "delete") return Either.right({})
    if (directive === "replace") return mergeMap({}, patch, path, keys)
    if (directive !== "merge") return fail(badPatchType(directive, patch))
  }

  const retained = applyRetainKeys(original, patch)
  if (Either.isLeft(retained)) return fail(retained.left)

  const ordered = applySetElementOrder(original, patch, path, keys)
  if (Either.isLeft(ordered)) return fail(ordered.left)

  for (const key of Object.keys(patch)) {
    const patchValue = patch[key]
    const deleteFrom = key.startsWith(deleteFromPrimitiveListPrefix)
    const field = deleteFrom ? directiveField(key, deleteFromPrimitiveListPrefix) : key
    if (field === undefined) return fail(malformed(badPrimitiveList))

    if (patchValue === null) {
      deleteOwn(original, field)
      continue
    }
    const fieldPath = childPath(path, field)
    if (deleteFrom) {
      const kept = deleteFromPrimitiveList(getOwn(original, field), patchValue, fieldPath)
      if (Either.isLeft(kept)) return fail(kept.left)
      if (kept.right !== undefined) setOwn(original, field, kept.right)
      continue
    }

    const current = getOwn(original, field)
    const merged =
      isObject(current) && isObject(patchValue)
        ? mergeMap(current, patchValue, fieldPath, keys)
        : Array.isArray(current) && Array.isArray(patchValue)
          ? mergeListField(current, patchValue, fieldPath, keys)
          : fresh(patchValue, fieldPath, keys)
    if (Either.isLeft(merged)) return fail(merged.left)
    setOwn(original, field, merged.right)
  }
  return Either.right(original)
}

/** A patch value placed where the object had nothing (or a different type): merged into empty. */
const fresh = (value: unknown, path: string, keys: MergeKeys): Result<unknown> => {
  if (isObject(value)) return mergeMap({}, value, path, keys)
  if (Array.isArray(value)) return mergeListField([], value, path, keys)
  return Either.right(value)
}

/** A list field: merged if the table names its strategy, replaced otherwise. */
const mergeListField = (original: Array<unknown>, patch: Array<unknown>, path: string, keys: MergeKeys): Result<Array<unknown>> => {
  const mergeKey = keys[path]
  if (mergeKey !== undefined) return mergeList(original, patch, path, mergeKey, keys)
  // Replace: the patch list wins, with any directives inside its objects applied. A `$patch`
  // element is a directive, not data (Kubernetes would store it as an empty element).
  const out: Array<unknown> = []
  for (const item of patch) {
    if (isObject(item) && hasOwn(item, directiveMarker)) {
      const directive = item[directiveMarker]
      if (directive === "replace" || directive === "merge" || directive === "delete") continue
      return fail(badPatchType(directive, item))
    }
    const value = isObject(item) ? mergeMap({}, item, elementPath(path), keys) : Either.right(item)
    if (Either.isLeft(value)) return fail(value.left)
    out.push(value.right)
  }
  return Either.right(out)
}

/** `$retainKeys`: drop every field of `original` the list does not name. */
const applyRetainKeys = (original: JsonObject, patch: JsonObject): Result<void> => {
  if (!hasOwn(patch, retainKeysDirective)) return Either.right(undefined)
  const list = patch[retainKeysDirective]
  deleteOwn(patch, retainKeysDirective)
  if (!Array.isArray(list)) return fail(malformed(badRetainKeys))
  const retain = new Set<unknown>(list)
  // Every field the patch sets must itself be retained.
  for (const key of Object.keys(patch)) {
    if (patch[key] === null || key.startsWith(deleteFromPrimitiveListPrefix) || key.startsWith(setElementOrderPrefix)) continue
    if (!retain.has(key)) return fail(malformed(badRetainKeys))
  }
  for (const key of Object.keys(original)) if (!retain.has(key)) deleteOwn(original, key)
  return Either.right(undefined)
}

/**
 * `$setElementOrder/<field>`: merge that list now and order it as the directive says (precedence:
 * directive, then patch order, then server order), then take it out of the patch.
 */
const applySetElementOrder = (original: JsonObject, patch: JsonObject, path: string, keys: MergeKeys): Result<void> => {
  for (const key of Object.keys(patch)) {
    if (!key.startsWith(setElementOrderPrefix)) continue
    const order = patch[key]
    deleteOwn(patch, key)
    const field = directiveField(key, setElementOrderPrefix)
    if (field === undefined || !Array.isArray(order)) return fail(malformed(badSetElementOrder))
    const fieldPath = childPath(path, field)
    const mergeKey = keys[fieldPath]
    if (mergeKey === undefined) continue
    const originalList = getOwn(original, field)
    const patchList = getOwn(patch, field)
    if (originalList !== undefined && !Array.isArray(originalList)) return fail(malformed(`${fieldPath}: expected a list`))
    if (patchList !== undefined && patchList !== null && !Array.isArray(patchList)) return fail(malformed(badSetElementOrder))
    if (patchList === null) continue

    const valid = validateOrder(patchList ?? [], order, mergeKey)
    if (Either.isLeft(valid)) return fail(valid.left)

    let merged: Array<unknown>
    if (patchList === undefined) {
      if (originalList === undefined) continue
      merged = originalList
    } else {
      const result = mergeList(originalList ?? [], patchList, fieldPath, mergeKey, keys)
      if (Either.isLeft(result)) return fail(result.left)
      merged = result.right
    }
    const keyOf = keyFunction(mergeKey)
    const inOrder = new Set(order.map(keyOf))
    const sorted = normalizeOrder(
      merged.filter((item) => inOrder.has(keyOf(item))),
      merged.filter((item) => !inOrder.has(keyOf(item))),
      order,
      originalList ?? [],
      keyOf
    )
    setOwn(original, field, sorted)
    deleteOwn(patch, field)
  }
  return Either.right(undefined)
}

/** The patch list's items (deletions aside) must appear in the same relative order as the directive's. */
const validateOrder = (patchList: Array<unknown>, order: Array<unknown>, mergeKey: string): Result<void> => {
  const items = patchList.filter((item) => !(isObject(item) && getOwn(item, directiveMarker) === "delete"))
  const keyOf = keyFunction(mergeKey)
  if (mergeKey !== byValue) {
    for (const item of [...items, ...order]) {
      if (!isObject(item)) return fail(malformed(badSetElementOrder))
      if (!hasOwn(item, mergeKey) && !hasOwn(item, directiveMarker)) return fail(noMergeKey(item, mergeKey))
    }
  }
  // validatePatchWithSetOrderList: walk both lists; every patch item must be found in order.
  let p = 0
  let o = 0
  while (p < items.length && o < order.length) {
    const item = items[p]
    if (isObject(item) && hasOwn(item, directiveMarker)) {
      p++
      continue
    }
    if (keyOf(item) === keyOf(order[o])) p++
    o++
  }
  return p < items.length && o >= order.length
    ? fail(malformed(`the order in patch list ${show(patchList)} doesn't match ${setElementOrderPrefix} list ${show(order)}`))
    : Either.right(undefined)
}

/** `$deleteFromPrimitiveList/<field>`: remove these values from a list of primitives. */
const deleteFromPrimitiveList = (current: unknown, toDelete: unknown, path: string): Result<Array<unknown> | undefined> => {
  if (!Array.isArray(toDelete)) return fail(malformed(badPrimitiveList))
  if (current === undefined) return Either.right(undefined)
  if (!Array.isArray(current) || [...current, ...toDelete].some((item) => isObject(item) || Array.isArray(item))) {
    return fail(malformed(`${path}: ${badPrimitiveList}`))
  }
  const drop = new Set<unknown>(toDelete)
  return Either.right(current.filter((item) => !drop.has(item)))
}

/** What identifies a list item: its merge key's value, or the item itself for primitives. */
const keyFunction =
  (mergeKey: string) =>
  (item: unknown): unknown =>
    mergeKey === byValue ? item : isObject(item) ? getOwn(item, mergeKey) : undefined

/** Every item of both lists must have the same JSON type, and lists of lists are not supported. */
const elementType = (original: Array<unknown>, patch: Array<unknown>): Result<string> => {
  let type: string | undefined
  for (const item of [...original, ...patch]) {
    const t = jsonType(item)
    if (t === "array") return fail(notApplicable("lists of lists are not supported"))
    if (type !== undefined && t !== type) {
      return fail(malformed(`list element types are not identical: ${show(original)} ${show(patch)}`))
    }
    type = t
  }
  return Either.right(type ?? "null")
}

/** `mergeSlice`: merge two lists of a field whose strategy is merge. */
const mergeList = (
  original: Array<unknown>,
  patch: Array<unknown>,
  path: string,
  mergeKey: string,
  keys: MergeKeys
): Result<Array<unknown>> => {
  if (original.length === 0 && patch.length === 0) return Either.right(original)
  const type = elementType(original, patch)
  if (Either.isLeft(type)) return fail(type.left)

  if (type.right !== "object") {
    // Primitives merge as a set.
    const keyOf = keyFunction(byValue)
    const seen = new Set<unknown>()
    const merged = [...original, ...patch].filter((item) => (seen.has(item) ? false : (seen.add(item), true)))
    const inPatch = new Set(patch)
    return Either.right(
      normalizeOrder(
        merged.filter((item) => inPatch.has(item)),
        merged.filter((item) => !inPatch.has(item)),
        patch,
        original,
        keyOf
      )
    )
  }
  if (mergeKey === byValue) return fail(malformed(`cannot merge lists without merge key for ${path}`))

  const special = applySpecialElements(original, patch, mergeKey)
  if (Either.isLeft(special)) return fail(special.left)
  const { replace } = special.right
  // On `$patch: replace` the patch's other items become the list, as if merged into nothing.
  const base = replace ? [] : special.right.base
  const items = special.right.items
  const merged = mergeByKey(base, items, path, mergeKey, keys)
  if (Either.isLeft(merged)) return fail(merged.left)

  const keyOf = keyFunction(mergeKey)
  for (const item of [...merged.right, ...base]) if (!isObject(item) || !hasOwn(item, mergeKey)) return fail(noMergeKey(item, mergeKey))
  const inPatch = new Set(items.map(keyOf))
  return Either.right(
    normalizeOrder(
      merged.right.filter((item) => inPatch.has(keyOf(item))),
      merged.right.filter((item) => !inPatch.has(keyOf(item))),
      items,
      replace ? items : base,
      keyOf
    )
  )
}

/**
 * `mergeSliceWithSpecialElements`: apply `$patch: delete` items to the original, and on
 * `$patch: replace` make the patch's other items the whole list.
 */
const applySpecialElements = (
  original: Array<unknown>,
  patch: Array<unknown>,
  mergeKey: string
): Result<{ base: Array<unknown>; items: Array<unknown>; replace: boolean }> => {
  let replace = false
  const items: Array<unknown> = []
  // Collected and applied in one pass: filtering the list once per deletion is quadratic.
  const deleted = new Set<unknown>()
  for (const item of patch) {
    if (!isObject(item) || !hasOwn(item, directiveMarker)) {
      items.push(item)
      continue
    }
    const directive = item[directiveMarker]
    if (directive === "delete") {
      if (!hasOwn(item, mergeKey)) return fail(noMergeKey(item, mergeKey))
      deleted.add(item[mergeKey])
    } else if (directive === "replace") {
      replace = true
    } else if (directive !== "merge") {
      return fail(badPatchType(directive, item))
    }
  }
  const base =
    deleted.size === 0
      ? original
      : original.filter((entry) => !(isObject(entry) && hasOwn(entry, mergeKey) && deleted.has(entry[mergeKey])))
  return Either.right({ base, items, replace })
}

/** `mergeSliceWithoutSpecialElements`: merge items matched by key, append the rest. */
const mergeByKey = (
  base: Array<unknown>,
  items: Array<unknown>,
  path: string,
  mergeKey: string,
  keys: MergeKeys
): Result<Array<unknown>> => {
  const out = [...base]
  // The first item holding each key value, found through a map: a search of the list per patch
  // item would make a patch of n items against a list of m cost n × m.
  const firstWith = new Map<unknown, number>()
  const remember = (entry: unknown, index: number) => {
    if (isObject(entry) && hasOwn(entry, mergeKey) && !firstWith.has(entry[mergeKey])) firstWith.set(entry[mergeKey], index)
  }
  out.forEach(remember)
  for (const item of items) {
    if (!isObject(item) || !hasOwn(item, mergeKey)) return fail(noMergeKey(item, mergeKey))
    const index = firstWith.get(item[mergeKey])
    const target = index !== undefined ? out[index] : undefined
    const merged = mergeMap(isObject(target) ? target : {}, item, elementPath(path), keys)
    if (Either.isLeft(merged)) return fail(merged.left)
    if (index !== undefined) out[index] = merged.right
    else {
      out.push(merged.right)
      remember(merged.right, out.length - 1)
    }
  }
  return Either.right(out)
}

/**
 * `normalizeElementOrder`: sort the patch's items by `patchOrder` and the server-only items by
 * `serverOrder`, then interleave them (`mergeSortedSlice`): a server-only item goes first only
 * when the server had it before the next patch item; a patch item new to the server goes first.
 */
const normalizeOrder = (
  patchItems: Array<unknown>,
  serverOnly: Array<unknown>,
  patchOrder: ReadonlyArray<unknown>,
  serverOrder: ReadonlyArray<unknown>,
  keyOf: (item: unknown) => unknown
): Array<unknown> => {
  const indexIn = (list: ReadonlyArray<unknown>) => {
    const positions = new Map<unknown, number>()
    list.forEach((item, i) => {
      const key = keyOf(item)
      if (!positions.has(key)) positions.set(key, i)
    })
    return (item: unknown) => positions.get(keyOf(item)) ?? -1
  }
  const byPatch = indexIn(patchOrder)
  const byServer = indexIn(serverOrder)
  // Stable: items the order does not mention keep their relative place at the end.
  const sortBy = (items: Array<unknown>, index: (item: unknown) => number) =>
    items
      .map((item, i) => ({ item, i, at: index(item) < 0 ? Number.MAX_SAFE_INTEGER : index(item) }))
      .sort((a, b) => (a.at !== b.at ? a.at - b.at : a.i - b.i))
      .map(({ item }) => item)
  const left = sortBy(serverOnly, byServer)
  const right = sortBy(patchItems, byPatch)
  const out: Array<unknown> = []
  let i = 0
  let j = 0
  while (i < left.length || j < right.length) {
    if (i >= left.length) out.push(right[j++])
    else if (j >= right.length) out.push(left[i++])
    else {
      const li = byServer(left[i])
      const ri = byServer(right[j])
      if (li >= 0 && ri >= 0 && li < ri) out.push(left[i++])
      else out.push(right[j++])
    }
  }
  return out
}
