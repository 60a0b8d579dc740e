// The API pipeline's request metrics and request ids, through the handler against a memory store,
// recorded into a registry of the test's own.
import { ApiError, ApiServer, Authn, Exposition, MetricRegistry, Status, Store } from "@koder/fleet-core"
import { Effect, Exit, Logger, LogLevel, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const s of scopes.splice(0)) await Effect.runPromise(Scope.close(s, Exit.void))
})

const start = async () => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const registry = MetricRegistry.make()
  const server = await Effect.runPromise(
    ApiServer.make({
      store: Store.makeMemory(),
      authenticate: (headers) =>
        headers["authorization"] === "Bearer good" ? Effect.succeed(Authn.bootstrapAdmin) : Effect.fail(ApiError.of(Status.unauthorized("bad token")))
    }).pipe(Effect.provideService(MetricRegistry.MetricRegistry, registry), Scope.extend(scope))
  )
  const lines: Array<string> = []
  const logger = Logger.make(({ message, annotations }) => lines.push(`${String(message)} ${JSON.stringify(Object.fromEntries(annotations))}`))
  const call = (method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}) => {
    const [p, q] = path.split("?")
    return Effect.runPromise(
      server
        .handle({
          method,
          path: p!,
          query: new URLSearchParams(q ?? ""),
          headers: { "content-type": "application/json", authorization: "Bearer good", ...options.headers },
          body: options.body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(options.body)),
          client: "test"
        })
        .pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Logger.withMinimumLogLevel(LogLevel.Debug))
    )
  }
  return { call, metrics: () => Exposition.render(registry.snapshot()), lines }
}

describe("API request metrics and request ids", () => {
  it("counts requests by verb, group, resource and code, with latency histograms", async () => {
    const { call, metrics } = await start()
    expect((await call("POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "a" } } })).status).toBe(201)
    expect((await call("POST", "/api/v1/namespaces/a/configmaps", { body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } } })).status).toBe(201)
    expect((await call("GET", "/api/v1/namespaces/a/configmaps/c")).status).toBe(200)
    expect((await call("GET", "/api/v1/namespaces/a/configmaps/missing")).status).toBe(404)
    expect((await call("GET", "/api/v1/namespaces/a/configmaps")).status).toBe(200)
    expect((await call("GET", "/apis/apps/v1/deployments")).status).toBe(200)
    expect((await call("GET", "/api/v1/pods", { headers: { authorization: "Bearer bad" } })).status).toBe(401)
    // A made-up resource must not become a label value.
    expect((await call("GET", "/api/v1/made-up-things")).status).toBe(404)
    const text = metrics()
    expect(text).toContain('apiserver_request_total{verb="POST",group="",resource="namespaces",subresource="",code="201"} 1')
    expect(text).toContain('apiserver_request_total{verb="POST",group="",resource="configmaps",subresource="",code="201"} 1')
    expect(text).toContain('apiserver_request_total{verb="GET",group="",resource="configmaps",subresource="",code="200"} 1')
    expect(text).toContain('apiserver_request_total{verb="GET",group="",resource="configmaps",subresource="",code="404"} 1')
    expect(text).toContain('apiserver_request_total{verb="LIST",group="",resource="configmaps",subresource="",code="200"} 1')
    expect(text).toContain('apiserver_request_total{verb="LIST",group="apps",resource="deployments",subresource="",code="200"} 1')
    expect(text).toContain('apiserver_request_total{verb="LIST",group="",resource="pods",subresource="",code="401"} 1')
    expect(text).toContain('apiserver_request_total{verb="LIST",group="",resource="",subresource="",code="404"} 1')
    expect(text).not.toContain("made-up")
    expect(text).toMatch(/apiserver_request_duration_seconds_bucket\{verb="GET",group="",resource="configmaps",subresource="",le="\+Inf"\} 2/)
    expect(text).toContain('apiserver_request_duration_seconds_count{verb="POST",group="",resource="namespaces",subresource=""} 1')
    // Nothing is in flight once every call has returned.
    expect(text).toContain('apiserver_current_inflight_requests{request_kind="readOnly"} 0')
    // The namespaces and configmaps caches exist: their sizes are exported.
    expect(text).toContain('apiserver_watch_cache_objects{group="",resource="configmaps"} 1')
  })

  it("answers X-Request-Id (the client's when sane, else a new one) and tags log lines with it", async () => {
    const { call, lines } = await start()
    const mine = await call("GET", "/api/v1/namespaces", { headers: { "x-request-id": "req-42" } })
    expect(mine.headers["x-request-id"]).toBe("req-42")
    const made = await call("GET", "/api/v1/namespaces")
    expect(made.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
    const odd = await call("GET", "/api/v1/namespaces", { headers: { "x-request-id": "two\nlines" } })
    expect(odd.headers["x-request-id"]).not.toContain("\n")
    expect(lines.find((l) => l.includes('"requestId":"req-42"'))).toContain("GET /api/v1/namespaces")
    expect(lines.find((l) => l.includes(made.headers["x-request-id"]!))).toBeDefined()
  })
})
