/**
 * Issue 29, watch memory and idle connections, against a real `koder-fleet server`: one tenant's
 * client opening 2,000 watches from resourceVersion 0 on a namespace of ~2.3 MB of ConfigMaps, and
 * never reading them, gets 429 past the per-client cap, the server's memory stays bounded, another
 * user is still served, and closing the watches frees them; 600 TLS connections that never send a
 * request are closed after the first-request timeout, while a long-running watch is not cut.
 */
import { existsSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import type { ClientRequest, IncomingMessage } from "node:http"
import { Agent, request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect, type TLSSocket } from "node:tls"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const scratch = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()
const quiet = ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--disable-controllers", "*", "--dns-listen", "off", "--ingress-listen", "off", "--ingress-tls-listen", "off"]

/** The server's resident memory in MiB. */
const rssMiB = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024

/** The server's `apiserver_registered_watchers` for configmaps, from its /metrics endpoint. */
const configMapWatchers = async (server: FleetProcess, token: string): Promise<number> => {
  const port = /metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(server.stdout())![1]
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text()
  const line = text.split("\n").find((l) => l.startsWith("apiserver_registered_watchers{") && l.includes('resource="configmaps"'))
  return line === undefined ? 0 : Number(line.split(" ").pop())
}

const json = (o: unknown) => JSON.stringify(o)

describe("watches cannot exhaust the server", () => {
  let dir: string
  let server: FleetProcess
  let http: ReturnType<typeof client>
  let admin: string
  let tenant: string

  beforeAll(async () => {
    dir = await mkdtemp(join(scratch, "fleet-watch-bounds-"))
    server = await start(["--data-dir", dir, ...quiet])
    const creds = credentials(server.kubeconfig)
    admin = creds.token
    http = client(server.port, creds.ca)
    const ok = async (method: string, path: string, body: unknown) => {
      const r = await http.send(method, path, { token: admin, body: json(body) })
      if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`)
      return r
    }
    await ok("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "tenant" } })
    // The tenant: a ServiceAccount that may read ConfigMaps in its namespace, and nothing else.
    await ok("POST", "/api/v1/namespaces/tenant/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "mallory" } })
    await ok("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/tenant/roles", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "read-configmaps" },
      rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch"] }]
    })
    await ok("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/tenant/rolebindings", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "mallory" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "read-configmaps" },
      subjects: [{ kind: "ServiceAccount", name: "mallory", namespace: "tenant" }]
    })
    const issued = await ok("POST", "/api/v1/namespaces/tenant/serviceaccounts/mallory/token", {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 3600 }
    })
    tenant = (issued.json()["status"] as { token: string }).token
    // ~2.3 MB of ConfigMaps: 230 of 10 KB.
    const blob = "x".repeat(10_000)
    const names = Array.from({ length: 230 }, (_, i) => `cm-${i}`)
    for (let i = 0; i < names.length; i += 10) {
      await Promise.all(names.slice(i, i + 10).map((name) => ok("POST", "/api/v1/namespaces/tenant/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { blob } })))
    }
    await eventually(async () => (await http.send("GET", "/api/v1/namespaces/tenant/configmaps/cm-0", { token: tenant })).status === 200 || undefined, 10_000, "the tenant's access")
  }, 90_000)

  afterAll(async () => {
    http?.close()
    server?.child.kill("SIGTERM")
    await server?.exited
    await rm(dir, { recursive: true, force: true })
  })

  it("answers 429 past the cap, keeps memory bounded and other users served, and frees the watches when they close", async () => {
    const pid = server.child.pid!
    const baseline = rssMiB(pid)
    let peak = baseline
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 100)

    // One client: one token, one keep-alive agent with many sockets. It never reads its watches.
    const agent = new Agent({ ca: credentials(server.kubeconfig).ca, keepAlive: true, maxSockets: 400 })
    const open: Array<{ req: ClientRequest; res: IncomingMessage }> = []
    const refused: Array<{ status: number; retryAfter: string | undefined; body: string }> = []
    const watch = () =>
      new Promise<void>((resolve, reject) => {
        const req = httpsRequest(
          {
            host: "127.0.0.1",
            port: server.port,
            servername: "localhost",
            agent,
            path: "/api/v1/namespaces/tenant/configmaps?watch=true&resourceVersion=0",
            headers: { authorization: `Bearer ${tenant}` }
          },
          (res) => {
            if (res.statusCode === 200) {
              res.pause()
              open.push({ req, res })
              return resolve()
            }
            let body = ""
            res.setEncoding("utf8")
            res.on("data", (d: string) => (body += d))
            res.on("end", () => {
              refused.push({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"] as string | undefined, body })
              resolve()
            })
          }
        )
        req.on("error", reject)
        req.end()
      })
    try {
      await Promise.all(Array.from({ length: 2000 }, watch))
      // The cap (250 per client and per user) and the budget admit a few hundred at most.
      expect(open.length).toBeGreaterThan(0)
      expect(open.length).toBeLessThanOrEqual(250)
      expect(refused.length).toBe(2000 - open.length)
      for (const r of refused) {
        expect(r.status).toBe(429)
        expect(Number(r.retryAfter)).toBeGreaterThan(0)
        expect(JSON.parse(r.body)).toMatchObject({ kind: "Status", code: 429, reason: "TooManyRequests" })
        // Refused for the cap (250 per client and per user) or for the budget of unread bytes.
        expect(r.body).toMatch(/250 concurrent watches|the budget is 67108864/)
      }

      // Give the server time to serialise and push what it would.
      await new Promise((r) => setTimeout(r, 3000))
      // Another user is served promptly meanwhile.
      const started = Date.now()
      const other = await http.send("GET", "/api/v1/namespaces/tenant/configmaps/cm-7", { token: admin })
      const took = Date.now() - started
      expect(other.status).toBe(200)
      expect(took).toBeLessThan(5000)
      const watching = await configMapWatchers(server, admin)
      expect(watching).toBe(open.length)
      peak = Math.max(peak, rssMiB(pid))
      // Before shared serialisations, 500 such watches took the server from 283 MB to 2.18 GB.
      console.log(`watchBounds: ${open.length} watches open, ${refused.length} refused; RSS ${baseline.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB; other user's GET ${took} ms`)
      expect(peak - baseline).toBeLessThan(400)
    } finally {
      clearInterval(sampler)
      for (const w of open) w.req.destroy()
      agent.destroy()
    }

    // Closing them frees them: the watchers go away and the tenant may watch again.
    await eventually(async () => ((await configMapWatchers(server, admin)) === 0 ? true : undefined), 20_000, "the watchers to be released")
    const again = await new Promise<{ status: number; first: string }>((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: server.port, servername: "localhost", ca: credentials(server.kubeconfig).ca, agent: false, path: "/api/v1/namespaces/tenant/configmaps?watch=true&resourceVersion=0", headers: { authorization: `Bearer ${tenant}` } },
        (res) => {
          let text = ""
          res.setEncoding("utf8")
          res.on("data", (d: string) => {
            text += d
            if (text.includes("\n")) {
              req.destroy()
              resolve({ status: res.statusCode ?? 0, first: text.slice(0, text.indexOf("\n")) })
            }
          })
          res.on("end", () => resolve({ status: res.statusCode ?? 0, first: text }))
        }
      )
      req.on("error", reject)
      req.end()
    })
    expect(again.status).toBe(200)
    expect(JSON.parse(again.first)).toMatchObject({ type: "ADDED", object: { kind: "ConfigMap", metadata: { namespace: "tenant" } } })
  }, 120_000)
})

