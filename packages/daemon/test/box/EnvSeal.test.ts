import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as EnvSeal from "../../src/box/EnvSeal.js"

describe("EnvSeal", () => {
  const dir = mkdtempSync(join(tmpdir(), "envseal-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("makes its key once (0600) and opens what it sealed, across loads", () => {
    const a = EnvSeal.load(dir)
    const key = readFileSync(join(dir, EnvSeal.keyFile))
    expect(key).toHaveLength(32)
    expect(statSync(join(dir, EnvSeal.keyFile)).mode & 0o777).toBe(0o600)
    const sealed = a.seal({ PASSWORD: "hunter2" })
    expect(sealed).not.toContain("hunter2")
    expect(sealed).not.toContain(Buffer.from("hunter2").toString("base64"))
    expect(EnvSeal.load(dir).open(sealed)).toEqual({ PASSWORD: "hunter2" })
    expect(readFileSync(join(dir, EnvSeal.keyFile)).equals(key)).toBe(true)
  })

  it("writes records without env and reads them back; another key or a damaged envelope opens nothing", () => {
    const seal = EnvSeal.load(dir)
    const rec = { id: "c1", spec: { name: "app", env: { TOKEN: "t0k3n" } } }
    const disk = JSON.parse(JSON.stringify(EnvSeal.toDisk(rec, seal.seal(rec.spec.env)))) as typeof rec & { sealedEnv: string }
    expect(JSON.stringify(disk)).not.toContain("t0k3n")
    expect(disk.spec).toEqual({ name: "app" })
    expect(EnvSeal.fromDisk(disk, seal)).toMatchObject({ rec, ok: true })
    expect(EnvSeal.fromDisk(disk, EnvSeal.make(Buffer.alloc(32, 7)))).toMatchObject({ rec: { id: "c1", spec: { name: "app" } }, ok: false })
    expect(seal.open(`${disk.sealedEnv.slice(0, -4)}AAAA`)).toBeUndefined()
    // A record an older box wrote in the clear keeps its environment.
    expect(EnvSeal.fromDisk(rec, seal)).toEqual({ rec, sealed: undefined, ok: true })
  })
})
