/**
 * Resource limits through cgroups, as root (this project's machines and CI run as root with
 * cgroup v1 controllers): a memory hog is OOM-killed at its limit, a busy loop is held to its
 * CPU quota, a fork loop stops at its pids limit.
 */
import type { Runtime } from "@koder/fleet-core"
import { Chunk, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type BoxProcess, type Client, connect, eventually, marker, podSpec, processesWith, shSpec, startBox } from "./BoxProcess.js"

describe("koder-fleet box limits (root, cgroups)", () => {
  let dir: string
  let box: BoxProcess
  let c: Client
  let sandbox: Runtime.Sandbox

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kbox-limits-"))
    box = await startBox(["--data-dir", join(dir, "data"), "--socket", join(dir, "box.sock")])
    c = await connect(box.socketPath)
    sandbox = await c.run(c.rt.sandboxes.create(podSpec("limits")))
  })

  afterAll(async () => {
    if (c) for (const s of await c.run(c.rt.sandboxes.list()).catch(() => [])) await c.run(c.rt.sandboxes.remove(s.id)).catch(() => undefined)
    await c?.close()
    await box?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  const run = async (name: string, script: string, mark: string, resources: Runtime.Resources) => {
    const id = await c.run(c.rt.containers.create(shSpec(sandbox.id, name, script, mark, { resources })))
    await c.run(c.rt.containers.start(id))
    return id
  }

  it("enforces cpu, memory and pids limits here", async () => {
    const info = await c.run(c.rt.info)
    expect(process.getuid?.()).toBe(0)
    expect(info.capabilities.cgroups).not.toBe("none")
    expect(info.capabilities.limits).toEqual({ cpu: true, memory: true, pids: true })
  })

  it("a memory hog is OOM-killed at its limit: exit 137, reason OOMKilled; the limit shows in stats", async () => {
    const mark = marker("hog")
    const id = await run("hog", "echo ready; sleep 0.3; x=0123456789abcdef; while :; do x=$x$x; done", mark, {
      memoryBytes: 32 * 1024 * 1024
    })
    const early = await c.run(c.rt.containers.stats(id)).catch(() => undefined)
    if (early) expect(early.memory.limitBytes).toBe(32 * 1024 * 1024)
    const status = await eventually(async () => {
      const s = (await c.run(c.rt.containers.inspect(id))).status
      return s.state === "exited" ? s : undefined
    }, 20_000, "the hog to be killed")
    expect(status).toMatchObject({ exitCode: 137, signal: "SIGKILL", reason: "OOMKilled" })
    expect(processesWith(mark)).toEqual([])
    // A container within its limit is not affected.
    const calm = await run("calm", "echo ok; sleep 1000", marker("calm"), { memoryBytes: 32 * 1024 * 1024 })
    const stats = await c.run(c.rt.containers.stats(calm))
    expect(stats.memory.limitBytes).toBe(32 * 1024 * 1024)
    expect(stats.memory.workingSetBytes).toBeLessThan(32 * 1024 * 1024)
    expect((await c.run(c.rt.containers.inspect(calm))).status.state).toBe("running")
  })

  it("a busy loop is held to its CPU quota", async () => {
    const id = await run("spin", "while :; do :; done", marker("spin"), { cpuMillis: 200 })
    await c.run(c.rt.containers.stats(id))
    await new Promise((r) => setTimeout(r, 1_500))
    const s = await c.run(c.rt.containers.stats(id))
    // 200 millicores = 0.2e9 nanocores; the quota allows no more (a little slack for the sampling).
    expect(s.cpu.usageNanoCores).toBeGreaterThan(0.05e9)
    expect(s.cpu.usageNanoCores).toBeLessThan(0.3e9)
    await c.run(c.rt.containers.remove(id))
  })

  it("a fork loop stops at its pids limit", async () => {
    const mark = marker("forks")
    const id = await run(
      "forks",
      "i=0; while [ $i -lt 20 ]; do sh -c 'exec sleep 1000' $0-child & echo spawned; i=$((i+1)); done; echo forked; sleep 1000",
      mark,
      { pids: 5 }
    )
    // The shell may give up at the first failed fork (dash does) or go on; either way the
    // container never holds more than 5 processes, nsenter and the main shell included.
    const outcome = await eventually(async () => {
      const ctr = await c.run(c.rt.containers.inspect(id))
      if (ctr.status.state === "exited") return "exited"
      const lines = Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(id))))
      return lines.some((l) => l.line === "forked\n") ? "forked" : undefined
    }, 10_000, "the fork loop to end")
    const lines = Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(id))))
    const spawned = lines.filter((l) => l.line === "spawned\n").length
    expect(spawned).toBeGreaterThan(0)
    expect(spawned).toBeLessThan(5)
    if (outcome === "exited") expect(lines.some((l) => l.stream === "stderr" && /fork/i.test(l.line))).toBe(true)
    else expect((await c.run(c.rt.containers.stats(id))).pids).toBeLessThanOrEqual(5)
    await c.run(c.rt.containers.remove(id))
    expect(processesWith(mark)).toEqual([])
  })
})
