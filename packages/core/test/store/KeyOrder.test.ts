import { KeyOrder } from "@koder/fleet-core"
import { describe, expect, it } from "vitest"

const utf8 = (s: string) => Array.from(new TextEncoder().encode(s))
const byteCompare = (a: string, b: string) => {
  const x = utf8(a)
  const y = utf8(b)
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!
  return x.length - y.length
}

describe("KeyOrder", () => {
  const cases: Array<[string, string]> = [
    ["a", "b"],
    ["a", "ab"],
    ["", "a"],
    ["\uffee", "😀"], // JS `<` says the emoji sorts first; UTF-8 bytes disagree
    ["z", "é"],
    ["日本", "😀"],
    ["a/b", "a0"],
    ["\ud7ff", "\ue000"]
  ]
  it.each(cases)("orders %j before %j as UTF-8 bytes do", (a, b) => {
    expect(Math.sign(KeyOrder.compare(a, b))).toBe(-1)
    expect(Math.sign(KeyOrder.compare(b, a))).toBe(1)
    expect(Math.sign(byteCompare(a, b))).toBe(-1)
  })

  it("agrees with UTF-8 byte order on a mixed set", () => {
    const keys = ["😀", "a", "\uffee", "é", "日", "Z", "", "a😀", "a\uffee", "🙂", "\u0000"]
    expect([...keys].sort(KeyOrder.compare)).toEqual([...keys].sort(byteCompare))
    expect(KeyOrder.compare("same", "same")).toBe(0)
  })

  it("finds the lower bound of a key in a sorted array", () => {
    const keys = ["a", "b/1", "b/2", "c"]
    expect(KeyOrder.lowerBound(keys, "b/")).toBe(1)
    expect(KeyOrder.lowerBound(keys, "b/2")).toBe(2)
    expect(KeyOrder.lowerBound(keys, "d")).toBe(4)
    expect(KeyOrder.lowerBound(keys, "")).toBe(0)
  })
})
