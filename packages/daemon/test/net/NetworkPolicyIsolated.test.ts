/**
 * NetworkPolicy end to end in isolated network mode (root): two hosts simulated as network
 * namespaces, each running `koder-fleet box` and `koder-fleet agent --network isolated`, the server
 * in the root namespace. Pod B (on h2) is selected by a NetworkPolicy that admits pods labelled
 * `role=a`: pod A (on h1, labelled) connects over real TCP, pod C (on h1, unlabelled) is dropped;
 * once C gains the label its agent-side rules in B's namespace follow within 2 s and C connects.
 * Deleting the policy opens B again. Everything is removed afterwards, also on failure
 * (IsolatedFixture.ts names everything after the run and clears leftovers of crashed runs).
 */
import { Runtime } from "@koder/fleet-core"
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Client, connect } from "../box/BoxProcess.js"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"
import { cleanupLeftovers, cleanupRun, createBridge, createHost, newRun, type InNetns, type Run, spawnIn } from "./IsolatedFixture.js"

const net = 200 + Math.floor(Math.random() * 50)
const link = (n: number) => `192.168.${net}.${n}`
const clusterCidr = `10.${net}.0.0/16`

/** Answers "<hostname>" on 8080 and closes (a client's reset must not end it). */
const serve = `require("node:net").createServer((s) => s.on("error", () => {}).end(require("node:os").hostname())).listen(8080)`
/** Connects to argv[1]:argv[2]: prints the answer, or "refused"/"timeout" (after argv[3] ms). */
const dial = `
const s = require("node:net").connect(Number(process.argv[2]), process.argv[1])
let got = ""
s.on("data", (d) => (got += d)).on("end", () => { console.log(got); process.exit(0) })
s.on("error", (e) => { console.log(e.code === "ECONNREFUSED" ? "refused" : e.message); process.exit(0) })
setTimeout(() => { console.log("timeout"); process.exit(0) }, Number(process.argv[3]))
`

interface Host {
  readonly name: string
  readonly ns: string
  readonly dir: string
  readonly box: InNetns
  readonly agent: InNetns
  readonly boxClient: Client
}

