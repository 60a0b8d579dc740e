// What a PATCH can make the server compute is bounded (issue 29): JSON Patch copies are capped
// in total like json-patch's AccumulatedCopySizeLimit, a result over the object size limit is
// 413 before it is decoded, and strategic merges take time linear in the object and the patch.
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { maxBodyDepth, maxObjectBytes } from "../../src/api/Body.js"
import { jsonSizeAtMost } from "../../src/api/internal/patchValue.js"
import * as Patch from "../../src/api/Patch.js"

const status = (result: Either.Either<unknown, Patch.PatchError>) => {
  if (Either.isRight(result)) throw new Error("expected the patch to fail")
  const s = Patch.toApiError(result.left).status
  return { code: s.code, reason: s.reason, detail: result.left.detail }
}

const configMap = (annotations: Record<string, string>) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "c", namespace: "a", annotations }
})

// The patch of issue 29: each copy puts the whole map into itself under a new key, so the
// document doubles 40 times (100 bytes × 2^40 ≈ 100 TiB unbounded).
const doublingPatch = Array.from({ length: 40 }, (_, i) => ({ op: "copy", from: "/metadata/annotations", path: `/metadata/annotations/k${i}` }))

describe("JSON Patch copy operations are bounded in what they copy", () => {
  it("the doubling patch of issue 29 is 422 naming the accumulated copy size, at once", () => {
    const started = performance.now()
    const result = status(Patch.apply(Patch.contentTypes.json, configMap({ a: "x".repeat(100) }), doublingPatch))
    expect(result).toMatchObject({ code: 422, reason: "Invalid" })
    expect(result.detail).toMatch(/^Unable to complete the copy, the accumulated size increase of copy is \d+, exceeding the limit 3145728$/)
    // Generous for a loaded machine: unbounded, this patch never finishes.
    expect(performance.now() - started).toBeLessThan(10_000)
  })

  it.each<[string, number, number, "ok" | 422]>([
    // [case, bytes of the copied value, copies, outcome]
    ["one copy of a small value", 100, 1, "ok"],
    ["two copies of a 1 MiB value (2 MiB in all)", 1024 * 1024, 2, "ok"],
    ["three copies of a 1.1 MiB value (3.3 MiB in all)", 1.1 * 1024 * 1024, 3, 422],
    ["one copy of a value just over 3 MiB", 3 * 1024 * 1024 + 1, 1, 422]
  ])("%s", (_name, bytes, copies, outcome) => {
    // The copied string's JSON is its length plus two quotes.
    const value = "x".repeat(Math.round(bytes) - 2)
    const ops = Array.from({ length: copies }, (_, i) => ({ op: "copy", from: "/v", path: `/c${i}` }))
    const result = Patch.jsonPatch({ v: value }, ops)
    if (outcome === "ok") expect(Either.isRight(result)).toBe(true)
    else expect(status(result)).toMatchObject({ code: 422, reason: "Invalid" })
  })

  it("moves, adds and tests do not count toward the copy limit", () => {
    const big = "x".repeat(2 * 1024 * 1024)
    const ops = [
      { op: "move", from: "/v", path: "/w" },
      { op: "move", from: "/w", path: "/v" },
      { op: "test", path: "/v", value: big },
      { op: "copy", from: "/v", path: "/copy" }
    ]
    expect(Either.isRight(Patch.jsonPatch({ v: big }, ops))).toBe(true)
  })
})

describe("a patched object over the object size limit is 413 before anything else looks at it", () => {
  const half = "x".repeat(Math.ceil(maxObjectBytes / 2))
  it.each<[string, string, unknown]>([
    ["a JSON Patch adding a value", Patch.contentTypes.json, [{ op: "add", path: "/metadata/annotations/b", value: half }]],
    ["a merge patch", Patch.contentTypes.merge, { metadata: { annotations: { b: half } } }],
    ["a strategic merge patch", Patch.contentTypes.strategic, { metadata: { annotations: { b: half } } }]
  ])("%s growing a 0.75 MiB ConfigMap by 0.75 MiB", (_name, contentType, patch) => {
    const result = status(Patch.apply(contentType, configMap({ a: half }), patch))
    expect(result).toMatchObject({ code: 413, reason: "RequestEntityTooLarge" })
    expect(result.detail).toBe(`the patched object is larger than the limit of ${maxObjectBytes} bytes`)
  })

  it("a patch that leaves the object under the limit applies", () => {
    const result = Patch.apply(Patch.contentTypes.merge, configMap({ a: "x".repeat(1024) }), { metadata: { annotations: { b: "y" } } })
    expect(Either.isRight(result)).toBe(true)
  })
})

