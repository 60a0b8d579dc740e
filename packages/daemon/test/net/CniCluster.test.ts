/**
 * Pod networks made by standard CNI plugins, end to end (root): two hosts simulated as network
 * namespaces on a test bridge, each running `koder-fleet box --cni-conf-dir` (Debian's bridge,
 * host-local, portmap and loopback plugins, one conflist for both: host-local gets each node's pod
 * CIDR) and `koder-fleet agent --network isolated`, the server in the root namespace. Pods get the
 * plugins' addresses of their node's block on the plugin's bridge, reach each other across hosts
 * and through a ClusterIP, and a NetworkPolicy is still enforced inside their namespaces.
 */
import { Runtime } from "@koder/fleet-core"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Client, connect } from "../box/BoxProcess.js"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"
import { cleanupLeftovers, cleanupRun, createBridge, createHost, inNetns, newRun, type InNetns, type Run, spawnIn } from "./IsolatedFixture.js"

const net = 200 + Math.floor(Math.random() * 50)
const link = (n: number) => `192.168.${net}.${n}`
const clusterCidr = `10.${net}.0.0/16`
const cniBridge = "cnifleet0"

/** Answers "<hostname>" on 8080 and closes. */
const serve = `require("node:net").createServer((s) => s.on("error", () => {}).end(require("node:os").hostname())).listen(8080)`
/** Connects to argv[1]:argv[2]: prints the answer, or "refused"/"timeout" (after 2 s). */
const dial = `
const s = require("node:net").connect(Number(process.argv[2]), process.argv[1])
let got = ""
s.on("data", (d) => (got += d)).on("end", () => { console.log(got); process.exit(0) })
s.on("error", (e) => { console.log(e.code === "ECONNREFUSED" ? "refused" : e.message); process.exit(0) })
setTimeout(() => { console.log("timeout"); process.exit(0) }, 2000)
`

interface Host {
  readonly name: string
  readonly ns: string
  readonly dir: string
  readonly box: InNetns
  readonly agent: InNetns
  readonly boxClient: Client
}

