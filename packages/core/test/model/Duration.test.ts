import { GoDuration, Metrics } from "@koder/fleet-core"
import { Either } from "effect"
import { describe, expect, it } from "vitest"

describe("GoDuration.parse (Go's time.ParseDuration, in milliseconds)", () => {
  it.each([
    ["0", 0],
    ["+0", 0],
    ["-0", 0],
    ["5s", 5000],
    ["300ms", 300],
    ["1h2m3.5s", 3_723_500],
    ["-1.5h", -5_400_000],
    ["+2m", 120_000],
    ["1us", 0.001],
    ["1µs", 0.001],
    ["1μs", 0.001],
    ["1000ns", 0.001],
    [".5s", 500],
    ["1.s", 1000],
    ["2h45m", 9_900_000],
    ["1m0s", 60_000]
  ])("%s is %d ms", (text, ms) => {
    expect(Either.getOrThrow(GoDuration.parse(text))).toBeCloseTo(ms, 9)
  })

  it.each([
    ["", 'time: invalid duration ""'],
    ["-", 'time: invalid duration "-"'],
    [".s", 'time: invalid duration ".s"'],
    ["5", 'time: missing unit in duration "5"'],
    ["00", 'time: missing unit in duration "00"'],
    ["1d", 'time: unknown unit "d" in duration "1d"'],
    ["1h30", 'time: missing unit in duration "1h30"'],
    ["3 s", 'time: unknown unit " s" in duration "3 s"']
  ])("%j is refused: %s", (text, error) => {
    expect(GoDuration.parse(text)).toEqual(Either.left(error))
    expect(GoDuration.toMillis(text)).toBeUndefined()
  })
})

describe("Metrics.parseDuration keeps its narrower grammar", () => {
  it.each([
    ["15s", 15_000],
    ["1m0s", 60_000],
    ["250ms", 250],
    ["1.s", 1000],
    ["1µs", 0.001],
    ["0", 0],
    ["-1s", undefined],
    ["+1s", undefined],
    [".5s", undefined],
    ["1h.5m", undefined],
    ["1μs", undefined],
    ["", undefined]
  ])("%j is %s", (text, ms) => {
    expect(Metrics.parseDuration(text)).toBe(ms)
  })
})
