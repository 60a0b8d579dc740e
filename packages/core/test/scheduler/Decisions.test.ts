import { describe, expect, it } from "@effect/vitest"
import { Decisions } from "../../src/scheduler/Decisions.js"
import type * as Schedule from "../../src/scheduler/Schedule.js"

const decision = (message: string) => ({ _tag: "Error", message, nextStartIndex: 0 }) as unknown as Schedule.Decision // only what explain reads

describe("Decisions", () => {
  it("keeps the most recent decisions up to its bound; a re-decided pod is most recent again", () => {
    const d = new Decisions(2)
    d.remember("a", decision("a"))
    d.remember("b", decision("b"))
    d.remember("a", decision("a2"))
    d.remember("c", decision("c"))
    expect(d.explain("b")).toBeUndefined()
    expect(d.explain("a")).toBeDefined()
    expect(d.explain("c")).toBeDefined()
    d.forget("a")
    expect(d.explain("a")).toBeUndefined()
  })
})
