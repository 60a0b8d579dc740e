// The pipeline's ports as the API server calls them: authorization (403 with kube-apiserver's
// message), admission (mutation, refusal, store operations committed atomically with the write)
// and the audit record of each mutating request.
import type { Admission} from "@koder/fleet-core";
import { ApiError, ApiServer, Authn, type Authz, Status, Store } from "@koder/fleet-core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"

const call = (server: ApiServer.ApiServer, method: string, path: string, body?: unknown, user = "bob") => {
  const [p, q] = path.split("?")
  return Effect.runPromise(
    server.handle({
      method,
      path: p!,
      query: new URLSearchParams(q ?? ""),
      headers: { "content-type": "application/json", authorization: `Bearer ${user}` },
      body: body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body)),
      client: user
    })
  ).then((r) => (r._tag === "Json" ? { status: r.status, body: r.body as any } : { status: r.status, body: undefined }))
}

const users = (headers: Readonly<Record<string, string | undefined>>) =>
  Effect.succeed({ name: Authn.bearer(headers) ?? "anonymous", uid: "u", groups: ["system:authenticated"] })

const ns = { apiVersion: "v1", kind: "Namespace", metadata: { name: "default" } }
const cm = (name: string) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { a: "b" } })

describe("API pipeline ports", () => {
  it("asks the authorizer with Kubernetes request attributes and answers 403 when it says no", async () => {
    const seen: Array<Authz.Attributes> = []
    const authorize: Authz.Authorizer = (a) => {
      seen.push(a)
      return Effect.succeed({ allowed: a.user.name === "admin", reason: "" })
    }
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* ApiServer.make({ store: Store.makeMemory(), authenticate: users, authorize })
          expect((yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces", ns, "admin"))).status).toBe(201)
          const denied = yield* Effect.promise(() => call(server, "GET", "/api/v1/namespaces/default/pods/web"))
          expect(denied.status).toBe(403)
          expect(denied.body.message).toBe('pods "web" is forbidden: User "bob" cannot get resource "pods" in API group "" in the namespace "default"')
          const list = yield* Effect.promise(() => call(server, "GET", "/apis/apps/v1/deployments?watch=true"))
          expect(list.body.message).toBe('deployments.apps is forbidden: User "bob" cannot watch resource "deployments" in API group "apps" at the cluster scope')
          const path = yield* Effect.promise(() => call(server, "GET", "/apis"))
          expect(path.body.message).toBe('forbidden: User "bob" cannot get path "/apis"')
          expect(seen.map((a) => [a.verb, a.resource, a.namespace, a.name])).toEqual([
            ["create", "namespaces", "", ""],
            ["get", "pods", "default", "web"],
            ["watch", "deployments", "", ""],
            ["get", "", "", ""]
          ])
        })
      )
    )
  })

  it("runs mutating then validating admission, and commits plugin operations with the write", async () => {
    const store = Store.makeMemory()
    const labeller: Admission.Plugin = {
      name: "Labeller",
      mutate: (r) => Effect.succeed({ ...r.object, metadata: { ...(r.object["metadata"] as object), labels: { admitted: "yes" } } })
    }
    const refuser: Admission.Plugin = {
      name: "Refuser",
      validate: (r) => (r.name === "forbidden" ? Effect.fail(ApiError.of(Status.forbidden("configmaps", r.name, "refused by policy"))) : Effect.succeed([]))
    }
    // Counts creates in the store, atomically with each create.
    const counter: Admission.Plugin = {
      name: "Counter",
      validate: (r) =>
        r.operation !== "CREATE"
          ? Effect.succeed([])
          : Effect.gen(function* () {
              const kv = yield* Effect.either(store.get("/counter"))
              return kv._tag === "Right"
                ? [{ op: "update" as const, key: "/counter", value: String(Number(kv.right.value) + 1), expectedRevision: kv.right.modRevision }]
                : [{ op: "create" as const, key: "/counter", value: "1" }]
            }).pipe(Effect.orDie)
    }
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* ApiServer.make({ store, authenticate: users, admission: [labeller, refuser, counter] })
          yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces", ns))
          const created = yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces/default/configmaps", cm("ok")))
          expect(created.body.metadata.labels).toMatchObject({ admitted: "yes" })
          const refused = yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces/default/configmaps", cm("forbidden")))
          expect(refused.status).toBe(403)
          expect((yield* Effect.promise(() => call(server, "GET", "/api/v1/namespaces/default/configmaps/forbidden"))).status).toBe(404)
          // Concurrent creates each retry admission until their counter update lands: none is lost.
          yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => `c${i}`), (n) => Effect.promise(() => call(server, "POST", "/api/v1/namespaces/default/configmaps", cm(n))), { concurrency: "unbounded" })
          expect((yield* store.get("/counter")).value).toBe(String(1 + 1 + 20))
        })
      )
    )
  })

  it("records one audit line per mutating request, without bodies", async () => {
    const records: Array<ApiServer.AuditRecord> = []
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* ApiServer.make({ store: Store.makeMemory(), authenticate: users, audit: (r) => records.push(r) })
          yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces", ns))
          yield* Effect.promise(() => call(server, "GET", "/api/v1/namespaces/default"))
          yield* Effect.promise(() => call(server, "POST", "/api/v1/namespaces/default/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "s" }, stringData: { password: "hunter2" } }))
          yield* Effect.promise(() => call(server, "DELETE", "/api/v1/namespaces/default/secrets/s"))
        })
      )
    )
    expect(records.map((r) => [r.verb, r.resource, r.namespace, r.name, r.code, r.user])).toEqual([
      ["create", "namespaces", "", "", 201, "bob"],
      ["create", "secrets", "default", "", 201, "bob"],
      ["delete", "secrets", "default", "s", 200, "bob"]
    ])
    expect(JSON.stringify(records)).not.toContain("hunter2")
  })
})
