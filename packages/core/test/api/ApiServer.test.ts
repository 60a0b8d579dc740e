// The API server through its request handler (no HTTP): Kubernetes REST semantics end to end
// against a real (memory) store.
import { ApiServer, Authn, Store } from "@koder/fleet-core"
import { Chunk, Effect, Exit, Scope, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"

type Response = { status: number; headers: Record<string, string>; body: any }

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const s of scopes.splice(0)) await Effect.runPromise(Scope.close(s, Exit.void))
})

const start = async () => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const store = Store.makeMemory()
  const server = await Effect.runPromise(
    Scope.extend(
      ApiServer.make({ store, authenticate: () => Effect.succeed(Authn.bootstrapAdmin), region: "eu-west", waitForRevision: "1 second" }),
      scope
    )
  )
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> => {
    const [p, q] = path.split("?")
    const bytes = body === undefined ? undefined : new TextEncoder().encode(typeof body === "string" ? body : JSON.stringify(body))
    const response = await Effect.runPromise(
      server.handle({ method, path: p!, query: new URLSearchParams(q ?? ""), headers: { "content-type": "application/json", ...headers }, body: bytes, client: "test" })
    )
    if (response._tag === "Stream") throw new Error("use watch() for streams")
    return { status: response.status, headers: response.headers as Record<string, string>, body: response.body }
  }
  /** The first `n` events of a watch. */
  const watch = async (path: string, n: number, during?: () => Promise<unknown>) => {
    const [p, q] = path.split("?")
    const response = await Effect.runPromise(server.handle({ method: "GET", path: p!, query: new URLSearchParams(q ?? ""), headers: {}, body: undefined, client: "test" }))
    if (response._tag !== "Stream") return { status: response.status, events: [] as Array<any>, error: response.body }
    const decoder = new TextDecoder()
    const lines = Stream.mapConcat(response.body, (b) => decoder.decode(b).split("\n").filter((l) => l !== ""))
    const collecting = Effect.runPromise(Stream.runCollect(Stream.take(lines, n)).pipe(Effect.timeout("5 seconds")))
    await during?.()
    return { status: response.status, events: Chunk.toReadonlyArray(await collecting).map((l) => JSON.parse(l)), error: undefined }
  }
  return { server, store, call, watch }
}

const ns = (name: string) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } })
const pod = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, labels },
  spec: { containers: [{ name: "main", image: "nginx:1.27", env: [{ name: "A", value: "1" }] }] }
})
const configMap = (name: string, data: Record<string, string> = { k: "v" }) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data })
const deployment = (name: string, replicas = 2) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "web", image: "nginx:1.27" }] } }
  }
})

describe("API server: create, read, defaults", () => {
  it("creates a pod with server-set metadata, defaults and the region label, and reads it back", async () => {
    const { call } = await start()
    expect((await call("POST", "/api/v1/namespaces", ns("team-a"))).status).toBe(201)
    const created = await call("POST", "/api/v1/namespaces/team-a/pods", pod("web"))
    expect(created.status).toBe(201)
    const m = created.body.metadata
    expect(m).toMatchObject({ name: "web", namespace: "team-a", generation: 1, labels: { "fleet.koder.dev/region": "eu-west" } })
    expect(m.uid).toMatch(/^[0-9a-f-]{36}$/)
    expect(m.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(Number(m.resourceVersion)).toBeGreaterThan(0)
    expect(created.body.spec).toMatchObject({ restartPolicy: "Always", terminationGracePeriodSeconds: 30, dnsPolicy: "ClusterFirst" })
    expect(created.body.spec.containers[0].imagePullPolicy).toBe("IfNotPresent")
    expect(created.body.status).toEqual({ phase: "Pending" })
    const got = await call("GET", "/api/v1/namespaces/team-a/pods/web")
    expect(got.status).toBe(200)
    expect(got.body).toEqual(created.body)
  })

  it("generates names from generateName", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const a = await call("POST", "/api/v1/namespaces/default/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { generateName: "cfg-" } })
    expect(a.status).toBe(201)
    expect(a.body.metadata.name).toMatch(/^cfg-[bcdfghjklmnpqrstvwxz2456789]{5}$/)
  })

  it("takes apiVersion and kind from the URL when the body has none", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", { metadata: { name: "default" } })
    const r = await call("POST", "/api/v1/namespaces/default/configmaps", { metadata: { name: "bare" }, data: { a: "1" } })
    expect(r.status).toBe(201)
    expect(r.body).toMatchObject({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "bare" } })
  })

  it("accepts YAML bodies", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  greeting: hello\n"
    const r = await call("POST", "/api/v1/namespaces/default/configmaps", yaml, { "content-type": "application/yaml" })
    expect(r.status).toBe(201)
    expect(r.body.data).toEqual({ greeting: "hello" })
  })
})