describe("jsonSizeAtMost estimates JSON length and stops past its budget", () => {
  it.each<[string, unknown]>([
    ["a string", "hello"],
    ["a number", -12.5e-7],
    ["booleans and null", [true, false, null]],
    ["an empty object and array", { a: {}, b: [] }],
    ["a nested object", { metadata: { name: "x", labels: { a: "b", c: "d" } }, spec: { replicas: 3, list: [1, "two", { three: 3 }] } }]
  ])("%s: exactly JSON.stringify's length (no escapes)", (_name, value) => {
    expect(jsonSizeAtMost(value, Number.MAX_SAFE_INTEGER)).toBe(JSON.stringify(value).length)
  })

  it("answers something over the budget without walking the whole value", () => {
    const wide = Array.from({ length: 100_000 }, () => "x".repeat(100))
    const size = jsonSizeAtMost(wide, 1000)
    expect(size).toBeGreaterThan(1000)
    expect(size).toBeLessThan(JSON.stringify(wide).length)
  })
})

describe("strategic merge of long keyed lists takes linear time", () => {
  // Items looked up by a linear search per patch item made this 100,000 × 75,000 steps (minutes);
  // by map it is well under a second on an idle machine. The deadline is loose for a loaded one.
  // (Applied without the size check: these lists are larger than an object may be.)
  const env = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ name: `${prefix}${i}`, value: "v" }))
  const pod = (n: number) => ({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: { containers: [{ name: "c", env: env("old", n) }] } })
  const n = 50_000
  const podKeys = Patch.builtInMergeKeys["v1/Pod"]!

  it("merging 50,000 new items and 50,000 existing ones into a list of 50,000", { timeout: 60_000 }, () => {
    const started = performance.now()
    const patch = { spec: { containers: [{ name: "c", env: [...env("new", n), ...env("old", n).map((e) => ({ ...e, value: "w" }))] }] } }
    const result = Patch.strategicMergePatch(pod(n), patch, podKeys)
    if (Either.isLeft(result)) throw new Error(result.left.detail)
    const merged = (result.right as ReturnType<typeof pod>).spec.containers[0]!.env
    expect(merged).toHaveLength(2 * n)
    expect(merged.filter((e) => e.value === "w")).toHaveLength(n)
    expect(performance.now() - started).toBeLessThan(30_000)
  })

  it("deleting 50,000 items of a list of 50,000 with $patch: delete", { timeout: 60_000 }, () => {
    const started = performance.now()
    const patch = { spec: { containers: [{ name: "c", env: env("old", n).map(({ name }) => ({ name, $patch: "delete" })) }] } }
    const result = Patch.strategicMergePatch(pod(n), patch, podKeys)
    if (Either.isLeft(result)) throw new Error(result.left.detail)
    expect((result.right as ReturnType<typeof pod>).spec.containers[0]!.env).toEqual([])
    expect(performance.now() - started).toBeLessThan(30_000)
  })
})

describe("a patched object nests no deeper than a body may", () => {
  const nested = (depth: number): unknown => {
    let v: unknown = "x"
    for (let i = 0; i < depth; i++) v = { a: v }
    return v
  }
  it("a value nested 450 levels added under a path 60 levels deep is 422", () => {
    // Each alone is well within the limit; repeated patches like this would nest without end.
    const original = { metadata: { name: "x" }, deep: nested(60) }
    const path = `/deep${"/a".repeat(59)}/a`
    const result = status(Patch.apply(Patch.contentTypes.json, original, [{ op: "replace", path, value: nested(450) }]))
    expect(result).toMatchObject({ code: 422, reason: "Invalid", detail: `the patched object nests deeper than ${maxBodyDepth} levels` })
  })

  it("the same value under a shallow path applies", () => {
    const result = Patch.apply(Patch.contentTypes.merge, { metadata: { name: "x" } }, { deep: nested(450) })
    expect(Either.isRight(result)).toBe(true)
  })
})
