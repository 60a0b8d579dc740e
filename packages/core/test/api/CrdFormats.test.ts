// A CRD's `format:` keywords are checked (ajv-formats), as kube-apiserver checks them.
import { ApiServer, Authn, Store } from "@koder/fleet-core"
import { Effect, Exit, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const s of scopes.splice(0)) await Effect.runPromise(Scope.close(s, Exit.void))
})

const start = async () => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const server = await Effect.runPromise(
    Scope.extend(ApiServer.make({ store: Store.makeMemory(), authenticate: () => Effect.succeed(Authn.bootstrapAdmin), waitForRevision: "1 second" }), scope)
  )
  return async (method: string, path: string, body: unknown) => {
    const response = await Effect.runPromise(
      server.handle({ method, path, query: new URLSearchParams(), headers: { "content-type": "application/json" }, body: new TextEncoder().encode(JSON.stringify(body)), client: "test" })
    )
    if (response._tag === "Stream") throw new Error("unexpected stream")
    return { status: response.status, body: response.body as any }
  }
}

const crd = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "contacts.example.com" },
  spec: {
    group: "example.com",
    scope: "Namespaced",
    names: { plural: "contacts", singular: "contact", kind: "Contact" },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: { type: "object", properties: { since: { type: "string", format: "date-time" }, mail: { type: "string", format: "email" } } }
            }
          }
        }
      }
    ]
  }
}

const contact = (name: string, spec: Record<string, string>) => ({ apiVersion: "example.com/v1", kind: "Contact", metadata: { name }, spec })

describe("CRD format keywords", () => {
  it.each([
    ["a date-time", { since: "yesterday" }, "spec.since"],
    ["an email", { mail: "not-an-address" }, "spec.mail"]
  ])("rejects %s that does not match its format with 422 naming the field", async (_, spec, field) => {
    const call = await start()
    await call("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "default" } })
    expect((await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)).status).toBe(201)
    const r = await call("POST", "/apis/example.com/v1/namespaces/default/contacts", contact("bad", spec))
    expect(r.status).toBe(422)
    expect(r.body.details.causes.map((c: any) => c.field)).toEqual([field])
  })

  it("accepts values that match their formats", async () => {
    const call = await start()
    await call("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "default" } })
    expect((await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)).status).toBe(201)
    const r = await call("POST", "/apis/example.com/v1/namespaces/default/contacts", contact("good", { since: "2026-12-03T23:00:00Z", mail: "ops@example.com" }))
    expect(r.status).toBe(201)
    expect(r.body.spec).toEqual({ since: "2026-12-03T23:00:00Z", mail: "ops@example.com" })
  })
})
