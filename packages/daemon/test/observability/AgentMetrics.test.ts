/**
 * An agent's `/metrics` on its endpoint (9301): a real server, box and agent. Scrapers without the
 * server's client certificate present a bearer token the agent checks with the API server (a
 * SelfSubjectAccessReview of `get /metrics`); the series include the pod start latency.
 */
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, spawnRole, start, type FleetProcess, type RoleProcess } from "../fixtures/FleetProcess.js"

const scrape = (port: number, token?: string) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpsRequest({ host: "127.0.0.1", port, path: "/metrics", rejectUnauthorized: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on("error", reject)
    req.end()
  })

// The workload's command line carries this, so its processes can be found (and none left behind).
const marker = `agent-metrics-${process.pid}-${Date.now()}`
const workload = async (): Promise<Array<number>> => {
  const pids: Array<number> = []
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue
    const cmdline = await readFile(`/proc/${name}/cmdline`, "utf8").catch(() => "")
    if (cmdline.includes(marker) && !cmdline.includes("vitest")) pids.push(Number(name))
  }
  return pids
}

describe("an agent's /metrics", () => {
  let dir: string
  let api: FleetProcess
  let box: RoleProcess
  let agent: RoleProcess
  let http: ReturnType<typeof client>
  let admin: string
  let port: number

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-agent-metrics-"))
    api = await start(["--data-dir", join(dir, "server"), "--listen", "127.0.0.1:0", "--metrics-listen", "off"])
    const m = /--join-token (\S+) --ca-hash (\S+)/.exec(api.stdout())
    if (m === null) throw new Error(`no join line in:\n${api.stdout()}`)
    const creds = credentials(api.kubeconfig)
    admin = creds.token
    http = client(api.port, creds.ca)
    box = spawnRole("box", ["--data-dir", join(dir, "box"), "--socket", join(dir, "box.sock"), "--isolation", "none"])
    agent = spawnRole("agent", [
      "--server", `https://127.0.0.1:${api.port}`, "--box-socket", join(dir, "box.sock"), "--data-dir", join(dir, "agent"),
      "--node-name", "metrics-node", "--internal-ip", "127.0.0.1", "--port", "0", "--join-token", m[1]!, "--ca-hash", m[2]!
    ])
    const node = await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`agent exited: ${agent.stderr()}`)
      const r = await http.send("GET", "/api/v1/nodes/metrics-node", { token: admin })
      const n = r.status === 200 ? r.json() : undefined
      return ((n?.["status"] as any)?.conditions ?? []).some((c: any) => c.type === "Ready" && c.status === "True") ? n : undefined
    }, 40_000, "the node Ready")
    port = (node["status"] as any).daemonEndpoints.kubeletEndpoint.Port as number
  }, 90_000)

  afterAll(async () => {
    // Containers outlive their box by design: the pod goes first, and the agent must have ended its
    // process (the pod object can be gone before that) before the agent and the box are killed.
    if (http !== undefined) {
      await http.send("DELETE", "/api/v1/namespaces/default/pods/sleeper", { token: admin }).catch(() => undefined)
      await eventually(async () => ((await http.send("GET", "/api/v1/namespaces/default/pods/sleeper", { token: admin })).status === 404 ? true : undefined), 30_000, "the pod gone").catch(() => undefined)
      await eventually(async () => ((await workload()).length === 0 ? true : undefined), 30_000, "the workload's process gone").catch(() => undefined)
    }
    // Whatever is still running now would outlive the test: end it.
    for (const pid of await workload()) process.kill(pid, "SIGKILL")
    http?.close()
    for (const p of [agent?.child, box?.child, api?.child]) if (p !== undefined && p.exitCode === null) p.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  it("answers 401 without a token, 403 to a user without the grant, and the series to one with it", async () => {
    expect((await scrape(port)).status).toBe(401)
    expect((await scrape(port, "not-a-token")).status).toBe(401)
    const post = (path: string, body: unknown) => http.send("POST", path, { token: admin, body: JSON.stringify(body) })
    expect((await post("/api/v1/namespaces/default/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "scraper" } })).status).toBe(201)
    const issued = await post("/api/v1/namespaces/default/serviceaccounts/scraper/token", { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: {} })
    const saToken = String((issued.json()["status"] as Record<string, unknown>)["token"])
    expect((await scrape(port, saToken)).status).toBe(403)

    // A pod runs: its start latency is observed once.
    const created = await post("/api/v1/namespaces/default/pods", {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "sleeper" },
      spec: { nodeName: "metrics-node", containers: [{ name: "main", image: "node:20", command: ["node", "-e", `setInterval(() => {}, 1000) // ${marker}`] }] }
    })
    expect(created.status).toBe(201)
    await eventually(async () => ((await http.send("GET", "/api/v1/namespaces/default/pods/sleeper", { token: admin })).json()["status"] as any)?.phase === "Running" || undefined, 30_000, "the pod Running")
    const text = await eventually(async () => {
      const r = await scrape(port, admin)
      return r.status === 200 && /^kubelet_pod_start_duration_seconds_count 1$/m.test(r.text) ? r.text : undefined
    }, 10_000, "the pod start series")
    expect(text).toMatch(/^process_cpu_seconds_total [\d.e-]+$/m)
    expect(text).toMatch(/^kubelet_pod_start_duration_seconds_bucket\{le="\+Inf"\} 1$/m)
    await http.send("DELETE", "/api/v1/namespaces/default/pods/sleeper?gracePeriodSeconds=0", { token: admin })
  }, 60_000)
})
