// Three writer processes share one database while a fourth process watches from revision 0:
// the watcher must see every revision exactly once, in order, matching the writers' acks.
import { afterAll, describe, expect, it } from "vitest"
import { adminQuery, eventually, randomName, testUrl } from "./pgTest.js"
import { type Fixture, startFixture } from "./processes.js"

const schema = randomName("fleet_test_mp")
const started: Array<Fixture> = []

afterAll(async () => {
  for (const f of started) f.child.kill("SIGKILL")
  await adminQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
})

describe("PostgreSQL store across processes", () => {
  it("delivers every revision written by three processes exactly once, in order, to a watcher in a fourth", async () => {
    const perWriter = 200
    const total = 3 * (perWriter + Math.ceil(perWriter / 3))
    // All four start at once; the writers begin only when every process is up, so the watcher
    // receives the writes live (through NOTIFY and its poller), not as history.
    const t0 = Date.now()
    const watcher = startFixture("watcher", [testUrl, schema, String(total)])
    const writers = ["a", "b", "c"].map((id) => startFixture("writer", [testUrl, schema, id, String(perWriter)]))
    started.push(watcher, ...writers)
    const all = [watcher, ...writers]
    await eventually(() => all.every((f) => f.lines.includes("READY") || f.child.exitCode !== null), 40_000, "the processes to start")
    for (const f of all) expect(f.lines, f.stderr()).toContain("READY")
    const t1 = Date.now()
    for (const w of writers) w.send("GO")
    const codes = await Promise.all(writers.map((w) => w.exited))
    expect(codes, writers.map((w) => w.stderr()).join("\n")).toEqual([0, 0, 0])
    expect(await watcher.exited).toBe(0)
    console.log(`multi-process: processes up in ${t1 - t0} ms, ${total} writes watched in ${Date.now() - t1} ms`)

    const acks = new Map<number, string>()
    for (const w of writers) {
      for (const line of w.lines) {
        const [tag, rev, key] = line.split(" ")
        if (tag !== "ACK") continue
        expect(acks.has(Number(rev)), `revision ${rev} acknowledged twice`).toBe(false)
        acks.set(Number(rev), key!)
      }
    }
    expect(acks.size).toBe(total)
    // Dense: the acks are exactly 1..total.
    expect([...acks.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, i) => i + 1))

    const events = watcher.lines.filter((l) => l.startsWith("EVENT ")).map((l) => l.split(" "))
    expect(events.map((e) => Number(e[1]))).toEqual(Array.from({ length: total }, (_, i) => i + 1))
    for (const [, rev, type, key] of events) {
      expect(key).toBe(acks.get(Number(rev)))
      expect(type === "ADDED" || type === "MODIFIED").toBe(true)
    }
    // Each writer interleaved with the others (group commit across processes, not one after another).
    const owners = events.map((e) => e[3]!.split("/")[1])
    const switches = owners.filter((o, i) => i > 0 && o !== owners[i - 1]).length
    expect(switches).toBeGreaterThan(2)
  }, 60_000)
})