describe("API server: bad input gets the right Status and changes nothing", () => {
  const cases: Array<{ name: string; method: string; path: string; body?: unknown; headers?: Record<string, string>; code: number; reason: string; message?: RegExp }> = [
    { name: "malformed JSON", method: "POST", path: "/api/v1/namespaces/default/configmaps", body: "{not json", code: 400, reason: "BadRequest", message: /not valid JSON/ },
    { name: "malformed YAML", method: "POST", path: "/api/v1/namespaces/default/configmaps", body: "a: [1, 2\nb: }", headers: { "content-type": "application/yaml" }, code: 400, reason: "BadRequest" },
    { name: "a wrong content type", method: "POST", path: "/api/v1/namespaces/default/configmaps", body: "x", headers: { "content-type": "text/plain" }, code: 415, reason: "UnsupportedMediaType" },
    { name: "an unknown resource", method: "GET", path: "/api/v1/namespaces/default/widgets", code: 404, reason: "NotFound", message: /could not find the requested resource/ },
    { name: "an unknown group", method: "GET", path: "/apis/nope.example.com/v1/things", code: 404, reason: "NotFound" },
    { name: "a kind that does not match the URL", method: "POST", path: "/api/v1/namespaces/default/configmaps", body: { apiVersion: "v1", kind: "Secret", metadata: { name: "x" } }, code: 400, reason: "BadRequest" },
    { name: "a namespace mismatch", method: "POST", path: "/api/v1/namespaces/default/configmaps", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", namespace: "other" } }, code: 400, reason: "BadRequest", message: /does not match the namespace/ },
    { name: "an invalid pod", method: "POST", path: "/api/v1/namespaces/default/pods", body: { apiVersion: "v1", kind: "Pod", metadata: { name: "bad" }, spec: { containers: [{ name: "c" }] } }, code: 422, reason: "Invalid", message: /spec\.containers\[0\]\.image: Required value/ },
    { name: "an invalid name", method: "POST", path: "/api/v1/namespaces/default/configmaps", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "Not_Valid" } }, code: 422, reason: "Invalid", message: /metadata\.name/ },
    { name: "a missing name", method: "POST", path: "/api/v1/namespaces/default/configmaps", body: { apiVersion: "v1", kind: "ConfigMap", metadata: {} }, code: 422, reason: "Invalid", message: /name or generateName is required/ },
    { name: "a missing namespace", method: "POST", path: "/api/v1/namespaces/nowhere/configmaps", body: configMap("x"), code: 404, reason: "NotFound", message: /namespaces "nowhere" not found/ },
    { name: "strict field validation", method: "POST", path: "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", body: { ...configMap("x"), bogus: 1 }, code: 400, reason: "BadRequest", message: /unknown field "bogus"/ },
    { name: "a bad label selector", method: "GET", path: "/api/v1/namespaces/default/pods?labelSelector=a%20in%20(", code: 400, reason: "BadRequest" },
    { name: "an unsupported field selector", method: "GET", path: "/api/v1/namespaces/default/pods?fieldSelector=spec.foo%3Dx", code: 400, reason: "BadRequest", message: /field label not supported: spec\.foo/ },
    { name: "a bogus continue token", method: "GET", path: "/api/v1/namespaces/default/pods?limit=1&continue=garbage", code: 400, reason: "BadRequest", message: /continue key is not valid/ },
    { name: "a non-numeric resourceVersion", method: "GET", path: "/api/v1/namespaces/default/pods?resourceVersion=abc", code: 400, reason: "BadRequest" },
    { name: "a POST to an object", method: "POST", path: "/api/v1/namespaces/default/configmaps/x", body: configMap("x"), code: 405, reason: "MethodNotAllowed" }
  ]
  it.each(cases)("$name → $code $reason", async ({ method, path, body, headers, code, reason, message }) => {
    const { call, store } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const before = await Effect.runPromise(store.currentRevision)
    const r = await call(method, path, body, headers)
    expect(r.status).toBe(code)
    expect(r.body).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", code, reason })
    if (message) expect(r.body.message).toMatch(message)
    expect(await Effect.runPromise(store.currentRevision)).toBe(before)
  })

  it("names every invalid field in the Status causes", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const r = await call("POST", "/api/v1/namespaces/default/pods", { apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: { containers: [{ name: "a" }, { image: "x" }] } })
    expect(r.status).toBe(422)
    expect(r.body.details.causes.map((c: { field: string }) => c.field)).toEqual(expect.arrayContaining(["spec.containers[0].image", "spec.containers[1].name"]))
  })

  it("rejects an object over the size limit with 413", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    // (A ConfigMap's data is refused sooner, with 422, past 1 MiB: see RequestBounds.test.ts.)
    const big = { ...pod("big"), spec: { containers: [{ name: "main", image: "nginx:1.27", args: ["x".repeat(1.6 * 1024 * 1024)] }] } }
    const r = await call("POST", "/api/v1/namespaces/default/pods", big)
    expect(r.status).toBe(413)
    expect(r.body.reason).toBe("RequestEntityTooLarge")
  })

  it("warns about unknown fields by default and drops them", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const r = await call("POST", "/api/v1/namespaces/default/configmaps", { ...configMap("x"), bogus: 1 })
    expect(r.status).toBe(201)
    expect(r.headers["warning"]).toBe('299 - "unknown field \\"bogus\\""')
    expect(r.body.bogus).toBeUndefined()
  })
})

