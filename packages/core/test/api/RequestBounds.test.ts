// No request content can poison the store or take the API server down (issue 29): hostile
// numbers, query parameters, YAML and sizes get a 4xx Status naming the cause, through the real
// request handler and a real (memory) store.
import { ApiServer, Authn, Store } from "@koder/fleet-core"
import { Effect, Exit, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import * as Query from "../../src/api/Query.js"

type Response = { status: number; body: any }

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const s of scopes.splice(0)) await Effect.runPromise(Scope.close(s, Exit.void))
})

const start = async () => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const server = await Effect.runPromise(
    Scope.extend(
      ApiServer.make({ store: Store.makeMemory(), authenticate: () => Effect.succeed(Authn.bootstrapAdmin), region: "r", waitForRevision: "1 second" }),
      scope
    )
  )
  const call = async (method: string, path: string, body?: unknown, contentType = "application/json"): Promise<Response> => {
    const [p, q] = path.split("?")
    const bytes = body === undefined ? undefined : new TextEncoder().encode(typeof body === "string" ? body : JSON.stringify(body))
    const response = await Effect.runPromise(
      server.handle({ method, path: p!, query: new URLSearchParams(q ?? ""), headers: { "content-type": contentType }, body: bytes, client: "test" })
    )
    if (response._tag === "Stream") throw new Error("unexpected stream")
    return { status: response.status, body: response.body }
  }
  expect((await call("POST", "/api/v1/namespaces", { metadata: { name: "a" } })).status).toBe(201)
  return call
}

const deployment = {
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "d" },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: "d" } },
    template: { metadata: { labels: { app: "d" } }, spec: { containers: [{ name: "c", image: "nginx:1.27" }] } }
  }
}

