// The typed Client over an API handler in the same process, by both in-process routes: the
// WHATWG `fetch` (InProcess.fetch) and the direct transport (InProcess.transport). Both must
// answer alike: objects, Status errors as ApiErrors, watches, and copies the caller may change.
import { ApiError, ApiServer, Authn, Client, InProcess, Status, Store } from "@koder/fleet-core"
import { Chunk, Effect, Exit, Fiber, Scope, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const s of scopes.splice(0)) await Effect.runPromise(Scope.close(s, Exit.void))
})

const ConfigMapRef: Client.ResourceRef = { apiVersion: "v1", kind: "ConfigMap" }

const clients = async () => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const server = await Effect.runPromise(
    ApiServer.make({
      store: Store.makeMemory(),
      authenticate: (headers) =>
        headers["authorization"] === "Bearer good" ? Effect.succeed(Authn.bootstrapAdmin) : Effect.fail(ApiError.of(Status.unauthorized("bad token")))
    }).pipe(Scope.extend(scope))
  )
  const make = (route: "fetch" | "transport", token = "good") =>
    Client.make({
      server: "http://fleet.test",
      token,
      ...(route === "fetch" ? { fetch: InProcess.fetch(server.handle) } : { transport: InProcess.transport(server.handle) })
    })
  return { make }
}

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failure = <A>(effect: Effect.Effect<A, ApiError.ApiError>) => run(Effect.flip(effect))

describe.each(["fetch", "transport"] as const)("Client in process over %s", (route) => {
  it("creates, reads and patches objects, each answer a copy of its own", async () => {
    const { make } = await clients()
    const client = make(route)
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "a" } }))
    const created = await run(client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "a" }, data: { k: "v" } }))
    expect(created["data"]).toEqual({ k: "v" })
    ;(created["data"] as Record<string, string>)["k"] = "changed by the caller"
    const read = await run(client.get(ConfigMapRef, "a", "c"))
    expect(read["data"]).toEqual({ k: "v" })
    const patched = await run(client.patch(ConfigMapRef, "a", "c", "merge", { data: { k2: "v2" } }))
    expect(patched["data"]).toEqual({ k: "v", k2: "v2" })
    const list = await run(client.list(ConfigMapRef, { namespace: "a", labelSelector: "missing" }))
    expect(list["items"]).toEqual([])
  })

  it("maps error Statuses to ApiErrors with their code and message", async () => {
    const { make } = await clients()
    const missing = await failure(make(route).get(ConfigMapRef, "a", "nope"))
    expect(missing.status.code).toBe(404)
    expect(missing.status.reason).toBe("NotFound")
    const denied = await failure(make(route, "bad").get(ConfigMapRef, "a", "c"))
    expect(denied.status.code).toBe(401)
    expect(denied.status.message).toContain("bad token")
  })

  it("watches: events from a resourceVersion on; a bad resourceVersion is an ApiError", async () => {
    const { make } = await clients()
    const client = make(route)
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "w" } }))
    const from = await run(client.list(ConfigMapRef, { namespace: "w" }))
    const rv = String((from["metadata"] as Record<string, unknown>)["resourceVersion"])
    const fiber = Effect.runFork(Stream.runCollect(Stream.take(client.watchOnce(ConfigMapRef, { namespace: "w", resourceVersion: rv }), 2)))
    await run(client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "one", namespace: "w" } }))
    await run(client.patch(ConfigMapRef, "w", "one", "merge", { data: { x: "1" } }))
    const events = Chunk.toReadonlyArray(await run(Fiber.join(fiber)))
    expect(events.map((e) => `${e.type} ${String((e.object["metadata"] as Record<string, unknown>)["name"])}`)).toEqual(["ADDED one", "MODIFIED one"])
    const stale = await failure(Stream.runDrain(client.watchOnce(ConfigMapRef, { namespace: "w", resourceVersion: "not-a-version" })))
    expect(stale.status.code).toBeGreaterThanOrEqual(400)
  })

  it("ends a watch with the ERROR event's Status, after the events before it", async () => {
    // A handler that streams what a watch cache sends a watcher that fell behind: events, then a 410.
    const lines = [
      { type: "ADDED", object: { kind: "ConfigMap", metadata: { name: "a", resourceVersion: "5" } } },
      { type: "MODIFIED", object: { kind: "ConfigMap", metadata: { name: "a", resourceVersion: "6" } } },
      { type: "ERROR", object: { kind: "Status", apiVersion: "v1", status: "Failure", code: 410, reason: "Expired", message: "too old resource version" } }
    ]
    const bytes = new TextEncoder().encode(lines.map((l) => JSON.stringify(l)).join("\n") + "\n")
    const handle: InProcess.Handle = () => Effect.succeed({ _tag: "Stream", status: 200, headers: { "content-type": "application/json" }, body: Stream.make(bytes.slice(0, 40), bytes.slice(40)) })
    const client = Client.make({ server: "http://fleet.test", ...(route === "fetch" ? { fetch: InProcess.fetch(handle) } : { transport: InProcess.transport(handle) }) })
    const seen: Array<string> = []
    const error = await failure(Stream.runForEach(client.watchOnce(ConfigMapRef, { namespace: "w" }), (e) => Effect.sync(() => void seen.push(e.type))))
    expect(seen).toEqual(["ADDED", "MODIFIED"])
    expect(error.status.code).toBe(410)
    expect(error.status.message).toBe("too old resource version")
  })
})