describe("API server: updates", () => {
  it("compare-and-swaps on resourceVersion: a stale one gets 409 Conflict", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const v1 = (await call("POST", "/api/v1/namespaces/default/configmaps", configMap("c"))).body
    const v2 = await call("PUT", "/api/v1/namespaces/default/configmaps/c", { ...v1, data: { k: "2" } })
    expect(v2.status).toBe(200)
    expect(Number(v2.body.metadata.resourceVersion)).toBeGreaterThan(Number(v1.metadata.resourceVersion))
    const stale = await call("PUT", "/api/v1/namespaces/default/configmaps/c", { ...v1, data: { k: "3" } })
    expect(stale.status).toBe(409)
    expect(stale.body).toMatchObject({ reason: "Conflict", message: 'Operation cannot be fulfilled on configmaps "c": the object has been modified; please apply your changes to the latest version and try again' })
    // Without a resourceVersion the update is unconditional.
    const { resourceVersion: _rv, ...metadata } = v1.metadata
    expect((await call("PUT", "/api/v1/namespaces/default/configmaps/c", { ...v1, metadata, data: { k: "4" } })).body.data).toEqual({ k: "4" })
  })

  it("keeps status out of main-resource updates, spec out of status updates, and bumps generation on spec changes only", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const d = (await call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web"))).body
    expect(d.metadata.generation).toBe(1)
    const withStatus = await call("PUT", "/apis/apps/v1/namespaces/default/deployments/web/status", { ...d, spec: { ...d.spec, replicas: 9 }, status: { replicas: 2, readyReplicas: 1 } })
    expect(withStatus.status).toBe(200)
    expect(withStatus.body.status).toEqual({ replicas: 2, readyReplicas: 1 })
    expect(withStatus.body.spec.replicas).toBe(2)
    expect(withStatus.body.metadata.generation).toBe(1)
    const labelled = await call("PUT", "/apis/apps/v1/namespaces/default/deployments/web", { ...withStatus.body, metadata: { ...withStatus.body.metadata, labels: { x: "y" } }, status: {} })
    expect(labelled.body.metadata.generation).toBe(1)
    expect(labelled.body.status).toEqual({ replicas: 2, readyReplicas: 1 })
    const scaled = await call("PUT", "/apis/apps/v1/namespaces/default/deployments/web", { ...labelled.body, spec: { ...labelled.body.spec, replicas: 5 } })
    expect(scaled.body.metadata.generation).toBe(2)
  })

  it("decodes only the status of a status write: its errors name status fields, a wrong name is refused, and a bad status leaves the object as it was", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const d = (await call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web"))).body
    const merge = { "content-type": "application/merge-patch+json" }
    const bad = await call("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/status", { status: { replicas: "two" } }, merge)
    expect(bad.status).toBe(422)
    expect(bad.body.reason).toBe("Invalid")
    expect(bad.body.message).toMatch(/^Deployment\.apps "web" is invalid: status\.replicas: /)
    expect((await call("GET", "/apis/apps/v1/namespaces/default/deployments/web")).body.metadata.resourceVersion).toBe(d.metadata.resourceVersion)
    const renamed = await call("PUT", "/apis/apps/v1/namespaces/default/deployments/web/status", { ...d, metadata: { ...d.metadata, name: "other" }, status: { replicas: 1 } })
    expect(renamed.status).toBe(400)
    const ok = await call("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/status", { status: { replicas: 2, readyReplicas: 1 } }, merge)
    expect(ok.status).toBe(200)
    expect(ok.body.status).toEqual({ replicas: 2, readyReplicas: 1 })
    expect(ok.body.spec).toEqual(d.spec)
    expect(ok.body.metadata.labels).toEqual(d.metadata.labels)
  })

  it("refuses changes to immutable fields with 422", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const d = (await call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web"))).body
    const r = await call("PUT", "/apis/apps/v1/namespaces/default/deployments/web", {
      ...d,
      spec: { ...d.spec, selector: { matchLabels: { app: "other" } }, template: { ...d.spec.template, metadata: { labels: { app: "other" } } } }
    })
    expect(r.status).toBe(422)
    expect(r.body.message).toMatch(/spec\.selector: Invalid value: .*field is immutable/)
    const relabel = await call("PUT", "/apis/apps/v1/namespaces/default/deployments/web", { ...d, metadata: { ...d.metadata, labels: { "fleet.koder.dev/region": "us-east" } } })
    expect(relabel.status).toBe(422)
    expect(relabel.body.message).toMatch(/fleet\.koder\.dev\/region/)
  })

  it("serves the scale subresource of a deployment", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    await call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", 3))
    const scale = await call("GET", "/apis/apps/v1/namespaces/default/deployments/web/scale")
    expect(scale.body).toMatchObject({ kind: "Scale", apiVersion: "autoscaling/v1", spec: { replicas: 3 }, status: { replicas: 0, selector: "app=web" } })
    const put = await call("PUT", "/apis/apps/v1/namespaces/default/deployments/web/scale", { ...scale.body, spec: { replicas: 7 } })
    expect(put.body.spec.replicas).toBe(7)
    const patched = await call("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale", { spec: { replicas: 1 } }, { "content-type": "application/merge-patch+json" })
    expect(patched.body.spec.replicas).toBe(1)
    expect((await call("GET", "/apis/apps/v1/namespaces/default/deployments/web")).body.spec.replicas).toBe(1)
  })

  it("applies JSON, merge and strategic merge patches", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    await call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web"))
    const base = "/apis/apps/v1/namespaces/default/deployments/web"
    const merge = await call("PATCH", base, { metadata: { labels: { tier: "front" } } }, { "content-type": "application/merge-patch+json" })
    expect(merge.body.metadata.labels.tier).toBe("front")
    const strategic = await call("PATCH", base, { spec: { template: { spec: { containers: [{ name: "sidecar", image: "envoy:1" }] } } } }, { "content-type": "application/strategic-merge-patch+json" })
    expect(strategic.status).toBe(200)
    expect(strategic.body.spec.template.spec.containers.map((c: { name: string }) => c.name).sort()).toEqual(["sidecar", "web"])
    const jsonPatch = await call("PATCH", base, [{ op: "replace", path: "/spec/replicas", value: 4 }], { "content-type": "application/json-patch+json" })
    expect(jsonPatch.body.spec.replicas).toBe(4)
    const failedTest = await call("PATCH", base, [{ op: "test", path: "/spec/replicas", value: 99 }], { "content-type": "application/json-patch+json" })
    expect(failedTest.status).toBe(422)
    const stale = await call("PATCH", base, { metadata: { resourceVersion: "1" }, spec: { replicas: 1 } }, { "content-type": "application/merge-patch+json" })
    expect(stale.status).toBe(409)
  })

  it("does not persist anything with dryRun=All", async () => {
    const { call, store } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const before = await Effect.runPromise(store.currentRevision)
    const r = await call("POST", "/api/v1/namespaces/default/configmaps?dryRun=All", configMap("dry"))
    expect(r.status).toBe(201)
    expect((await call("GET", "/api/v1/namespaces/default/configmaps/dry")).status).toBe(404)
    expect(await Effect.runPromise(store.currentRevision)).toBe(before)
  })
})

