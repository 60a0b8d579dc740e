import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Decode, LabelSelector } from "../../src/model/index.js"

const parse = (s: string): LabelSelector.LabelSelector => {
  const r = LabelSelector.parse(s)
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return r.right
}

describe("LabelSelector.parse + matches", () => {
  const labels = { app: "web", tier: "frontend", env: "prod", empty: "" }
  it.each([
    ["", true],
    ["app=web", true],
    ["app==web", true],
    ["app=db", false],
    ["app!=db", true],
    ["app!=web", false],
    ["missing!=x", true], // != matches objects without the key
    ["tier in (frontend,backend)", true],
    ["tier in (backend)", false],
    ["tier notin (backend, cache)", true],
    ["tier notin (frontend)", false],
    ["missing notin (x)", true],
    ["app", true],
    ["missing", false],
    ["!missing", true],
    ["!app", false],
    ["empty=", true],
    ["empty", true],
    ["app=web,tier in (frontend),!canary,env", true],
    ["app=web,tier=backend", false],
    ["  app = web ,  tier  in  ( frontend )  ", true],
    ["example.com/role=x", false],
    ["app=web,app=db", false]
  ])("%j → %s", (selector, expected) => {
    expect(LabelSelector.matches(parse(selector), labels)).toBe(expected)
  })

  it.each([
    ["app=", 4, "invalid"],
    ["app in (a b)", 10, "expected: ',' or ')'"],
    ["app in ()", 8, "values set can't be empty"],
    ["app in a", 7, "expected: '('"],
    ["app=a,", 6, "expected: '!', identifier"],
    [",app", 0, "expected: '!', identifier"],
    ["app b", 4, "expected: '='"],
    ["!", 1, "expected: identifier"],
    ["app>1", 3, "not supported"],
    ["-bad=1", 0, "invalid label key"],
    ["a b=1", 2, "expected: '='"],
    ["app=bad value", 8, "expected: ','"],
    ["app=-x", 4, "invalid label value"],
    ["app in (x", 9, "expected: ',' or ')'"],
    ["a/b/c=x", 0, "invalid label key"]
  ])("rejects %j at position %d", (input, position, reason) => {
    const r = LabelSelector.parse(input)
    if (input === "app=") {
      // An empty value is valid ("has label app with value ''"); keep this row as a control.
      expect(Either.isRight(r)).toBe(true)
      return
    }
    expect(Either.isLeft(r)).toBe(true)
    if (Either.isLeft(r)) {
      expect(r.left._tag).toBe("LabelSelectorParseError")
      expect(r.left.position).toBe(position)
      expect(r.left.reason).toContain(reason)
      expect(r.left.message).toContain(`position ${position}`)
    }
  })

  it("parses to matchExpressions", () => {
    expect(parse("a=b,c!=d,e in (x,y),f notin (z),g,!h")).toEqual({
      matchExpressions: [
        { key: "a", operator: "In", values: ["b"] },
        { key: "c", operator: "NotIn", values: ["d"] },
        { key: "e", operator: "In", values: ["x", "y"] },
        { key: "f", operator: "NotIn", values: ["z"] },
        { key: "g", operator: "Exists" },
        { key: "h", operator: "DoesNotExist" }
      ]
    })
  })
})

