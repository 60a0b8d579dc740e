/**
 * The box's pod networks by CNI plugins (root): a box inside a simulated host, started with
 * `--cni-conf-dir` naming a conflist of Debian's bridge + host-local + portmap + loopback, gives
 * each `network: pod` sandbox the plugins' address from the node's pod CIDR; pods reach each other
 * over real TCP and keep their addresses across a box restart (the ADD result is recorded);
 * removing a sandbox runs DEL, which frees its address (host-local's reservation) and its veth.
 */
import type { Runtime } from "@koder/fleet-core"
import { Chunk, Stream } from "effect"
import { mkdtempSync, readdirSync, rmSync, writeFileSync, mkdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Client, connect, eventually } from "../box/BoxProcess.js"
import { cleanupLeftovers, cleanupRun, createNetns, inNetns, newRun, type InNetns, type Run, spawnIn } from "./IsolatedFixture.js"

const cidr = "10.198.7.0/24"
const serve = `require("node:net").createServer((s) => s.on("error", () => {}).end(require("node:os").hostname())).listen(8080, () => console.log("listening"))`
const dial = `
const s = require("node:net").connect(Number(process.argv[2]), process.argv[1])
let got = ""
s.on("data", (d) => (got += d)).on("end", () => { console.log(got); process.exit(0) })
s.on("error", (e) => { console.error(e.message); process.exit(3) })
setTimeout(() => { console.error("timeout"); process.exit(4) }, 3000)
`

describe("box: pod networks by CNI plugins (root)", () => {
  let run: Run
  let ns: string
  let dir: string
  let box: InNetns
  let c: Client
  const bridge = `cni${Math.random().toString(36).slice(2, 8)}`

  const startBox = async () => {
    box = spawnIn(ns, "box", ["--data-dir", join(dir, "data"), "--socket", join(dir, "box.sock"), "--cni-conf-dir", join(dir, "net.d"), "--cni-bin-dir", "/usr/lib/cni"])
    await box.waitFor(/serving the kbox API/)
    c = await connect(join(dir, "box.sock"))
  }
  const logs = async (container: string) => Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(container)))).map((l) => l.line).join("")
  const pod = async (name: string): Promise<{ sandbox: Runtime.Sandbox; container: string }> => {
    const sandbox = await c.run(c.rt.sandboxes.create({ podUid: `uid-${name}`, name: run.pod(name), namespace: "shop", network: "pod", podCidr: cidr }))
    const container = await c.run(c.rt.containers.create({ sandboxId: sandbox.id, name: "app", attempt: 0, command: [process.execPath, "-e", serve] }))
    await c.run(c.rt.containers.start(container))
    await eventually(async () => (await logs(container)).includes("listening"), 10_000, `${name} listening`)
    return { sandbox, container }
  }
  const connectFrom = (container: string, ip: string) => c.run(c.rt.containers.exec(container, { command: [process.execPath, "-e", dial, ip, "8080"], timeoutMs: 5_000 }))
  const reserved = () => readdirSync(join(dir, "ipam", "fleet-cni")).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f)).sort()

  beforeAll(async () => {
    cleanupLeftovers()
    run = newRun()
    ns = createNetns(run, "c")
    dir = mkdtempSync(join(tmpdir(), "fleet-cnibox-"))
    mkdirSync(join(dir, "net.d"))
    writeFileSync(
      join(dir, "net.d", "10-fleet.conflist"),
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "fleet-cni",
        plugins: [
          { type: "bridge", bridge, isGateway: true, ipMasq: false, ipam: { type: "host-local", dataDir: join(dir, "ipam"), routes: [{ dst: "0.0.0.0/0" }] } },
          { type: "portmap", capabilities: { portMappings: true }, snat: false },
          { type: "loopback" }
        ]
      })
    )
    await startBox()
  }, 60_000)

  afterAll(async () => {
    if (c !== undefined) {
      for (const s of await c.run(c.rt.sandboxes.list()).catch(() => [])) await c.run(c.rt.sandboxes.remove(s.id)).catch(() => undefined)
      await c.close().catch(() => undefined)
    }
    box?.child.kill("SIGKILL")
    cleanupRun(run.id)
    rmSync(dir, { recursive: true, force: true })
  }, 30_000)

  it("pods get the plugins' addresses of the node's CIDR on the plugin's bridge and reach each other", async () => {
    const a = await pod("a")
    const b = await pod("b")
    expect(a.sandbox.ip).toMatch(/^10\.198\.7\.\d+$/)
    expect(b.sandbox.ip).toMatch(/^10\.198\.7\.\d+$/)
    expect(reserved()).toEqual([a.sandbox.ip, b.sandbox.ip].sort())
    expect(inNetns(ns, ["ip", "-o", "-4", "addr", "show", "dev", bridge])).toContain("10.198.7.1/24")
    const r = await connectFrom(b.container, a.sandbox.ip!)
    expect(r.stderr).toBe("")
    expect(r.stdout.trim()).toBe(run.pod("a"))
  }, 60_000)

  it("keeps addresses across a box restart, CHECKs them then; removing a sandbox runs DEL (address and veth freed)", async () => {
    const before = await c.run(c.rt.sandboxes.list())
    await c.close()
    box.child.kill("SIGTERM")
    expect(await box.exited).toBe(0)
    // Behind the box's back, b's address is dropped from host-local's store: CHECK must say so.
    const b = before.find((s) => s.spec.name === run.pod("b"))!
    rmSync(join(dir, "ipam", "fleet-cni", b.ip!))
    await startBox()
    await eventually(() => box.stderr().includes("CNI CHECK failed"), 10_000, "the CHECK failure on stderr")
    expect(box.stderr()).toContain(`(shop/${run.pod("b")}): CNI CHECK failed`)
    expect(box.stderr()).not.toContain(`(shop/${run.pod("a")})`)
    const after = await c.run(c.rt.sandboxes.list())
    expect(after.map((s) => [s.spec.name, s.ip]).sort()).toEqual(before.map((s) => [s.spec.name, s.ip]).sort())
    const a = after.find((s) => s.spec.name === run.pod("a"))!
    const veths = () => inNetns(ns, ["ip", "-o", "link", "show", "master", bridge]).split("\n").filter((l) => l !== "").length
    expect(veths()).toBe(2)
    await c.run(c.rt.sandboxes.remove(a.id))
    await eventually(() => veths() === 1, 5_000, "a's veth to go")
    expect(reserved()).not.toContain(a.ip)
    expect(reserved()).toEqual([])
  }, 90_000)
})