describe("NetworkPolicy in isolated network mode: two hosts (root)", () => {
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
    const box = spawnIn(ns, "box", ["--data-dir", join(hostDir, "box"), "--socket", join(hostDir, "box.sock")])
    await box.waitFor(/serving the kbox API.*pod network on bridge fleet0/, 90_000)
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
    dir = mkdtempSync(join(tmpdir(), "fleet-netpol-"))
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
    // The pods' namespaces (and their nftables tables) went with their sandboxes; the rest goes here.
    if (run !== undefined) cleanupRun(run.id)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  const diagnose = () => hosts.map((h) => `${h.name} agent: ${h.agent.stderr().slice(-1500)}\n${h.name} box: ${h.box.stderr().slice(-800)}`).join("\n")

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
    }, 90_000, `pod ${name} Ready`).catch(async (e: Error) => {
      const p = (await send("GET", `/api/v1/namespaces/default/pods/${run.pod(name)}`)).json()
      throw new Error(`${e.message}\npod: ${JSON.stringify(p["status"])}\n${diagnose()}`)
    })

  /** Run a command in pod `name`'s running container on host `h` (its network namespace). */
  const execIn = async (h: Host, name: string, command: ReadonlyArray<string>) => {
    const [ctr] = await h.boxClient.run(h.boxClient.rt.containers.list({ labels: { [Runtime.Labels.podName]: run.pod(name) }, state: "running" }))
    if (ctr === undefined) {
      const all = await h.boxClient.run(h.boxClient.rt.containers.list())
      throw new Error(`no running container of ${name} on ${h.name}: ${JSON.stringify(all.map((c) => [c.spec.labels?.[Runtime.Labels.podName], c.status]))}\n${diagnose()}`)
    }
    return h.boxClient.run(h.boxClient.rt.containers.exec(ctr.id, { command, timeoutMs: 10_000 }))
  }
  /** Pod `name`'s NetworkPolicy table, read from the node (in the pod's network namespace); "" when it has none. */
  const tableOf = async (h: Host, name: string) => {
    const [ctr] = await h.boxClient.run(h.boxClient.rt.containers.list({ labels: { [Runtime.Labels.podName]: run.pod(name) }, state: "running" }))
    if (ctr?.status.pid === undefined) throw new Error(`no running container of ${name} on ${h.name}`)
    try {
      return execFileSync("nsenter", [`--net=/proc/${ctr.status.pid}/ns/net`, "nft", "list", "table", "inet", "fleet_policy"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
    } catch {
      return ""
    }
  }
  /** Whether a table admits `ip` (nft prints a /32 as the bare address, several in a set). */
  const admits = (table: string, ip: string) => new RegExp(`ip saddr [{ ]*[^\\n]*\\b${ip.replace(/\./g, "\\.")}\\b[^\\n]*tcp dport 8080 accept`).test(table)
  const events = async () =>
    ((await send("GET", "/api/v1/namespaces/default/events")).json()["items"] as Array<any>).map((e) => `${e.reason}: ${e.message}`).join("\n")
  const dialFrom = async (h: Host, name: string, ip: string, timeoutMs = 1500) =>
    (await execIn(h, name, [process.execPath, "-e", dial, ip, "8080", String(timeoutMs)])).stdout.trim()

  /** Pods may only be bound to registered nodes (the pod GC removes pods of unknown nodes). */
  const nodeReady = (name: string) =>
    eventually(async () => {
      const n = await send("GET", `/api/v1/nodes/${name}`)
      const ready = n.status === 200 && (n.json()["status"]?.conditions ?? []).some((c: any) => c.type === "Ready" && c.status === "True")
      return ready && n.json()["spec"]?.podCIDR !== undefined ? true : undefined
    }, 90_000, `node ${name} Ready with a pod CIDR`).catch((e: Error) => {
      throw new Error(`${e.message}\n${diagnose()}`)
    })

  it("starts A and C on h1 and B on h2, each with an address of its node's block", async () => {
    await Promise.all([nodeReady("h1"), nodeReady("h2")])
    await createPod("a", "h1", { role: "a" })
    await createPod("c", "h1", { role: "c" })
    await createPod("b", "h2", { app: "b" })
    for (const p of ["a", "b", "c"]) ips[p] = (await readyPod(p))["status"].podIP as string
    expect(new Set(Object.values(ips)).size).toBe(3)
    // No policy yet: both clients reach B across hosts.
    const [h1] = hosts as [Host]
    expect(await dialFrom(h1, "a", ips["b"]!)).toBe(run.pod("b"))
    expect(await dialFrom(h1, "c", ips["b"]!)).toBe(run.pod("b"))
  }, 200_000)

  it("a policy selecting B admits A (matching label) and drops C", async () => {
    const r = await send("POST", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: "b-from-a" },
      spec: { podSelector: { matchLabels: { app: "b" } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: "a" } } }], ports: [{ port: "http" }] }] }
    })
    expect(r.status).toBe(201)
    const [h1, h2] = hosts as [Host, Host]
    // B's namespace gets the table, with A's address on B's named port.
    await eventually(async () => (admits(await tableOf(h2, "b"), ips["a"]!) ? true : undefined), 10_000, "B's NetworkPolicy table").catch(async (e: Error) => {
      throw new Error(`${e.message}\ntable: ${await tableOf(h2, "b")}\nevents: ${await events()}\n${diagnose()}`)
    })
    const [fromA, fromC] = await Promise.all([dialFrom(h1, "a", ips["b"]!), dialFrom(h1, "c", ips["b"]!)])
    expect(fromA).toBe(run.pod("b"))
    // Dropped, not refused: C's SYN never reaches B.
    expect(fromC).toBe("timeout")
  }, 60_000)

  it("when C gains the label, B's rules follow within 2 s and C connects", async () => {
    const [h1, h2] = hosts as [Host, Host]
    const before = await tableOf(h2, "b")
    const t0 = Date.now()
    const patched = await send("PATCH", `/api/v1/namespaces/default/pods/${run.pod("c")}`, { metadata: { labels: { role: "a" } } }, "application/merge-patch+json")
    expect(patched.status).toBe(200)
    // nft prints the addresses its own way (two neighbours become one /31): watch for the new ruleset.
    const after = await eventually(async () => {
      const t = await tableOf(h2, "b")
      return t !== before && t !== "" ? t : undefined
    }, 5_000, "B's rules to change").catch((e: Error) => {
      throw new Error(`${e.message}\n${before}\n${hosts[1]!.agent.stderr().slice(-3000)}`)
    })
    const elapsed = Date.now() - t0
    expect(elapsed).toBeLessThan(2_000)
    expect(after).toContain("tcp dport 8080 accept")
    expect(await dialFrom(h1, "c", ips["b"]!)).toBe(run.pod("b"))
    console.log(`NetworkPolicy e2e: C's new label reached B's rules in ${elapsed} ms`)
  }, 60_000)

  it("deleting the policy opens B to everyone again", async () => {
    const [h1, h2] = hosts as [Host, Host]
    await send("PATCH", `/api/v1/namespaces/default/pods/${run.pod("c")}`, { metadata: { labels: { role: "c" } } }, "application/merge-patch+json")
    expect((await send("DELETE", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies/b-from-a")).status).toBe(200)
    await eventually(async () => ((await tableOf(h2, "b")) === "" ? true : undefined), 5_000, "B's table to go")
    expect(await dialFrom(h1, "c", ips["b"]!)).toBe(run.pod("b"))
  }, 60_000)
})
