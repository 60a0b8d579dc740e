/**
 * The ingress proxy against an in-process API (core's TestCluster: real API pipeline, memory
 * store) and real backends: HTTP servers on loopback ports, published as Services with hand-made
 * EndpointSlices (what the EndpointSlice controller writes in host-network mode). Every request is
 * a real socket through the proxy: hosts, TLS by SNI from a Secret, 503 naming the Service,
 * websocket passthrough, retry past a dead endpoint, 502/504, keep-alive, X-Forwarded-*.
 */
import { type Client } from "@koder/fleet-core"
import { TestCluster } from "@koder/fleet-core/testing"
import { Effect, Exit, Scope } from "effect"
import { Agent as HttpAgent, createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http"
import { request as httpsRequest } from "node:https"
import { type AddressInfo, createServer as createTcpServer, type Socket } from "node:net"
import { type PeerCertificate, type TLSSocket } from "node:tls"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import * as HostFacts from "../../src/agent/HostFacts.js"
import * as IngressProxy from "../../src/net/IngressProxy.js"
import * as Tls from "../../src/Tls.js"

type Json = Record<string, unknown>

const scope = Effect.runSync(Scope.make())
const run = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Effect.runPromise(Scope.extend(effect, scope))
const servers: Array<Server> = []
// EndpointSlices may not hold loopback addresses: backends listen where a node's pods would.
const hostIP = HostFacts.defaultInternalIP()
const sockets = new Set<Socket>()

/** A backend answering `name` (and echoing headers at /headers, the body on POST). */
const backend = async (name: string, options: { silent?: boolean } = {}) => {
  const seen = { requests: 0, connections: 0 }
  const server = createServer((req, res) => {
    seen.requests++
    if (options.silent === true) return
    if (req.url === "/headers") return void res.end(JSON.stringify(req.headers))
    let body = ""
    req.on("data", (d: Buffer) => (body += d.toString()))
    req.on("end", () => {
      res.setHeader("x-backend", name)
      res.end(req.method === "POST" ? `${name} got ${body}` : `${name} ${req.url}`)
    })
  })
  server.on("connection", (s: Socket) => {
    seen.connections++
    sockets.add(s)
  })
  await new Promise<void>((r) => server.listen(0, hostIP, r))
  servers.push(server)
  return { port: (server.address() as AddressInfo).port, seen }
}

/** A port nothing listens on (bound, then closed: connections are refused). */
const deadPort = async () => {
  const s = createTcpServer()
  await new Promise<void>((r) => s.listen(0, hostIP, r))
  const port = (s.address() as AddressInfo).port
  await new Promise((r) => s.close(r))
  return port
}

const service = (name: string): Json => ({ apiVersion: "v1", kind: "Service", metadata: { name, namespace: "default" }, spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] } })

const slice = (svc: string, suffix: string, port: number, ready = true): Json => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: { name: `${svc}-${suffix}`, namespace: "default", labels: { "kubernetes.io/service-name": svc } },
  addressType: "IPv4",
  ports: [{ name: "http", port, protocol: "TCP" }],
  endpoints: [{ addresses: [hostIP], conditions: { ready } }]
})

const rule = (host: string, svc: string): Json => ({ host, http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: svc, port: { number: 80 } } } }] } })

interface Reply {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly text: string
  readonly reused: boolean
}

const keepAlive = new HttpAgent({ keepAlive: true, maxSockets: 1 })

const get = (port: number, host: string, path = "/", options: { method?: string; body?: string; headers?: Record<string, string>; agent?: HttpAgent } = {}) =>
  new Promise<Reply>((resolve, reject) => {
    const req = httpRequest(
      { host: "127.0.0.1", port, path, method: options.method ?? "GET", headers: { host, ...options.headers }, agent: options.agent ?? false },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (d: string) => (text += d))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text, reused: req.reusedSocket }))
      }
    )
    req.on("error", reject)
    req.end(options.body)
  })

