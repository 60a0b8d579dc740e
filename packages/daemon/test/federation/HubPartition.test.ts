/**
 * Members on simulated hosts (root): each member a `koder-fleet dev` (its own node and SQLite
 * store) in its own network namespace with its own address on a test bridge, the hub in the root
 * namespace. Two join in pull mode (the hub's auto-approve rule approves their certificate
 * requests), one in push mode (the hub dials it). Cutting a member's link (`ip link set eth0
 * down` in its namespace) makes it Unknown within the grace period and tainted NoSchedule, with
 * nothing deleted on either side and the other members untouched; restoring the link brings it
 * back Ready with exactly one copy of what its Work holds.
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"
import * as Fixtures from "./FederationFixtures.js"
import { cleanupLeftovers, cleanupRun, createBridge, createHost, inNetns, newRun, type InNetns, type Run, spawnIn } from "../net/IsolatedFixture.js"

const kubectlPath = process.env["KUBECTL"] ?? "/usr/bin/kubectl"
const group = "/apis/federation.fleet.koder.dev/v1alpha1"
const net = 150 + Math.floor(Math.random() * 40)
const link = (n: number) => `192.168.${net}.${n}`
const unreachable = "federation.fleet.koder.dev/unreachable"

type Json = Record<string, any>

interface Member {
  readonly name: string
  readonly ns: string
  readonly ip: string
  readonly process: InNetns
  readonly kubeconfig: string
}

describe("a hub and members on simulated hosts (root)", () => {
  let run: Run
  let dir: string
  let hub: FleetProcess
  let http: ReturnType<typeof client>
  let token: string
  const members: Record<string, Member> = {}

  const send = async (method: string, path: string, body?: unknown) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    return { status: r.status, json: r.json() as Json }
  }
  const memberCluster = async (name: string) => (await send("GET", `${group}/memberclusters/${name}`)).json
  const condition = (o: Json, type: string) => (o["status"]?.conditions ?? []).find((c: Json) => c.type === type)
  /** kubectl on the member's host, against its own API. */
  const onMember = (m: Member, ...args: ReadonlyArray<string>) => inNetns(m.ns, [kubectlPath, "--kubeconfig", m.kubeconfig, ...args])
  const tainted = (mc: Json) => (mc["spec"].taints ?? []).some((t: Json) => t.key === unreachable)

  const startMember = async (name: string, n: number, joinArgs: ReadonlyArray<string>) => {
    const ip = link(10 + n)
    const ns = createHost(run, name, n, `${ip}/24`)
    const process = spawnIn(ns, "dev", [
      ...["--data-dir", join(dir, name), "--listen", `${ip}:9300`, "--tls-san", ip, "--node-name", `${name}-node`, "--member-name", name, "--region", `r${n}`],
      ...["--metrics-listen", "off", "--dns-listen", "off", "--ingress-listen", "off", "--ingress-tls-listen", "off", "--nodeport-address", "off"],
      ...joinArgs
    ])
    const m = await process.waitFor(/koder-fleet dev listening on https:\/\/\S+ \(kubeconfig: (.+)\)/, 90_000)
    members[name] = { name, ns, ip, process, kubeconfig: m[1]! }
  }

  beforeAll(async () => {
    cleanupLeftovers()
    run = newRun()
    dir = await mkdtemp(join(tmpdir(), "fleet-hub-hosts-"))
    createBridge(run, `${link(1)}/24`)
    hub = await start(["--data-dir", join(dir, "hub"), "--listen", `${link(1)}:0`, "--metrics-listen", "off", "--member-grace-period", "12s", "--auto-approve-members", "m1|m2"], "hub")
    const creds = credentials(hub.kubeconfig)
    token = creds.token
    http = client(hub.port, creds.ca, link(1))
    const m = /--join-hub (\S+) --hub-token (\S+) --hub-ca-hash (\S+)/.exec(hub.stdout())
    if (m === null) throw new Error(`no member join line in:\n${hub.stdout()}`)
    const join_ = ["--join-hub", m[1]!, "--hub-token", m[2]!, "--hub-ca-hash", m[3]!]
    await Promise.all([startMember("m1", 1, join_), startMember("m2", 2, join_), startMember("m3", 3, [])])
    // m3 is a Push member: the hub is given its kubeconfig and dials its address.
    const kubeconfig = readFileSync(members["m3"]!.kubeconfig, "utf8")
    expect((await send("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "fleet-federation" } })).status).toBe(201)
    expect((await send("POST", "/api/v1/namespaces/fleet-federation/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "m3-kubeconfig" }, stringData: { kubeconfig } })).status).toBe(201)
    const push = { apiVersion: "federation.fleet.koder.dev/v1alpha1", kind: "MemberCluster", metadata: { name: "m3" }, spec: { syncMode: "Push", apiEndpoint: `https://${link(13)}:9300`, region: "r3", secretRef: { namespace: "fleet-federation", name: "m3-kubeconfig" } } }
    expect((await send("POST", `${group}/memberclusters`, push)).status).toBe(201)
  }, 240_000)

  afterAll(async () => {
    http?.close()
    for (const m of Object.values(members)) if (m.process.child.exitCode === null) m.process.child.kill("SIGKILL")
    if (hub !== undefined && hub.child.exitCode === null) hub.child.kill("SIGKILL")
    if (run !== undefined) cleanupRun(run.id)
    if (dir) await rm(dir, { recursive: true, force: true })
  }, 60_000)

  it("pull and push members on their own hosts are Ready with their nodes' capacity", async () => {
    for (const name of ["m1", "m2", "m3"]) {
      const mc = await eventually(async () => {
        const o = await memberCluster(name)
        return condition(o, "Ready")?.status === "True" && o["status"]?.nodeCount === 1 ? o : undefined
      }, 60_000, `${name} Ready`).catch((e: Error) => {
        throw new Error(`${e.message}\nmember: ${members[name]!.process.stdout().slice(-2000)}\n${members[name]!.process.stderr().slice(-2000)}\nhub: ${hub.stdout().slice(-1500)}\n${hub.stderr().slice(-2000)}`)
      })
      expect(mc["spec"].syncMode).toBe(name === "m3" ? "Push" : "Pull")
      const node = JSON.parse(onMember(members[name]!, "get", "node", `${name}-node`, "-o", "json")) as Json
      expect(mc["status"].resources.capacity.cpu).toBe(node["status"].capacity.cpu)
    }
  }, 120_000)

  const work = (member: string) => Fixtures.work(member, [Fixtures.deployment, Fixtures.config])
  const available = (member: string) =>
    eventually(async () => {
      const w = (await send("GET", `${group}/namespaces/fleet-member-${member}/works/web`)).json
      return condition(w, "Available")?.status === "True" ? w : undefined
    }, 60_000, `${member}'s Work Available`)
  /** What the Work made on the member: one Deployment, one running pod, one ConfigMap. */
  const oneCopy = (m: Member) => {
    expect(onMember(m, "get", "deployments", "-l", "federation.fleet.koder.dev/work=web", "--no-headers").trim().split("\n")).toHaveLength(1)
    expect(onMember(m, "get", "configmaps", "-l", "federation.fleet.koder.dev/work=web", "--no-headers").trim().split("\n")).toHaveLength(1)
    const pods = JSON.parse(onMember(m, "get", "pods", "-l", "app=web", "-o", "json")) as Json
    expect(pods["items"].map((p: Json) => p.status.phase)).toEqual(["Running"])
    return pods["items"][0].metadata.uid as string
  }

  it("cutting a member's link: Unknown and NoSchedule within the grace period, nothing deleted; restored: Ready with one copy", async () => {
    for (const name of ["m1", "m3"]) expect((await send("POST", `${group}/namespaces/fleet-member-${name}/works`, work(name))).status).toBe(201)
    await Promise.all([available("m1"), available("m3")])
    const before = { m1: oneCopy(members["m1"]!), m3: oneCopy(members["m3"]!) }

    // A pull member (its agent dials out) and the push member (the hub dials in) lose their links.
    const cutAt = Date.now()
    for (const name of ["m1", "m3"]) execFileSync("ip", ["-n", members[name]!.ns, "link", "set", "eth0", "down"])
    for (const name of ["m1", "m3"]) {
      const mc = await eventually(async () => {
        const o = await memberCluster(name)
        return condition(o, "Ready")?.status === "Unknown" && tainted(o) ? o : undefined
      }, 60_000, `${name} Unknown and tainted`)
      expect(mc["spec"].taints.find((t: Json) => t.key === unreachable).effect).toBe("NoSchedule")
    }
    // Within the 12 s grace period plus a heartbeat interval (10 s) and the health check's tick.
    expect(Date.now() - cutAt).toBeLessThan(40_000)
    // The others are untouched; nothing is evicted on the hub or deleted on the members.
    expect(condition(await memberCluster("m2"), "Ready")?.status).toBe("True")
    for (const name of ["m1", "m3"]) expect((await send("GET", `${group}/namespaces/fleet-member-${name}/works/web`)).status).toBe(200)
    expect(oneCopy(members["m1"]!)).toBe(before.m1)
    expect(oneCopy(members["m3"]!)).toBe(before.m3)

    for (const name of ["m1", "m3"]) execFileSync("ip", ["-n", members[name]!.ns, "link", "set", "eth0", "up"])
    for (const name of ["m1", "m3"]) {
      await eventually(async () => {
        const o = await memberCluster(name)
        return condition(o, "Ready")?.status === "True" && !tainted(o) ? true : undefined
      }, 60_000, `${name} Ready again, untainted`).catch((e: Error) => {
        throw new Error(`${e.message}\nmember: ${members[name]!.process.stderr().slice(-2000)}\nhub: ${hub.stdout().slice(-1500)}\n${hub.stderr().slice(-2000)}`)
      })
      await available(name)
    }
    // The same pod, one copy of each object: the reconnect applied nothing twice.
    expect(oneCopy(members["m1"]!)).toBe(before.m1)
    expect(oneCopy(members["m3"]!)).toBe(before.m3)
  }, 240_000)
})
