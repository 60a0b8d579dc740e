/**
 * The image store: real busybox rootfs tarballs imported by the system's tar, stored by digest,
 * listed and resolved the ways a pod may name them; `koder-fleet box image` as a function.
 */
import { Runtime } from "@koder/fleet-core"
import { Effect, Exit } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import * as Images from "../../src/box/Images.js"
import { busyboxTarball, requireRunc } from "./RuncFixture.js"

describe("parseReference", () => {
  const hex = "a".repeat(64)
  it.each([
    ["busybox", { name: "busybox", tagged: "busybox:latest" }],
    ["busybox:1.36", { name: "busybox", tagged: "busybox:1.36" }],
    ["team/app:v2", { name: "team/app", tagged: "team/app:v2" }],
    [`busybox@sha256:${hex}`, { name: "busybox", digest: `sha256:${hex}` }],
    [`busybox:1.36@sha256:${hex}`, { name: "busybox", tagged: "busybox:1.36", digest: `sha256:${hex}` }],
    [`sha256:${hex}`, { digest: `sha256:${hex}` }]
  ])("%s", (ref, expected) => expect(Images.parseReference(ref)).toEqual(expected))
  it.each(["Busybox:1", "busybox@sha256:abc", "busybox@md5:" + "a".repeat(32), ":tag", "busybox:bad tag"])(
    "refuses %s",
    (ref) => expect(typeof Images.parseReference(ref)).toBe("string")
  )
})

describe("image store (system tar, real busybox rootfs)", () => {
  let dir: string
  let store: Images.ImageStore
  let plain: string
  let gzipped: string

  beforeAll(() => {
    requireRunc()
    dir = mkdtempSync(join(tmpdir(), "kbox-images-"))
    store = Images.ImageStore.open(join(dir, "data"))
    plain = busyboxTarball(dir)
    gzipped = busyboxTarball(dir, { gzip: true, extra: { "etc/release": "two" } })
  })

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  const failure = async (p: Promise<unknown>) => {
    const exit = await Effect.runPromiseExit(Effect.tryPromise({ try: () => p, catch: (e) => e }))
    if (Exit.isSuccess(exit)) throw new Error("expected a failure")
    return exit.cause._tag === "Fail" ? exit.cause.error : undefined
  }

  it("imports a plain tarball by its sha256, extracts it once, lists it, and resolves it by tag and by digest", async () => {
    const image = await store.importImage({ file: plain, name: "busybox:1" })
    expect(image.digest).toMatch(/^sha256:[0-9a-f]{64}$/)
    expect(image.names).toEqual(["busybox:1"])
    expect(image.sizeBytes).toBe(statSync(plain).size)
    const hex = image.digest.slice(7)
    const rootfs = join(dir, "data", "images", "sha256", hex, "rootfs")
    expect(statSync(join(rootfs, "bin", "busybox")).isFile()).toBe(true)
    expect(store.list()).toEqual([image])

    const byTag = await store.resolve("busybox:1")
    expect(byTag).toEqual({ image, digest: image.digest, rootfs })
    expect((await store.resolve(`busybox@${image.digest}`)).rootfs).toBe(rootfs)
    expect((await store.resolve(`busybox:1@${image.digest}`)).rootfs).toBe(rootfs)
    expect((await store.resolve(image.digest)).rootfs).toBe(rootfs)

    // The same tarball under a second name: one image, two names, not extracted again.
    const inode = statSync(rootfs).ino
    const again = await store.importImage({ file: plain, name: "box" })
    expect(again.names).toEqual(["busybox:1", "box:latest"])
    expect(statSync(rootfs).ino).toBe(inode)
    expect(store.list()).toHaveLength(1)
  })

  it("imports a gzipped tarball; a name moves to the newest digest", async () => {
    const first = (await store.resolve("busybox:1")).digest
    const second = await store.importImage({ file: gzipped, name: "busybox:1" })
    expect(second.digest).not.toBe(first)
    expect(readFileSync(join((await store.resolve("busybox:1")).rootfs, "etc", "release"), "utf8")).toBe("two")
    const names = new Map(store.list().map((i) => [i.digest, i.names]))
    expect(names.get(first)).toEqual(["box:latest"])
    expect(names.get(second.digest)).toEqual(["busybox:1"])
  })

  it("refuses a wrong digest, a digest of another name, an unknown tag: NotFound (image)", async () => {
    const digest = (await store.resolve("busybox:1")).digest
    const other = (await store.resolve("box")).digest
    for (const ref of [`busybox@sha256:${"0".repeat(64)}`, `busybox:1@${other}`, `busybox@${other}`, "busybox:2", `nothing@${digest}`]) {
      const e = await failure(store.resolve(ref))
      expect(e, ref).toBeInstanceOf(Runtime.NotFound)
      expect((e as Runtime.NotFound).kind).toBe("image")
    }
    expect(await failure(store.resolve("Bad:Ref"))).toBeInstanceOf(Runtime.Invalid)
  })

  it("refuses a malformed name, a missing file, and a file that is not a tarball, leaving nothing behind", async () => {
    expect(await failure(store.importImage({ file: plain, name: "Not A Name" }))).toBeInstanceOf(Runtime.Invalid)
    expect(await failure(store.importImage({ file: join(dir, "absent.tar"), name: "x:1" }))).toBeInstanceOf(Runtime.Invalid)
    const junk = join(dir, "junk.tar")
    writeFileSync(junk, "this is not a tar archive\n".repeat(100))
    const e = await failure(store.importImage({ file: junk, name: "junk:1" }))
    expect(e).toBeInstanceOf(Runtime.Invalid)
    expect((e as Runtime.Invalid).message).toMatch(/not a readable tar archive/)
    expect(store.list().flatMap((i) => i.names)).not.toContain("junk:1")
  })

  it("is the Runtime port's Images", async () => {
    const images = Images.toImages(store)
    const image = await Effect.runPromise(images.import({ name: "viaport:1", path: plain }))
    expect(image.names).toContain("viaport:1")
    expect((await Effect.runPromise(images.list)).some((i) => i.digest === image.digest)).toBe(true)
    const exit = await Effect.runPromiseExit(images.import({ name: "viaport:2", path: join(dir, "absent") }))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error._tag).toBe("RuntimeInvalid")
  })

  it("koder-fleet box image import FILE --name NAME:TAG [--data-dir DIR], and list", async () => {
    const data = join(dir, "cli-data")
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined)
    const err = vi.spyOn(console, "error").mockImplementation(() => undefined)
    try {
      expect(await Images.cli(["import", plain, "--name", "busybox:cli", "--data-dir", data])).toBe(0)
      expect(log.mock.calls.flat().join("\n")).toMatch(/imported busybox:cli sha256:[0-9a-f]{64}/)
      expect(await Images.cli(["list", "--data-dir", data])).toBe(0)
      expect(log.mock.calls.flat().join("\n")).toMatch(/sha256:[0-9a-f]{64} .* busybox:cli/)
      expect(await Images.cli(["import", plain, "--data-dir", data])).toBe(2)
      expect(await Images.cli(["import", join(dir, "absent.tar"), "--name", "x:1", "--data-dir", data])).toBe(1)
      expect(err.mock.calls.flat().join("\n")).toMatch(/cannot be read/)
    } finally {
      log.mockRestore()
      err.mockRestore()
    }
    expect(existsSync(join(data, "images", "index.json"))).toBe(true)
    expect((await Images.ImageStore.open(data).resolve("busybox:cli")).digest).toMatch(/^sha256:/)
  })
})
