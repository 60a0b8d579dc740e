/**
 * Plain-JSON helpers the three patch appliers share: type tests, own-property access that is safe
 * for keys like `__proto__` and `constructor`, deep copy, deep equality, and a nesting-depth check
 * that keeps the recursive appliers from overflowing the stack on hostile input.
 */

/** A JSON object as `JSON.parse` produces it. */
export type JsonObject = { [key: string]: unknown }

/** Whether `value` is a JSON object (not an array, not null). */
export const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Whether `object` has `key` as its own property (never an inherited one). */
export const hasOwn = (object: JsonObject, key: string): boolean => Object.prototype.hasOwnProperty.call(object, key)

/** `object[key]` if it is an own property, else `undefined`. */
export const getOwn = (object: JsonObject, key: string): unknown => (hasOwn(object, key) ? object[key] : undefined)

/** Sets an own property; `__proto__` is defined as data rather than replacing the prototype. */
export const setOwn = (object: JsonObject, key: string, value: unknown): void => {
  if (key === "__proto__") {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true })
  } else {
    object[key] = value
  }
}

/** Removes an own property if present. */
export const deleteOwn = (object: JsonObject, key: string): void => {
  if (hasOwn(object, key)) delete object[key]
}

/** A deep copy of a JSON value, sharing nothing with it. */
export const clone = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(clone)
  if (isObject(value)) {
    const copy: JsonObject = {}
    for (const key of Object.keys(value)) setOwn(copy, key, clone(value[key]))
    return copy
  }
  return value
}

/** JSON equality: objects compare by members regardless of order, arrays element-wise. */
export const deepEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false
    return a.every((item, i) => deepEqual(item, b[i]))
  }
  if (isObject(a)) {
    if (!isObject(b)) return false
    const keys = Object.keys(a)
    if (keys.length !== Object.keys(b).length) return false
    return keys.every((key) => hasOwn(b, key) && deepEqual(a[key], b[key]))
  }
  return false
}

/** The JSON type of a value, as Go's decoder names it in messages. */
export const jsonType = (value: unknown): "object" | "array" | "string" | "number" | "bool" | "null" => {
  if (value === null || value === undefined) return "null"
  if (Array.isArray(value)) return "array"
  if (typeof value === "string") return "string"
  if (typeof value === "number") return "number"
  if (typeof value === "boolean") return "bool"
  return "object"
}

/** Compact JSON for error messages. */
export const show = (value: unknown): string => JSON.stringify(value) ?? String(value)

/**
 * Whether `value` nests at most `max` arrays/objects deep. Iterative, so it is safe to call on
 * input that would overflow the stack of the recursive appliers.
 */
export const depthAtMost = (value: unknown, max: number): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [current, depth] = top
    const children = Array.isArray(current) ? current : isObject(current) ? Object.values(current) : undefined
    if (children === undefined) continue
    if (depth + 1 > max) return false
    for (const child of children) stack.push([child, depth + 1])
  }
  return true
}

/** How deep a patch body may nest; Kubernetes objects rarely exceed 20 levels. */
export const maxDepth = 1000

/**
 * An estimate of `value`'s compact JSON length (strings counted without escapes, numbers by
 * their shortest form), computed iteratively and abandoned as soon as it passes `budget`: the
 * answer is exact up to escapes when at most `budget`, and some number above `budget` otherwise,
 * so measuring a huge value costs no more than walking `budget` characters of it.
 */
export const jsonSizeAtMost = (value: unknown, budget: number): number => {
  let size = 0
  const stack: Array<unknown> = [value]
  for (let top = stack.pop(); ; top = stack.pop()) {
    if (Array.isArray(top)) {
      // Brackets and commas.
      size += top.length === 0 ? 2 : top.length + 1
      for (const item of top) stack.push(item)
    } else if (isObject(top)) {
      const keys = Object.keys(top)
      size += keys.length === 0 ? 2 : keys.length + 1
      for (const key of keys) {
        // The quoted key and its colon.
        size += key.length + 3
        stack.push(top[key])
      }
    } else if (typeof top === "string") size += top.length + 2
    else if (typeof top === "number") size += String(top).length
    else if (typeof top === "boolean") size += top ? 4 : 5
    else if (top === null) size += 4
    if (size > budget) return size
    if (stack.length === 0) return size
  }
}