describe("idle connections are closed", () => {
  let dir: string
  let server: FleetProcess
  let http: ReturnType<typeof client>
  let token: string
  let ca: string

  beforeAll(async () => {
    dir = await mkdtemp(join(scratch, "fleet-idle-"))
    server = await start(["--data-dir", dir, ...quiet, "--first-request-timeout", "3s"])
    const creds = credentials(server.kubeconfig)
    token = creds.token
    ca = creds.ca
    http = client(server.port, ca)
  }, 60_000)

  afterAll(async () => {
    http?.close()
    server?.child.kill("SIGTERM")
    await server?.exited
    await rm(dir, { recursive: true, force: true })
  })

  it("closes TLS connections that send no request within --first-request-timeout, and leaves a quiet watch running", async () => {
    // A watch with nothing to say for longer than the timeout must not be cut by it.
    const watchStarted = Date.now()
    const events: Array<string> = []
    let watchEnded = false
    const watch = httpsRequest(
      { host: "127.0.0.1", port: server.port, servername: "localhost", ca, agent: false, path: "/api/v1/namespaces/default/configmaps?watch=true", headers: { authorization: `Bearer ${token}` } },
      (res) => {
        expect(res.statusCode).toBe(200)
        res.setEncoding("utf8")
        res.on("data", (d: string) => events.push(...d.split("\n").filter((l) => l !== "")))
        res.on("close", () => (watchEnded = true))
      }
    )
    watch.end()

    // 600 connections that finish the TLS handshake and never send a byte.
    const sockets: Array<TLSSocket> = []
    const handshakes: Array<Promise<void>> = []
    let closed = 0
    for (let i = 0; i < 600; i++) {
      const socket = connect({ host: "127.0.0.1", port: server.port, servername: "localhost", ca })
      socket.on("error", () => {})
      socket.on("close", () => closed++)
      // Reading (nothing arrives) lets the client see the server's end of the connection.
      socket.resume()
      handshakes.push(new Promise((resolve) => (socket.once("secureConnect", () => resolve()), socket.once("close", () => resolve()))))
      sockets.push(socket)
    }
    try {
      await Promise.all(handshakes)
      // Most finish the handshake (on a loaded machine some are still in it when their time is up).
      expect(sockets.filter((s) => s.authorized).length).toBeGreaterThan(100)
      await eventually(() => (closed === 600 ? true : undefined), 40_000, "the idle connections to be closed by the server")

      // The watch outlived them all, for longer than the timeout, and still delivers.
      await eventually(() => (Date.now() - watchStarted > 4000 ? true : undefined), 10_000, "the timeout to pass")
      expect(watchEnded).toBe(false)
      const created = await http.send("POST", "/api/v1/namespaces/default/configmaps", {
        token,
        body: json({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "after-idle" }, data: { a: "b" } })
      })
      expect(created.status).toBe(201)
      await eventually(() => (events.some((l) => l.includes('"after-idle"')) ? true : undefined), 10_000, "the watch event")
      expect(watchEnded).toBe(false)
    } finally {
      for (const s of sockets) s.destroy()
      watch.destroy()
    }
  }, 90_000)
})
