/**
 * The HTTPS adapter on its own, with a fake handler of core's shape: body limits, timeouts,
 * stream backpressure, client disconnects and graceful shutdown, over real TLS sockets.
 */
import { Http } from "@koder/fleet-core"
import { Effect, Exit, Scope, Stream } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { request as httpsRequest, type RequestOptions } from "node:https"
import type { IncomingMessage } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as HttpServer from "../src/HttpServer.js"
import * as Tls from "../src/Tls.js"
import { client, eventually } from "./fixtures/FleetProcess.js"

describe("HttpServer", () => {
  let dir: string
  let ca: string
  let scope: Scope.CloseableScope
  let server: HttpServer.HttpServer
  let http: ReturnType<typeof client>
  const seen: Array<HttpServer.Request> = []
  const state = { streamPulled: 0, streamClosed: 0, slowInterrupted: 0 }

  const handle: HttpServer.Handle = (request) => {
    seen.push(request)
    switch (request.path) {
      case "/text":
        return Effect.succeed({ _tag: "Json", status: 200, headers: { "content-type": "text/plain" }, body: "ok" })
      case "/echo":
        return Effect.succeed(Http.json(200, { size: request.body?.length ?? null, client: request.client, query: request.query.get("q"), headers: request.headers }))
      case "/never":
        return Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => state.slowInterrupted++)))
      case "/slow":
        return Effect.as(Effect.sleep("250 millis"), Http.json(200, { slow: true }))
      case "/apis/x/v1/watch/things": {
        // An endless watch of 64 KiB chunks: only backpressure keeps it from filling memory.
        const chunk = new Uint8Array(64 * 1024).fill(0x61)
        const body = Stream.repeatEffect(Effect.sync(() => (state.streamPulled++, chunk))).pipe(Stream.ensuring(Effect.sync(() => state.streamClosed++)))
        return Effect.succeed({ _tag: "Stream", status: 200, headers: { "content-type": "application/json" }, body })
      }
      default:
        return Effect.succeed(Http.json(404, { kind: "Status", code: 404 }))
    }
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-http-"))
    const tls = await Effect.runPromise(Tls.ensure({ dataDir: dir }))
    ca = tls.ca!
    scope = Effect.runSync(Scope.make())
    server = await Effect.runPromise(
      Scope.extend(HttpServer.make({ host: "127.0.0.1", port: 0, tls, maxBodyBytes: 1024 * 1024, maxInFlight: 3, requestTimeout: "1 second", shutdownGrace: "2 seconds" }), scope)
    )
    http = client(server.address.port, ca)
  })

  afterAll(async () => {
    http.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await rm(dir, { recursive: true, force: true })
  })

  it("answers 503 until it is given a handler", async () => {
    const r = await http.send("GET", "/text")
    expect(r.status).toBe(503)
    expect(r.headers["retry-after"]).toBe("1")
    server.serve(handle)
    expect((await http.send("GET", "/text")).status).toBe(200)
  })

  it("passes method, path, query, lower-cased headers and the body; strings go out as text", async () => {
    const text = await http.send("GET", "/text")
    expect(text.text).toBe("ok")
    expect(text.headers["content-type"]).toBe("text/plain")
    expect(text.headers["content-length"]).toBe("2")
    const r = await http.send("POST", "/echo?q=1", { body: "hello", headers: { "X-Thing": "A" }, token: "secret" })
    const body = r.json() as { size: number; client: string; query: string; headers: Record<string, string> }
    expect(body.size).toBe(5)
    expect(body.query).toBe("1")
    expect(body.headers["x-thing"]).toBe("A")
    // The client key is a hash prefix of the token, never the token.
    expect(body.client).toMatch(/^token:[0-9a-f]{16}$/)
    expect(JSON.stringify(body.client)).not.toContain("secret")
    expect((await http.send("GET", "/echo")).json()["size"]).toBeNull()
  })

  it("refuses an oversized chunked body with 413 and keeps the connection usable", async () => {
    const r = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpsRequest({ host: "127.0.0.1", port: server.address.port, method: "POST", path: "/echo", agent: http.agent, servername: "localhost" }, (res) => {
        let text = ""
        res.on("data", (d: Buffer) => (text += d.toString()))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }))
      })
      req.on("error", reject)
      // No content-length: chunked, so the limit is found while reading.
      for (let i = 0; i < 32; i++) req.write(Buffer.alloc(64 * 1024))
      req.end()
    })
    expect(r.status).toBe(413)
    expect(JSON.parse(r.text)).toMatchObject({ reason: "RequestEntityTooLarge", code: 413 })
    expect((await http.send("GET", "/text")).status).toBe(200)
  })

  it("times out a slow request with 504 and interrupts its handler", async () => {
    const r = await http.send("GET", "/never")
    expect(r.status).toBe(504)
    expect(r.json()).toMatchObject({ kind: "Status", reason: "Timeout", code: 504 })
    await eventually(() => (state.slowInterrupted === 1 ? true : undefined), 2_000, "the handler's interruption")
  })

  it("rejects a malformed path with 400", async () => {
    expect((await http.send("GET", "/api/%zz")).status).toBe(400)
  })

  const openStream = (options: Partial<RequestOptions> = {}) =>
    new Promise<{ res: IncomingMessage; abort: () => void }>((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: server.address.port, path: "/apis/x/v1/watch/things", servername: "localhost", ca, agent: false, ...options },
        (res) => resolve({ res, abort: () => req.destroy() })
      )
      req.on("error", () => {})
      req.on("error", reject)
      req.end()
    })

  it("writes streams with backpressure and ends them when the client goes away", async () => {
    const before = { pulled: state.streamPulled, closed: state.streamClosed }
    const { res, abort } = await openStream()
    res.pause() // a client that does not read
    await eventually(() => (state.streamPulled - before.pulled > 4 ? true : undefined), 5_000, "the stream to start")
    // The pull count settles: the server waits for 'drain' rather than buffering without bound.
    let last = -1
    const settled = await eventually(
      async () => {
        const now = state.streamPulled
        await new Promise((r) => setTimeout(r, 100))
        return now === last && now === state.streamPulled ? now : ((last = state.streamPulled), undefined)
      },
      10_000,
      "the stream to stop being pulled"
    )
    expect(settled - before.pulled).toBeLessThan(1000) // < 64 MiB in flight; unbounded would be far more
    abort()
    await eventually(() => (state.streamClosed === before.closed + 1 ? true : undefined), 5_000, "the stream's finalizer")
  })

  it("counts watches separately from requests in the per-client limit", async () => {
    // maxInFlight is 3: three open watches do not use up the request slots.
    const watches = await Promise.all([openStream(), openStream(), openStream(), openStream()])
    try {
      for (const w of watches) expect(w.res.statusCode).toBe(200)
      const slow = await Promise.all([1, 2, 3, 4, 5].map(() => http.send("GET", "/slow")))
      const statuses = slow.map((r) => r.status).sort()
      expect(statuses.filter((s) => s === 200).length).toBe(3)
      expect(statuses.filter((s) => s === 429).length).toBe(2)
      expect(slow.find((r) => r.status === 429)?.headers["retry-after"]).toBe("1")
    } finally {
      for (const w of watches) w.abort()
    }
  })

  it("shuts down gracefully: watches end cleanly, in-flight requests finish, new ones are refused", async () => {
    const { res } = await openStream()
    let ended = false
    let aborted = false
    res.on("data", () => {})
    res.on("end", () => (ended = true))
    res.on("aborted", () => (aborted = true))
    const inFlight = http.send("GET", "/slow")
    await eventually(() => (server.inFlight().requests === 1 ? true : undefined), 2_000, "the slow request to be in flight")
    const closedBefore = state.streamClosed
    await Effect.runPromise(server.shutdown)
    expect(server.draining()).toBe(true)
    expect((await inFlight).status).toBe(200)
    await eventually(() => (ended ? true : undefined), 2_000, "the watch to end")
    expect(aborted).toBe(false)
    expect(state.streamClosed).toBe(closedBefore + 1)
    await expect(http.send("GET", "/text")).rejects.toThrow()
  })
})

describe("HttpServer.isWatch", () => {
  it.each([
    ["/api/v1/namespaces/d/pods", "watch=true", true],
    ["/api/v1/watch/namespaces/d/pods", "", true],
    ["/api/v1/namespaces/d/pods/p/log", "follow=true", true],
    ["/api/v1/namespaces/d/pods/p/log", "follow=false", false],
    ["/api/v1/namespaces/d/pods/p/log", "", false],
    ["/api/v1/namespaces/d/pods/p", "follow=true", false]
  ])("%s?%s is long-running: %s", (path, query, want) => {
    expect(HttpServer.isWatch(path, new URLSearchParams(query))).toBe(want)
  })
})
