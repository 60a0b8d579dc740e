/**
 * CNI delegation with Debian's containernetworking-plugins (bridge + host-local + portmap +
 * loopback), as root: two network namespaces get addresses from the node's pod CIDR and reach
 * each other over the plugin's bridge; the portmap plugin forwards a host port into one; CHECK
 * passes; DEL releases the addresses and removes the veths. Configuration parsing is table-driven.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { createConnection } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Cni from "../../src/box/Cni.js"
import { eventually } from "./BoxProcess.js"

const binDir = "/usr/lib/cni"

describe("CNI network configurations", () => {
  it.each([
    ['{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{"type":"portmap"}]}', { name: "n", cniVersion: "1.0.0", types: ["bridge", "portmap"] }],
    ['{"cniVersion":"0.4.0","name":"single","type":"ptp"}', { name: "single", cniVersion: "0.4.0", types: ["ptp"] }],
    ['{"name":"nover","plugins":[{"type":"bridge"}]}', { name: "nover", cniVersion: "1.0.0", types: ["bridge"] }]
  ])("reads %s", (text, expected) => {
    const l = Cni.parseConfig(text, "f")
    if (typeof l === "string") throw new Error(l)
    expect({ name: l.name, cniVersion: l.cniVersion, types: l.plugins.map((p) => p.type) }).toEqual(expected)
  })

  it.each([
    ["{", /f: not JSON/],
    ['{"plugins":[{"type":"bridge"}]}', /f: name: required/],
    ['{"name":"n","plugins":[]}', /plugins: a list/],
    ['{"name":"n","plugins":[{"type":"../../bin/sh"}]}', /plugins\[0\].type: a plugin binary name/]
  ])("refuses %s", (text, message) => {
    expect(Cni.parseConfig(text, "f")).toMatch(message)
  })

  it("puts the node's pod CIDR into a host-local IPAM without ranges, and passes prevResult", () => {
    const list = Cni.parseConfig('{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","ipam":{"type":"host-local"}},{"type":"portmap"}]}', "f") as Cni.NetworkList
    expect(Cni.pluginInput(list, list.plugins[0]!, "10.42.3.0/24", undefined)).toEqual({ type: "bridge", cniVersion: "1.0.0", name: "n", ipam: { type: "host-local", ranges: [[{ subnet: "10.42.3.0/24" }]] } })
    const prev = { ips: [{ address: "10.42.3.2/24" }] }
    expect(Cni.pluginInput(list, list.plugins[1]!, "10.42.3.0/24", prev)).toEqual({ type: "portmap", cniVersion: "1.0.0", name: "n", prevResult: prev })
    const own = Cni.parseConfig('{"name":"n","plugins":[{"type":"bridge","ipam":{"type":"host-local","subnet":"10.9.0.0/16"}}]}', "f") as Cni.NetworkList
    expect(Cni.pluginInput(own, own.plugins[0]!, "10.42.3.0/24", undefined)["ipam"]).toEqual({ type: "host-local", subnet: "10.9.0.0/16" })
    expect(Cni.podIpOf({ ips: [{ address: "10.42.3.7/24" }] })).toBe("10.42.3.7")
  })
})

describe("CNI plugins from containernetworking-plugins (root)", () => {
  const tag = Math.random().toString(36).slice(2, 7)
  const bridge = `cnit${tag}`
  const netns = [`cni-a-${tag}`, `cni-b-${tag}`]
  const cidr = "10.251.7.0/24"
  let dir: string
  let runner: Cni.CniRunner
  const results = new Map<string, Cni.Result>()
  // Pod b asks the portmap plugin for host port 17002 → its port 7002.
  const call = (ns: string): Cni.Call => ({
    containerId: ns,
    netns: `/var/run/netns/${ns}`,
    podCidr: cidr,
    args: { K8S_POD_NAMESPACE: "default", K8S_POD_NAME: ns },
    ...(ns === netns[1] ? { portMappings: [{ hostPort: 17002, containerPort: 7002, protocol: "tcp" as const }] } : {})
  })
  const tcpRead = (host: string, port: number, expected: string) =>
    new Promise<string | undefined>((resolve) => {
      const s = createConnection({ host, port })
      let got = ""
      s.on("data", (d) => (got += d.toString()))
      s.on("close", () => resolve(got.includes(expected) ? got : undefined))
      s.on("error", () => resolve(undefined))
    })
  const inNs = (ns: string, args: ReadonlyArray<string>) => spawnSync("ip", ["netns", "exec", ns, ...args], { encoding: "utf8", timeout: 10_000 })

  beforeAll(() => {
    if (process.getuid?.() !== 0) throw new Error("the CNI tests run as root (as this project's machines and CI do)")
    for (const p of ["bridge", "host-local", "portmap", "loopback"])
      if (spawnSync(join(binDir, p), [], { env: { CNI_COMMAND: "VERSION" } }).status !== 0) throw new Error(`${binDir}/${p} is missing: apt-get install -y containernetworking-plugins (.ci/run does it)`)
    dir = mkdtempSync(join(tmpdir(), "fleet-cni-"))
    writeFileSync(
      join(dir, "10-fleet.conflist"),
      JSON.stringify({
        cniVersion: "1.0.0",
        name: `fleet-test-${tag}`,
        plugins: [
          { type: "bridge", bridge, isGateway: true, ipMasq: false, ipam: { type: "host-local", dataDir: join(dir, "ipam"), routes: [{ dst: "0.0.0.0/0" }] } },
          { type: "portmap", capabilities: { portMappings: true }, snat: false },
          { type: "loopback" }
        ]
      })
    )
    runner = new Cni.CniRunner([binDir], Cni.loadDir(dir))
    for (const ns of netns) execFileSync("ip", ["netns", "add", ns])
  })

  afterAll(() => {
    for (const ns of netns) spawnSync("ip", ["netns", "delete", ns])
    spawnSync("ip", ["link", "delete", bridge])
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it("ADD gives each pod an address of the pod CIDR on the bridge, the gateway its first address; they reach each other", async () => {
    for (const ns of netns) results.set(ns, await runner.add(call(ns)))
    const [a, b] = netns.map((ns) => Cni.podIpOf(results.get(ns)!)!)
    expect(a).toMatch(/^10\.251\.7\.\d+$/)
    expect(b).toMatch(/^10\.251\.7\.\d+$/)
    expect(a).not.toBe(b)
    expect(results.get(netns[0]!)!.ips![0]!.gateway).toBe("10.251.7.1")
    expect(inNs(netns[0]!, ["ip", "-4", "addr", "show", "eth0"]).stdout).toContain(`${a}/24`)
    expect(inNs(netns[0]!, ["ip", "link", "show", "lo"]).stdout).toMatch(/state UNKNOWN|UP/)
    // A TCP server in b, reached from a across the bridge.
    const server = spawn("ip", ["netns", "exec", netns[1]!, "busybox", "nc", "-l", "-p", "7000", "-e", "echo", "from-b"], { stdio: "ignore" })
    try {
      const answer = await eventually(() => {
        const r = inNs(netns[0]!, ["busybox", "nc", "-w", "2", b!, "7000"])
        return r.stdout.includes("from-b") ? r.stdout : undefined
      }, 10_000, "a to reach b")
      expect(answer).toContain("from-b")
    } finally {
      server.kill()
    }
  })

  it("CHECK passes for a pod network that is as ADD left it", async () => {
    await runner.check(call(netns[0]!), results.get(netns[0]!)!)
  })

  it("the host reaches a pod through the bridge (the node's route to its pod CIDR)", async () => {
    const b = Cni.podIpOf(results.get(netns[1]!)!)!
    const server = spawn("ip", ["netns", "exec", netns[1]!, "busybox", "nc", "-l", "-p", "7001", "-e", "echo", "host-reached"], { stdio: "ignore" })
    try {
      const text = await eventually(() => tcpRead(b, 7001, "host-reached"), 10_000, "the host to reach b")
      expect(text).toContain("host-reached")
    } finally {
      server.kill()
    }
  })

  it("portmap forwards the pod's host port to it", async () => {
    const server = spawn("ip", ["netns", "exec", netns[1]!, "busybox", "nc", "-l", "-p", "7002", "-e", "echo", "mapped"], { stdio: "ignore" })
    try {
      // The node's own address on the bridge: a locally generated connection DNATed by portmap's OUTPUT rules.
      const text = await eventually(() => tcpRead("10.251.7.1", 17002, "mapped"), 10_000, "host port 17002 to reach b:7002")
      expect(text).toContain("mapped")
    } finally {
      server.kill()
    }
  })

  it("DEL releases the addresses and the veths; a second DEL succeeds", async () => {
    for (const ns of netns) await runner.del(call(ns), results.get(ns))
    expect(inNs(netns[0]!, ["ip", "link", "show", "eth0"]).status).not.toBe(0)
    await runner.del(call(netns[0]!), results.get(netns[0]!))
    // host-local keeps a file per reserved address: none is left.
    const reserved = readdirSync(join(dir, "ipam", runner.list.name)).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f))
    expect(reserved).toEqual([])
  })

  it("a plugin's error is reported with its message; what ran is undone", async () => {
    const broken = new Cni.CniRunner([binDir], { ...runner.list, plugins: [runner.list.plugins[0]!, { type: "bridge", bridge, ipam: { type: "host-local", subnet: "not-a-cidr" } }] })
    const e = await broken.add(call(netns[1]!)).catch((x: unknown) => x)
    expect(e).toBeInstanceOf(Cni.CniError)
    expect(String((e as Error).message)).toMatch(/^CNI plugin bridge: ADD /)
    expect(inNs(netns[1]!, ["ip", "link", "show", "eth0"]).status).not.toBe(0)
    const missing = new Cni.CniRunner([binDir], { ...runner.list, plugins: [{ type: "no-such-plugin" }] })
    await expect(missing.add(call(netns[1]!))).rejects.toThrow(/CNI plugin no-such-plugin: not found in \/usr\/lib\/cni/)
  })
})
