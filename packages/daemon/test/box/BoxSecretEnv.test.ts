/**
 * A container's environment (Secret values among it) never reaches the box's data dir in the
 * clear: records hold it sealed (EnvSeal), yet a box restarted on the same data dir still has it,
 * for an exec into a running container and for a container created before the restart and started
 * after it.
 */
import { Chunk, Stream } from "effect"
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type BoxProcess, type Client, connect, eventually, marker, podSpec, shSpec, startBox } from "./BoxProcess.js"

/** Every regular file under `dir` whose bytes contain `needle`. */
const filesContaining = (dir: string, needle: string): Array<string> => {
  const out: Array<string> = []
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.isFile()) {
        try {
          if (readFileSync(p).includes(needle)) out.push(p)
        } catch {
          // removed meanwhile
        }
      }
    }
  }
  walk(dir)
  return out
}

describe("a container's environment in the box's records", () => {
  let dir: string
  let args: Array<string>
  let box: BoxProcess
  let c: Client
  const secret = `s3cr3t-${Math.random().toString(36).slice(2, 10)}`

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kbox-env-"))
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

  it("is sealed on disk and still there after a restart of the box", async () => {
    const sb = await c.run(c.rt.sandboxes.create(podSpec("env")))
    const env = { PASSWORD: secret }
    const runner = await c.run(c.rt.containers.create(shSpec(sb.id, "runner", "while :; do sleep 0.2; done", marker("runner"), { env })))
    await c.run(c.rt.containers.start(runner))
    const later = await c.run(c.rt.containers.create(shSpec(sb.id, "later", 'echo "later=$PASSWORD"', marker("later"), { env })))

    const data = join(dir, "data")
    const records = readdirSync(join(data, "containers")).map((id) => join(data, "containers", id, "state.json"))
    expect(records).toHaveLength(2)
    for (const r of records) {
      expect(readFileSync(r, "utf8")).toContain("kbox:env:aesgcm:v1:")
      expect(statSync(r).mode & 0o077).toBe(0)
    }
    expect(filesContaining(data, secret)).toEqual([])
    expect(filesContaining(data, Buffer.from(secret).toString("base64"))).toEqual([])

    // A crash, then a new box on the same data dir.
    await c.close()
    expect(await box.stop("SIGKILL")).toBe("SIGKILL")
    box = await startBox(args)
    c = await connect(box.socketPath)

    const exec = await c.run(c.rt.containers.exec(runner, { command: ["sh", "-c", 'echo "exec=$PASSWORD"'] }))
    expect(exec.stdout).toBe(`exec=${secret}\n`)
    await c.run(c.rt.containers.start(later))
    const logged = await eventually(async () => {
      const lines = Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(later))))
      return lines.some((l) => l.line === `later=${secret}\n`) || undefined
    }, 10_000, "the later container's output")
    expect(logged).toBe(true)
    expect(filesContaining(data, secret).filter((f) => !f.endsWith(".log"))).toEqual([])
  })
})
