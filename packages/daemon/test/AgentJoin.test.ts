/**
 * Three processes, as on a real node: `koder-fleet server`, `koder-fleet box` and
 * `koder-fleet agent` joining with the one-time token and CA hash the server printed. The node
 * registers and turns Ready; a pod runs as a real process answering HTTP on the host port the
 * agent gave it; restarting the agent re-adopts the running container (same pid, restartCount 0)
 * without the join token; deleting the pod leaves no process behind.
 */
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { request } from "node:http"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, spawnRole, start, type FleetProcess, type RoleProcess } from "./fixtures/FleetProcess.js"

const get = (port: number, path: string) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path }, (res) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on("error", reject)
    req.end()
  })

const server = `
const http = require("node:http")
http.createServer((req, res) => res.end(String(process.pid))).listen(Number(process.env.PORT), () => console.log("up on " + process.env.PORT))
`

describe("koder-fleet agent joining a server", () => {
  let dir: string
  let api: FleetProcess
  let box: RoleProcess
  let agent: RoleProcess | undefined
  let http: ReturnType<typeof client>
  let token: string
  let join_: { token: string; hash: string }

  const startAgent = (extra: ReadonlyArray<string>) =>
    spawnRole("agent", ["--server", `https://127.0.0.1:${api.port}`, "--box-socket", join(dir, "box.sock"), "--data-dir", join(dir, "agent"), "--node-name", "worker-1", "--internal-ip", "127.0.0.1", "--port", "0", ...extra])

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-join-"))
    api = await start(["--data-dir", join(dir, "server"), "--listen", "127.0.0.1:0"])
    const m = /--join-token (\S+) --ca-hash (\S+)/.exec(api.stdout())
    if (m === null) throw new Error(`no join line in:\n${api.stdout()}`)
    join_ = { token: m[1]!, hash: m[2]! }
    const creds = credentials(api.kubeconfig)
    token = creds.token
    http = client(api.port, creds.ca)
    box = spawnRole("box", ["--data-dir", join(dir, "box"), "--socket", join(dir, "box.sock"), "--isolation", "none"])
  }, 60_000)

  afterAll(async () => {
    http?.close()
    for (const p of [agent?.child, box?.child, api?.child]) if (p !== undefined && p.exitCode === null) p.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  const pod = async () => (await http.send("GET", "/api/v1/namespaces/default/pods/web", { token })).json() as Record<string, any>

  it("joins with the printed token and CA hash, and the node turns Ready", async () => {
    agent = startAgent(["--join-token", join_.token, "--ca-hash", join_.hash])
    const node = await eventually(
      async () => {
        if (agent!.child.exitCode !== null) throw new Error(`agent exited: ${agent!.stderr()}`)
        const r = await http.send("GET", "/api/v1/nodes/worker-1", { token })
        const n = r.status === 200 ? r.json() : undefined
        const ready = ((n?.["status"] as any)?.conditions ?? []).find((c: any) => c.type === "Ready")
        return ready?.status === "True" ? n : undefined
      },
      30_000,
      "node worker-1 Ready"
    )
    expect((node["metadata"] as any).labels).toMatchObject({ "kubernetes.io/hostname": "worker-1", "kubernetes.io/os": "linux" })
    // Its endpoint takes only the API server's client certificate: a caller without one is refused.
    const port = (node["status"] as any).daemonEndpoints.kubeletEndpoint.Port as number
    expect(port).toBeGreaterThan(0)
    const refused = await new Promise<string>((resolve) => {
      const req = httpsRequest({ host: "127.0.0.1", port, path: "/v1/pods/default/x/y/z/log", rejectUnauthorized: false }, (res) => resolve(`answered ${res.statusCode}`))
      req.on("error", (e) => resolve(e.message))
      req.end()
    })
    expect(refused).not.toMatch(/^answered 200/)
    expect(existsSync(join(dir, "agent", "node-token"))).toBe(true)
    expect(existsSync(join(dir, "agent", "ca.crt"))).toBe(true)
  }, 60_000)

  it("runs a pod as a process that answers on its host port; an agent restart re-adopts it; deleting it leaves no process", async () => {
    const created = await http.send("POST", "/api/v1/namespaces/default/pods", {
      token,
      body: JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "web" },
        spec: { containers: [{ name: "web", image: "node:20", command: ["node", "-e", server], ports: [{ name: "http", containerPort: 8080 }], readinessProbe: { tcpSocket: { port: "http" }, periodSeconds: 1 } }] }
      })
    })
    expect(created.status).toBe(201)
    const running = await eventually(
      async () => {
        const p = await pod()
        return p["status"]?.phase === "Running" && p["status"]?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True") ? p : undefined
      },
      30_000,
      "pod web Running and Ready"
    ).catch(async (e) => {
      throw new Error(`${e.message}\npod: ${JSON.stringify((await pod())["status"])}\nagent: ${agent?.stderr().slice(-2000)}\nbox: ${box.stderr().slice(-1000)}`)
    })
    const hostPort = running["status"].hostPorts[0].hostPort as number
    const first = await get(hostPort, "/")
    expect(first.status).toBe(200)
    const pid = Number(first.text)
    expect(existsSync(`/proc/${pid}`)).toBe(true)

    // Logs and exec go from the server to the agent's endpoint (client certificate) and back.
    const log = await eventually(async () => {
      const r = await http.send("GET", "/api/v1/namespaces/default/pods/web/log", { token })
      return r.status === 200 && r.text.includes(`up on ${hostPort}`) ? r : undefined
    }, 10_000, "the pod's log through the server")
    expect(log.text).toBe(`up on ${hostPort}\n`)
    expect((await http.send("POST", "/apis/fleet.koder.dev/v1/namespaces/default/processcontrols", { token, body: JSON.stringify({ apiVersion: "fleet.koder.dev/v1", kind: "ProcessControl", metadata: { name: "ok" } }) })).status).toBe(201)
    const exec = await http.send("POST", "/api/v1/namespaces/default/pods/web/exec", { token, body: JSON.stringify({ command: ["sh", "-c", "echo remote; exit 4"] }) })
    expect(exec.status).toBe(200)
    expect(exec.json()).toMatchObject({ exitCode: 4, stdout: "remote\n" })

    // The agent stops; the container does not. A new agent (no join token now) adopts it.
    agent!.child.kill("SIGTERM")
    expect(await agent!.exited).toBe(0)
    expect((await get(hostPort, "/")).text).toBe(String(pid))
    agent = startAgent([])
    await eventually(async () => (agent!.stdout().includes("registered") ? true : undefined), 30_000, "the second agent to register")
    // It syncs the pod without restarting it.
    await eventually(async () => {
      const p = await pod()
      return p["status"]?.containerStatuses?.[0]?.ready === true ? p : undefined
    }, 30_000)
    expect((await pod())["status"].containerStatuses[0].restartCount).toBe(0)
    expect((await get(hostPort, "/")).text).toBe(String(pid))

    const deleted = Date.now()
    expect((await http.send("DELETE", "/api/v1/namespaces/default/pods/web", { token })).status).toBe(200)
    // The process has no SIGTERM handler: the first signal ends it, long before the 30 s grace period.
    await eventually(() => (existsSync(`/proc/${pid}`) ? undefined : true), 25_000, `process ${pid} to exit on SIGTERM`)
    expect(Date.now() - deleted).toBeLessThan(10_000)
    await eventually(async () => ((await http.send("GET", "/api/v1/namespaces/default/pods/web", { token })).status === 404 ? true : undefined), 30_000, "the pod to go").catch(async (e) => {
      throw new Error(`${e.message}\npod: ${JSON.stringify(await pod())}\nagent: ${agent?.stderr().slice(-3000)}`)
    })
    await eventually(() => (existsSync(`/proc/${pid}`) ? undefined : true), 10_000, `process ${pid} to exit`)
  }, 120_000)
})
