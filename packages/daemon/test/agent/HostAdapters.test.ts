// The agent's host adapters against the real host: the filesystem, sockets, /proc.
import { Either, Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { createServer as createTcpServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as FsVolumeWriter from "../../src/agent/FsVolumeWriter.js"
import * as HostFacts from "../../src/agent/HostFacts.js"
import * as NetHostPortAllocator from "../../src/agent/NetHostPortAllocator.js"
import * as NetProber from "../../src/agent/NetProber.js"

const dir = mkdtempSync(join(tmpdir(), "fleet-host-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("HostFacts", () => {
  const reserved: ReadonlyArray<[string, Either.Either<Record<string, string>, string>]> = [
    ["cpu=500m,memory=1Gi", Either.right({ cpu: "500m", memory: "1Gi" })],
    ["", Either.right({})],
    ["cpu", Either.left('--reserved "cpu": expected name=quantity[,name=quantity...]')],
    ["memory=lots", Either.left("--reserved: memory=lots is not a quantity")]
  ]
  it.each(reserved)("parses --reserved %j", (text, want) => {
    expect(HostFacts.parseReserved(text)).toEqual(want)
  })

  it("subtracts reservations from capacity, never below zero", () => {
    expect(HostFacts.allocatable({ cpu: "4", memory: "8Gi", pods: "110" }, { cpu: "500m", memory: "1Gi", pods: "200" })).toEqual({ cpu: "3500m", memory: "7Gi", pods: "0" })
  })

  it("reads the host: CPUs, memory, the data dir's disk, Go's os/arch names", () => {
    const facts = HostFacts.detect({ nodeName: "n1", dataDir: dir, reserved: { cpu: "100m" }, containerRuntimeVersion: "kbox://0.1.0" })
    expect(Number(facts.capacity["cpu"])).toBeGreaterThanOrEqual(1)
    expect(facts.capacity["memory"]).toMatch(/^\d+Ki$/)
    expect(facts.capacity["ephemeral-storage"]).toMatch(/^\d+Ki$/)
    expect(facts.allocatable["cpu"]).toBe(`${Number(facts.capacity["cpu"]) * 1000 - 100}m`)
    expect(facts.os).toBe("linux")
    expect(["amd64", "arm64"]).toContain(facts.arch)
    expect(facts.nodeInfo.kernelVersion).not.toBe("")
    expect(facts.internalIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
    expect(HostFacts.goArch("x64")).toBe("amd64")
  })
})

describe("FsVolumeWriter", () => {
  const writer = FsVolumeWriter.make()
  const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(e))

  it("writes projected files behind an atomic ..data link, with their modes, and swaps on change only", async () => {
    const vol = join(dir, "pods/u1/volumes/kubernetes.io~configmap/cfg")
    const files = [
      { path: "app.conf", data: "a=1", encoding: "utf8" as const, mode: 0o644 },
      { path: "nested/key", data: Buffer.from("secret").toString("base64"), encoding: "base64" as const, mode: 0o400 }
    ]
    expect(await run(writer.prepare({ _tag: "Files", name: "cfg", path: vol, files }))).toEqual(Either.right(undefined))
    expect(readFileSync(join(vol, "app.conf"), "utf8")).toBe("a=1")
    expect(readFileSync(join(vol, "nested/key"), "utf8")).toBe("secret")
    expect(readlinkSync(join(vol, "app.conf"))).toBe("..data/app.conf")
    expect(statSync(join(vol, "nested/key")).mode & 0o777).toBe(0o400)
    const version = readlinkSync(join(vol, "..data"))
    await run(writer.prepare({ _tag: "Files", name: "cfg", path: vol, files }))
    expect(readlinkSync(join(vol, "..data"))).toBe(version)
    await run(writer.prepare({ _tag: "Files", name: "cfg", path: vol, files: [{ path: "app.conf", data: "a=2", encoding: "utf8", mode: 0o644 }] }))
    expect(readFileSync(join(vol, "app.conf"), "utf8")).toBe("a=2")
    expect(existsSync(join(vol, "nested"))).toBe(false)
    expect(readdirSync(vol).filter((e) => e.startsWith("..") && e !== "..data")).toHaveLength(1)
  })

  it("refuses a projected path that climbs out of its volume", async () => {
    const result = await run(writer.prepare({ _tag: "Files", name: "bad", path: join(dir, "bad"), files: [{ path: "../escape", data: "x", encoding: "utf8", mode: 0o644 }] }))
    expect(Either.isLeft(result)).toBe(true)
  })

  it("creates emptyDirs world-writable and checks or creates hostPaths by type", async () => {
    const empty = join(dir, "pods/u2/volumes/kubernetes.io~empty-dir/scratch")
    await run(writer.prepare({ _tag: "EmptyDir", name: "scratch", path: empty }))
    expect(statSync(empty).mode & 0o777).toBe(0o777)
    await run(writer.prepare({ _tag: "HostPath", name: "h", path: join(dir, "created/deep"), type: "DirectoryOrCreate" }))
    expect(lstatSync(join(dir, "created/deep")).isDirectory()).toBe(true)
    writeFileSync(join(dir, "a-file"), "x")
    const wrong = await run(writer.prepare({ _tag: "HostPath", name: "h", path: join(dir, "a-file"), type: "Directory" }))
    expect(wrong).toEqual(Either.left(expect.objectContaining({ _tag: "VolumeError", message: `hostPath type check failed: ${join(dir, "a-file")} is not a directory` })))
    await run(writer.prepare({ _tag: "HostPath", name: "f", path: join(dir, "new-file"), type: "FileOrCreate" }))
    expect(lstatSync(join(dir, "new-file")).isFile()).toBe(true)
  })

  it("removes a pod's directory", async () => {
    await run(writer.removePod(join(dir, "pods/u2")))
    expect(existsSync(join(dir, "pods/u2"))).toBe(false)
  })
})

describe("NetProber", () => {
  const prober = NetProber.make()
  let server: Server
  let port = 0
  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((q, s) => {
        if (q.url === "/slow") return void setTimeout(() => s.end(), 2_000)
        s.statusCode = q.url === "/ok" ? 200 : q.url === "/moved" ? 302 : 503
        if (q.headers["user-agent"] !== "kube-probe/1.31" || q.headers["x-probe"] !== "yes") s.statusCode = 400
        s.end()
      }).listen(0, "127.0.0.1", () => {
        port = (server.address() as { port: number }).port
        resolve()
      })
    })

  it("HTTP: 2xx and 3xx pass, others and timeouts fail; TCP: a listener passes, a closed port fails", async () => {
    await listen()
    const get = (path: string, timeoutMs = 1_000) =>
      Effect.runPromise(prober.probe({ _tag: "HttpGet", scheme: "HTTP", host: "127.0.0.1", port, path, headers: [{ name: "X-Probe", value: "yes" }] }, timeoutMs))
    expect((await get("/ok")).result).toBe("success")
    expect((await get("/moved")).result).toBe("success")
    expect(await get("/bad")).toEqual({ result: "failure", message: "HTTP probe failed with statuscode: 503" })
    expect((await get("/slow", 200)).message).toMatch(/deadline exceeded/)
    expect((await Effect.runPromise(prober.probe({ _tag: "TcpSocket", host: "127.0.0.1", port }, 1_000))).result).toBe("success")
    await new Promise<void>((resolve) => server.close(() => resolve()))
    expect((await Effect.runPromise(prober.probe({ _tag: "TcpSocket", host: "127.0.0.1", port }, 1_000))).result).toBe("failure")
  })
})

describe("NetHostPortAllocator", () => {
  it("hands out distinct free ports, skipping excluded and recently handed ones", async () => {
    const allocator = NetHostPortAllocator.make()
    const first = await Effect.runPromise(allocator.allocate(["TCP", "TCP", "UDP"], new Set()))
    expect(new Set(first).size).toBe(3)
    const second = await Effect.runPromise(allocator.allocate(["TCP"], new Set(first)))
    expect(first).not.toContain(second[0])
    // Every port handed out can be listened on.
    const server = createTcpServer()
    await new Promise<void>((resolve) => server.listen(second[0], "0.0.0.0", () => resolve()))
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
})