describe("API server: deletes", () => {
  it("answers a Success Status for a configmap and the object for a pod", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const cm = (await call("POST", "/api/v1/namespaces/default/configmaps", configMap("c"))).body
    const r = await call("DELETE", "/api/v1/namespaces/default/configmaps/c")
    expect(r.body).toMatchObject({ kind: "Status", status: "Success", details: { name: "c", kind: "configmaps", uid: cm.metadata.uid } })
    await call("POST", "/api/v1/namespaces/default/pods", pod("p"))
    const p = await call("DELETE", "/api/v1/namespaces/default/pods/p")
    expect(p.body).toMatchObject({ kind: "Pod", metadata: { name: "p" } })
    expect((await call("GET", "/api/v1/namespaces/default/pods/p")).status).toBe(404)
    expect((await call("DELETE", "/api/v1/namespaces/default/pods/p")).status).toBe(404)
  })

  it("waits for finalizers, honours preconditions, and records Foreground/Orphan as finalizers", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const cm = (await call("POST", "/api/v1/namespaces/default/configmaps", { ...configMap("c"), metadata: { name: "c", finalizers: ["example.com/hold"] } })).body
    const wrongUid = await call("DELETE", "/api/v1/namespaces/default/configmaps/c", { preconditions: { uid: "nope" } })
    expect(wrongUid.status).toBe(409)
    expect(wrongUid.body.message).toMatch(/Precondition failed: UID in precondition: nope/)
    const pending = await call("DELETE", "/api/v1/namespaces/default/configmaps/c", { preconditions: { uid: cm.metadata.uid } })
    expect(pending.status).toBe(200)
    expect(pending.body.metadata.deletionTimestamp).toBeDefined()
    const current = (await call("GET", "/api/v1/namespaces/default/configmaps/c")).body
    const released = await call("PUT", "/api/v1/namespaces/default/configmaps/c", { ...current, metadata: { ...current.metadata, finalizers: [] } })
    expect(released.status).toBe(200)
    // The answer carries the deletion's revision (found by the API fuzz test: it had none).
    expect(Number(released.body.metadata.resourceVersion)).toBeGreaterThan(Number(current.metadata.resourceVersion))
    expect((await call("GET", "/api/v1/namespaces/default/configmaps/c")).status).toBe(404)

    await call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web"))
    const fg = await call("DELETE", "/apis/apps/v1/namespaces/default/deployments/web?propagationPolicy=Foreground")
    expect(fg.body.metadata.finalizers).toEqual(["foregroundDeletion"])
  })

  it("marks a namespace Terminating and refuses new content in it", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("going"))
    const r = await call("DELETE", "/api/v1/namespaces/going")
    expect(r.status).toBe(200)
    expect(r.body.status.phase).toBe("Terminating")
    const refused = await call("POST", "/api/v1/namespaces/going/configmaps", configMap("x"))
    expect(refused.status).toBe(403)
    expect(refused.body.message).toMatch(/because it is being terminated/)
  })

  it("deletes a collection by label selector and returns what it deleted", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    for (const [n, l] of [["a", "x"], ["b", "x"], ["c", "y"]] as const) {
      await call("POST", "/api/v1/namespaces/default/configmaps", { ...configMap(n), metadata: { name: n, labels: { group: l } } })
    }
    const r = await call("DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=group%3Dx")
    expect(r.body.kind).toBe("ConfigMapList")
    expect(r.body.items.map((i: any) => i.metadata.name).sort()).toEqual(["a", "b"])
    expect((await call("GET", "/api/v1/namespaces/default/configmaps")).body.items.map((i: any) => i.metadata.name)).toEqual(["c"])
  })
})

