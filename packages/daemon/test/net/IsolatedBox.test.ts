/**
 * The box's pod networks (root): a box inside a simulated host (a network namespace) gives each
 * `network: pod` sandbox its own network namespace, a veth on the bridge `fleet0` and an address
 * of the node's pod CIDR; pods reach each other by IP over real TCP, get a resolv.conf pointing at
 * the gateway, and keep their addresses across a box restart, which hands out no address twice.
 * Removing a sandbox removes its veth and frees its address.
 */
import type { Runtime } from "@koder/fleet-core"
import { Chunk, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Client, connect, eventually } from "../box/BoxProcess.js"
import { cleanupLeftovers, cleanupRun, createNetns, inNetns, newRun, type InNetns, type Run, spawnIn } from "./IsolatedFixture.js"

const cidr = "10.199.7.0/24"

/** A TCP server answering "<hostname> <its addresses>" then closing. */
const serve = `
const os = require("node:os")
const addrs = Object.values(os.networkInterfaces()).flat().filter((a) => a.family === "IPv4" && !a.internal).map((a) => a.address)
require("node:net").createServer((s) => s.on("error", () => {}).end(os.hostname() + " " + addrs.join(","))).listen(8080, () => console.log("listening"))
`
/** A client: connects to argv[1]:argv[2] and prints what it got (exit 3 on error). */
const dial = `
const s = require("node:net").connect(Number(process.argv[2]), process.argv[1])
let got = ""
s.on("data", (d) => (got += d)).on("end", () => { console.log(got); process.exit(0) })
s.on("error", (e) => { console.error(e.message); process.exit(3) })
setTimeout(() => { console.error("timeout"); process.exit(4) }, 3000)
`

describe("box: isolated pod networks (root)", () => {
  let run: Run
  let ns: string
  let dir: string
  let box: InNetns
  let c: Client

  const startBox = async () => {
    box = spawnIn(ns, "box", ["--data-dir", join(dir, "data"), "--socket", join(dir, "box.sock")])
    await box.waitFor(/serving the kbox API/)
    c = await connect(join(dir, "box.sock"))
  }
  const stopBox = async () => {
    await c.close()
    box.child.kill("SIGTERM")
    expect(await box.exited).toBe(0)
  }

  const pod = async (name: string): Promise<{ sandbox: Runtime.Sandbox; container: string }> => {
    const sandbox = await c.run(
      c.rt.sandboxes.create({
        podUid: `uid-${name}`,
        name: run.pod(name),
        namespace: "shop",
        network: "pod",
        podCidr: cidr,
        dns: { nameservers: ["10.199.7.1"], searches: ["shop.svc.cluster.local", "svc.cluster.local", "cluster.local"], options: ["ndots:5"] }
      })
    )
    const container = await c.run(c.rt.containers.create({ sandboxId: sandbox.id, name: "app", attempt: 0, command: [process.execPath, "-e", serve] }))
    await c.run(c.rt.containers.start(container))
    await eventually(async () => (await logs(container)).includes("listening"), 10_000, `${name} listening`).catch(async (e: Error) => {
      throw new Error(`${e.message}\nlog: ${await logs(container)}\n${JSON.stringify(await c.run(c.rt.containers.inspect(container)))}\nbox: ${box.stderr()}`)
    })
    return { sandbox, container }
  }

  const logs = async (container: string) => Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(container)))).map((l) => l.line).join("")

  const connectFrom = async (container: string, ip: string) =>
    c.run(c.rt.containers.exec(container, { command: [process.execPath, "-e", dial, ip, "8080"], timeoutMs: 5_000 }))

  beforeAll(async () => {
    cleanupLeftovers()
    run = newRun()
    ns = createNetns(run, "h")
    dir = mkdtempSync(join(tmpdir(), "fleet-isobox-"))
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

  it("reports pod networking and gives pods addresses of the node's CIDR that reach each other", async () => {
    const info = await c.run(c.rt.info)
    expect(info.capabilities.podNetwork).toBe(true)
    expect(info.capabilities.namespaces).toContain("net")
    const a = await pod("a")
    const b = await pod("b")
    expect([a.sandbox.ip, b.sandbox.ip]).toEqual(["10.199.7.2", "10.199.7.3"])
    const bridge = inNetns(ns, ["ip", "-o", "-4", "addr", "show", "dev", "fleet0"])
    expect(bridge).toContain("10.199.7.1/24")
    // A real TCP connection from pod b to pod a: a's answer names a's hostname and its only address.
    const r = await connectFrom(b.container, a.sandbox.ip!)
    expect(r.stderr).toBe("")
    expect(r.stdout.trim()).toBe(`${run.pod("a")} 10.199.7.2`)
    // The pod's resolver is the gateway, with Kubernetes' search path.
    const resolv = await c.run(c.rt.containers.exec(a.container, { command: ["cat", "/etc/resolv.conf"] }))
    expect(resolv.stdout).toBe("nameserver 10.199.7.1\nsearch shop.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n")
    // The host's own resolv.conf is untouched.
    expect(inNetns(ns, ["cat", "/etc/resolv.conf"])).not.toContain("nameserver 10.199.7.1")
  }, 60_000)

  it("keeps addresses across a box restart and hands out none twice; removal frees the veth", async () => {
    const before = await c.run(c.rt.sandboxes.list())
    const a = before.find((s) => s.spec.name === run.pod("a"))!
    await stopBox()
    await startBox()
    const after = await c.run(c.rt.sandboxes.list())
    expect(after.map((s) => [s.spec.name, s.ip, s.state]).sort()).toEqual(before.map((s) => [s.spec.name, s.ip, "ready"]).sort())
    const d = await pod("d")
    expect(d.sandbox.ip).toBe("10.199.7.4")
    // The old pods still answer, through the new box too.
    const [ctr] = await c.run(c.rt.containers.list({ sandboxId: a.id }))
    expect((await connectFrom(d.container, a.ip!)).stdout).toContain(run.pod("a"))
    expect(ctr).toBeDefined()

    const veths = () => inNetns(ns, ["ip", "-o", "link", "show", "master", "fleet0"]).split("\n").filter((l) => l !== "").length
    expect(veths()).toBe(3)
    await c.run(c.rt.sandboxes.remove(a.id))
    await eventually(() => veths() === 2, 5_000, "a's veth to go")
    // Round-robin: the next pod does not take a's address at once.
    const e = await pod("e")
    expect(e.sandbox.ip).toBe("10.199.7.5")
    // Unreachable now: nothing answers at a's old address.
    const gone = await connectFrom(e.container, a.ip!)
    expect(gone.exitCode).not.toBe(0)
  }, 90_000)
})
