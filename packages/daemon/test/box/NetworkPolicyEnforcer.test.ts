/**
 * NetworkPolicy enforcement on real network namespaces (root): a target pod namespace and two
 * peers on a bridge (all inside namespaces this test creates, nothing on the host), real TCP.
 * An allowed peer connects; a denied peer's SYN is dropped (a timeout, not a refusal); the node
 * (the bridge's address) always gets through; rules are replaced atomically; removing isolation
 * opens the pod again. Every namespace goes at the end, even on failure, and with it every table.
 */
import type { Runtime } from "@koder/fleet-core"
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as NetworkPolicyEnforcer from "../../src/box/NetworkPolicyEnforcer.js"

const open: Runtime.PolicyDirection = { isolated: false, allow: [] }
const tcp = (port: number): Runtime.PolicyPort => ({ protocol: "TCP", port })

describe("NetworkPolicyEnforcer.render", () => {
  it("renders one table with a dropping chain per isolated direction", () => {
    const { script, rules } = NetworkPolicyEnforcer.render(
      {
        ingress: {
          isolated: true,
          allow: [
            { cidrs: ["10.1.0.11/32", "fd00::11/128"], ports: [tcp(6379), { protocol: "TCP", port: 32000, endPort: 32768 }, { protocol: "UDP" }] },
            { cidrs: ["172.17.0.0/16"], except: ["172.17.1.0/24"] },
            {}
          ]
        },
        egress: { isolated: true, allow: [] }
      },
      ["10.1.0.1"]
    )
    expect(script).toBe(
      [
        "table inet fleet_policy",
        "delete table inet fleet_policy",
        "table inet fleet_policy {",
        "\tchain ingress {",
        "\t\ttype filter hook input priority filter; policy drop;",
        '\t\tiif "lo" accept',
        "\t\tct state established,related accept",
        "\t\tmeta l4proto { icmp, ipv6-icmp } accept",
        '\t\tip saddr 10.1.0.1 accept comment "the pod\'s node"',
        "\t\tip saddr 10.1.0.11/32 tcp dport { 6379, 32000-32768 } accept",
        "\t\tip saddr 10.1.0.11/32 meta l4proto udp accept",
        "\t\tip6 saddr fd00::11/128 tcp dport { 6379, 32000-32768 } accept",
        "\t\tip6 saddr fd00::11/128 meta l4proto udp accept",
        "\t\tip saddr 172.17.0.0/16 ip saddr != 172.17.1.0/24 accept",
        "\t\taccept",
        "\t}",
        "\tchain egress {",
        "\t\ttype filter hook output priority filter; policy drop;",
        '\t\toif "lo" accept',
        "\t\tct state established,related accept",
        "\t\tmeta l4proto { icmp, ipv6-icmp } accept",
        '\t\tip daddr 10.1.0.1 accept comment "the pod\'s node"',
        "\t}",
        "}",
        ""
      ].join("\n")
    )
    expect(rules).toBe(6)
  })

  it("only deletes the table when nothing is isolated", () => {
    expect(NetworkPolicyEnforcer.render({ ingress: open, egress: open }, [])).toEqual({ script: "table inet fleet_policy\ndelete table inet fleet_policy\n", rules: 0 })
  })
})

// ---- real namespaces -----------------------------------------------------------------------------

const id = randomBytes(2).toString("hex")
const names = { hub: `fltpol-${id}-hub`, t: `fltpol-${id}-t`, a: `fltpol-${id}-a`, c: `fltpol-${id}-c` }
const address = { hub: "10.77.0.1", t: "10.77.0.10", a: "10.77.0.11", c: "10.77.0.12" }
const netnsPath = (ns: string) => `/run/netns/${ns}`
const ip = (...args: ReadonlyArray<string>) => execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/** A TCP server on the given ports that answers "ok" and closes. */
const serverScript = `
const net = require("node:net")
let n = 0
for (const port of process.argv.slice(1).map(Number)) net.createServer((s) => s.end("ok")).listen(port, () => { if (++n === process.argv.length - 1) console.log("listening") })
`
/**
 * A dialer living in one namespace (so each attempt costs a connect, not a process start): reads
 * `<seq> <ip> <port>` lines, answers `<seq> <what it got | refused | timeout>` for each.
 */