describe("API server: lists and watches", () => {
  it("lists with label and field selectors, across namespaces, and in pages pinned to one revision", async () => {
    const { call } = await start()
    for (const n of ["a", "b"]) await call("POST", "/api/v1/namespaces", ns(n))
    for (let i = 0; i < 5; i++) await call("POST", "/api/v1/namespaces/a/pods", pod(`p${i}`, { parity: i % 2 === 0 ? "even" : "odd" }))
    await call("POST", "/api/v1/namespaces/b/pods", pod("other", { parity: "even" }))
    const even = await call("GET", "/api/v1/namespaces/a/pods?labelSelector=parity%3Deven")
    expect(even.body.kind).toBe("PodList")
    expect(even.body.items.map((p: any) => p.metadata.name)).toEqual(["p0", "p2", "p4"])
    const all = await call("GET", "/api/v1/pods?labelSelector=parity%20in%20(even)")
    expect(all.body.items.map((p: any) => `${p.metadata.namespace}/${p.metadata.name}`)).toEqual(["a/p0", "a/p2", "a/p4", "b/other"])
    const byName = await call("GET", "/api/v1/pods?fieldSelector=metadata.name%3Dother")
    expect(byName.body.items.map((p: any) => p.metadata.name)).toEqual(["other"])

    const page1 = await call("GET", "/api/v1/namespaces/a/pods?limit=2")
    expect(page1.body.items.map((p: any) => p.metadata.name)).toEqual(["p0", "p1"])
    expect(page1.body.metadata.remainingItemCount).toBe(3)
    await call("DELETE", "/api/v1/namespaces/a/pods/p2")
    const page2 = await call("GET", `/api/v1/namespaces/a/pods?limit=2&continue=${page1.body.metadata.continue}`)
    expect(page2.body.items.map((p: any) => p.metadata.name)).toEqual(["p2", "p3"])
    expect(page2.body.metadata.resourceVersion).toBe(page1.body.metadata.resourceVersion)
  })

  it("answers a list without resourceVersion as of the store's newest revision, also after writes to other resources", async () => {
    const { call, store } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    await call("POST", "/api/v1/namespaces/default/pods", pod("p1"))
    expect((await call("GET", "/api/v1/namespaces/default/pods")).body.items.map((p: any) => p.metadata.name)).toEqual(["p1"])
    // A write elsewhere moves the store past anything the pods' cache has seen.
    await call("POST", "/api/v1/namespaces/default/configmaps", configMap("elsewhere"))
    await call("POST", "/api/v1/namespaces/default/pods", pod("p2"))
    await call("POST", "/api/v1/namespaces/default/configmaps", configMap("later"))
    const list = await call("GET", "/api/v1/namespaces/default/pods")
    expect(list.body.items.map((p: any) => p.metadata.name)).toEqual(["p1", "p2"])
    expect(list.body.metadata.resourceVersion).toBe(String(await Effect.runPromise(store.currentRevision)))
  })

  it("watches from a resourceVersion: ADDED, MODIFIED, DELETED as newline-delimited JSON", async () => {
    const { call, watch } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const c = (await call("POST", "/api/v1/namespaces/default/configmaps", configMap("w"))).body
    const { status, events } = await watch(`/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${c.metadata.resourceVersion}`, 3, async () => {
      const updated = await call("PUT", "/api/v1/namespaces/default/configmaps/w", { ...c, data: { k: "2" } })
      await call("POST", "/api/v1/namespaces/default/configmaps", configMap("w2"))
      expect(updated.status).toBe(200)
      await call("DELETE", "/api/v1/namespaces/default/configmaps/w")
    })
    expect(status).toBe(200)
    expect(events.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual(["MODIFIED w", "ADDED w2", "DELETED w"])
    expect(events[0].object.data).toEqual({ k: "2" })
  })

  it("starts a watch without resourceVersion with the current objects", async () => {
    const { call, watch } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    await call("POST", "/api/v1/namespaces/default/configmaps", configMap("one"))
    const { events } = await watch("/api/v1/namespaces/default/configmaps?watch=1", 1)
    expect(events[0]).toMatchObject({ type: "ADDED", object: { metadata: { name: "one" } } })
  })
})

describe("API server: discovery and tables", () => {
  it("serves /api, /apis, resource lists and /version", async () => {
    const { call } = await start()
    expect((await call("GET", "/api")).body).toMatchObject({ kind: "APIVersions", versions: ["v1"] })
    const groups = (await call("GET", "/apis")).body
    expect(groups.groups.map((g: any) => g.name)).toEqual(expect.arrayContaining(["apps", "coordination.k8s.io", "apiextensions.k8s.io"]))
    const v1 = (await call("GET", "/api/v1")).body
    expect(v1.resources.find((r: any) => r.name === "pods")).toMatchObject({ namespaced: true, kind: "Pod", shortNames: ["po"] })
    expect((await call("GET", "/version")).body.major).toBe("1")
  })

  it("renders a Table for kubectl", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    await call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", 3))
    const t = await call("GET", "/apis/apps/v1/namespaces/default/deployments", undefined, { accept: "application/json;as=Table;v=v1;g=meta.k8s.io" })
    expect(t.body.kind).toBe("Table")
    expect(t.body.columnDefinitions.map((c: any) => c.name)).toEqual(["Name", "Ready", "Up-to-date", "Available", "Age"])
    expect(t.body.rows[0].cells.slice(0, 4)).toEqual(["web", "0/3", 0, 0])
  })
})

