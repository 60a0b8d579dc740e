/**
 * `koder-fleet server` end to end: a real process, real HTTPS, the kubeconfig it writes.
 */
import { readFileSync, statSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { Agent, request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "./fixtures/FleetProcess.js"

const mode = (path: string) => statSync(path).mode & 0o777

describe("koder-fleet server", () => {
  let dir: string
  let server: FleetProcess
  let creds: ReturnType<typeof credentials>
  let http: ReturnType<typeof client>

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-server-"))
    server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0"])
    creds = credentials(server.kubeconfig)
    http = client(server.port, creds.ca)
  })

  afterAll(async () => {
    http?.close()
    if (server?.child.exitCode === null) server.child.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  it("writes a kubeconfig and prints the token once, keeping only its hash", () => {
    expect(server.kubeconfig).toBe(join(dir, "kubeconfig"))
    expect(creds.server).toBe(`https://127.0.0.1:${server.port}`)
    expect(creds.token).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(server.stdout().split(creds.token).length - 1).toBe(1)
    expect(server.stderr()).not.toContain(creds.token)
    const hash = readFileSync(join(dir, "bootstrap-token.sha256"), "utf8")
    expect(hash).toMatch(/^sha256:[0-9a-f]{64}\n$/)
    expect(hash).not.toContain(creds.token)
    for (const f of ["kubeconfig", "bootstrap-token.sha256", "tls/ca.key", "tls/server.key"]) expect(mode(join(dir, f)), f).toBe(0o600)
  })

  it("answers health checks without authentication", async () => {
    for (const path of ["/healthz", "/livez", "/readyz"]) {
      const r = await http.send("GET", path)
      expect(r.status, path).toBe(200)
      expect(r.text).toBe("ok")
    }
  })

  it("answers 401 Status without a token and 200 with the kubeconfig's", async () => {
    const anonymous = await http.send("GET", "/api/v1/namespaces")
    expect(anonymous.status).toBe(401)
    expect(anonymous.json()).toMatchObject({ kind: "Status", status: "Failure", reason: "Unauthorized", code: 401 })
    const wrong = await http.send("GET", "/api/v1/namespaces", { token: "not-the-token" })
    expect(wrong.status).toBe(401)
    const admin = await http.send("GET", "/api/v1/namespaces", { token: creds.token })
    expect(admin.status).toBe(200)
    expect(admin.json()).toMatchObject({ kind: "NamespaceList" })
  })

  it("refuses a 4 MiB body with 413 and keeps serving", async () => {
    const big = Buffer.alloc(4 * 1024 * 1024, 0x20)
    const r = await http.send("POST", "/api/v1/namespaces", { token: creds.token, body: big })
    expect(r.status).toBe(413)
    expect(r.json()).toMatchObject({ kind: "Status", reason: "RequestEntityTooLarge", code: 413 })
    const after = await http.send("POST", "/api/v1/namespaces", {
      token: creds.token,
      body: JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "after-413" } })
    })
    expect(after.status).toBe(201)
  })

  it("answers 429 with Retry-After past 100 concurrent requests of one client", async () => {
    // 100 requests whose bodies never arrive hold their slots for as long as we like. They get an
    // agent of their own: a kept-alive socket from an earlier test could be closed by the server
    // just as one is sent, and a lost request would leave a slot free for good.
    const own = new Agent({ ca: creds.ca, keepAlive: false, maxSockets: Infinity })
    const lost: Array<Error> = []
    const stalled = Array.from({ length: 100 }, () => {
      const req = httpsRequest({
        host: "127.0.0.1",
        port: server.port,
        method: "POST",
        path: "/api/v1/namespaces",
        headers: { authorization: `Bearer ${creds.token}`, "content-type": "application/json", "content-length": "100" },
        agent: own,
        servername: "localhost"
      })
      req.on("error", (e) => lost.push(e))
      // An answer before the body (a server-side timeout) frees its slot just as an error would.
      req.on("response", (r) => lost.push(new Error(`answered ${r.statusCode} before its body was sent`)))
      req.flushHeaders()
      return req
    })
    try {
      const refused = await eventually(
        async () => {
          if (lost.length > 0) throw new Error(`a held request failed: ${lost[0]?.message}`)
          const r = await http.send("GET", "/api/v1/namespaces", { token: creds.token })
          return r.status === 429 ? r : undefined
        },
        45_000,
        "a 429"
      )
      expect(refused.headers["retry-after"]).toBe("1")
      expect(refused.json()).toMatchObject({ kind: "Status", reason: "TooManyRequests", code: 429 })
      // Another client (no token: its address) and health probes are not affected.
      expect((await http.send("GET", "/api/v1/namespaces")).status).toBe(401)
      expect((await http.send("GET", "/healthz")).status).toBe(200)
    } finally {
      for (const req of stalled) req.destroy()
      own.destroy()
    }
    await eventually(async () => ((await http.send("GET", "/api/v1/namespaces", { token: creds.token })).status === 200 ? true : undefined), 10_000, "the slots to free")
  }, 90_000)

  it("ends open watches and exits 0 on SIGTERM", async () => {
    const events: Array<string> = []
    let ended = false
    const watch = await new Promise<number>((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: server.port, path: "/api/v1/namespaces?watch=true", headers: { authorization: `Bearer ${creds.token}` }, agent: http.agent, servername: "localhost" },
        (res) => {
          res.setEncoding("utf8")
          res.on("data", (d: string) => events.push(d))
          res.on("end", () => (ended = true))
          resolve(res.statusCode ?? 0)
        }
      )
      req.on("error", reject)
      req.end()
    })
    expect(watch).toBe(200)
    await eventually(() => (events.join("").includes("after-413") ? true : undefined), 10_000, "the watch's initial events")

    const t0 = Date.now()
    server.child.kill("SIGTERM")
    await eventually(() => (ended ? true : undefined), 5_000, "the watch to end")
    expect(await server.exited).toBe(0)
    expect(Date.now() - t0).toBeLessThan(5_000)
    expect(server.stderr()).toContain("SIGTERM, draining")
  })

  it("reuses its CA, token and kubeconfig on a second start", async () => {
    const kubeconfig = readFileSync(join(dir, "kubeconfig"), "utf8")
    const ca = readFileSync(join(dir, "tls/ca.crt"), "utf8")
    const cert = readFileSync(join(dir, "tls/server.crt"), "utf8")
    // The same port, so the kubeconfig's server URL stays the same too.
    const again = await start(["--data-dir", dir, "--listen", `127.0.0.1:${server.port}`, "--request-timeout", "1s"])
    const http2 = client(again.port, creds.ca)
    try {
      expect(again.stdout()).not.toContain(creds.token)
      expect(again.stdout()).not.toContain("bootstrap admin token")
      expect(readFileSync(join(dir, "kubeconfig"), "utf8")).toBe(kubeconfig)
      expect(readFileSync(join(dir, "tls/ca.crt"), "utf8")).toBe(ca)
      expect(readFileSync(join(dir, "tls/server.crt"), "utf8")).toBe(cert)
      const r = await http2.send("GET", "/api/v1/namespaces/after-413", { token: creds.token })
      expect(r.status).toBe(200)

      // A request whose body never comes is cut off by the request timeout.
      const slow = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpsRequest(
          {
            host: "127.0.0.1",
            port: again.port,
            method: "POST",
            path: "/api/v1/namespaces",
            headers: { authorization: `Bearer ${creds.token}`, "content-type": "application/json", "content-length": "100" },
            agent: http2.agent,
            servername: "localhost"
          },
          (res) => {
            let body = ""
            res.on("data", (d: Buffer) => (body += d.toString()))
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
          }
        )
        req.on("error", reject)
        req.flushHeaders()
      })
      expect(slow.status).toBe(504)
      expect(JSON.parse(slow.body)).toMatchObject({ kind: "Status", reason: "Timeout", code: 504 })
    } finally {
      http2.close()
      again.child.kill("SIGTERM")
      expect(await again.exited).toBe(0)
    }
  })
})
