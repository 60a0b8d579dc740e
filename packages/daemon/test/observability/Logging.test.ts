/**
 * The daemon's log stream: the format and level flags, the logger's JSON and text lines, request
 * ids, and no secret values — unit checks of the logger, then a real `koder-fleet server` whose
 * stderr is read while a client uses bearer tokens, a join token and a Secret.
 */
import { Effect, Either, LogLevel } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Logging from "../../src/observability/Logging.js"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const capture = (settings: Logging.Settings, effect: Effect.Effect<void>) => {
  const lines: Array<string> = []
  Effect.runSync(Effect.provide(effect, Logging.layer(settings, (l) => lines.push(l))))
  return lines
}

describe("Logging (unit)", () => {
  it("takes --log-format and --log-level off the command line, leaving the role's flags", () => {
    const r = Logging.extractFlags(["--listen", ":0", "--log-format=text", "--log-level", "debug", "--data-dir", "x"], { format: "json", level: LogLevel.Info })
    expect(Either.getOrThrow(r).rest).toEqual(["--listen", ":0", "--data-dir", "x"])
    expect(Either.getOrThrow(r).settings).toEqual({ format: "text", level: LogLevel.Debug })
    expect(Either.getOrThrow(Logging.extractFlags([], { format: "json", level: LogLevel.Info })).settings.format).toBe("json")
    expect(Logging.extractFlags(["--log-format", "xml"])).toEqual(Either.left('--log-format "xml": expected json or text'))
    expect(Either.isLeft(Logging.extractFlags(["--log-level", "loud"]))).toBe(true)
    expect(Logging.defaults(true).format).toBe("text")
    expect(Logging.defaults(false).format).toBe("json")
  })

  it("writes one JSON object per line with time, level, message and annotations", () => {
    const lines = capture(
      { format: "json", level: LogLevel.Info },
      Effect.logWarning("store slow").pipe(Effect.annotateLogs({ requestId: "r-1", code: 200 }))
    )
    expect(lines).toHaveLength(1)
    const record = JSON.parse(lines[0]!) as Record<string, unknown>
    expect(record).toMatchObject({ level: "warn", msg: "store slow", requestId: "r-1", code: 200 })
    expect(new Date(String(record["time"])).getTime()).toBeGreaterThan(0)
  })

  it("writes readable text lines, and drops records under the level", () => {
    const lines = capture(
      { format: "text", level: LogLevel.Info },
      Effect.all([Effect.logDebug("hidden"), Effect.logInfo("shown with spaces").pipe(Effect.annotateLogs("requestId", "r 2")), Effect.logError("bad")], { discard: true })
    )
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z INFO {2}shown with spaces requestId="r 2"$/)
    expect(lines[1]).toMatch(/ ERROR bad$/)
  })

  it("never writes credentials: annotations named like them, bearer tokens, JWTs and join tokens in messages", () => {
    const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
    const join_ = "abc123.0123456789abcdefghijklmnopqrstuv"
    const lines = capture(
      { format: "json", level: LogLevel.Debug },
      Effect.logInfo(`header was Bearer s3cr3t-t0ken, then ${jwt}, join ${join_}`).pipe(Effect.annotateLogs({ token: "plain-secret", authorization: "Bearer x", user: "alice" }))
    )
    const line = lines[0]!
    for (const secret of ["s3cr3t-t0ken", jwt, join_, "plain-secret"]) expect(line).not.toContain(secret)
    expect(JSON.parse(line)).toMatchObject({ token: "<redacted>", authorization: "<redacted>", user: "alice" })
  })
})

describe("koder-fleet server logs (end to end)", () => {
  let dir: string
  let server: FleetProcess
  let http: ReturnType<typeof client>
  let admin: string

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-logs-"))
    server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--log-format", "json", "--log-level", "debug"])
    const creds = credentials(server.kubeconfig)
    admin = creds.token
    http = client(server.port, creds.ca)
  })

  afterAll(async () => {
    http?.close()
    if (server?.child.exitCode === null) server.child.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  it("stderr is JSON lines; a request's line carries its request id, which the response returns", async () => {
    const r = await http.send("GET", "/api/v1/namespaces", { token: admin, headers: { "x-request-id": "e2e-req-7" } })
    expect(r.status).toBe(200)
    expect(r.headers["x-request-id"]).toBe("e2e-req-7")
    const generated = await http.send("GET", "/api/v1/namespaces/default", { token: admin })
    expect(String(generated.headers["x-request-id"])).toMatch(/^[0-9a-f-]{36}$/)
    const record = await eventually(() => {
      const lines = server.stderr().split("\n").filter((l) => l.startsWith("{"))
      return lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((o) => o["requestId"] === "e2e-req-7")
    }, 10_000, "the request's log line")
    expect(record).toMatchObject({ level: "debug", msg: "GET /api/v1/namespaces", code: 200, user: "fleet:bootstrap-admin" })
    await eventually(() => server.stderr().includes(String(generated.headers["x-request-id"])) || undefined, 10_000, "the generated id in the log")
    // Every line of the log stream is JSON.
    for (const line of server.stderr().split("\n").filter((l) => l.trim() !== "")) expect(() => JSON.parse(line), line).not.toThrow()
  })

  it("no bearer token, join token, ServiceAccount token or Secret value appears in the logs", async () => {
    const joinToken = /--join-token (\S+)/.exec(server.stdout())?.[1]
    expect(joinToken).toBeDefined()
    const secretValue = "hunter2-correct-horse-battery-staple"
    const post = (path: string, body: unknown, token = admin) => http.send("POST", path, { token, body: JSON.stringify(body) })
    expect((await post("/api/v1/namespaces/default/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "db" }, stringData: { password: secretValue } })).status).toBe(201)
    expect((await http.send("GET", "/api/v1/namespaces/default/secrets/db", { token: admin })).status).toBe(200)
    // A failing write that echoes the object back in its error.
    await post("/api/v1/namespaces/default/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "db" }, stringData: { password: secretValue } })
    await post("/api/v1/namespaces/default/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "robot" } })
    const issued = await post("/api/v1/namespaces/default/serviceaccounts/robot/token", { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: {} })
    const saToken = String((issued.json()["status"] as Record<string, unknown>)["token"])
    expect(saToken.length).toBeGreaterThan(20)
    expect((await http.send("GET", "/api/v1/namespaces", { token: saToken })).status).toBe(403)
    // The join token as a bearer token (what an agent sends when it joins).
    await http.send("GET", "/api/v1/nodes", { token: joinToken! })
    await http.send("GET", "/api/v1/nodes", { token: "not-a-valid-token-but-still-secret" })
    await eventually(() => server.stderr().includes("/api/v1/nodes") || undefined, 10_000, "the requests' log lines")
    const logs = server.stderr()
    for (const [what, secret] of [
      ["admin token", admin],
      ["join token", joinToken!],
      ["ServiceAccount token", saToken],
      ["invalid token", "not-a-valid-token-but-still-secret"],
      ["Secret value", secretValue],
      ["Secret value (base64)", Buffer.from(secretValue).toString("base64")]
    ] as const) {
      expect(logs.includes(secret), what).toBe(false)
    }
    // The banner on stdout shows the one-time tokens by design; never a Secret's data or a ServiceAccount token.
    expect(server.stdout()).not.toContain(secretValue)
    expect(server.stdout()).not.toContain(saToken)
  })
})