describe("API server: custom resources", () => {
  const crd = {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "widgets.example.com" },
    spec: {
      group: "example.com",
      scope: "Namespaced",
      names: { plural: "widgets", singular: "widget", kind: "Widget", shortNames: ["wd"] },
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [{ name: "Size", type: "integer", jsonPath: ".spec.size" }],
          schema: {
            openAPIV3Schema: {
              type: "object",
              properties: {
                spec: { type: "object", required: ["size"], properties: { size: { type: "integer", minimum: 1 }, color: { type: "string", enum: ["red", "blue"] } } },
                status: { type: "object", properties: { ready: { type: "boolean" } } }
              }
            }
          }
        }
      ]
    }
  }

  it("serves a CRD's kind with schema validation, pruning, status and printer columns; deleting the CRD removes its objects", async () => {
    const { call } = await start()
    await call("POST", "/api/v1/namespaces", ns("default"))
    const created = await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    expect(created.status).toBe(201)
    expect(created.body.status.conditions.find((c: any) => c.type === "Established").status).toBe("True")
    const w = await call("POST", "/apis/example.com/v1/namespaces/default/widgets", { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w1" }, spec: { size: 3, extra: "pruned" } })
    expect(w.status).toBe(201)
    expect(w.body.spec).toEqual({ size: 3 })
    const bad = await call("POST", "/apis/example.com/v1/namespaces/default/widgets", { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w2" }, spec: { size: 0, color: "green" } })
    expect(bad.status).toBe(422)
    expect(bad.body.details.causes.map((c: any) => c.field).sort()).toEqual(["spec.color", "spec.size"])
    const status = await call("PUT", "/apis/example.com/v1/namespaces/default/widgets/w1/status", { ...w.body, status: { ready: true } })
    expect(status.body.status).toEqual({ ready: true })
    const table = await call("GET", "/apis/example.com/v1/namespaces/default/widgets", undefined, { accept: "application/json;as=Table;v=v1;g=meta.k8s.io" })
    expect(table.body.rows[0].cells.slice(0, 2)).toEqual(["w1", 3])
    const discovery = await call("GET", "/apis/example.com/v1")
    expect(discovery.body.resources.map((r: any) => r.name)).toEqual(expect.arrayContaining(["widgets", "widgets/status"]))

    expect((await call("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")).status).toBe(200)
    const deadline = Date.now() + 5_000
    while ((await call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")).status !== 404) {
      if (Date.now() > deadline) throw new Error("the CRD was not finalized")
      await new Promise((r) => setTimeout(r, 20))
    }
    expect((await call("GET", "/apis/example.com/v1/namespaces/default/widgets/w1")).status).toBe(404)
  })

  it("rejects a CRD whose name is not plural.group", async () => {
    const { call } = await start()
    const r = await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", { ...crd, metadata: { name: "wrong.example.com" } })
    expect(r.status).toBe(422)
    expect(r.body.message).toMatch(/metadata\.name/)
  })
})
