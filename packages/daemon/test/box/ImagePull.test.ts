/**
 * Pulls by the runc driver from a real registry (Debian's docker-registry on loopback, TLS, token
 * auth; a second one with basic auth), of images built and pushed by the test: the image runs
 * with its config; an index resolves to the node's platform; a pinned digest runs and a wrong one
 * is refused; a private image needs credentials; a second image reuses the cached layers (the
 * registry's log shows no second GET); whiteouts and opaque directories delete lower files.
 */
import type { Runtime } from "@koder/fleet-core"
import { Chunk, Effect, Exit, Stream } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as RuncDriver from "../../src/box/RuncDriver.js"
import { startRegistry, type LayerEntry, type Registry } from "../fixtures/Registry.js"
import { eventually, podSpec } from "./BoxProcess.js"
import { busybox, requireRunc } from "./RuncFixture.js"

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const fail = async <A, E>(effect: Effect.Effect<A, E>): Promise<E> => {
  const exit = await Effect.runPromiseExit(effect)
  if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit)}`)
  return exit.cause.error
}

const applets = ["sh", "cat", "ls", "echo", "sleep", "test", "id", "pwd", "env"]
const base: Record<string, LayerEntry> = {
  bin: { dir: true },
  "bin/busybox": { content: readFileSync(busybox), mode: 0o755 },
  ...Object.fromEntries(applets.map((a) => [`bin/${a}`, { symlink: "busybox" }])),
  "etc/passwd": { content: "root:x:0:0:root:/root:/bin/sh\n" },
  "etc/motd": { content: "base\n" },
  "etc/old/a": { content: "a\n" },
  "etc/old/b": { content: "b\n" },
  tmp: { dir: true }
}

describe("runc driver pulls from a real registry", () => {
  let dir: string
  let registry: Registry
  let basicRegistry: Registry
  let handle: RuncDriver.Handle
  let rt: Runtime.RuntimeService
  let sandbox: Runtime.Sandbox
  let app: { digest: string; manifest: string; layers: ReadonlyArray<string> }

  const output = async (image: string, command: ReadonlyArray<string> = [], extra: Partial<Runtime.ContainerSpec> = {}) => {
    const name = `c${Math.random().toString(36).slice(2, 8)}`
    const id = await run(rt.containers.create({ sandboxId: sandbox.id, name, attempt: 0, image, command: [...command], ...extra }))
    await run(rt.containers.start(id))
    await eventually(async () => ((await run(rt.containers.inspect(id))).status.state === "exited" ? true : undefined), 20_000, `${name} to exit`)
    return Chunk.toArray(await run(Stream.runCollect(rt.containers.logs(id)))).map((l) => l.line).join("")
  }

  beforeAll(async () => {
    requireRunc()
    dir = mkdtempSync(join(tmpdir(), "kbox-pull-"))
    registry = await startRegistry(join(dir, "registry"))
    basicRegistry = await startRegistry(join(dir, "registry-basic"), { auth: "basic" })
    // The box trusts each registry's CA, as a k3s registries.yaml says.
    writeFileSync(
      join(dir, "registries.yaml"),
      `configs:\n  "${registry.host}":\n    tls:\n      ca_file: ${registry.caFile}\n  "${basicRegistry.host}":\n    tls:\n      ca_file: ${basicRegistry.caFile}\n`
    )
    app = await registry.push("public/busybox", "1", [base, { "etc/app": { content: "app\n" } }], { Entrypoint: ["/bin/sh", "-c"], Cmd: ["cat /etc/app; echo $MODE; pwd"], Env: ["PATH=/bin", "MODE=from-image"], WorkingDir: "/tmp" }, { index: true })
    // GC thresholds of 0: every collection removes every image no container holds.
    handle = RuncDriver.open({ dataDir: join(dir, "data"), registries: join(dir, "registries.yaml"), imageGc: { highPercent: 0, lowPercent: 0, intervalMs: 3_600_000 } })
    rt = handle.runtime
    sandbox = await run(rt.sandboxes.create({ ...podSpec("pull"), hostname: "pull-pod" }))
  }, 60_000)

  afterAll(async () => {
    if (rt) for (const s of await run(rt.sandboxes.list()).catch(() => [])) await run(rt.sandboxes.remove(s.id)).catch(() => undefined)
    handle?.close()
    await registry?.stop()
    await basicRegistry?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it("says it pulls images", async () => {
    expect((await run(rt.info)).capabilities.imagePull).toBe(true)
  })

  it("pulls a tag through an index (the node's platform), and the image runs with its config merged by the caller", async () => {
    const ref = `${registry.host}/public/busybox:1`
    const r = await run(rt.images.pull({ image: ref, policy: "IfNotPresent" }))
    expect(r.pulled).toBe(true)
    expect(r.fetchedBytes).toBeGreaterThan(500_000)
    expect(r.image.digest).toBe(app.manifest)
    expect(r.image.repoDigests).toContain(`${registry.host}/public/busybox@${app.digest}`)
    expect(r.image.config).toEqual({ entrypoint: ["/bin/sh", "-c"], cmd: ["cat /etc/app; echo $MODE; pwd"], env: ["PATH=/bin", "MODE=from-image"], workingDir: "/tmp" })
    // The agent merges the config (ContainerSpec.withImage); here the same request by hand.
    expect(await output(ref, ["/bin/sh", "-c", "cat /etc/app; echo $MODE; pwd"], { env: { MODE: "from-image" }, workingDir: "/tmp" })).toBe("app\nfrom-image\n/tmp\n")
    // Held now: IfNotPresent does not ask the registry again.
    const again = await run(rt.images.pull({ image: ref, policy: "IfNotPresent" }))
    expect(again.pulled).toBe(false)
    expect((await run(rt.images.list)).some((i) => i.names.includes(ref))).toBe(true)
  })

  it("a pinned digest runs; a wrong digest is refused with the registry's word", async () => {
    const pinned = `${registry.host}/public/busybox@${app.digest}`
    const r = await run(rt.images.pull({ image: pinned, policy: "IfNotPresent" }))
    expect(r.image.digest).toBe(app.manifest)
    expect(await output(pinned, ["cat", "/etc/app"])).toBe("app\n")
    const wrong = `${registry.host}/public/busybox@sha256:${"0".repeat(64)}`
    const e = await fail(rt.images.pull({ image: wrong, policy: "IfNotPresent" }))
    expect(e._tag).toBe("RuntimeNotFound")
    expect(e.message).toMatch(/manifest unknown/i)
  })

  it("a private image needs credentials: refused anonymously, pulled with the right ones", async () => {
    await registry.push("team/private", "1", [base, { "etc/secret-app": { content: "private\n" } }], { Cmd: ["cat", "/etc/secret-app"] })
    const ref = `${registry.host}/team/private:1`
    const anonymous = await fail(rt.images.pull({ image: ref, policy: "Always" }))
    expect(anonymous._tag).toBe("RuntimeInvalid")
    expect(anonymous.message).toMatch(/^unauthorized/)
    const wrong = await fail(rt.images.pull({ image: ref, policy: "Always", credentials: [{ username: "alice", password: "nope" }] }))
    expect(wrong.message).toMatch(/^unauthorized/)
    const r = await run(rt.images.pull({ image: ref, policy: "Always", credentials: [{ username: "mallory", password: "x" }, registry.user] }))
    expect(r.pulled).toBe(true)
    expect(await output(ref, ["cat", "/etc/secret-app"])).toBe("private\n")
  })

  it("a second image reuses the cached layers: the registry serves the shared base once", async () => {
    const other = await registry.push("public/other", "1", [base, { "etc/other": { content: "other\n" } }], { Cmd: ["cat", "/etc/other"] })
    const baseLayer = other.layers[0]!
    expect(baseLayer).toBe(app.layers[0])
    const before = registry.blobGets(baseLayer)
    expect(before).toBeGreaterThanOrEqual(1)
    const r = await run(rt.images.pull({ image: `${registry.host}/public/other:1`, policy: "IfNotPresent" }))
    expect(r.pulled).toBe(true)
    expect(registry.blobGets(baseLayer)).toBe(before)
    expect(registry.blobGets(other.layers[1]!)).toBe(1)
    expect(r.fetchedBytes).toBeLessThan(10_000)
    expect(await output(`${registry.host}/public/other:1`, ["cat", "/etc/other"])).toBe("other\n")
  })

  it("whiteouts delete a lower file; an opaque directory keeps only its own layer's entries", async () => {
    await registry.push("public/whiteout", "1", [
      base,
      { "etc/.wh.motd": { content: "" }, "etc/old/.wh..wh..opq": { content: "" }, "etc/old/c": { content: "c\n" } }
    ])
    const ref = `${registry.host}/public/whiteout:1`
    await run(rt.images.pull({ image: ref, policy: "IfNotPresent" }))
    expect(await output(ref, ["sh", "-c", "test -e /etc/motd && echo motd; ls /etc/old; ls -a /etc | grep -c '^.wh' || true"])).toBe("c\n0\n")
  })

  it("basic auth: refused without credentials, pulled with them", async () => {
    await basicRegistry.push("app", "2", [base], { Cmd: ["echo", "basic"] })
    const ref = `${basicRegistry.host}/app:2`
    const anonymous = await fail(rt.images.pull({ image: ref, policy: "Always" }))
    expect(anonymous.message).toMatch(/^unauthorized/)
    const r = await run(rt.images.pull({ image: ref, policy: "Always", credentials: [basicRegistry.user] }))
    expect(r.image.config?.cmd).toEqual(["echo", "basic"])
  })

  it("Never: an image that is not held is NotFound and nothing is fetched; an unknown repository is NotFound", async () => {
    const e = await fail(rt.images.pull({ image: `${registry.host}/public/never:1`, policy: "Never" }))
    expect(e._tag).toBe("RuntimeNotFound")
    expect(e.message).toMatch(/not present with pull policy of Never/)
    expect(registry.log()).not.toContain("public/never")
    const missing = await fail(rt.images.pull({ image: `${registry.host}/public/missing:1`, policy: "IfNotPresent" }))
    expect(missing._tag).toBe("RuntimeNotFound")
  })

  it("image garbage collection removes the images no container holds and their blobs, and keeps the rest", async () => {
    const gcImage = `${registry.host}/public/gc-only:1`
    const pushed = await registry.push("public/gc-only", "1", [base, { "etc/gc": { content: "gc\n" } }], { Cmd: ["cat", "/etc/gc"] })
    await run(rt.images.pull({ image: gcImage, policy: "IfNotPresent" }))
    const blob = join(dir, "data", "images", "blobs", "sha256", pushed.layers[1]!.slice("sha256:".length))
    expect(existsSync(blob)).toBe(true)
    const held = new Set((await run(rt.containers.list())).map((c) => c.imageRef))
    const result = handle.collectImages()
    expect(result.images).toContain(pushed.manifest)
    expect(existsSync(blob)).toBe(false)
    const left = await run(rt.images.list)
    expect(left.some((i) => i.names.includes(gcImage))).toBe(false)
    // The images of the containers (exited ones too) stay, with the base layer they share.
    expect(left.some((i) => i.names.includes(`${registry.host}/public/busybox:1`))).toBe(true)
    expect(held.size).toBeGreaterThan(0)
    expect(existsSync(join(dir, "data", "images", "blobs", "sha256", app.layers[0]!.slice("sha256:".length)))).toBe(true)
    // Pulled again, it comes back (its shared base layer from the cache).
    const again = await run(rt.images.pull({ image: gcImage, policy: "IfNotPresent" }))
    expect(again.pulled).toBe(true)
    expect(registry.blobGets(pushed.layers[1]!)).toBe(2)
  })

  it("a registry that does not answer is Unavailable, and a malformed reference Invalid", async () => {
    const e = await fail(rt.images.pull({ image: "127.0.0.1:1/nothing:1", policy: "Always" }))
    expect(e._tag).toBe("RuntimeUnavailable")
    const bad = await fail(rt.images.pull({ image: "UPPER/Case:1", policy: "Always" }))
    expect(bad._tag).toBe("RuntimeInvalid")
  })
})
