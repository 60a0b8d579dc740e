// A watch that asks for Tables (`kubectl get -w`), through the request handler: each event's
// object is a one-row Table, and only the first carries the column definitions, as
// kube-apiserver sends them (kubectl lays later rows out with the columns it kept).
import { ApiServer, Authn, Store } from "@koder/fleet-core"
import { Chunk, Effect, Exit, Scope, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const s of scopes.splice(0)) await Effect.runPromise(Scope.close(s, Exit.void))
})

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

const start = async () => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const server = await Effect.runPromise(
    Scope.extend(ApiServer.make({ store: Store.makeMemory(), authenticate: () => Effect.succeed(Authn.bootstrapAdmin), region: "local", waitForRevision: "1 second" }), scope)
  )
  const call = async (method: string, path: string, body: unknown, contentType = "application/json") => {
    const [p, q] = path.split("?")
    const r = await Effect.runPromise(
      server.handle({ method, path: p!, query: new URLSearchParams(q ?? ""), headers: { "content-type": contentType }, body: new TextEncoder().encode(JSON.stringify(body)), client: "test" })
    )
    if (r._tag === "Stream") throw new Error("unexpected stream")
    return r
  }
  /** The first `n` events of a watch with these headers, `during` run once it is open. */
  const watch = async (path: string, headers: Record<string, string>, n: number, during?: () => Promise<unknown>) => {
    const [p, q] = path.split("?")
    const r = await Effect.runPromise(server.handle({ method: "GET", path: p!, query: new URLSearchParams(q ?? ""), headers, body: undefined, client: "test" }))
    if (r._tag !== "Stream") throw new Error(`not a stream: ${r.status} ${JSON.stringify(r.body)}`)
    const decoder = new TextDecoder()
    const lines = Stream.mapConcat(r.body, (b) => decoder.decode(b).split("\n").filter((l) => l !== ""))
    const collecting = Effect.runPromise(Stream.runCollect(Stream.take(lines, n)).pipe(Effect.timeout("5 seconds")))
    await during?.()
    return Chunk.toReadonlyArray(await collecting).map((l) => JSON.parse(l) as { type: string; object: any })
  }
  await call("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "default" } })
  return { call, watch }
}

const deployment = (name: string, replicas: number) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name },
  spec: { replicas, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "web", image: "nginx:1.27" }] } } }
})

const path = "/apis/apps/v1/namespaces/default/deployments"

describe("watch with Accept as=Table", () => {
  it("sends each event's object as a one-row Table, the column definitions only with the first", async () => {
    const { call, watch } = await start()
    expect((await call("POST", path, deployment("web", 2))).status).toBe(201)
    const events = await watch(`${path}?watch=true&resourceVersion=0&fieldSelector=metadata.name%3Dweb`, { accept: tableAccept }, 3, async () => {
      expect((await call("PATCH", `${path}/web`, { spec: { replicas: 3 } }, "application/merge-patch+json")).status).toBe(200)
      expect((await call("DELETE", `${path}/web`, {})).status).toBe(200)
    })
    expect(events.map((e) => e.type)).toEqual(["ADDED", "MODIFIED", "DELETED"])
    const [added, modified, deleted] = events.map((e) => e.object)
    expect(added).toMatchObject({ kind: "Table", apiVersion: "meta.k8s.io/v1" })
    expect(added.columnDefinitions.map((c: { name: string }) => c.name)).toEqual(["Name", "Ready", "Up-to-date", "Available", "Age"])
    expect(added.rows).toHaveLength(1)
    expect(added.rows[0].cells.slice(0, 4)).toEqual(["web", "0/2", 0, 0])
    expect(added.rows[0].object).toMatchObject({ kind: "PartialObjectMetadata", metadata: { name: "web", namespace: "default" } })
    expect(added.metadata.resourceVersion).toBe(added.rows[0].object.metadata.resourceVersion)
    expect(modified.columnDefinitions).toEqual([])
    expect(modified.rows[0].cells.slice(0, 2)).toEqual(["web", "0/3"])
    expect(Number(modified.metadata.resourceVersion)).toBeGreaterThan(Number(added.metadata.resourceVersion))
    expect(deleted).toMatchObject({ kind: "Table", columnDefinitions: [], rows: [{ cells: ["web", "0/3", 0, 0, expect.any(String)] }] })
  })

  it("includes the whole object with includeObject=Object; a watch without as=Table is unchanged", async () => {
    const { call, watch } = await start()
    expect((await call("POST", path, deployment("api", 1))).status).toBe(201)
    const [asTable] = await watch(`${path}?watch=true&includeObject=Object`, { accept: tableAccept }, 1)
    expect(asTable!.object.rows[0].object).toMatchObject({ kind: "Deployment", spec: { replicas: 1 } })
    const [plain] = await watch(`${path}?watch=true`, { accept: "application/json" }, 1)
    expect(plain).toMatchObject({ type: "ADDED", object: { kind: "Deployment", metadata: { name: "api" } } })
  })
})
