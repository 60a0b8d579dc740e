import { describe, expect, it } from "vitest"
import * as FairQueue from "../../src/api/FairQueue.js"

/**
 * Drive a queue with a script: `+A1` enters request A1 (flow A), `-` ends the oldest executing
 * request, `xA1` cancels A1. Answers the order requests started in, and what was refused.
 */
const run = (seats: number, queueLimit: number, script: ReadonlyArray<string>) => {
  const q = FairQueue.make(seats, queueLimit)
  const started: Array<string> = []
  const refused: Array<string> = []
  const entries = new Map<string, FairQueue.Entry>()
  const executing: Array<string> = []
  for (const step of script) {
    if (step === "-") {
      executing.shift()
      q.leave()
    } else if (step.startsWith("x")) {
      q.cancel(entries.get(step.slice(1))!)
    } else {
      const name = step.slice(1)
      const entry = q.enter(name[0]!, () => (started.push(name), executing.push(name)))
      if (entry === undefined) refused.push(name)
      else entries.set(name, entry)
    }
  }
  return { started, refused, executing: q.executing(), queued: q.queued() }
}

describe("FairQueue", () => {
  it.each<[string, number, number, ReadonlyArray<string>, { started: Array<string>; refused?: Array<string>; executing: number; queued: number }]>([
    ["starts at once while seats are free", 2, 10, ["+A1", "+B1"], { started: ["A1", "B1"], executing: 2, queued: 0 }],
    ["queues once the seats are taken", 1, 10, ["+A1", "+A2"], { started: ["A1"], executing: 1, queued: 1 }],
    ["a freed seat goes to the next waiter", 1, 10, ["+A1", "+A2", "-"], { started: ["A1", "A2"], executing: 1, queued: 0 }],
    // A's flood of three is ahead of B's one, yet B goes second: flows take turns.
    ["flows take turns", 1, 10, ["+A1", "+A2", "+A3", "+A4", "+B1", "-", "-", "-", "-"], { started: ["A1", "A2", "B1", "A3", "A4"], executing: 1, queued: 0 }],
    ["three flows in turn", 1, 10, ["+A1", "+A2", "+A3", "+B1", "+B2", "+C1", "-", "-", "-", "-", "-"], { started: ["A1", "A2", "B1", "C1", "A3", "B2"], executing: 1, queued: 0 }],
    ["refuses past the queue limit, and queues again once there is room", 1, 2, ["+A1", "+A2", "+B1", "+C1", "-", "+C2"], { started: ["A1", "A2"], refused: ["C1"], executing: 1, queued: 2 }],
    ["a freed seat goes to the one waiting, and a newcomer queues behind", 2, 10, ["+A1", "+A2", "+A3", "-", "+B1"], { started: ["A1", "A2", "A3"], executing: 2, queued: 1 }],
    ["a cancelled waiter never starts", 1, 10, ["+A1", "+A2", "+B1", "xA2", "-", "-"], { started: ["A1", "B1"], executing: 0, queued: 0 }],
    ["cancelling a started request changes nothing", 1, 10, ["+A1", "xA1", "+A2"], { started: ["A1"], executing: 1, queued: 1 }],
    ["leave with nothing executing is ignored", 1, 10, ["-", "+A1", "+A2"], { started: ["A1"], executing: 1, queued: 1 }]
  ])("%s", (_what, seats, limit, script, expected) => {
    expect(run(seats, limit, script)).toEqual({ refused: [], ...expected })
  })

  it("refuses a level without seats", () => {
    expect(() => FairQueue.make(0, 10)).toThrow(/positive integer/)
  })

  it("stamps entries with its clock", () => {
    let now = 5
    const q = FairQueue.make(1, 10, () => now)
    q.enter("a", () => {})
    now = 42
    expect(q.enter("a", () => {})?.enqueuedAt).toBe(42)
  })
})
