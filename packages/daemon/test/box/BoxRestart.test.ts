/**
 * Containers outlive the box: a box that crashes (SIGKILL) or stops (SIGTERM) leaves them
 * running, and the next box on the same data dir re-adopts them, never starting anything twice,
 * and knows the exit codes of those that ended while it was away.
 */
import type { Runtime } from "@koder/fleet-core"
import { Chunk, Stream } from "effect"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  alive,
  type BoxProcess,
  type Client,
  connect,
  eventually,
  isShim,
  marker,
  podSpec,
  processesWith,
  shSpec,
  startBox
} from "./BoxProcess.js"

describe("koder-fleet box restarts", () => {
  let dir: string
  let args: Array<string>
  let box: BoxProcess
  let c: Client

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kbox-restart-"))
    args = ["--data-dir", join(dir, "data"), "--socket", join(dir, "box.sock")]
    box = await startBox(args)
    c = await connect(box.socketPath)
  })

  afterAll(async () => {
    if (c) for (const s of await c.run(c.rt.sandboxes.list()).catch(() => [])) await c.run(c.rt.sandboxes.remove(s.id)).catch(() => undefined)
    await c?.close()
    await box?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Stop the box with `signal`, start a new one on the same data dir, reconnect. */
  const restart = async (signal: NodeJS.Signals) => {
    await c.close()
    expect(await box.stop(signal)).toBe(signal === "SIGKILL" ? "SIGKILL" : 0)
    box = await startBox(args)
    c = await connect(box.socketPath)
  }

  const beats = (lines: ReadonlyArray<Runtime.LogChunk>) =>
    lines.map((l) => /^beat-(\d+)\n$/.exec(l.line)).filter((m) => m !== null).map((m) => Number(m![1]))

  it("re-adopts running containers after a crash and a clean stop, without duplicates or lost output", async () => {
    const sb = await c.run(c.rt.sandboxes.create(podSpec("restart")))
    const runMark = marker("runner")
    const shortMark = marker("short")
    const runner = await c.run(
      c.rt.containers.create(shSpec(sb.id, "runner", "i=0; while :; do echo beat-$i; i=$((i+1)); sleep 0.05; done", runMark))
    )
    await c.run(c.rt.containers.start(runner))
    const short = await c.run(c.rt.containers.create(shSpec(sb.id, "short", "sleep 1; exit 5", shortMark)))
    await c.run(c.rt.containers.start(short))
    const waiting = await c.run(c.rt.containers.create(shSpec(sb.id, "waiting", "true", marker("waiting"))))
    const before = await c.run(c.rt.containers.inspect(runner))
    const pids = processesWith(runMark).sort()

    // A crash: nothing of the box's shutdown runs.
    await restart("SIGKILL")
    expect(alive(before.status.pid!)).toBe(true)
    // `short` ends while no box is watching it.
    await eventually(() => processesWith(shortMark).length === 0 || undefined, 10_000, "short to end")

    const after = await c.run(c.rt.containers.list())
    expect(after.map((x) => x.id).sort()).toEqual([runner, short, waiting].sort())
    expect(after.find((x) => x.id === runner)!.status).toEqual(before.status)
    expect(await eventually(async () => {
      const s = (await c.run(c.rt.containers.inspect(short))).status
      return s.state === "exited" ? s : undefined
    })).toMatchObject({ exitCode: 5, reason: "Error" })
    expect(after.find((x) => x.id === waiting)!.status.state).toBe("created")
    // Nothing was started again: the very same processes.
    expect(processesWith(runMark).sort()).toEqual(pids)
    expect(pids.filter((p) => !isShim(p)).length).toBeGreaterThan(0)

    // Output written while the box was down waited in the pipe; the log has no gap, and a
    // follower gets new lines from the adopted container.
    const live = Chunk.toArray(
      await c.run(Stream.runCollect(Stream.take(c.rt.containers.logs(runner, { follow: true, tailLines: 0 }), 3)))
    )
    expect(beats(live)).toHaveLength(3)
    const all = beats(Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(runner)))))
    expect(all[0]).toBe(0)
    expect(all).toEqual(Array.from({ length: all.length }, (_, i) => i))

    // A clean stop leaves the containers running too.
    await restart("SIGTERM")
    expect((await c.run(c.rt.containers.inspect(runner))).status).toEqual(before.status)
    expect(processesWith(runMark).sort()).toEqual(pids)

    // The adopted container is fully under control: stop works and leaves nothing behind.
    const stopped = await c.run(c.rt.containers.stop(runner, { gracePeriodMs: 2_000 }))
    expect(stopped).toMatchObject({ state: "exited", signal: "SIGTERM", exitCode: 143 })
    expect(processesWith(runMark)).toEqual([])
    const final = beats(Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(runner)))))
    expect(final).toEqual(Array.from({ length: final.length }, (_, i) => i))
  })

  it("removes the run directories (in /dev/shm) of data dirs that are gone when it starts, and keeps the others", async () => {
    const runDir = (tag: string, dataDir: string) => {
      const path = join("/dev/shm", `kbox-${process.getuid?.() ?? 0}-test${tag}${process.pid}`)
      mkdirSync(join(path, "fifos"), { recursive: true, mode: 0o700 })
      writeFileSync(join(path, "data-dir"), dataDir)
      return path
    }
    const orphan = runDir("gone", join(dir, "removed-data"))
    const kept = runDir("kept", dir)
    try {
      await restart("SIGTERM")
      expect(existsSync(orphan)).toBe(false)
      expect(existsSync(kept)).toBe(true)
    } finally {
      rmSync(orphan, { recursive: true, force: true })
      rmSync(kept, { recursive: true, force: true })
    }
  })

  it("refuses to serve a data dir or a socket another box serves", async () => {
    const [sameData, sameSocket] = await Promise.all([
      startBox([...args.slice(0, 2), "--socket", join(dir, "other.sock")]).catch((e: Error) => e),
      startBox(["--data-dir", join(dir, "data2"), "--socket", join(dir, "box.sock")]).catch((e: Error) => e)
    ])
    expect(sameData).toBeInstanceOf(Error)
    expect(String(sameData)).toContain("another box")
    expect(String(sameSocket)).toContain("in use")
    // The first box still answers.
    expect((await c.run(c.rt.info)).name).toBe("koder-fleet-box")
  })
})
