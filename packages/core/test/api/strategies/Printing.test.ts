import { describe, expect, it } from "vitest"
import { humanDuration, labelsText, selectorText } from "../../../src/api/strategies/Printing.js"

describe("kubectl's human durations", () => {
  it.each([
    [-5000, "<invalid>"],
    [-500, "0s"],
    [45_000, "45s"],
    [200_000, "3m20s"],
    [300_000, "5m"],
    [1_800_000, "30m"],
    [5 * 3600_000 + 600_000, "5h10m"],
    [20 * 3600_000, "20h"],
    [(3 * 24 + 4) * 3600_000, "3d4h"],
    [30 * 24 * 3600_000, "30d"],
    [(2 * 365 + 30) * 24 * 3600_000, "2y30d"],
    [9 * 365 * 24 * 3600_000, "9y"]
  ])("%d ms is %s", (ms, text) => {
    expect(humanDuration(ms)).toBe(text)
  })
})

describe("selector and label text", () => {
  it.each([
    [undefined, "<none>"],
    [{}, "<none>"],
    [{ matchLabels: { app: "web" } }, "app=web"]
  ])("selector %j prints %s", (selector, text) => {
    expect(selectorText(selector)).toBe(text)
  })

  it("sorts labels by key", () => {
    expect(labelsText({ b: "1", a: "2" })).toBe("a=2,b=1")
    expect(labelsText(undefined)).toBe("<none>")
  })
})
