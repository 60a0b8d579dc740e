// Every namespace gets a `default` ServiceAccount: in the namespace's own create transaction,
// and at server start for the system namespaces and any namespace that predates the plugin.
import { ApiServer, Keys, NamespaceServiceAccount, Store } from "@koder/fleet-core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"

const call = (server: ApiServer.ApiServer, method: string, path: string, body?: unknown) =>
  Effect.runPromise(
    server.handle({
      method,
      path,
      query: new URLSearchParams(),
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body)),
      client: "test"
    })
  ).then((r) => ({ status: r.status, body: (r._tag === "Json" ? r.body : undefined) as any }))

const anyone = () => Effect.succeed({ name: "admin", uid: "1", groups: ["system:masters"] })
const saKey = (ns: string) => Keys.object({ group: "", resource: "serviceaccounts", namespace: ns, name: "default" })

describe("default ServiceAccount", () => {
  it("is created with its namespace, in the same transaction, as the API would store it", async () => {
    const store = Store.makeMemory()
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* ApiServer.make({ store, authenticate: anyone, admission: [NamespaceServiceAccount.plugin(store)], region: "eu-1" })
          const ns = yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } }))
          expect(ns.status).toBe(201)
          const sa = yield* store.get(saKey("shop"))
          // Namespace and account commit together: consecutive revisions of one transaction.
          expect(sa.modRevision).toBe(Number(ns.body.metadata.resourceVersion) + 1)
          const served = yield* Effect.promise(() => call(server, "GET", "/api/v1/namespaces/shop/serviceaccounts/default"))
          expect(served.status).toBe(200)
          expect(served.body).toMatchObject({
            apiVersion: "v1",
            kind: "ServiceAccount",
            metadata: { name: "default", namespace: "shop", labels: { "fleet.koder.dev/region": "eu-1" } }
          })
          expect(served.body.metadata.uid).toMatch(/^[0-9a-f-]{36}$/)
          expect(served.body.metadata.creationTimestamp).toMatch(/Z$/)
          // A dry run creates nothing.
          yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces?dryRun=All", { apiVersion: "v1", kind: "Namespace", metadata: { name: "dry" } }))
          expect((yield* Effect.either(store.get(saKey("dry"))))._tag).toBe("Left")
          // A leftover account does not block creating its namespace again.
          yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces/shop/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "x" } }))
          yield* store.create(saKey("again"), "{}")
          const again = yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "again" } }))
          expect(again.status).toBe(201)
        })
      )
    )
  })

  it("ensure creates default and kube-system, backfills older namespaces, and is idempotent", async () => {
    const store = Store.makeMemory()
    await Effect.runPromise(
      Effect.gen(function* () {
        yield* store.create(Keys.object({ group: "", resource: "namespaces", name: "old" }), JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "old", uid: "u" } }))
        yield* NamespaceServiceAccount.ensure(store, "local")
        const first = yield* store.currentRevision
        yield* NamespaceServiceAccount.ensure(store, "local")
        expect(yield* store.currentRevision).toBe(first)
        for (const ns of ["default", "kube-system", "old"]) {
          const sa = JSON.parse((yield* store.get(saKey(ns))).value)
          expect(sa.metadata).toMatchObject({ name: "default", namespace: ns, labels: { "fleet.koder.dev/region": "local" } })
        }
        const ns = JSON.parse((yield* store.get(Keys.object({ group: "", resource: "namespaces", name: "kube-system" }))).value)
        expect(ns).toMatchObject({ apiVersion: "v1", kind: "Namespace", metadata: { name: "kube-system" } })
      })
    )
  })
})
