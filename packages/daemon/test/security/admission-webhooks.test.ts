// External admission webhooks over real HTTPS: the test runs a webhook server with a certificate
// from its own CA (the daemon's Tls module), registers it through the API, and checks patches,
// denials, timeouts, unreachable endpoints and untrusted certificates under both failure policies.
import { ApiServer, Authn, Registry, Store } from "@koder/fleet-core"
import { Effect, Exit, Scope } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as AdmissionChain from "../../src/security/AdmissionChain.js"
import * as Tls from "../../src/Tls.js"

const held: Array<{ destroy: () => void }> = []
let server: Server
let base: string
let caBundle: string
let foreignCa: string
let closedPort: number
const dirs: Array<string> = []
const seen: Array<any> = []
/** What the /callback webhook does before it answers: write through the API under test. */
let callback: (() => Promise<number>) | undefined

const review = (uid: string, response: object) => JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid, ...response } })

beforeAll(async () => {
  const dir = await mkdtemp(join(tmpdir(), "fleet-webhook-"))
  const other = await mkdtemp(join(tmpdir(), "fleet-webhook-other-"))
  dirs.push(dir, other)
  const tls = await Effect.runPromise(Tls.ensure({ dataDir: dir }))
  const foreign = await Effect.runPromise(Tls.ensure({ dataDir: other }))
  caBundle = Buffer.from(tls.ca!).toString("base64")
  foreignCa = Buffer.from(foreign.ca!).toString("base64")
  server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      seen.push({ path: req.url, body })
      const uid = body.request.uid
      const send = (text: string) => res.writeHead(200, { "content-type": "application/json" }).end(text)
      switch (req.url) {
        case "/mutate": {
          const patch = [
            { op: "add", path: "/metadata/labels/injected", value: "true" },
            { op: "add", path: "/spec/containers/0/env", value: [{ name: "FROM_WEBHOOK", value: "1" }] }
          ]
          return send(review(uid, { allowed: true, patchType: "JSONPatch", patch: Buffer.from(JSON.stringify(patch)).toString("base64") }))
        }
        case "/validate": {
          const image = body.request.object?.spec?.containers?.[0]?.image ?? ""
          return send(
            image.endsWith(":latest")
              ? review(uid, { allowed: false, status: { code: 403, reason: "Forbidden", message: "images must be pinned, not :latest" } })
              : review(uid, { allowed: true })
          )
        }
        case "/slow":
          held.push(res.socket!)
          return // never answers
        case "/callback":
          return void callback!().then((code) => send(review(uid, code === 201 ? { allowed: true } : { allowed: false, status: { code: 403, message: `the webhook's own write answered ${code}` } })))
        default:
          res.writeHead(404).end()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
  closedPort = (probe.address() as AddressInfo).port
  await new Promise<void>((resolve) => probe.close(() => resolve()))
})

afterAll(async () => {
  for (const s of held) s.destroy()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  for (const d of dirs) await rm(d, { recursive: true, force: true })
})

const eventually = async (check: () => Promise<void>, ms = 5000) => {
  const deadline = Date.now() + ms
  for (;;) {
    try {
      return await check()
    } catch (e) {
      if (Date.now() > deadline) throw e
      await new Promise((r) => setTimeout(r, 25))
    }
  }
}

/** An in-process API server with the daemon's admission chain. */
const cluster = async (flowControl?: ApiServer.Options["flowControl"]) => {
  const scope = await Effect.runPromise(Scope.make())
  const store = Store.makeMemory()
  const { admission } = await Effect.runPromise(
    Scope.extend(AdmissionChain.make({ dataDir: "", store, registry: Registry.make(), bootstrapTokenHash: "", address: "", flags: {} }), scope)
  )
  const api = await Effect.runPromise(Scope.extend(ApiServer.make({ store, authenticate: (h) => Effect.succeed({ name: Authn.bearer(h) ?? "x", uid: "u", groups: ["system:masters"] }), admission: admission ?? [], ...(flowControl === undefined ? {} : { flowControl }) }), scope))
  const call = (method: string, path: string, body?: unknown, contentType = "application/json", token = "admin") =>
    Effect.runPromise(
      api.handle({
        method,
        path,
        query: new URLSearchParams(),
        headers: { "content-type": contentType, authorization: `Bearer ${token}` },
        body: body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body)),
        client: "admin"
      })
    ).then((r) => (r._tag === "Json" ? { status: r.status, body: r.body as any } : { status: r.status, body: undefined }))
  await call("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "team" } })
  return { call, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

type Cluster = Awaited<ReturnType<typeof cluster>>

const webhook = (name: string, path: string, extra: Record<string, unknown> = {}) => ({
  name,
  clientConfig: { url: `${base}${path}`, caBundle },
  rules: [{ operations: ["CREATE", "UPDATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"] }],
  sideEffects: "None",
  admissionReviewVersions: ["v1"],
  ...extra
})

const configure = (c: Cluster, kind: "Mutating" | "Validating", name: string, webhooks: ReadonlyArray<object>) =>
  c.call("POST", `/apis/admissionregistration.k8s.io/v1/${kind.toLowerCase()}webhookconfigurations`, {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: `${kind}WebhookConfiguration`,
    metadata: { name },
    webhooks
  })

let counter = 0
const pod = (image = "nginx:1.27") => ({ apiVersion: "v1", kind: "Pod", metadata: { name: `p${counter++}` }, spec: { containers: [{ name: "app", image }] } })
const createPod = (c: Cluster, image?: string) => c.call("POST", "/api/v1/namespaces/team/pods", pod(image))

describe("admission webhooks over HTTPS", () => {
  it("applies a mutating webhook's JSON patch and refuses with a validating webhook's Status", async () => {
    const c = await cluster()
    try {
      expect((await configure(c, "Mutating", "inject", [webhook("inject.example.com", "/mutate")])).status).toBe(201)
      expect((await configure(c, "Validating", "pinned", [webhook("pinned.example.com", "/validate")])).status).toBe(201)
      await eventually(async () => {
        const created = await createPod(c)
        expect(created.status).toBe(201)
        expect(created.body.metadata.labels.injected).toBe("true")
        expect(created.body.spec.containers[0].env).toEqual([{ name: "FROM_WEBHOOK", value: "1" }])
      })
      const latest = await createPod(c, "nginx:latest")
      expect(latest.status).toBe(403)
      expect(latest.body).toMatchObject({ kind: "Status", status: "Failure", reason: "Forbidden", code: 403, message: 'admission webhook "pinned.example.com" denied the request: images must be pinned, not :latest' })
      const last = seen.filter((s) => s.path === "/validate").at(-1)
      expect(last.body).toMatchObject({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { operation: "CREATE", namespace: "team", kind: { kind: "Pod" }, resource: { resource: "pods" } } })
      // The validating webhook saw the mutated pod.
      expect(last.body.request.object.metadata.labels.injected).toBe("true")
    } finally {
      await c.close()
    }
  })

  it.each<[string, string, Record<string, unknown>, string]>([
    ["a timeout", "/slow", { timeoutSeconds: 1 }, 'failed calling webhook "w.example.com": failed to call webhook: Post "BASE/slow": context deadline exceeded'],
    ["an unreachable endpoint", "UNREACHABLE", {}, "ECONNREFUSED"],
    ["an untrusted certificate", "FOREIGN", {}, 'failed calling webhook "w.example.com": failed to call webhook: Post "BASE/validate": '],
    ["an HTTP error", "/nowhere", {}, 'failed calling webhook "w.example.com": the server responded with status 404']
  ])("refuses on %s under failurePolicy Fail (the default) and allows under Ignore", async (_what, path, extra, message) => {
    const c = await cluster()
    try {
      const url = path === "UNREACHABLE" ? `https://127.0.0.1:${closedPort}/validate` : path === "FOREIGN" ? `${base}/validate` : `${base}${path}`
      const clientConfig = { url, caBundle: path === "FOREIGN" ? foreignCa : caBundle }
      expect((await configure(c, "Validating", "w", [{ ...webhook("w.example.com", path), ...extra, clientConfig }])).status).toBe(201)
      await eventually(async () => {
        const r = await createPod(c)
        expect(r.status).toBe(500)
        expect(r.body.reason).toBe("InternalError")
        expect(r.body.message).toContain(message.replace("BASE", base))
      }, 8000)
      const patched = await c.call("PATCH", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/w", [{ op: "add", path: "/webhooks/0/failurePolicy", value: "Ignore" }], "application/json-patch+json")
      expect(patched.status).toBe(200)
      await eventually(async () => expect((await createPod(c)).status).toBe(201), 8000)
    } finally {
      await c.close()
    }
  })
  it("does not wait for its caller's API seat: a webhook writing through the API answers while the request it admits waits", async () => {
    // One seat: the pod's create holds it while the webhook runs; the webhook's own write would wait
    // for that seat, and the create for the webhook, until the webhook's timeout, without awayFromSeat.
    const c = await cluster({ seats: 1, maxWait: "3 seconds" })
    let n = 0
    callback = async () => (await c.call("POST", "/api/v1/namespaces/team/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `seen-${n++}` } }, "application/json", "webhook")).status
    try {
      expect((await configure(c, "Validating", "callback", [webhook("callback.example.com", "/callback", { timeoutSeconds: 5 })])).status).toBe(201)
      // The configuration reaches the admission chain by a watch: wait until a create is sent to the webhook.
      await eventually(async () => {
        expect((await createPod(c)).status).toBe(201)
        expect(seen.some((s) => s.path === "/callback")).toBe(true)
      })
      // Had the webhook's write waited for the seat, it would have got 429 after 3 s, and the webhook denied.
      const created = await Promise.all([createPod(c), createPod(c)])
      expect(created.map((r) => r.status)).toEqual([201, 201])
      const maps = await c.call("GET", "/api/v1/namespaces/team/configmaps")
      expect(maps.body.items.filter((m: any) => m.metadata.name.startsWith("seen-")).length).toBeGreaterThanOrEqual(3)
    } finally {
      callback = undefined
      await c.close()
    }
  })
})
