// The join flow: a join token (stored hashed) authenticates once, as a bootstrapper; a NodeJoin
// exchanges it for a node token bound to `system:node:<name>`; reuse is refused; deleting the
// node credential revokes the node.
import { ApiServer, Authn, NodeCredentials, Registry, Store } from "@koder/fleet-core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"

const admin = "admin-token"

const call = (server: ApiServer.ApiServer, method: string, path: string, token: string | undefined, body?: unknown) =>
  Effect.runPromise(
    server.handle({
      method,
      path,
      query: new URLSearchParams(),
      headers: { "content-type": "application/json", ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
      body: body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body)),
      client: "test"
    })
  ).then((r) => ({ status: r.status, body: (r._tag === "Json" ? r.body : undefined) as any }))

const withServer = <A>(f: (server: ApiServer.ApiServer, store: Store.StoreService) => Promise<A>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const store = Store.makeMemory()
        const registry = Registry.make()
        for (const r of NodeCredentials.resources(store)) registry.put(r)
        const whoami: Authn.Authenticator = () => Effect.succeedNone
        const server = yield* ApiServer.make({
          store,
          registry,
          authenticate: Authn.chain([
            Authn.staticToken(yield* Authn.hashToken(admin), Authn.bootstrapAdmin),
            NodeCredentials.nodeAuthenticator(store),
            NodeCredentials.joinTokenAuthenticator(store),
            whoami
          ])
        })
        return yield* Effect.promise(() => f(server, store))
      })
    )
  )

const joins = "/apis/fleet.koder.dev/v1/nodejoins"
const nodeJoin = (nodeName: unknown) => ({ apiVersion: "fleet.koder.dev/v1", kind: "NodeJoin", spec: { nodeName } })

