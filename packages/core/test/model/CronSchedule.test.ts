import { Either, Option } from "effect"
import { describe, expect, it } from "vitest"
import { CronSchedule } from "../../src/model/index.js"

const next = (schedule: string, after: string, timeZone?: string) =>
  Option.getOrUndefined(Option.map(CronSchedule.nextAfter(schedule, timeZone, new Date(after)), (d) => d.toISOString()))

const runs = (schedule: string, after: string, n: number, timeZone?: string) => {
  const parsed = CronSchedule.parse(schedule, timeZone)
  if (Either.isLeft(parsed)) throw new Error(parsed.left)
  const out: Array<string> = []
  let t = new Date(after)
  for (let i = 0; i < n; i++) {
    const d = parsed.right.next(t)
    if (d === undefined) break
    out.push(d.toISOString())
    t = d
  }
  return out
}

describe("schedules robfig/cron's ParseStandard accepts", () => {
  it.each<[string, string, ReadonlyArray<string>]>([
    ["*/15 * * * *", "2024-03-09T23:59:30Z", ["2024-03-10T00:00:00.000Z", "2024-03-10T00:15:00.000Z", "2024-03-10T00:30:00.000Z"]],
    ["0 * * * *", "2024-01-01T10:00:00Z", ["2024-01-01T11:00:00.000Z", "2024-01-01T12:00:00.000Z"]],
    ["30 2 * * 1-5", "2024-05-03T03:00:00Z", ["2024-05-06T02:30:00.000Z", "2024-05-07T02:30:00.000Z"]],
    ["0 0 1 jan,JUL *", "2024-02-01T00:00:00Z", ["2024-07-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z"]],
    ["0 12 * * sun", "2024-05-01T00:00:00Z", ["2024-05-05T12:00:00.000Z"]],
    // Day of month and day of week: OR when both are restricted, AND (just the other) when one is a star.
    ["0 0 13 * 5", "2024-09-01T00:00:00Z", ["2024-09-06T00:00:00.000Z", "2024-09-13T00:00:00.000Z", "2024-09-20T00:00:00.000Z"]],
    ["0 0 * * 5", "2024-09-01T00:00:00Z", ["2024-09-06T00:00:00.000Z", "2024-09-13T00:00:00.000Z"]],
    ["0 0 */10 * ?", "2024-09-01T00:00:00Z", ["2024-09-11T00:00:00.000Z", "2024-09-21T00:00:00.000Z", "2024-10-01T00:00:00.000Z"]],
    // `N/step` is `N-max/step`, as in robfig.
    ["5/20 * * * *", "2024-01-01T00:00:00Z", ["2024-01-01T00:05:00.000Z", "2024-01-01T00:25:00.000Z", "2024-01-01T00:45:00.000Z", "2024-01-01T01:05:00.000Z"]],
    ["@hourly", "2024-01-01T10:30:00Z", ["2024-01-01T11:00:00.000Z"]],
    ["@daily", "2024-01-01T10:30:00Z", ["2024-01-02T00:00:00.000Z"]],
    ["@midnight", "2024-01-01T10:30:00Z", ["2024-01-02T00:00:00.000Z"]],
    ["@weekly", "2024-05-01T00:00:00Z", ["2024-05-05T00:00:00.000Z"]],
    ["@monthly", "2024-05-01T00:00:00Z", ["2024-06-01T00:00:00.000Z"]],
    ["@yearly", "2024-05-01T00:00:00Z", ["2025-01-01T00:00:00.000Z"]],
    ["@annually", "2024-05-01T00:00:00Z", ["2025-01-01T00:00:00.000Z"]],
    // A constant delay from the (whole) second of the previous run.
    ["@every 1h30m", "2024-01-01T10:00:00.750Z", ["2024-01-01T11:30:00.000Z", "2024-01-01T13:00:00.000Z"]],
    ["@every 100ms", "2024-01-01T10:00:00Z", ["2024-01-01T10:00:01.000Z"]]
  ])("%s after %s", (schedule, after, expected) => {
    expect(CronSchedule.validate(schedule)).toBeUndefined()
    expect(runs(schedule, after, expected.length)).toEqual(expected)
  })

  it("is strictly after the given time", () => {
    expect(next("0 * * * *", "2024-01-01T10:00:00Z")).toBe("2024-01-01T11:00:00.000Z")
    expect(next("0 * * * *", "2024-01-01T09:59:59.500Z")).toBe("2024-01-01T10:00:00.000Z")
  })

  it("computes activations in the time zone, following DST", () => {
    // 09:00 in New York is 14:00 UTC in winter and 13:00 UTC in summer (DST began 2024-03-10).
    expect(runs("0 9 * * *", "2024-03-08T00:00:00Z", 3, "America/New_York")).toEqual([
      "2024-03-08T14:00:00.000Z",
      "2024-03-09T14:00:00.000Z",
      "2024-03-10T13:00:00.000Z"
    ])
    expect(next("0 0 * * *", "2024-06-01T00:00:00Z", "Asia/Tokyo")).toBe("2024-06-01T15:00:00.000Z")
    // Without a time zone, UTC.
    expect(next("0 0 * * *", "2024-06-01T00:00:00Z")).toBe("2024-06-02T00:00:00.000Z")
    expect(Either.map(CronSchedule.parse("0 0 * * *"), (s) => s.timeZone)).toEqual(Either.right("UTC"))
  })

  it("has no next activation for a date that never comes, and none for an invalid schedule", () => {
    expect(CronSchedule.nextAfter("0 0 30 2 *", undefined, new Date("2024-01-01T00:00:00Z"))).toEqual(Option.none())
    expect(CronSchedule.nextAfter("not a schedule", undefined, new Date("2024-01-01T00:00:00Z"))).toEqual(Option.none())
  })
})

