/**
 * HardStop.killAll with real processes: what looks like a box's holder and shim (a process whose
 * argv names a launch file in the box's run directory, in a session of its own) dies with every
 * descendant, including one that ignores SIGTERM and one that started a session of its own; a
 * process of another box's run directory and a user's process reading the data dir are left alone.
 * (The caller's own children go too; here the caller is a stand-in without children.)
 * And `--shutdown-grace` parsing.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Either } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import * as HardStop from "../../src/box/HardStop.js"
import * as Shutdown from "../../src/Shutdown.js"
import { eventually } from "../fixtures/FleetProcess.js"

const live = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) [ZX] /s.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return false
  }
}

/** A shell in a new session whose argv carries `launch` (as a holder's does), running `script`. */
const fake = (launch: string, script: string): ChildProcess => spawn("sh", ["-c", script, launch], { detached: true, stdio: "ignore" })

/** The pids of a process's children and of the processes in its session. */
const family = (root: number): Array<number> => {
  const out: Array<number> = []
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue
    try {
      const text = readFileSync(`/proc/${e}/stat`, "utf8")
      const f = text.slice(text.lastIndexOf(")") + 2).split(" ")
      if (Number(e) !== root && (Number(f[1]) === root || Number(f[3]) === root)) out.push(Number(e))
    } catch {
      // gone meanwhile
    }
  }
  return out
}

describe("HardStop.killAll", () => {
  const started: Array<ChildProcess> = []
  let dir: string | undefined
  afterEach(async () => {
    for (const c of started.splice(0)) {
      try {
        if (c.pid !== undefined) process.kill(-c.pid, "SIGKILL")
      } catch {
        // gone
      }
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it("kills the box's holders and shims with everything under them, and nothing else", async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-hardstop-"))
    const box = join(dir, "box")
    const [runDir] = HardStop.markers(box)
    const other = HardStop.markers(join(dir, "other-box"))[0]!
    // A holder-like process ignoring SIGTERM, with a child that starts a session of its own.
    const holder = fake(`${runDir}launch/abc.launch`, "trap '' TERM; setsid sleep 1001 & sleep 1002 & wait")
    const bystander = fake(`${other}launch/abc.launch`, "sleep 1003")
    const reader = fake(join(box, "containers", "x", "container.log"), "sleep 1004")
    started.push(holder, bystander, reader)
    const kids = await eventually(() => {
      const f = family(holder.pid!)
      return f.length >= 2 ? f : undefined
    }, 10_000, "the fake holder's children")

    // As dev would be: a process whose own children go too (here it has none); the fakes are
    // this test's children, so only their argv marks them.
    const self = spawn("sleep", ["1005"], { stdio: "ignore" })
    started.push(self)
    const killed = HardStop.killAll(box, { self: self.pid! })
    expect(killed).toBeGreaterThanOrEqual(3)
    await eventually(() => (!live(holder.pid!) && kids.every((k) => !live(k)) ? true : undefined), 5_000, "the holder and its children gone")
    expect(live(bystander.pid!)).toBe(true)
    expect(live(reader.pid!)).toBe(true)
  })
})

describe("Shutdown.extractFlag", () => {
  const cases: ReadonlyArray<[ReadonlyArray<string>, number | string, ReadonlyArray<string>]> = [
    [["--listen", "x"], 30_000, ["--listen", "x"]],
    [["--shutdown-grace", "5s", "--listen", "x"], 5000, ["--listen", "x"]],
    [["--shutdown-grace=250ms"], 250, []],
    [["--shutdown-grace", "2m"], 120_000, []],
    [["--shutdown-grace", "0"], 0, []],
    [["--shutdown-grace", "soon"], "--shutdown-grace", []],
    [["--shutdown-grace"], "--shutdown-grace", []]
  ]
  it.each(cases)("%j", (args, want, rest) => {
    const r = Shutdown.extractFlag(args)
    if (typeof want === "string") {
      expect(Either.isLeft(r) && r.left.startsWith(want)).toBe(true)
      return
    }
    expect(r).toEqual(Either.right({ graceMs: want, rest }))
  })
})
