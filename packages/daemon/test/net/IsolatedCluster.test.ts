/**
 * Isolated network mode end to end (root): two hosts simulated as network namespaces on a test
 * bridge, each running `koder-fleet box` and `koder-fleet agent --network isolated`, the server in
 * the root namespace. Nodes get pod CIDRs from the server's node IPAM; pods get addresses from
 * them and reach each other across hosts by pod IP (host-gw routes) and through a ClusterIP
 * (nftables DNAT spread over both hosts' pods) — real TCP connections from inside the pods. A box
 * restart keeps every address and hands out no duplicate. Everything is removed afterwards, also
 * on failure, and leftovers of crashed runs are removed first (IsolatedFixture.ts).
 */
import { Runtime } from "@koder/fleet-core"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Client, connect } from "../box/BoxProcess.js"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"
import { cleanupLeftovers, cleanupRun, createBridge, createHost, inNetns, newRun, type InNetns, type Run, spawnIn } from "./IsolatedFixture.js"

const net = 200 + Math.floor(Math.random() * 50)
const link = (n: number) => `192.168.${net}.${n}`
const clusterCidr = `10.${net}.0.0/16`

/** Answers "<hostname> <pod IP>" on 8080 and closes. */
const serve = `
const os = require("node:os")
const ip = Object.values(os.networkInterfaces()).flat().find((a) => a.family === "IPv4" && !a.internal)?.address
// A probe may close its connection first: the answer's error is ignored, not fatal.
require("node:net").createServer((s) => s.on("error", () => {}).end(os.hostname() + " " + ip)).listen(Number(process.env.PORT || 8080))
`
/** Connects to argv[1]:argv[2] and prints the answer (exit 3 on error, 4 on timeout). */
const dial = `
const s = require("node:net").connect(Number(process.argv[2]), process.argv[1])
let got = ""
s.on("data", (d) => (got += d)).on("end", () => { console.log(got); process.exit(0) })
s.on("error", (e) => { console.error(e.message); process.exit(3) })
setTimeout(() => { console.error("timeout"); process.exit(4) }, 3000)
`

/** From inside a pod: GET the pod list with the in-cluster config (env, token, CA); prints "<status> <body>". */
const inCluster = `
const fs = require("node:fs")
const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
const req = require("node:https").request({
  host: process.env.KUBERNETES_SERVICE_HOST, port: Number(process.env.KUBERNETES_SERVICE_PORT), path: "/api/v1/namespaces/default/pods",
  ca: fs.readFileSync(dir + "/ca.crt"), headers: { authorization: "Bearer " + fs.readFileSync(dir + "/token", "utf8") }
}, (res) => { let b = ""; res.on("data", (d) => (b += d)); res.on("end", () => { console.log(res.statusCode + " " + b); process.exit(0) }) })
req.on("error", (e) => { console.error(e.message); process.exit(3) })
req.end()
setTimeout(() => { console.error("timeout"); process.exit(4) }, 4000)
`

interface Host {
  readonly name: string
  readonly ns: string
  readonly ip: string
  readonly dir: string
  box: InNetns
  agent: InNetns | undefined
  boxClient: Client
}