const dialerScript = `
const net = require("node:net")
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const [seq, host, port] = line.split(" ")
  let done = false
  const answer = (text) => { if (!done) { done = true; console.log(seq + " " + text); s.destroy() } }
  const s = net.connect(Number(port), host)
  let got = ""
  s.on("data", (d) => (got += d)).on("end", () => answer(got))
  s.on("error", (e) => answer(e.code === "ECONNREFUSED" ? "refused" : e.message))
  setTimeout(() => answer("timeout"), 1000)
})
console.log("ready")
`

describe("NetworkPolicyEnforcer on real namespaces (root)", () => {
  const servers: Array<ChildProcess> = []
  const dialers = new Map<string, { readonly child: ChildProcess; readonly waiting: Map<string, (text: string) => void> }>()
  let seq = 0

  const startDialer = (ns: string) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn("ip", ["netns", "exec", ns, process.execPath, "-e", dialerScript], { stdio: ["pipe", "pipe", "pipe"] })
      servers.push(child)
      const waiting = new Map<string, (text: string) => void>()
      dialers.set(ns, { child, waiting })
      let buffer = ""
      child.stdout!.on("data", (d: Buffer) => {
        buffer += d.toString()
        let nl: number
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl)
          buffer = buffer.slice(nl + 1)
          if (line === "ready") resolve()
          const space = line.indexOf(" ")
          const k = line.slice(0, space)
          waiting.get(k)?.(line.slice(space + 1))
          waiting.delete(k)
        }
      })
      child.once("exit", (code) => reject(new Error(`dialer in ${ns} exited (${code})`)))
    })

  /** Connect from namespace `from` to `to:port`: "ok", "refused" or "timeout". */
  const dial = (from: string, to: string, port: number): Promise<string> =>
    new Promise((resolve) => {
      const d = dialers.get(from)!
      const k = String(++seq)
      d.waiting.set(k, resolve)
      d.child.stdin!.write(`${k} ${to} ${port}\n`)
    })

  const startServer = (ns: string, ports: ReadonlyArray<number>) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn("ip", ["netns", "exec", ns, process.execPath, "-e", serverScript, ...ports.map(String)], { stdio: ["ignore", "pipe", "pipe"] })
      servers.push(child)
      let out = ""
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString()
        if (out.includes("listening")) resolve()
      })
      child.once("exit", (code) => reject(new Error(`server in ${ns} exited (${code})`)))
    })

  const enforce = (rules: Runtime.NetworkPolicyRules) => NetworkPolicyEnforcer.apply(netnsPath(names.t), rules)

  beforeAll(async () => {
    ip("netns", "add", names.hub)
    ip("-n", names.hub, "link", "set", "lo", "up")
    ip("-n", names.hub, "link", "add", "br0", "type", "bridge")
    ip("-n", names.hub, "addr", "add", `${address.hub}/24`, "dev", "br0")
    ip("-n", names.hub, "link", "set", "br0", "up")
    for (const pod of ["t", "a", "c"] as const) {
      ip("netns", "add", names[pod])
      ip("-n", names.hub, "link", "add", `v${pod}`, "type", "veth", "peer", "name", "eth0", "netns", names[pod])
      ip("-n", names.hub, "link", "set", `v${pod}`, "master", "br0", "up")
      ip("-n", names[pod], "link", "set", "lo", "up")
      ip("-n", names[pod], "addr", "add", `${address[pod]}/24`, "dev", "eth0")
      ip("-n", names[pod], "link", "set", "eth0", "up")
      ip("-n", names[pod], "route", "add", "default", "via", address.hub)
    }
    await Promise.all([startServer(names.t, [8080, 9090]), startServer(names.a, [8080]), ...Object.values(names).map(startDialer)])
  }, 30_000)

  afterAll(() => {
    for (const s of servers) s.kill("SIGKILL")
    // Deleting a namespace takes its links, bridge and nftables tables with it.
    for (const ns of Object.values(names)) {
      try {
        ip("netns", "del", ns)
      } catch {
        // not created
      }
    }
    expect(ip("netns", "list")).not.toContain(`fltpol-${id}-`)
  })

  it("without a policy every peer connects", async () => {
    expect(await Promise.all([dial(names.a, address.t, 8080), dial(names.c, address.t, 8080)])).toEqual(["ok", "ok"])
    expect(await NetworkPolicyEnforcer.list(netnsPath(names.t))).toBeUndefined()
  })

  it("an isolated pod accepts the allowed peer on the allowed port and drops everyone else", async () => {
    const count = await enforce({ ingress: { isolated: true, allow: [{ cidrs: [`${address.a}/32`], ports: [tcp(8080)] }] }, egress: open })
    expect(count).toBe(1)
    const [allowed, denied, otherPort, node] = await Promise.all([
      dial(names.a, address.t, 8080),
      dial(names.c, address.t, 8080),
      dial(names.a, address.t, 9090),
      dial(names.hub, address.t, 9090)
    ])
    expect(allowed).toBe("ok")
    // Dropped, not refused: the SYN never reaches the server.
    expect(denied).toBe("timeout")
    expect(otherPort).toBe("timeout")
    // The node the pod runs on (its gateway) is always allowed, as Kubernetes specifies.
    expect(node).toBe("ok")
  })

  it("new rules replace the old ones in one transaction", async () => {
    await enforce({ ingress: { isolated: true, allow: [{ cidrs: [`${address.a}/32`, `${address.c}/32`], ports: [tcp(8080)] }] }, egress: open })
    expect(await dial(names.c, address.t, 8080)).toBe("ok")
    const listed = await NetworkPolicyEnforcer.list(netnsPath(names.t))
    expect(listed?.match(/chain ingress/g)).toHaveLength(1)
    expect(listed).toContain("10.77.0.12")
  })

  it("an ipBlock with a hole", async () => {
    await enforce({ ingress: { isolated: true, allow: [{ cidrs: ["10.77.0.0/24"], except: [`${address.c}/32`] }] }, egress: open })
    expect(await Promise.all([dial(names.a, address.t, 9090), dial(names.c, address.t, 9090)])).toEqual(["ok", "timeout"])
  })

  it("egress isolation stops the pod's own connections except to the node and allowed peers", async () => {
    await enforce({ ingress: open, egress: { isolated: true, allow: [] } })
    expect(await dial(names.t, address.a, 8080)).toBe("timeout")
    await enforce({ ingress: open, egress: { isolated: true, allow: [{ cidrs: [`${address.a}/32`], ports: [tcp(8080)] }] } })
    expect(await dial(names.t, address.a, 8080)).toBe("ok")
    // Ingress is open again: C is back in.
    expect(await dial(names.c, address.t, 8080)).toBe("ok")
  })

  it("no isolation removes the table", async () => {
    await enforce({ ingress: open, egress: open })
    expect(await NetworkPolicyEnforcer.list(netnsPath(names.t))).toBeUndefined()
    expect(await dial(names.c, address.t, 9090)).toBe("ok")
  })

  it("refuses rules it cannot express, leaving the namespace as it was", async () => {
    await expect(enforce({ ingress: { isolated: true, allow: [{ cidrs: ["10.0.0.0"] }] }, egress: open })).rejects.toThrow(/is not a CIDR/)
    expect(await NetworkPolicyEnforcer.list(netnsPath(names.t))).toBeUndefined()
  })
})