const eventually = async <A>(check: () => Promise<A | undefined>, ms = 10_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check().catch(() => undefined)
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

const logs: Array<string> = []
let cluster: TestCluster.TestCluster
let proxy: IngressProxy.IngressProxy
let httpPort = 0
let httpsPort = 0
let secureCert = ""
let a1: Awaited<ReturnType<typeof backend>>
let a2: Awaited<ReturnType<typeof backend>>
let flakyLive: Awaited<ReturnType<typeof backend>>

beforeAll(async () => {
  cluster = await run(TestCluster.make({ nodes: 0, scheduler: false }))
  proxy = await run(
    IngressProxy.make({
      client: cluster.client,
      http: { host: "127.0.0.1", port: 0, explicit: true },
      https: { host: "127.0.0.1", port: 0, explicit: true },
      timeouts: { responseMs: 400, connectMs: 1000 },
      log: (line) => logs.push(line)
    })
  )
  httpPort = proxy.http!.port
  httpsPort = proxy.https!.port

  a1 = await backend("a1")
  a2 = await backend("a2")
  const b = await backend("b")
  const secure = await backend("secure")
  flakyLive = await backend("flaky")
  const slow = await backend("slow", { silent: true })

  const echo = createServer()
  const wss = new WebSocketServer({ server: echo })
  wss.on("connection", (ws, req) => {
    ws.send(`hello ${String(req.headers["x-forwarded-for"])} ${String(req.headers["x-forwarded-host"])}`)
    ws.on("message", (m, binary) => ws.send(m, { binary }))
  })
  echo.on("connection", (s: Socket) => sockets.add(s))
  await new Promise<void>((r) => echo.listen(0, hostIP, r))
  servers.push(echo)

  const pem = await Tls.selfSigned("secure.test", ["secure.test"])
  secureCert = pem.cert
  const objects: Array<Json> = [
    ...["web-a", "web-b", "secure", "echo", "flaky", "empty", "slow", "dead"].map(service),
    slice("web-a", "1", a1.port),
    slice("web-a", "2", a2.port),
    slice("web-b", "1", b.port),
    slice("secure", "1", secure.port),
    slice("echo", "1", (echo.address() as AddressInfo).port),
    slice("flaky", "dead", await deadPort()),
    slice("flaky", "live", flakyLive.port),
    slice("empty", "1", a1.port, false),
    slice("slow", "1", slow.port),
    slice("dead", "1", await deadPort()),
    slice("dead", "2", await deadPort()),
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "secure-tls", namespace: "default" },
      type: "kubernetes.io/tls",
      data: { "tls.crt": Buffer.from(pem.cert).toString("base64"), "tls.key": Buffer.from(pem.key).toString("base64") }
    },
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "Ingress",
      metadata: { name: "sites", namespace: "default" },
      spec: {
        ingressClassName: "fleet",
        tls: [{ hosts: ["secure.test"], secretName: "secure-tls" }],
        rules: [
          rule("a.test", "web-a"),
          rule("b.test", "web-b"),
          rule("secure.test", "secure"),
          rule("ws.test", "echo"),
          rule("flaky.test", "flaky"),
          rule("empty.test", "empty"),
          rule("slow.test", "slow"),
          rule("dead.test", "dead")
        ]
      }
    }
  ]
  for (const o of objects) await Effect.runPromise(cluster.client.create(o))
  await eventually(async () => ((await get(httpPort, "dead.test")).status === 502 ? true : undefined))
})

afterAll(async () => {
  keepAlive.destroy()
  await Effect.runPromise(Scope.close(scope, Exit.void))
  for (const s of sockets) s.destroy()
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))))
})

