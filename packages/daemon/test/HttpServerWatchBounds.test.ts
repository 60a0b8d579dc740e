/**
 * HttpServer's bounds on watches and connections (issue 29), with a handler of core's shape over
 * real TLS sockets: watches counted per user across tokens, the per-user budget of unread bytes
 * (429 with Retry-After), a watch whose client stops reading closed after the stall timeout, and
 * connections past the per-address cap closed on accept.
 */
import type { Http } from "@koder/fleet-core"
import { Effect, Exit, Scope, Stream } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import type { IncomingMessage } from "node:http"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect } from "node:tls"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as HttpServer from "../src/HttpServer.js"
import * as Tls from "../src/Tls.js"
import { eventually } from "./fixtures/FleetProcess.js"

const KiB = 1024
const line = new Uint8Array(16 * KiB).fill(0x61)
line[line.length - 1] = 0x0a

describe("HttpServer watch and connection bounds", () => {
  let dir: string
  let ca: string
  let scope: Scope.CloseableScope
  let server: HttpServer.HttpServer

  // `?user=U&initial=BYTES&delay=MS&endless=1`: a watch of U owing BYTES at start, written after
  // MS, then quiet (or, with endless, 16 KiB lines for as long as the client takes them).
  const handle: HttpServer.Handle = (request) => {
    const q = request.query
    const initial = Number(q.get("initial") ?? "0")
    const lines = Stream.make(...Array.from({ length: Math.ceil(initial / line.length) }, () => line))
    const body = Stream.concat(
      Stream.fromEffect(Effect.sleep(`${Number(q.get("delay") ?? "0")} millis`)).pipe(Stream.drain),
      Stream.concat(lines, q.get("endless") === "1" ? Stream.repeatValue(line) : Stream.never)
    )
    return Effect.succeed({
      _tag: "Stream",
      status: 200,
      headers: { "content-type": "application/json" },
      body,
      watch: { user: q.get("user") ?? "nobody", initialBytes: initial }
    } satisfies Http.StreamResponse)
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-http-bounds-"))
    const tls = await Effect.runPromise(Tls.ensure({ dataDir: dir }))
    ca = tls.ca!
    scope = Effect.runSync(Scope.make())
    server = await Effect.runPromise(
      Scope.extend(
        HttpServer.make({
          host: "127.0.0.1",
          port: 0,
          tls,
          maxWatches: 3,
          watchBudgetPerUser: 1024 * KiB,
          watchStallTimeout: "1 second",
          maxConnectionsPerAddress: 40
        }),
        scope
      )
    )
    server.serve(handle)
  })

  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await rm(dir, { recursive: true, force: true })
  })

  /** Open a watch with its own connection and token; a 200 is left unread (paused). */
  const watch = (query: string, token: string) =>
    new Promise<{ status: number; res: IncomingMessage; body: Promise<string>; close: () => void }>((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: server.address.port, path: `/apis/x/v1/watch/things?${query}`, servername: "localhost", ca, agent: false, headers: { authorization: `Bearer ${token}` } },
        (res) => {
          const status = res.statusCode ?? 0
          const body =
            status === 200
              ? Promise.resolve("")
              : new Promise<string>((done) => {
                  let text = ""
                  res.setEncoding("utf8")
                  res.on("data", (d: string) => (text += d))
                  res.on("end", () => done(text))
                })
          if (status === 200) res.pause()
          resolve({ status, res, body, close: () => req.destroy() })
        }
      )
      req.on("error", reject)
      req.end()
    })

  it("counts watches per user, whatever tokens they come with", async () => {
    const alice = await Promise.all(["a1", "a2", "a3"].map((token) => watch("user=alice", token)))
    expect(alice.map((w) => w.status)).toEqual([200, 200, 200])
    const fourth = await watch("user=alice", "a4")
    expect(fourth.status).toBe(429)
    expect(fourth.res.headers["retry-after"]).toBe("1")
    expect(JSON.parse(await fourth.body)).toMatchObject({ kind: "Status", code: 429, reason: "TooManyRequests", message: expect.stringContaining('user "alice" already has 3 concurrent watches') })
    // Another user is not affected, and a closed watch frees its place.
    const bob = await watch("user=bob", "b1")
    expect(bob.status).toBe(200)
    alice[0]!.close()
    const again = await eventually(async () => {
      const w = await watch("user=alice", "a5")
      if (w.status === 200) return w
      w.close()
      return undefined
    }, 10_000, "alice's freed watch")
    for (const w of [...alice, bob, again]) w.close()
  })

  it("refuses a watch whose initial state would take its user past the budget while another is unread", async () => {
    // The first watch reserves its 800 KiB at once; it writes them only after 3 s.
    const first = await watch(`user=carol&initial=${800 * KiB}&delay=3000`, "c1")
    expect(first.status).toBe(200)
    const second = await watch(`user=carol&initial=${800 * KiB}`, "c2")
    expect(second.status).toBe(429)
    expect(second.res.headers["retry-after"]).toBe("5")
    expect(JSON.parse(await second.body)).toMatchObject({ code: 429, reason: "TooManyRequests", message: expect.stringContaining("the budget is 1048576") })
    // Small ones still fit beside it; and once the first is gone, the big one too.
    const small = await watch(`user=carol&initial=${64 * KiB}`, "c3")
    expect(small.status).toBe(200)
    first.close()
    const big = await eventually(async () => {
      const w = await watch(`user=carol&initial=${800 * KiB}`, "c4")
      if (w.status === 200) return w
      w.close()
      return undefined
    }, 10_000, "carol's budget to be returned")
    small.close()
    big.close()
  })

  it("closes watches whose clients stop reading, once they have waited the stall timeout", async () => {
    // dave holds all 3 of his watches and reads none of them.
    const stuck = await Promise.all(["d1", "d2", "d3"].map((token) => watch("user=dave&endless=1", token)))
    expect(stuck.map((w) => w.status)).toEqual([200, 200, 200])
    const watching = server.inFlight().watches
    expect(watching).toBeGreaterThanOrEqual(3)
    expect((await watch("user=dave", "d4")).status).toBe(429)
    // Each fills the kernel's buffers, then 256 KiB more, then makes no progress for 1 s: closed
    // (reset), which frees their places. (The paused clients themselves notice nothing.)
    await eventually(() => (server.inFlight().watches <= watching - 3 ? true : undefined), 20_000, "the stalled watches to be closed")
    const next = await watch("user=dave", "d5")
    expect(next.status).toBe(200)
    for (const w of [...stuck, next]) w.close()
  })

  it("closes a running watch whose writes would take its user past the budget", async () => {
    // A server of its own: a budget smaller than two watches' windows, and no stall closing.
    const own = await Effect.runPromise(
      Scope.extend(HttpServer.make({ host: "127.0.0.1", port: 0, tls: await Effect.runPromise(Tls.ensure({ dataDir: dir })), watchBudgetPerUser: 384 * KiB, watchStallTimeout: "5 minutes" }), scope)
    )
    own.serve(handle)
    const open = (token: string) =>
      new Promise<IncomingMessage>((resolve, reject) => {
        const req = httpsRequest(
          { host: "127.0.0.1", port: own.address.port, path: "/apis/x/v1/watch/things?user=erin&endless=1", servername: "localhost", ca, agent: false, headers: { authorization: `Bearer ${token}` } },
          (res) => (res.pause(), resolve(res))
        )
        req.on("error", reject)
        req.end()
      })
    const watches = await Promise.all([open("e1"), open("e2")])
    expect(watches.map((r) => r.statusCode)).toEqual([200, 200])
    // Each stops at 256 KiB unsent once the kernel's buffers are full: the second to get there
    // takes erin past 384 KiB and is closed; the other stays open (it is her only one now).
    await eventually(() => (own.inFlight().watches === 1 ? true : undefined), 20_000, "one of erin's watches to be closed")
    await new Promise((r) => setTimeout(r, 1000))
    expect(own.inFlight().watches).toBe(1)
    for (const r of watches) r.destroy()
  })

  it("closes connections past the per-address cap on accept, before any TLS", async () => {
    const outcomes = await Promise.all(
      Array.from(
        { length: 60 },
        () =>
          new Promise<"secure" | "refused">((resolve) => {
            const socket = connect({ host: "127.0.0.1", port: server.address.port, servername: "localhost", ca })
            socket.once("secureConnect", () => resolve("secure"))
            socket.once("error", () => resolve("refused"))
            socket.once("close", () => resolve("refused"))
            socket.resume()
            setTimeout(() => socket.destroy(), 3000)
          })
      )
    )
    expect(outcomes.filter((o) => o === "refused").length).toBeGreaterThanOrEqual(20)
    expect(outcomes.filter((o) => o === "secure").length).toBeGreaterThan(0)
  })
})
