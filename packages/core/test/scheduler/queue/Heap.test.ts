import { describe, expect, it } from "@effect/vitest"
import { Heap } from "../../../src/scheduler/queue/Heap.js"

interface Item {
  index: number
  key: number
}
const item = (key: number): Item => ({ index: -1, key })
const drain = (h: Heap<Item>) => {
  const out: Array<number> = []
  for (let e = h.pop(); e !== undefined; e = h.pop()) out.push(e.key)
  return out
}

describe("Heap", () => {
  it.each([
    { name: "empty", keys: [], out: [] },
    { name: "sorted", keys: [1, 2, 3], out: [1, 2, 3] },
    { name: "reversed", keys: [5, 4, 3, 2, 1], out: [1, 2, 3, 4, 5] },
    { name: "duplicates", keys: [2, 1, 2, 1], out: [1, 1, 2, 2] }
  ])("pops in order: $name", ({ keys, out }) => {
    const h = new Heap<Item>((a, b) => a.key < b.key)
    for (const k of keys) h.push(item(k))
    expect(h.size).toBe(keys.length)
    expect(drain(h)).toEqual(out)
  })

  it("removes any item by its position and re-orders one whose key changed", () => {
    const h = new Heap<Item>((a, b) => a.key < b.key)
    const items = [7, 3, 9, 1, 5].map(item)
    for (const i of items) h.push(i)
    h.remove(items[1]!)
    expect(items[1]!.index).toBe(-1)
    items[2]!.key = 0
    h.fix(items[2]!)
    expect(h.peek()?.key).toBe(0)
    expect(drain(h)).toEqual([0, 1, 5, 7])
    for (const i of items) expect(i.index).toBe(-1)
  })
})