describe("node credentials", () => {
  it("exchanges a join token once for a node token bound to the node's name", () =>
    withServer(async (server, store) => {
      const join = await Effect.runPromise(NodeCredentials.createJoinToken(store, 600))
      expect(join.token).toMatch(/^[a-z0-9]{6}\.[a-z0-9]{32}$/)
      // Only the hash is stored.
      const stored = (await Effect.runPromise(store.list("/registry/fleet.koder.dev/jointokens/"))).items
      expect(stored).toHaveLength(1)
      expect(stored[0]!.value).not.toContain(join.token.split(".")[1])

      const invalid = await call(server, "POST", joins, join.token, nodeJoin("Not_A_Name"))
      expect(invalid.status).toBe(422)
      const answered = await call(server, "POST", joins, join.token, nodeJoin("worker-1"))
      expect(answered.status).toBe(201)
      expect(answered.body.status).toMatchObject({ username: "system:node:worker-1", groups: ["system:nodes", "system:authenticated"] })
      const nodeToken = answered.body.status.token as string

      // The node token is the node; the join token is spent (401 on any use).
      const user = await Effect.runPromise(NodeCredentials.nodeAuthenticator(store)({ authorization: `Bearer ${nodeToken}` }))
      expect(user._tag === "Some" && user.value.name).toBe("system:node:worker-1")
      expect((await call(server, "GET", "/api/v1/nodes", nodeToken)).status).toBe(200)
      expect((await call(server, "POST", joins, join.token, nodeJoin("worker-2"))).status).toBe(401)
      expect((await call(server, "GET", "/api/v1/nodes", join.token)).status).toBe(401)

      // Revocation: delete the credential.
      const listed = await call(server, "GET", "/apis/fleet.koder.dev/v1/nodecredentials", admin)
      expect(listed.body.items.map((i: any) => i.metadata.name)).toEqual(["worker-1"])
      expect(JSON.stringify(listed.body)).not.toContain("tokenHash")
      expect((await call(server, "DELETE", "/apis/fleet.koder.dev/v1/nodecredentials/worker-1", admin)).status).toBe(200)
      expect((await call(server, "GET", "/api/v1/nodes", nodeToken)).status).toBe(401)
    }))

  it("refuses a join for a name in use (a live credential or an existing Node) with 409 naming the node, until its credential is revoked", () =>
    withServer(async (server, store) => {
      const fresh = async () => (await Effect.runPromise(NodeCredentials.createJoinToken(store, 600))).token
      const first = await call(server, "POST", joins, await fresh(), nodeJoin("worker-1"))
      expect(first.status).toBe(201)
      const oldToken = first.body.status.token as string

      const spare = await fresh()
      const again = await call(server, "POST", joins, spare, nodeJoin("worker-1"))
      expect(again.status).toBe(409)
      expect(again.body.message).toContain('node "worker-1" already has a live node credential')
      expect(again.body.message).toContain("kubectl delete nodecredential worker-1")
      // A Node that exists without ever having joined (an in-process node, or one an admin made).
      expect((await call(server, "POST", "/api/v1/nodes", admin, { apiVersion: "v1", kind: "Node", metadata: { name: "vm" } })).status).toBe(201)
      const vm = await call(server, "POST", joins, spare, nodeJoin("vm"))
      expect(vm.status).toBe(409)
      expect(vm.body.message).toContain('node "vm" already exists')

      // Revoked, the name is free again (the refused attempts did not spend the join token), and the old token is dead.
      expect((await call(server, "DELETE", "/apis/fleet.koder.dev/v1/nodecredentials/worker-1", admin)).status).toBe(200)
      expect((await call(server, "POST", "/api/v1/nodes", admin, { apiVersion: "v1", kind: "Node", metadata: { name: "worker-1" } })).status).toBe(201)
      const rejoined = await call(server, "POST", joins, spare, nodeJoin("worker-1"))
      expect(rejoined.status).toBe(201)
      expect((await call(server, "GET", "/api/v1/nodes", oldToken)).status).toBe(401)
      expect((await call(server, "GET", "/api/v1/nodes", rejoined.body.status.token)).status).toBe(200)
      // The revocation was consumed by that join: the next one is refused again.
      expect((await call(server, "POST", joins, await fresh(), nodeJoin("worker-1"))).status).toBe(409)
      // A Node that never joined is freed by deleting it.
      expect((await call(server, "DELETE", "/api/v1/nodes/vm", admin)).status).toBe(200)
      expect((await call(server, "POST", joins, await fresh(), nodeJoin("vm"))).status).toBe(201)
    }))

  it("lets only one of many concurrent joins with the same token succeed", () =>
    withServer(async (server, store) => {
      const join = await Effect.runPromise(NodeCredentials.createJoinToken(store, 600))
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => call(server, "POST", joins, join.token, nodeJoin(`n${i}`))))
      expect(results.filter((r) => r.status === 201)).toHaveLength(1)
      expect(results.filter((r) => r.status === 401)).toHaveLength(9)
    }))

  it("refuses expired, wrong-secret and non-join bearers", () =>
    withServer(async (server, store) => {
      const expired = await Effect.runPromise(NodeCredentials.createJoinToken(store, -1))
      expect((await call(server, "POST", joins, expired.token, nodeJoin("a"))).status).toBe(401)
      const live = await Effect.runPromise(NodeCredentials.createJoinToken(store, 600))
      const wrong = `${live.id}.${"a".repeat(32)}`
      expect((await call(server, "POST", joins, wrong, nodeJoin("a"))).status).toBe(401)
      // The admin has no join token to spend.
      expect((await call(server, "POST", joins, admin, nodeJoin("a"))).status).toBe(403)
      expect((await call(server, "POST", joins, "fleet-node_a_" + "b".repeat(40), nodeJoin("a"))).status).toBe(401)
    }))

  it("mints, lists and revokes join tokens through the API", () =>
    withServer(async (server) => {
      const minted = await call(server, "POST", "/apis/fleet.koder.dev/v1/jointokens", admin, { apiVersion: "fleet.koder.dev/v1", kind: "JoinToken", spec: { ttlSeconds: 900 } })
      expect(minted.status).toBe(201)
      const token = minted.body.status.token as string
      expect(minted.body.metadata.name).toBe(token.split(".")[0])
      const list = await call(server, "GET", "/apis/fleet.koder.dev/v1/jointokens", admin)
      expect(list.body.items).toHaveLength(1)
      expect(JSON.stringify(list.body)).not.toContain("tokenHash")
      expect((await call(server, "DELETE", `/apis/fleet.koder.dev/v1/jointokens/${minted.body.metadata.name}`, admin)).status).toBe(200)
      expect((await call(server, "POST", joins, token, nodeJoin("a"))).status).toBe(401)
    }))
})
