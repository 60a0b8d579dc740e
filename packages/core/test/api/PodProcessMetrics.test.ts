import { describe, expect, it } from "vitest"
import * as PodProcessMetrics from "../../src/api/PodProcessMetrics.js"
import type * as Runtime from "../../src/runtime/Runtime.js"

const p = (pid: number, command: string, state = "S", extra: Partial<Runtime.Process> = {}): Runtime.Process => ({ pid, ppid: 1, command, args: [command, "--secret=x"], rssBytes: 1000 * pid, state, ...extra })

describe("PodProcessMetrics.summarize", () => {
  it.each([
    ["no processes", [], undefined, { processes: 0, threads: 0, rssBytes: 0, io: { readBytes: 0, writeBytes: 0 }, byCommand: [], byState: {} }],
    [
      "counts, threads (one each when unknown), memory and I/O summed; commands by count",
      [p(1, "sh", "S", { threads: 1 }), p(2, "nginx", "S", { threads: 4, readBytes: 10, writeBytes: 5 }), p(3, "nginx", "R", { readBytes: 1 }), p(4, "sleep", "D")],
      { timestamp: "t", cpu: { usageCoreNanoSeconds: 0, usageNanoCores: 0 }, memory: { workingSetBytes: 0, rssBytes: 0 }, pids: 9 },
      {
        processes: 4,
        threads: 7,
        pids: 9,
        rssBytes: 10_000,
        io: { readBytes: 11, writeBytes: 5 },
        byCommand: [
          { command: "nginx", count: 2, rssBytes: 5000 },
          { command: "sleep", count: 1, rssBytes: 4000 },
          { command: "sh", count: 1, rssBytes: 1000 }
        ],
        byState: { S: 2, R: 1, D: 1 }
      }
    ]
  ] as const)("%s", (_why, processes, stats, expected) => {
    const read = { processes, ...(stats === undefined ? {} : { stats }) }
    expect(PodProcessMetrics.summarize("app", read)).toEqual({ name: "app", ...expected })
  })

  it("never carries command lines (they may hold secrets)", () => {
    expect(JSON.stringify(PodProcessMetrics.summarize("app", { processes: [p(1, "app")] }))).not.toContain("--secret")
  })
})