describe("LabelSelector.compile / matches on structured selectors", () => {
  it("an empty selector matches everything; an absent one matches nothing", () => {
    expect(LabelSelector.matches({}, { a: "b" })).toBe(true)
    expect(LabelSelector.matches({}, undefined)).toBe(true)
    expect(LabelSelector.matches(undefined, { a: "b" })).toBe(false)
    expect(LabelSelector.compile(undefined)({})).toBe(false)
  })

  it.each([
    [{ matchLabels: { app: "web" } }, { app: "web", x: "y" }, true],
    [{ matchLabels: { app: "web" } }, { app: "db" }, false],
    [{ matchLabels: { app: "web" } }, undefined, false],
    [{ matchExpressions: [{ key: "a", operator: "In" as const, values: ["1", "2", "3"] }] }, { a: "3" }, true],
    [{ matchExpressions: [{ key: "a", operator: "In" as const, values: ["1", "2", "3"] }] }, { a: "4" }, false],
    [{ matchExpressions: [{ key: "a", operator: "NotIn" as const, values: ["1", "2"] }] }, { a: "2" }, false],
    [{ matchExpressions: [{ key: "a", operator: "Exists" as const }] }, { a: "" }, true],
    [{ matchExpressions: [{ key: "a", operator: "DoesNotExist" as const }] }, { a: "" }, false],
    [
      { matchLabels: { app: "web" }, matchExpressions: [{ key: "track", operator: "NotIn" as const, values: ["canary"] }] },
      { app: "web", track: "stable" },
      true
    ],
    // Inherited properties are not labels.
    [{ matchExpressions: [{ key: "toString", operator: "Exists" as const }] }, {}, false]
  ])("%j matches %j: %s", (selector, labels, expected) => {
    expect(LabelSelector.matches(selector, labels)).toBe(expected)
    expect(LabelSelector.compile(selector)(labels)).toBe(expected)
  })

  it("an invalid selector matches nothing", () => {
    const bad = { matchExpressions: [{ key: "a", operator: "In" as const, values: [] }] }
    expect(LabelSelector.matches(bad, { a: "x" })).toBe(false)
    const alsoBad = { matchExpressions: [{ key: "a", operator: "Exists" as const, values: ["x"] }] }
    expect(LabelSelector.matches(alsoBad, { a: "x" })).toBe(false)
  })

  it("compiles once per selector object", () => {
    const selector = parse("app=web,tier in (a,b,c)")
    const m = LabelSelector.compile(selector)
    let n = 0
    for (let i = 0; i < 10_000; i++) if (m({ app: "web", tier: i % 2 === 0 ? "b" : "z" })) n++
    expect(n).toBe(5_000)
  })
})

describe("LabelSelector validation", () => {
  it.each([
    [
      { matchExpressions: [{ key: "a", operator: "In", values: [] }] },
      [{ path: "spec.selector.matchExpressions[0].values", message: "Required value: must be specified when `operator` is 'In' or 'NotIn'" }]
    ],
    [
      { matchExpressions: [{ key: "a", operator: "NotIn" }] },
      [{ path: "spec.selector.matchExpressions[0].values", message: "Required value: must be specified when `operator` is 'In' or 'NotIn'" }]
    ],
    [
      { matchExpressions: [{ key: "a", operator: "Exists", values: ["x"] }] },
      [
        {
          path: "spec.selector.matchExpressions[0].values",
          message: "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        }
      ]
    ],
    [{ matchExpressions: [{ key: "a", operator: "DoesNotExist" }] }, []]
  ])("validate(%j)", (selector, errors) => {
    expect(LabelSelector.validate(selector as LabelSelector.LabelSelector, "spec.selector")).toEqual(errors)
  })

  it("decoding reports operator and value problems at their fields", () => {
    const r = Decode.decodeObject(LabelSelector.LabelSelector, {
      matchLabels: { app: "web" },
      matchExpressions: [
        { key: "a", operator: "Equals", values: ["x"] },
        { key: "b", operator: "In" }
      ]
    })
    expect(r).toEqual(
      Either.left([
        {
          path: "matchExpressions[0].operator",
          message: 'Unsupported value: "Equals": supported values: "In", "NotIn", "Exists", "DoesNotExist"'
        }
      ])
    )
    const r2 = Decode.decodeObject(LabelSelector.LabelSelector, { matchExpressions: [{ key: "b", operator: "In" }] })
    expect(r2).toEqual(
      Either.left([
        { path: "matchExpressions[0].values", message: "Required value: must be specified when `operator` is 'In' or 'NotIn'" }
      ])
    )
  })
})

describe("LabelSelector.formatSelector", () => {
  it.each([
    [{}, ""],
    [{ matchLabels: { b: "2", a: "1" } }, "a=1,b=2"],
    [{ matchExpressions: [{ key: "e", operator: "In" as const, values: ["y", "x"] }] }, "e in (x,y)"],
    [{ matchExpressions: [{ key: "f", operator: "NotIn" as const, values: ["z"] }] }, "f!=z"],
    [{ matchExpressions: [{ key: "f", operator: "NotIn" as const, values: ["z", "w"] }] }, "f notin (w,z)"],
    [{ matchExpressions: [{ key: "h", operator: "DoesNotExist" as const }, { key: "g", operator: "Exists" as const }] }, "g,!h"]
  ])("%j → %j", (selector, text) => {
    expect(LabelSelector.formatSelector(selector)).toBe(text)
  })

  it("round-trips through parse", () => {
    const s = "a=b,c!=d,e in (x,y),f notin (w,z),g,!h"
    const once = LabelSelector.formatSelector(parse(s))
    expect(once).toBe(s)
    expect(LabelSelector.formatSelector(parse(once))).toBe(once)
  })
})