describe("/scale takes only an int32 replica count", () => {
  it.each<[string, string, string]>([
    // [case, body as sent (a JSON text: 1e300 must reach the server as written), message]
    ["2^31", '{"spec":{"replicas":2147483648}}', "spec.replicas: Invalid value: 2147483648: must be between -2147483648 and 2147483647, inclusive"],
    ["1e300", '{"spec":{"replicas":1e300}}', "spec.replicas: Invalid value: 1e+300: must be between -2147483648 and 2147483647, inclusive"],
    ["a fraction", '{"spec":{"replicas":1.5}}', "spec.replicas: Invalid value: 1.5: must be an integer"],
    ["a string", '{"spec":{"replicas":"3"}}', 'spec.replicas: Invalid value: "3": must be an integer'],
    ["negative", '{"spec":{"replicas":-1}}', "spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
  ])("%s is 422 through PUT and PATCH, and the Deployment still decodes and updates", async (_name, body, message) => {
    const call = await start()
    expect((await call("POST", "/apis/apps/v1/namespaces/a/deployments", deployment)).status).toBe(201)
    for (const [method, contentType] of [
      ["PUT", "application/json"],
      ["PATCH", "application/merge-patch+json"]
    ] as const) {
      const r = await call(method, "/apis/apps/v1/namespaces/a/deployments/d/scale", body, contentType)
      expect(r.status).toBe(422)
      expect(r.body).toMatchObject({ kind: "Status", reason: "Invalid", message: `Scale.autoscaling "d" is invalid: ${message}` })
    }
    const got = await call("GET", "/apis/apps/v1/namespaces/a/deployments/d")
    expect(got.body.spec.replicas).toBe(1)
    // The object is still one the API accepts back unchanged, and a later update works.
    expect((await call("PUT", "/apis/apps/v1/namespaces/a/deployments/d", got.body)).status).toBe(200)
    const scaled = await call("PUT", "/apis/apps/v1/namespaces/a/deployments/d/scale", { spec: { replicas: 2147483647 } })
    expect(scaled.status).toBe(200)
    expect(scaled.body.spec.replicas).toBe(2147483647)
  })

  it.each<[string, unknown, string]>([
    ["replicas 2^31 on create", { ...deployment, spec: { ...deployment.spec, replicas: 2147483648 } }, "spec.replicas"],
    ["a container port past 65535", { ...deployment, spec: { ...deployment.spec, template: { ...deployment.spec.template, spec: { containers: [{ name: "c", image: "x", ports: [{ containerPort: 70000 }] }] } } } }, "spec.template.spec.containers[0].ports[0].containerPort"],
    ["terminationGracePeriodSeconds 1e300", { ...deployment, spec: { ...deployment.spec, template: { ...deployment.spec.template, spec: { containers: [{ name: "c", image: "x" }], terminationGracePeriodSeconds: 1e300 } } } }, "spec.template.spec.terminationGracePeriodSeconds"]
  ])("%s is 422 naming the field", async (_name, body, field) => {
    const call = await start()
    const r = await call("POST", "/apis/apps/v1/namespaces/a/deployments", body)
    expect(r.status).toBe(422)
    expect(r.body.message).toContain(`${field}: Invalid value`)
  })
})

describe("list and delete parameters", () => {
  it.each<[string, number]>([
    ["limit=99999999999999999999", 200],
    ["limit=9223372036854775808", 200],
    ["limit=0", 200],
    ["limit=-1", 400],
    ["limit=abc", 400],
    ["limit=1e3", 400],
    ["limit=1.5", 400],
    ["resourceVersion=99999999999999999999", 400],
    ["resourceVersion=9007199254740992", 400],
    ["resourceVersion=-1", 400],
    ["timeoutSeconds=99999999999999999999", 400],
    ["resourceVersion=1&resourceVersionMatch=Exact&limit=99999999999999999999", 200],
    ["continue=not-a-token&limit=1", 400]
  ])("GET configmaps?%s is %i", async (query, code) => {
    const call = await start()
    const r = await call("GET", `/api/v1/namespaces/a/configmaps?${query}`)
    expect(r.status).toBe(code)
    if (code === 400) expect(r.body).toMatchObject({ kind: "Status", reason: "BadRequest" })
  })

  it(`a huge limit is served as pages of ${Query.maxLimit} with a continue token`, async () => {
    const call = await start()
    // A small page size shows the clamp without creating ten thousand objects: the clamp is
    // checked through the parsed options, and the pages through a real list.
    expect(Query.list(new URLSearchParams("limit=99999999999999999999"), false)).toMatchObject({ right: { limit: Query.maxLimit } })
    for (const name of ["x", "y", "z"]) expect((await call("POST", "/api/v1/namespaces/a/configmaps", { metadata: { name } })).status).toBe(201)
    const first = await call("GET", "/api/v1/namespaces/a/configmaps?limit=2")
    expect(first.body.items).toHaveLength(2)
    const rest = await call("GET", `/api/v1/namespaces/a/configmaps?limit=99999999999999999999&continue=${first.body.metadata.continue}`)
    expect(rest.body.items.map((i: any) => i.metadata.name)).toEqual(["z"])
  })

  it.each<[string, string, string | undefined]>([
    ["a body gracePeriodSeconds of 1e300", '{"gracePeriodSeconds":1e300}', undefined],
    ["a body gracePeriodSeconds of 2^63", '{"gracePeriodSeconds":9223372036854775808}', undefined],
    ["a query gracePeriodSeconds of 2^63", "", "gracePeriodSeconds=9223372036854775808"]
  ])("%s is 400 and deletes nothing", async (_name, body, query) => {
    const call = await start()
    expect((await call("POST", "/api/v1/namespaces/a/configmaps", { metadata: { name: "c" } })).status).toBe(201)
    const r = await call("DELETE", `/api/v1/namespaces/a/configmaps/c${query === undefined ? "" : `?${query}`}`, body === "" ? undefined : body)
    expect(r.status).toBe(400)
    expect(r.body.message).toMatch(/^gracePeriodSeconds: /)
    expect((await call("GET", "/api/v1/namespaces/a/configmaps/c")).status).toBe(200)
  })
})

describe("request bodies", () => {
  // Nine aliases of nine aliases, six levels deep: 9^6 = 531,441 nodes from a 300-byte body.
  const bomb = [
    'a: &a ["x","x","x","x","x","x","x","x","x"]',
    ...["b", "c", "d", "e", "f"].map((name, i) => `${name}: &${name} [${Array(9).fill(`*${"abcdef"[i]}`).join(",")}]`),
    "metadata: {name: bomb}"
  ].join("\n")
  const nested = (depth: number): unknown => {
    let v: unknown = "x"
    for (let i = 0; i < depth; i++) v = [v]
    return v
  }

  it.each<[string, string, string, RegExp]>([
    ["a YAML alias bomb", bomb, "application/yaml", /^error converting YAML to JSON: Excessive alias count/],
    ["YAML nested 20,000 levels", `${"[".repeat(20_000)}${"]".repeat(20_000)}`, "application/yaml", /^the request body nests deeper than 500 levels$/],
    ["YAML of 150,000 tokens (a 300 KB flow list)", `metadata: {name: many}\ndata: [${"1,".repeat(150_000)}]`, "application/yaml", /^the YAML body has more than 100000 tokens$/],
    ["compact YAML sequences nested 20,000 levels", `metadata: {name: deep}\ndata:\n  ${"- ".repeat(20_000)}x`, "application/yaml", /^the request body nests deeper than 500 levels$/],
    ["JSON nested 100,000 levels", `${"[".repeat(100_000)}${"]".repeat(100_000)}`, "application/json", /^the request body nests deeper than 500 levels$/],
    ["JSON nested 501 levels in a field", JSON.stringify({ metadata: { name: "n" }, data: nested(500) }), "application/json", /^the request body nests deeper than 500 levels$/]
  ])("%s is 400", async (_name, body, contentType, message) => {
    const call = await start()
    const r = await call("POST", "/api/v1/namespaces/a/configmaps", body, contentType)
    expect(r.status).toBe(400)
    expect(r.body).toMatchObject({ kind: "Status", reason: "BadRequest" })
    expect(r.body.message).toMatch(message)
  })

  it("a YAML ConfigMap of 5,000 keys (about 20,000 tokens) is accepted", async () => {
    const call = await start()
    const data = Array.from({ length: 5000 }, (_, i) => `  key${i}: value ${i}`).join("\n")
    const r = await call("POST", "/api/v1/namespaces/a/configmaps", `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keys\ndata:\n${data}\n`, "application/yaml")
    expect(r.status).toBe(201)
    expect(Object.keys(r.body.data)).toHaveLength(5000)
  })

  it("a YAML body with a few aliases is still accepted", async () => {
    const call = await start()
    const r = await call("POST", "/api/v1/namespaces/a/configmaps", "metadata: {name: y, labels: &l {a: b}, annotations: *l}\n", "application/yaml")
    expect(r.status).toBe(201)
    expect(r.body.metadata.annotations).toEqual({ a: "b" })
  })
})

describe("invalid bodies get a bounded answer at a bounded cost", () => {
  it("a Pod with 500,000 wrongly typed args is 422 naming the first, at once", async () => {
    const call = await start()
    const started = performance.now()
    const body = `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x","args":[${"1,".repeat(500_000)}1]}]}}`
    const r = await call("POST", "/api/v1/namespaces/a/pods", body)
    expect(r.status).toBe(422)
    expect(r.body.message).toBe('Pod "p" is invalid: spec.containers[0].args[0]: Invalid value: 1: expected string')
    // Collecting every error took gigabytes and half a minute; the deadline is loose for a loaded machine.
    expect(performance.now() - started).toBeLessThan(20_000)
  })

  it("a Pod with 1,000 wrongly typed args lists the first 100 errors and counts the rest", async () => {
    const call = await start()
    const r = await call("POST", "/api/v1/namespaces/a/pods", `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x","args":[${"1,".repeat(999)}1]}]}}`)
    expect(r.status).toBe(422)
    expect(r.body.details.causes).toHaveLength(101)
    expect(r.body.details.causes[100]).toMatchObject({ message: "and 900 more errors" })
  })
})

describe("object size", () => {
  const mib = 1024 * 1024
  it.each<[string, number, string, unknown, string | undefined]>([
    ["a ConfigMap with exactly 1 MiB of data", 201, "configmaps", { metadata: { name: "c" }, data: { a: "x".repeat(mib / 2), b: "y".repeat(mib / 2) } }, undefined],
    ["a ConfigMap with 1.1 MiB of data", 422, "configmaps", { metadata: { name: "c" }, data: { a: "x".repeat(1.1 * mib) } }, 'ConfigMap "c" is invalid: data: Too long: must have at most 1048576 bytes'],
    ["a ConfigMap with 1 MiB of multi-byte text", 422, "configmaps", { metadata: { name: "c" }, data: { a: "é".repeat(mib / 2 + 1) } }, 'ConfigMap "c" is invalid: data: Too long: must have at most 1048576 bytes'],
    ["a ConfigMap with 0.6 MiB of data and 0.6 MiB of binaryData", 422, "configmaps", { metadata: { name: "c" }, data: { a: "x".repeat(0.6 * mib) }, binaryData: { b: btoa("y".repeat(0.6 * mib)) } }, 'ConfigMap "c" is invalid: data: Too long: must have at most 1048576 bytes'],
    ["a Secret with 1.1 MiB of data", 422, "secrets", { metadata: { name: "s" }, data: { a: btoa("x".repeat(1.1 * mib)) } }, 'Secret "s" is invalid: data: Too long: must have at most 1048576 bytes'],
    ["a Secret with 1.1 MiB of stringData", 422, "secrets", { metadata: { name: "s" }, stringData: { a: "x".repeat(1.1 * mib) } }, 'Secret "s" is invalid: data: Too long: must have at most 1048576 bytes'],
    ["a 2 MiB Pod", 413, "pods", { metadata: { name: "p" }, spec: { containers: [{ name: "c", image: "x", args: ["x".repeat(2 * mib)] }] } }, undefined]
  ])("%s: %i", async (_name, code, plural, body, message) => {
    const call = await start()
    const r = await call("POST", `/api/v1/namespaces/a/${plural}`, body)
    expect(r.status).toBe(code)
    if (message !== undefined) expect(r.body.message).toBe(message)
    if (code === 413) expect(r.body).toMatchObject({ kind: "Status", reason: "RequestEntityTooLarge" })
  })

  it("a ConfigMap grown past 1 MiB by update or patch is 422 and keeps its data", async () => {
    const call = await start()
    expect((await call("POST", "/api/v1/namespaces/a/configmaps", { metadata: { name: "c" }, data: { a: "x".repeat(0.9 * mib) } })).status).toBe(201)
    const patched = await call("PATCH", "/api/v1/namespaces/a/configmaps/c", { data: { b: "y".repeat(0.2 * mib) } }, "application/merge-patch+json")
    expect(patched.status).toBe(422)
    const put = await call("PUT", "/api/v1/namespaces/a/configmaps/c", { metadata: { name: "c" }, data: { a: "x".repeat(1.2 * mib) } })
    expect(put.status).toBe(422)
    const got = await call("GET", "/api/v1/namespaces/a/configmaps/c")
    expect(Object.keys(got.body.data)).toEqual(["a"])
  })

  it("the doubling JSON Patch of issue 29 is 422 and the object is unchanged", async () => {
    const call = await start()
    expect((await call("POST", "/api/v1/namespaces/a/configmaps", { metadata: { name: "c", annotations: { a: "x".repeat(100) } } })).status).toBe(201)
    const ops = Array.from({ length: 40 }, (_, i) => ({ op: "copy", from: "/metadata/annotations", path: `/metadata/annotations/k${i}` }))
    const r = await call("PATCH", "/api/v1/namespaces/a/configmaps/c", ops, "application/json-patch+json")
    expect(r.status).toBe(422)
    expect(r.body.details.causes[0].message).toMatch(/accumulated size increase of copy is \d+, exceeding the limit 3145728/)
    expect((await call("GET", "/api/v1/namespaces/a/configmaps/c")).body.metadata.annotations).toEqual({ a: "x".repeat(100) })
  })
})