describe("invalid schedules get robfig/cron's errors", () => {
  it.each<[string, string]>([
    ["", "empty spec string"],
    ["* * * *", "expected exactly 5 fields, found 4: [* * * *]"],
    // Seconds (6 fields) and years (7 fields) are croner extensions Kubernetes does not have.
    ["0 * * * * *", "expected exactly 5 fields, found 6: [0 * * * * *]"],
    ["0 0 * * * * 2030", "expected exactly 5 fields, found 7: [0 0 * * * * 2030]"],
    ["60 * * * *", "end of range (60) above maximum (59): 60"],
    ["* 24 * * *", "end of range (24) above maximum (23): 24"],
    ["* * 0 * *", "beginning of range (0) below minimum (1): 0"],
    ["* * * 13 *", "end of range (13) above maximum (12): 13"],
    ["* * * * 7", "end of range (7) above maximum (6): 7"],
    ["5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"],
    ["*/0 * * * *", "step of range should be a positive number: */0"],
    ["1-2-3 * * * *", "too many hyphens: 1-2-3"],
    ["*/2/3 * * * *", "too many slashes: */2/3"],
    ["x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'],
    ["* * L * *", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax'],
    ["* * * * 5#2", 'failed to parse int from 5#2: strconv.Atoi: parsing "5#2": invalid syntax'],
    ["@reboot", "unrecognized descriptor: @reboot"],
    ["@every 1d", 'failed to parse duration @every 1d: time: unknown unit "d" in duration "1d"'],
    ["@every 10", 'failed to parse duration @every 10: time: missing unit in duration "10"']
  ])("%j: %s", (schedule, message) => {
    expect(CronSchedule.validate(schedule)).toBe(message)
    expect(Either.isLeft(CronSchedule.parse(schedule))).toBe(true)
  })
})

describe("time zones", () => {
  it.each([["UTC"], ["Europe/Paris"], ["America/New_York"], ["US/Eastern"], ["Etc/GMT+5"]])("%s is known", (tz) => {
    expect(CronSchedule.validateTimeZone(tz)).toBeUndefined()
  })

  it.each<[string, string]>([
    ["Mars/Olympus", "unknown time zone Mars/Olympus"],
    ["europe/paris", "unknown time zone europe/paris"],
    ["+01:00", "unknown time zone +01:00"],
    ["../etc/passwd", "unknown time zone ../etc/passwd"],
    ["Local", "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"],
    ["", "timeZone must be nil or non-empty string"]
  ])("%j: %s", (tz, message) => {
    expect(CronSchedule.validateTimeZone(tz)).toBe(message)
  })
})