describe("isolated network mode: two hosts (root)", () => {
  let run: Run
  let dir: string
  let api: FleetProcess
  let http: ReturnType<typeof client>
  let token: string
  const hosts: Array<Host> = []

  const send = async (method: string, path: string, body?: unknown) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    return { status: r.status, json: () => r.json() as Record<string, any> }
  }

  const startBox = async (h: Pick<Host, "ns" | "dir">) => {
    const box = spawnIn(h.ns, "box", ["--data-dir", join(h.dir, "box"), "--socket", join(h.dir, "box.sock")])
    await box.waitFor(/serving the kbox API.*pod network on bridge fleet0/, 90_000)
    return { box, boxClient: await connect(join(h.dir, "box.sock")) }
  }

  const host = async (name: string, n: number, joinToken: string, caHash: string): Promise<Host> => {
    const ns = createHost(run, name, n, `${link(n)}/24`)
    const h = { name, ns, ip: link(n), dir: join(dir, name) }
    const { box, boxClient } = await startBox(h)
    const agent = spawnIn(ns, "agent", [
      "--server", `https://${link(1)}:${api.port}`, "--join-token", joinToken, "--ca-hash", caHash,
      "--box-socket", join(h.dir, "box.sock"), "--data-dir", join(h.dir, "agent"), "--node-name", name,
      "--internal-ip", h.ip, "--port", "0", "--network", "isolated"
    ])
    return { ...h, box, agent, boxClient }
  }

  beforeAll(async () => {
    cleanupLeftovers()
    run = newRun()
    dir = mkdtempSync(join(tmpdir(), "fleet-isolated-"))
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
      h.agent?.child.kill("SIGKILL")
      h.box.child.kill("SIGKILL")
    }
    http?.close()
    api?.child.kill("SIGKILL")
    if (run !== undefined) cleanupRun(run.id)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  const nodeCidr = async (name: string) =>
    eventually(async () => {
      const n = await send("GET", `/api/v1/nodes/${name}`)
      const ready = n.status === 200 && (n.json()["status"]?.conditions ?? []).some((c: any) => c.type === "Ready" && c.status === "True")
      return ready ? (n.json()["spec"]?.podCIDR as string | undefined) : undefined
    }, 150_000, `node ${name} Ready with a pod CIDR`).catch(async (e: Error) => {
      throw new Error(`${e.message}\nnodes: ${JSON.stringify((await send("GET", "/api/v1/nodes")).json()["items"]?.map((n: any) => [n.metadata.name, n.spec, n.status?.conditions]))}\nagents: ${hosts.map((h) => `${h.name}: ${h.agent?.stdout()} ${h.agent?.stderr().slice(-2000)}`).join("\n")}\nserver: ${api.stderr().slice(-3000)}`)
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
    }, 120_000, `pod ${name} Ready`).catch(async (e: Error) => {
      const p = (await send("GET", `/api/v1/namespaces/default/pods/${run.pod(name)}`)).json()
      throw new Error(`${e.message}\npod: ${JSON.stringify(p["status"])}\nagents: ${hosts.map((h) => `${h.name}: ${h.agent?.stderr().slice(-2000)}\nbox: ${h.box.stderr().slice(-1000)}`).join("\n")}`)
    })

  /** Run `dial` inside pod `name` (on host `h`) against ip:port. */
  const dialFrom = async (h: Host, name: string, ip: string, port: number) => {
    const [ctr] = await h.boxClient.run(h.boxClient.rt.containers.list({ labels: { [Runtime.Labels.podName]: run.pod(name) }, state: "running" }))
    if (ctr === undefined) throw new Error(`no running container of ${name} on ${h.name}`)
    return h.boxClient.run(h.boxClient.rt.containers.exec(ctr.id, { command: [process.execPath, "-e", dial, ip, String(port)], timeoutMs: 5_000 }))
  }

  let ips: Record<string, string> = {}

  it("gives each node a block of the cluster CIDR and each pod an address of its node's block", async () => {
    const [c1, c2] = [await nodeCidr("h1"), await nodeCidr("h2")]
    expect(new Set([c1, c2])).toEqual(new Set([`10.${net}.0.0/24`, `10.${net}.1.0/24`]))
    await createPod("a", "h1", { app: "web" })
    await createPod("b", "h2", { app: "web" })
    await createPod("c", "h1", { app: "client" })
    const pods = { a: await readyPod("a"), b: await readyPod("b"), c: await readyPod("c") }
    ips = Object.fromEntries(Object.entries(pods).map(([k, p]) => [k, p["status"].podIP as string]))
    const prefix = (cidr: string) => cidr.replace(/\.0\/24$/, ".")
    expect(ips["a"]!.startsWith(prefix(c1))).toBe(true)
    expect(ips["c"]!.startsWith(prefix(c1))).toBe(true)
    expect(ips["b"]!.startsWith(prefix(c2))).toBe(true)
    expect(new Set(Object.values(ips)).size).toBe(3)
    expect(pods.a["status"].podIPs).toEqual([{ ip: ips["a"] }])
    // No host ports in isolated mode.
    expect(pods.a["status"].hostPorts ?? []).toEqual([])
  }, 300_000)

  /** Pods' container statuses and recent Events, for failure messages. */
  const diagnose = async () => {
    const pods = (await send("GET", "/api/v1/namespaces/default/pods")).json()["items"] ?? []
    const events = (await send("GET", "/api/v1/namespaces/default/events")).json()["items"] ?? []
    const logs: Array<string> = []
    for (const p of pods) {
      const r = await http.send("GET", `/api/v1/namespaces/default/pods/${p.metadata.name}/log?previous=true`, { token })
      logs.push(`${p.metadata.name}: ${r.status} ${r.text.slice(-1500)}`)
    }
    return `logs: ${logs.join("\n")}\npods: ${JSON.stringify(pods.map((p: any) => [p.metadata.name, p.status?.podIP, p.status?.containerStatuses]))}\nevents: ${JSON.stringify(events.map((e: any) => [e.involvedObject?.name, e.reason, e.message]))}`
  }

  it("pods on different hosts reach each other by pod IP", async () => {
    const [h1, h2] = hosts as [Host, Host]
    const toB = await dialFrom(h1, "c", ips["b"]!, 8080)
    if (toB.stderr !== "") throw new Error(`${toB.stderr}\n${await diagnose()}\nagent h2: ${h2.agent?.stderr().slice(-3000)}`)
    expect(toB.stdout.trim()).toBe(`${run.pod("b")} ${ips["b"]}`)
    const toA = await dialFrom(h2, "b", ips["a"]!, 8080)
    expect(toA.stdout.trim()).toBe(`${run.pod("a")} ${ips["a"]}`)
    // The host-gw route on h1 to h2's block, via h2's address, is Fleet's (proto 160).
    expect(inNetns(h1.ns, ["ip", "route", "show", "proto", "160"])).toContain(`via ${h2.ip}`)
  }, 60_000)

  it("a pod reaches the API with its in-cluster config: address from the environment, the projected token and CA", async () => {
    const [h1] = hosts as [Host, Host]
    const [ctr] = await h1.boxClient.run(h1.boxClient.rt.containers.list({ labels: { [Runtime.Labels.podName]: run.pod("c") }, state: "running" }))
    const r = await h1.boxClient.run(h1.boxClient.rt.containers.exec(ctr!.id, { command: [process.execPath, "-e", inCluster], timeoutMs: 8_000 }))
    if (r.stderr !== "") throw new Error(`${r.stderr}\n${await diagnose()}`)
    // Authenticated as the pod's ServiceAccount (a 401 would be a bad token, a TLS error a bad CA); RBAC grants it nothing.
    expect(r.stdout).toMatch(/^403 /)
    expect(r.stdout).toContain("system:serviceaccount:default:default")
  }, 30_000)

  it("a ClusterIP spreads connections over the pods of both hosts; its endpoints carry pod IPs and the container port", async () => {
    const svc = await send("POST", "/api/v1/namespaces/default/services", {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "web" },
      spec: { selector: { app: "web" }, ports: [{ port: 80, targetPort: "http" }] }
    })
    expect(svc.status).toBe(201)
    const clusterIP = svc.json()["spec"].clusterIP as string
    const slice = await eventually(async () => {
      const l = (await send("GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb")).json()
      const s = l["items"]?.[0]
      return s?.endpoints?.length === 2 ? s : undefined
    }, 30_000, "the Service's two endpoints")
    expect(slice.endpoints.flatMap((e: any) => e.addresses).sort()).toEqual([ips["a"], ips["b"]].sort())
    expect(slice.ports[0].port).toBe(8080)
    const [h1] = hosts as [Host]
    const seen = new Map<string, number>()
    await eventually(async () => {
      const r = await dialFrom(h1, "c", clusterIP, 80)
      if (r.exitCode === 0) seen.set(r.stdout.trim(), (seen.get(r.stdout.trim()) ?? 0) + 1)
      return seen.size === 2 || undefined
    }, 30_000, `answers of both pods through ${clusterIP}:80`).catch((e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify([...seen])}\n${inNetns(h1.ns, ["nft", "list", "table", "ip", "fleet"])}`)
    })
    expect([...seen.keys()].sort()).toEqual([`${run.pod("a")} ${ips["a"]}`, `${run.pod("b")} ${ips["b"]}`].sort())
  }, 120_000)

  it("a box restart keeps the pods' addresses and hands out no duplicate", async () => {
    const h1 = hosts[0]!
    await h1.boxClient.close()
    h1.box.child.kill("SIGTERM")
    expect(await h1.box.exited).toBe(0)
    Object.assign(h1, await startBox(h1))
    await createPod("d", "h1", { app: "client" })
    const d = await readyPod("d")
    const ipD = d["status"].podIP as string
    expect([ips["a"], ips["c"]]).not.toContain(ipD)
    const toA = await dialFrom(h1, "d", ips["a"]!, 8080)
    expect(toA.stdout.trim()).toBe(`${run.pod("a")} ${ips["a"]}`)
    // Deleting the pods frees their sandboxes and veths.
    for (const p of ["a", "b", "c", "d"]) expect((await send("DELETE", `/api/v1/namespaces/default/pods/${run.pod(p)}?gracePeriodSeconds=0`)).status).toBe(200)
    await eventually(() => (inNetns(h1.ns, ["ip", "-o", "link", "show", "master", "fleet0"]).trim() === "" ? true : undefined), 30_000, "h1's veths to go")
  }, 300_000)
})
