// The typed Client over a MessagePort to a real API handler (PortTransport), as dev mode's node
// thread uses it: objects, Status errors, watches, and a watch the client stops ends on the
// serving side too. The two ends run in one thread here; the messages cross a real MessageChannel.
import { ApiError, ApiServer, Authn, Client, Status, Store, type InProcess } from "@koder/fleet-core"
import { Chunk, Effect, Exit, Fiber, Scope, Stream } from "effect"
import { MessageChannel } from "node:worker_threads"
import { afterEach, describe, expect, it } from "vitest"
import * as PortTransport from "../../src/internal/PortTransport.js"

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const s of scopes.splice(0)) await Effect.runPromise(Scope.close(s, Exit.void))
})

const ConfigMapRef: Client.ResourceRef = { apiVersion: "v1", kind: "ConfigMap" }
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failure = <A>(effect: Effect.Effect<A, ApiError.ApiError>) => run(Effect.flip(effect))

/** A client whose requests cross a MessageChannel to `handle`; `open` counts the serving side's unfinished requests. */
const across = async (handle: InProcess.Handle, token = "good") => {
  const scope = await run(Scope.make())
  scopes.push(scope)
  const channel = new MessageChannel()
  let open = 0
  const counted: InProcess.Handle = (request) =>
    Effect.map(handle(request), (response) =>
      response._tag !== "Stream" ? response : { ...response, body: Stream.ensuring(Stream.onStart(response.body, Effect.sync(() => open++)), Effect.sync(() => open--)) }
    )
  await run(PortTransport.serve(channel.port1, counted, "system:node:test").pipe(Scope.extend(scope)))
  await run(Scope.addFinalizer(scope, Effect.sync(() => channel.port2.close())))
  return { client: Client.make({ server: "http://fleet.test", token, transport: PortTransport.transport(channel.port2) }), open: () => open }
}

const apiServer = async () => {
  const scope = await run(Scope.make())
  scopes.push(scope)
  return run(
    ApiServer.make({
      store: Store.makeMemory(),
      authenticate: (headers) =>
        headers["authorization"] === "Bearer good" ? Effect.succeed(Authn.bootstrapAdmin) : Effect.fail(ApiError.of(Status.unauthorized("bad token")))
    }).pipe(Scope.extend(scope))
  )
}

const until = async (check: () => boolean, what: string) => {
  const deadline = Date.now() + 5_000
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe("Client over PortTransport", () => {
  it("creates, reads and patches objects; errors arrive as ApiErrors with their Status", async () => {
    const server = await apiServer()
    const { client } = await across(server.handle)
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "a" } }))
    const created = await run(client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "a" }, data: { k: "v" } }))
    expect(created["data"]).toEqual({ k: "v" })
    const patched = await run(client.patch(ConfigMapRef, "a", "c", "merge", { data: { k2: "v2" } }))
    expect(patched["data"]).toEqual({ k: "v", k2: "v2" })
    const missing = await failure(client.get(ConfigMapRef, "a", "nope"))
    expect([missing.status.code, missing.status.reason]).toEqual([404, "NotFound"])
    const denied = await failure((await across(server.handle, "bad")).client.get(ConfigMapRef, "a", "c"))
    expect(denied.status.code).toBe(401)
  })

  it("streams a watch's events, and a watch the client stops ends on the serving side", async () => {
    const server = await apiServer()
    const { client, open } = await across(server.handle)
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "w" } }))
    const from = await run(client.list(ConfigMapRef, { namespace: "w" }))
    const rv = String((from["metadata"] as Record<string, unknown>)["resourceVersion"])
    const two = Effect.runFork(Stream.runCollect(Stream.take(client.watchOnce(ConfigMapRef, { namespace: "w", resourceVersion: rv }), 2)))
    const forever = Effect.runFork(Stream.runDrain(client.watchOnce(ConfigMapRef, { namespace: "w", resourceVersion: rv })))
    await until(() => open() === 2, "both watches to be served")
    await run(client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "one", namespace: "w" } }))
    await run(client.patch(ConfigMapRef, "w", "one", "merge", { data: { x: "1" } }))
    const events = Chunk.toReadonlyArray(await run(Fiber.join(two)))
    expect(events.map((e) => `${e.type} ${String((e.object["metadata"] as Record<string, unknown>)["name"])}`)).toEqual(["ADDED one", "MODIFIED one"])
    // The first watch took its two events and stopped; the other is stopped here.
    await until(() => open() === 1, "the finished watch to end where it is served")
    await run(Fiber.interrupt(forever))
    await until(() => open() === 0, "the interrupted watch to end where it is served")
  })

  it("answers 500 when the handler dies, and ends a watch whose stream dies", async () => {
    const dies: InProcess.Handle = (request) =>
      request.query.get("watch") === "true"
        ? Effect.succeed({ _tag: "Stream", status: 200, headers: {}, body: Stream.concat(Stream.make(Buffer.from(`${JSON.stringify({ type: "ADDED", object: { kind: "ConfigMap", metadata: { name: "a" } } })}\n`)), Stream.die(new Error("boom"))) })
        : Effect.die(new Error("boom"))
    const { client, open } = await across(dies)
    const failed = await failure(client.get(ConfigMapRef, "a", "c"))
    expect(failed.status.code).toBe(500)
    const seen: Array<string> = []
    await run(Stream.runForEach(client.watchOnce(ConfigMapRef, { namespace: "a" }), (e) => Effect.sync(() => void seen.push(e.type))))
    expect(seen).toEqual(["ADDED"])
    await until(() => open() === 0, "the dead watch to end where it is served")
  })

  it("ends a watch with the ERROR event's Status, after the events before it", async () => {
    const lines = [
      { type: "ADDED", object: { kind: "ConfigMap", metadata: { name: "a", resourceVersion: "5" } } },
      { type: "ERROR", object: { kind: "Status", apiVersion: "v1", status: "Failure", code: 410, reason: "Expired", message: "too old resource version" } }
    ]
    const bytes = Buffer.from(lines.map((l) => JSON.stringify(l)).join("\n") + "\n")
    // Chunks that are views of a larger buffer: each must cross as exactly its own bytes.
    const pooled = Buffer.concat([Buffer.from("garbage-before"), bytes, Buffer.from("garbage-after")])
    const at = "garbage-before".length
    const handle: InProcess.Handle = () =>
      Effect.succeed({ _tag: "Stream", status: 200, headers: { "content-type": "application/json" }, body: Stream.make(pooled.subarray(at, at + 30), pooled.subarray(at + 30, at + bytes.length)) })
    const { client } = await across(handle)
    const seen: Array<string> = []
    const error = await failure(Stream.runForEach(client.watchOnce(ConfigMapRef, { namespace: "w" }), (e) => Effect.sync(() => void seen.push(e.type))))
    expect(seen).toEqual(["ADDED"])
    expect([error.status.code, error.status.message]).toEqual([410, "too old resource version"])
  })
})