describe("IngressProxy", () => {
  it("routes two hosts to their Services, round-robin over the ready endpoints", async () => {
    const replies = await Promise.all(Array.from({ length: 6 }, (_, i) => get(httpPort, "a.test", `/page/${i}?q=1`)))
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200])
    expect(replies.filter((r) => r.text.startsWith("a1 ")).length).toBe(3)
    expect(replies.filter((r) => r.text.startsWith("a2 ")).length).toBe(3)
    expect(replies[0]!.text).toMatch(/^a[12] \/page\/0\?q=1$/)
    const b = await get(httpPort, "B.TEST:8080", "/x")
    expect([b.status, b.text, b.headers["x-backend"]]).toEqual([200, "b /x", "b"])
    const none = await get(httpPort, "nobody.test", "/")
    expect(none.status).toBe(404)
    expect(none.text).toContain("nobody.test")
  })

  it("serves a TLS host with the certificate of its Secret, chosen by SNI", async () => {
    const reply = await new Promise<{ status: number; text: string; peer: PeerCertificate }>((resolve, reject) => {
      const req = httpsRequest({ host: "127.0.0.1", port: httpsPort, path: "/s", servername: "secure.test", headers: { host: "secure.test" }, ca: secureCert, agent: false }, (res) => {
        let text = ""
        res.on("data", (d: Buffer) => (text += d.toString()))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text, peer: (res.socket as TLSSocket).getPeerCertificate() }))
      })
      req.on("error", reject)
      req.end()
    })
    expect(reply).toMatchObject({ status: 200, text: "secure /s" })
    expect(reply.peer.subject.CN).toBe("secure.test")
    // Another name gets the proxy's default certificate, which the Secret's CA does not sign.
    const other = await new Promise<Error>((resolve) => {
      const req = httpsRequest({ host: "127.0.0.1", port: httpsPort, servername: "a.test", headers: { host: "a.test" }, ca: secureCert, agent: false }, () => resolve(new Error("trusted")))
      req.on("error", resolve)
      req.end()
    })
    expect(other.message).toMatch(/self[- ]signed|unable to verify|certificate/i)
    // HTTPS requests carry X-Forwarded-Proto https.
    const headers = await new Promise<Record<string, string>>((resolve, reject) => {
      const req = httpsRequest({ host: "127.0.0.1", port: httpsPort, path: "/headers", servername: "secure.test", headers: { host: "secure.test" }, ca: secureCert, agent: false }, (res) => {
        let text = ""
        res.on("data", (d: Buffer) => (text += d.toString()))
        res.on("end", () => resolve(JSON.parse(text) as Record<string, string>))
      })
      req.on("error", reject)
      req.end()
    })
    expect(headers).toMatchObject({ "x-forwarded-proto": "https", "x-forwarded-host": "secure.test", "x-forwarded-port": String(httpsPort) })
  })

  it("answers 503 naming the Service that has no ready endpoints, in HTML for browsers", async () => {
    const plain = await get(httpPort, "empty.test", "/")
    expect(plain.status).toBe(503)
    expect(plain.headers["content-type"]).toMatch(/^text\/plain/)
    expect(plain.text).toContain("Service default/empty:80 has no ready endpoints")
    const html = await get(httpPort, "empty.test", "/", { headers: { accept: "text/html,*/*" } })
    expect(html.status).toBe(503)
    expect(html.headers["content-type"]).toMatch(/^text\/html/)
    expect(html.text).toContain("<h1>503 Service Unavailable</h1>")
    expect(html.text).toContain("default/empty:80")
  })

  it("retries a request past an endpoint that refuses connections (bodies included), then sorts that endpoint last", async () => {
    const before = flakyLive.seen.requests
    const retried = () => logs.filter((l) => l.startsWith("default/flaky:80:") && l.includes("trying the next endpoint")).length
    // Round-robin starts the first or the second of these at the dead endpoint (never tried yet).
    for (const body of ["one", "two"]) {
      const posted = await get(httpPort, "flaky.test", "/", { method: "POST", body, headers: { "content-type": "text/plain" } })
      expect([posted.status, posted.text]).toEqual([200, `flaky got ${body}`])
    }
    expect(retried()).toBe(1)
    const replies = await Promise.all(Array.from({ length: 10 }, () => get(httpPort, "flaky.test", "/")))
    expect(replies.map((r) => r.status)).toEqual(Array(10).fill(200))
    expect(flakyLive.seen.requests - before).toBe(12)
    // The dead endpoint refused once; for the next seconds it is tried only after the live one.
    expect(retried()).toBe(1)
  })

  it("answers 502 when every endpoint fails, 504 when the endpoint does not answer in time", async () => {
    const dead = await get(httpPort, "dead.test", "/")
    expect(dead.status).toBe(502)
    expect(dead.text).toContain("default/dead:80")
    const started = Date.now()
    const slow = await get(httpPort, "slow.test", "/")
    expect(slow.status).toBe(504)
    expect(slow.text).toContain("Service default/slow:80 did not answer")
    expect(Date.now() - started).toBeLessThan(3000)
  })

  it("passes websockets through (Upgrade), both ways", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${httpPort}/chat`, { headers: { host: "ws.test" } })
    const messages: Array<string> = []
    const got = (n: number) => eventually(async () => (messages.length >= n ? true : undefined), 5000)
    ws.on("message", (m: Buffer) => messages.push(m.toString()))
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject))
    await got(1)
    expect(messages[0]).toBe("hello 127.0.0.1 ws.test")
    ws.send("ping 1")
    ws.send("x".repeat(100_000))
    await got(3)
    expect(messages[1]).toBe("ping 1")
    expect(messages[2]).toHaveLength(100_000)
    ws.close()
    await new Promise((r) => ws.once("close", r))
  })

  it("keeps connections alive on both sides and sets the X-Forwarded headers", async () => {
    const connectionsBefore = a1.seen.connections + a2.seen.connections
    const replies: Array<Reply> = []
    for (let i = 0; i < 6; i++) replies.push(await get(httpPort, "a.test", "/", { agent: keepAlive }))
    expect(replies.map((r) => r.reused)).toEqual([false, true, true, true, true, true])
    // Six sequential requests over two endpoints: the proxy's pool reuses its connections.
    expect(a1.seen.connections + a2.seen.connections - connectionsBefore).toBeLessThanOrEqual(2)
    const echoed = await get(httpPort, "a.test", "/headers", { headers: { "x-forwarded-for": "203.0.113.7", "x-forwarded-proto": "spoofed", connection: "keep-alive, x-drop-me", "x-drop-me": "1" } })
    const headers = JSON.parse(echoed.text) as Record<string, string>
    expect(headers).toMatchObject({
      host: "a.test",
      "x-forwarded-for": "203.0.113.7, 127.0.0.1",
      "x-forwarded-proto": "http",
      "x-forwarded-host": "a.test",
      "x-forwarded-port": String(httpPort),
      "x-real-ip": "127.0.0.1"
    })
    expect(headers["x-drop-me"]).toBeUndefined()
  })

  it("creates the default IngressClass fleet and writes the address into the Ingress status", async () => {
    const cls = (await Effect.runPromise(cluster.client.get({ apiVersion: "networking.k8s.io/v1", kind: "IngressClass" }, undefined, "fleet"))) as Json
    expect(cls).toMatchObject({ metadata: { annotations: { "ingressclass.kubernetes.io/is-default-class": "true" } }, spec: { controller: "fleet.koder.dev/ingress" } })
    const status = await eventually(async () => {
      const ing = (await Effect.runPromise(cluster.client.get({ apiVersion: "networking.k8s.io/v1", kind: "Ingress" }, "default", "sites"))) as Client.JsonObject
      const lb = (ing["status"] as Json | undefined)?.["loadBalancer"] as Json | undefined
      return lb?.["ingress"] === undefined ? undefined : lb
    })
    expect(status).toEqual({ ingress: [{ ip: "127.0.0.1", ports: [{ port: httpPort, protocol: "TCP" }, { port: httpsPort, protocol: "TCP" }] }] })
  })

  it("goes on without a default address that is taken, and fails on an explicit one", async () => {
    const taken = { host: "127.0.0.1", port: httpPort }
    const lines: Array<string> = []
    const inner = Effect.runSync(Scope.make())
    const quiet = await Effect.runPromise(
      Scope.extend(IngressProxy.make({ client: cluster.client, http: { ...taken, explicit: false }, https: undefined, log: (l) => lines.push(l) }), inner)
    )
    expect(quiet.http).toBeUndefined()
    expect(lines.join("\n")).toContain(`--ingress-listen 127.0.0.1:${httpPort}`)
    const failed = await Effect.runPromiseExit(Scope.extend(IngressProxy.make({ client: cluster.client, http: { ...taken, explicit: true }, https: undefined, log: () => undefined }), inner))
    expect(Exit.isFailure(failed) && JSON.stringify(failed.cause)).toContain("EADDRINUSE")
    await Effect.runPromise(Scope.close(inner, Exit.void))
  })
})
