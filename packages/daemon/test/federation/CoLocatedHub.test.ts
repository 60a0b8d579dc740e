/**
 * Co-located mode, a real process: `koder-fleet dev --hub` runs a hub beside the cluster with the
 * cluster registered to it as its first member. The member is Ready with its node's capacity
 * without any join step; a Work on the hub applies on the cluster and leaves it again; the proxy
 * reaches the cluster through the hub with kubectl; a restart keeps one member, Ready again; bad
 * flag combinations are refused before anything starts.
 */
import { execFile } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, listening, spawnRole, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const run = promisify(execFile)
const kubectlPath = process.env["KUBECTL"] ?? "/usr/bin/kubectl"
const group = "/apis/federation.fleet.koder.dev/v1alpha1"

type Json = Record<string, any>

describe("koder-fleet dev --hub", () => {
  let dir: string
  let dev: FleetProcess
  let hubKubeconfig: string
  let hubUrl: string
  let send: (method: string, path: string, body?: unknown) => Promise<{ status: number; json: Json }>
  let close = () => {}

  const kubectl = (kubeconfig: string, ...args: ReadonlyArray<string>) => run(kubectlPath, ["--kubeconfig", kubeconfig, ...args]).then((r) => r.stdout)
  const condition = (mc: Json, type: string) => (mc["status"]?.conditions ?? []).find((c: Json) => c.type === type)

  const startDev = async () => {
    dev = await start(
      ["--hub", "--hub-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--member-name", "solo", "--node-name", "solo-node", "--metrics-listen", "off", "--dns-listen", "off", "--ingress-listen", "off", "--ingress-tls-listen", "off", "--region", "eu"],
      "dev",
      { FLEET_DATA_DIR: dir },
      60_000
    )
    const m = listening("hub").exec(dev.stdout())
    if (m === null) throw new Error(`no hub listening line in:\n${dev.stdout()}`)
    hubUrl = `https://${m[1]}:${m[2]}`
    hubKubeconfig = m[3]!
    const creds = credentials(hubKubeconfig)
    const http = client(Number(m[2]), creds.ca)
    close = () => http.close()
    send = async (method, path, body) => {
      const r = await http.send(method, path, { token: creds.token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
      return { status: r.status, json: r.json() as Json }
    }
  }

  const readyMember = () =>
    eventually(async () => {
      const r = await send("GET", `${group}/memberclusters/solo`)
      return r.status === 200 && condition(r.json, "Ready")?.status === "True" && r.json["status"]?.nodeCount === 1 ? r.json : undefined
    }, 30_000, "solo Ready").catch((e: Error) => {
      throw new Error(`${e.message}\n${dev.stderr().slice(-3000)}`)
    })

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-colocated-"))
    await startDev()
  }, 90_000)

  afterAll(async () => {
    close()
    if (dev !== undefined && dev.child.exitCode === null) dev.child.kill("SIGKILL")
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it("the cluster is the hub's member without a join: Ready, with its node's capacity", async () => {
    const mc = await readyMember()
    expect(mc["spec"]).toMatchObject({ syncMode: "Push", region: "eu", apiEndpoint: expect.stringMatching(/^https:\/\/127\.0\.0\.1:\d+$/) })
    expect(condition(mc, "Joined")).toMatchObject({ status: "True", reason: "CoLocated" })
    expect(mc["status"].fleetVersion).toMatch(/^\d+\.\d+\.\d+/)
    const node = JSON.parse(await kubectl(dev.kubeconfig, "get", "node", "solo-node", "-o", "json")) as Json
    expect(mc["status"].resources.capacity.cpu).toBe(node["status"].capacity.cpu)
    expect(await kubectl(hubKubeconfig, "get", "memberclusters", "--no-headers")).toMatch(/^solo\s+True\s+Push\s+eu\s+1\s+/m)
    // The hub is its own server: a separate kubeconfig, no nodes of its own.
    expect(hubKubeconfig).toBe(join(dir, "federation-hub", "kubeconfig"))
    expect(await kubectl(hubKubeconfig, "get", "nodes", "--no-headers").catch((e: { stderr: string }) => e.stderr)).toMatch(/No resources found|^$/)
  }, 60_000)

  it("a Work on the hub applies on the cluster, with the region label, and leaves it again", async () => {
    const work = (data: Json | undefined) => ({
      apiVersion: "federation.fleet.koder.dev/v1alpha1",
      kind: "Work",
      metadata: { name: "settings", namespace: "fleet-member-solo" },
      spec: { workload: { manifests: data === undefined ? [] : [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings", namespace: "default" }, data }] } }
    })
    expect((await send("POST", `${group}/namespaces/fleet-member-solo/works`, work({ colour: "blue" }))).status).toBe(201)
    const cm = await eventually(async () => {
      const out = await kubectl(dev.kubeconfig, "get", "configmap", "settings", "-n", "default", "-o", "json").catch(() => undefined)
      return out === undefined ? undefined : (JSON.parse(out) as Json)
    }, 20_000, "the ConfigMap on the cluster")
    expect(cm["data"]).toEqual({ colour: "blue" })
    expect(cm["metadata"].labels["fleet.koder.dev/region"]).toBe("eu")
    const applied = await eventually(async () => {
      const w = (await send("GET", `${group}/namespaces/fleet-member-solo/works/settings`)).json
      return (w["status"]?.conditions ?? []).some((c: Json) => c.type === "Applied" && c.status === "True") ? w : undefined
    }, 20_000, "Applied on the hub")
    const current = (await send("GET", `${group}/namespaces/fleet-member-solo/works/settings`)).json
    expect((await send("PUT", `${group}/namespaces/fleet-member-solo/works/settings`, { ...work(undefined), metadata: { ...work(undefined).metadata, resourceVersion: current["metadata"].resourceVersion } })).status).toBe(200)
    expect(applied["metadata"].name).toBe("settings")
    await eventually(async () => ((await kubectl(dev.kubeconfig, "get", "configmap", "settings", "-n", "default").catch(() => "gone")) === "gone" ? true : undefined), 20_000, "the ConfigMap gone")
  }, 60_000)

  it("the proxy reaches the cluster through the hub", async () => {
    const nodes = await kubectl(hubKubeconfig, "--server", `${hubUrl}${group}/memberclusters/solo/proxy`, "get", "nodes", "--no-headers")
    expect(nodes).toMatch(/^solo-node\s+Ready\s+/m)
  }, 30_000)

  it("a restart keeps one member, Ready again", async () => {
    dev.child.kill("SIGTERM")
    await dev.exited
    close()
    await startDev()
    await readyMember()
    const list = (await send("GET", `${group}/memberclusters`)).json
    expect(list["items"].map((m: Json) => m["metadata"].name)).toEqual(["solo"])
  }, 120_000)

  it("refuses --hub-listen without --hub, and --hub with --join-hub", async () => {
    for (const [args, message] of [
      [["--hub-listen", "127.0.0.1:0"], "--hub-listen needs --hub"],
      [["--hub", "--join-hub", "https://127.0.0.1:9400"], "--hub and --join-hub"]
    ] as const) {
      for (const role of ["dev", "server"]) {
        const p = spawnRole(role, [...args, "--data-dir", join(dir, "refused")])
        expect(await p.exited).toBe(2)
        expect(p.stderr()).toContain(message)
      }
    }
  }, 60_000)
})