describe("pod networks by CNI plugins: two hosts (root)", () => {
  let run: Run
  let dir: string
  let api: FleetProcess
  let http: ReturnType<typeof client>
  let token: string
  const hosts: Array<Host> = []
  const ips: Record<string, string> = {}

  const send = async (method: string, path: string, body?: unknown, contentType?: string) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }), ...(contentType === undefined ? {} : { headers: { "content-type": contentType } }) })
    return { status: r.status, json: () => r.json() as Record<string, any> }
  }

  const host = async (name: string, n: number, joinToken: string, caHash: string): Promise<Host> => {
    const ns = createHost(run, name, n, `${link(n)}/24`)
    const hostDir = join(dir, name)
    mkdirSync(join(hostDir, "net.d"), { recursive: true })
    writeFileSync(
      join(hostDir, "net.d", "10-fleet.conflist"),
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "fleet-cni",
        plugins: [
          // No subnet: the box gives host-local the node's pod CIDR.
          { type: "bridge", bridge: cniBridge, isGateway: true, ipMasq: false, ipam: { type: "host-local", dataDir: join(hostDir, "ipam"), routes: [{ dst: "0.0.0.0/0" }] } },
          { type: "portmap", capabilities: { portMappings: true }, snat: false },
          { type: "loopback" }
        ]
      })
    )
    const box = spawnIn(ns, "box", ["--data-dir", join(hostDir, "box"), "--socket", join(hostDir, "box.sock"), "--cni-conf-dir", join(hostDir, "net.d"), "--cni-bin-dir", "/usr/lib/cni"])
    await box.waitFor(/serving the kbox API.*pod network by the CNI plugins of/, 90_000)
    const agent = spawnIn(ns, "agent", [
      "--server", `https://${link(1)}:${api.port}`, "--join-token", joinToken, "--ca-hash", caHash,
      "--box-socket", join(hostDir, "box.sock"), "--data-dir", join(hostDir, "agent"), "--node-name", name,
      "--internal-ip", link(n), "--port", "0", "--network", "isolated"
    ])
    return { name, ns, dir: hostDir, box, agent, boxClient: await connect(join(hostDir, "box.sock")) }
  }

  beforeAll(async () => {
    cleanupLeftovers()
    run = newRun()
    dir = mkdtempSync(join(tmpdir(), "fleet-cnicluster-"))
    createBridge(run, `${link(1)}/24`)
    api = await start(["--data-dir", join(dir, "server"), "--listen", "0.0.0.0:0", "--tls-san", link(1), "--cluster-cidr", clusterCidr])
    const m = /--join-token (\S+) --ca-hash (\S+)/.exec(api.stdout())
    if (m === null) throw new Error(`no join line in:\n${api.stdout()}`)
    const creds = credentials(api.kubeconfig)
    token = creds.token
    http = client(api.port, creds.ca)
    const second = await send("POST", "/apis/fleet.koder.dev/v1/jointokens", { apiVersion: "fleet.koder.dev/v1", kind: "JoinToken", metadata: {} })
    expect(second.status).toBe(201)
    hosts.push(...(await Promise.all([host("h1", 2, m[1]!, m[2]!), host("h2", 3, second.json()["status"].token, m[2]!)])))
  }, 180_000)

  afterAll(async () => {
    for (const h of hosts) {
      for (const s of await h.boxClient.run(h.boxClient.rt.sandboxes.list()).catch(() => [])) await h.boxClient.run(h.boxClient.rt.sandboxes.remove(s.id)).catch(() => undefined)
      await h.boxClient.close().catch(() => undefined)
      h.agent.child.kill("SIGKILL")
      h.box.child.kill("SIGKILL")
    }
    http?.close()
    api?.child.kill("SIGKILL")
    if (run !== undefined) cleanupRun(run.id)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  const diagnose = () => hosts.map((h) => `${h.name} agent: ${h.agent.stderr().slice(-1500)}\n${h.name} box: ${h.box.stderr().slice(-1500)}`).join("\n")

  const nodeCidr = (name: string) =>
    eventually(async () => {
      const n = await send("GET", `/api/v1/nodes/${name}`)
      const ready = n.status === 200 && (n.json()["status"]?.conditions ?? []).some((c: any) => c.type === "Ready" && c.status === "True")
      return ready ? (n.json()["spec"]?.podCIDR as string | undefined) : undefined
    }, 120_000, `node ${name} Ready with a pod CIDR`).catch((e: Error) => {
      throw new Error(`${e.message}\n${diagnose()}`)
    })

  const createPod = async (name: string, node: string, labels: Record<string, string>) => {
    const r = await send("POST", "/api/v1/namespaces/default/pods", {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: run.pod(name), labels },
      spec: {
        nodeName: node,
        containers: [{ name: "app", image: "node:20", command: [process.execPath, "-e", serve], ports: [{ name: "http", containerPort: 8080 }], readinessProbe: { tcpSocket: { port: "http" }, periodSeconds: 1 } }]
      }
    })
    expect(r.status).toBe(201)
  }

  const readyPod = (name: string) =>
    eventually(async () => {
      const p = (await send("GET", `/api/v1/namespaces/default/pods/${run.pod(name)}`)).json()
      return p["status"]?.podIP && p["status"]?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True") ? p : undefined
    }, 120_000, `pod ${name} Ready`).catch((e: Error) => {
      throw new Error(`${e.message}\n${diagnose()}`)
    })

  const dialFrom = async (h: Host, name: string, ip: string, port = 8080) => {
    const [ctr] = await h.boxClient.run(h.boxClient.rt.containers.list({ labels: { [Runtime.Labels.podName]: run.pod(name) }, state: "running" }))
    if (ctr === undefined) throw new Error(`no running container of ${name} on ${h.name}`)
    const r = await h.boxClient.run(h.boxClient.rt.containers.exec(ctr.id, { command: [process.execPath, "-e", dial, ip, String(port)], timeoutMs: 5_000 }))
    return r.stdout.trim()
  }

  it("pods get the plugins' addresses of their node's block, on the plugin's bridge", async () => {
    const [c1, c2] = [await nodeCidr("h1"), await nodeCidr("h2")]
    await createPod("a", "h1", { app: "web" })
    await createPod("b", "h2", { app: "web" })
    await createPod("c", "h1", { role: "client" })
    for (const p of ["a", "b", "c"]) ips[p] = (await readyPod(p))["status"].podIP as string
    const prefix = (cidr: string) => cidr.replace(/\.0\/24$/, ".")
    expect(ips["a"]!.startsWith(prefix(c1))).toBe(true)
    expect(ips["c"]!.startsWith(prefix(c1))).toBe(true)
    expect(ips["b"]!.startsWith(prefix(c2))).toBe(true)
    // The bridge plugin's gateway on the node's block, and no built-in bridge.
    const [h1] = hosts as [Host]
    expect(inNetns(h1.ns, ["ip", "-o", "-4", "addr", "show", "dev", cniBridge])).toContain(`${prefix(c1)}1/24`)
    expect(inNetns(h1.ns, ["ip", "-o", "link", "show"])).not.toMatch(/^\d+: fleet0:/m)
  }, 300_000)

  it("pods on different hosts reach each other by pod IP, and a ClusterIP reaches both", async () => {
    const [h1, h2] = hosts as [Host, Host]
    expect(await dialFrom(h1, "c", ips["b"]!)).toBe(run.pod("b"))
    expect(await dialFrom(h2, "b", ips["a"]!)).toBe(run.pod("a"))
    const svc = await send("POST", "/api/v1/namespaces/default/services", {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "web" },
      spec: { selector: { app: "web" }, ports: [{ port: 80, targetPort: "http" }] }
    })
    expect(svc.status).toBe(201)
    const clusterIP = svc.json()["spec"].clusterIP as string
    const seen = new Set<string>()
    await eventually(async () => {
      const answer = await dialFrom(h1, "c", clusterIP, 80)
      if (answer.startsWith(run.pod(""))) seen.add(answer)
      return seen.size === 2 || undefined
    }, 60_000, `answers of both pods through ${clusterIP}:80`).catch((e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify([...seen])}\n${inNetns(h1.ns, ["nft", "list", "table", "ip", "fleet"])}`)
    })
    expect([...seen].sort()).toEqual([run.pod("a"), run.pod("b")].sort())
  }, 120_000)

  it("a NetworkPolicy is still enforced: B admits only labelled clients", async () => {
    const [h1] = hosts as [Host, Host]
    const r = await send("POST", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: "web-from-allowed" },
      spec: { podSelector: { matchLabels: { app: "web" } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: "allowed" } } }], ports: [{ port: "http" }] }] }
    })
    expect(r.status).toBe(201)
    await eventually(async () => ((await dialFrom(h1, "c", ips["b"]!)) === "timeout" ? true : undefined), 20_000, "C dropped by B's policy").catch((e: Error) => {
      throw new Error(`${e.message}\n${diagnose()}`)
    })
    const patched = await send("PATCH", `/api/v1/namespaces/default/pods/${run.pod("c")}`, { metadata: { labels: { role: "allowed" } } }, "application/merge-patch+json")
    expect(patched.status).toBe(200)
    await eventually(async () => ((await dialFrom(h1, "c", ips["b"]!)) === run.pod("b") ? true : undefined), 20_000, "C admitted once labelled")
  }, 90_000)
})
