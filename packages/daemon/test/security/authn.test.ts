/**
 * Authentication through a real `koder-fleet server` over HTTPS: ServiceAccount tokens from the
 * TokenRequest subresource (and their revocation by deleting the account), the default
 * namespaces and accounts, the node join flow printed in the banner, and every route the server
 * registers answering 401 without credentials (health checks excepted).
 */
import { statSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

describe("authentication over HTTPS", () => {
  let dir: string
  let server: FleetProcess
  let admin: string
  let http: ReturnType<typeof client>

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-authn-"))
    server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0"])
    const creds = credentials(server.kubeconfig)
    admin = creds.token
    http = client(server.port, creds.ca)
  }, 60_000)

  afterAll(async () => {
    http?.close()
    if (server?.child.exitCode === null) server.child.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  const post = (path: string, body: unknown, token = admin) => http.send("POST", path, { token, body: JSON.stringify(body) })

  it("keeps its ServiceAccount signing key in the data dir, readable only by the owner", () => {
    expect(statSync(join(dir, "service-account.key")).mode & 0o777).toBe(0o600)
  })

  it("has the default and kube-system namespaces, each with a default ServiceAccount; new namespaces get one", async () => {
    for (const ns of ["default", "kube-system"]) {
      expect((await http.send("GET", `/api/v1/namespaces/${ns}`, { token: admin })).status, ns).toBe(200)
      expect((await http.send("GET", `/api/v1/namespaces/${ns}/serviceaccounts/default`, { token: admin })).status, ns).toBe(200)
    }
    expect((await post("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "authn-a" } })).status).toBe(201)
    const sa = await http.send("GET", "/api/v1/namespaces/authn-a/serviceaccounts/default", { token: admin })
    expect(sa.status).toBe(200)
    expect(sa.json()).toMatchObject({ kind: "ServiceAccount", metadata: { name: "default", namespace: "authn-a", labels: { "fleet.koder.dev/region": "local" } } })
  })

  it("issues ServiceAccount tokens through TokenRequest; they authenticate until the account is deleted", async () => {
    expect((await post("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "authn-b" } })).status).toBe(201)
    const sa = await post("/api/v1/namespaces/authn-b/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "ci" } })
    expect(sa.status).toBe(201)
    const issued = await post("/api/v1/namespaces/authn-b/serviceaccounts/ci/token", { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 600 } })
    expect(issued.status).toBe(201)
    const body = issued.json() as any
    expect(body.status.token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/)
    expect(Date.parse(body.status.expirationTimestamp) - Date.now()).toBeGreaterThan(500_000)
    const token = body.status.token as string

    // Authenticated: 200 while everything authenticated is allowed, 403 once RBAC denies it; never 401.
    const get = await http.send("GET", "/api/v1/namespaces/authn-b/configmaps", { token })
    expect([200, 403]).toContain(get.status)
    const review = await post("/apis/authentication.k8s.io/v1/selfsubjectreviews", { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" }, token)
    if (review.status === 201) {
      expect((review.json() as any).status.userInfo).toMatchObject({
        username: "system:serviceaccount:authn-b:ci",
        groups: expect.arrayContaining(["system:serviceaccounts", "system:serviceaccounts:authn-b", "system:authenticated"])
      })
    } else expect(review.status).not.toBe(401)

    expect((await http.send("DELETE", "/api/v1/namespaces/authn-b/serviceaccounts/ci", { token: admin })).status).toBe(200)
    await eventually(async () => (await http.send("GET", "/api/v1/namespaces/authn-b/configmaps", { token })).status === 401 || undefined, 5_000, "the deleted account's token to be refused")
  })

  it("joins a node with the one-time join token from the banner; the node token is revocable", async () => {
    const line = /join a node .*: koder-fleet agent --server https:\/\/(\S+) --join-token (\S+) --ca-hash (sha256:[0-9a-f]{64})/.exec(server.stdout())
    expect(line, server.stdout()).not.toBeNull()
    expect(line![1]).toBe(`127.0.0.1:${server.port}`)
    const joinToken = line![2]!
    // Join-token holders (group system:bootstrappers) may create NodeJoins; Kubernetes grants its
    // bootstrappers the same through system:node-bootstrapper. Ensure the grant in case the
    // bootstrap policy does not carry it (yet): 201 or 409 (already there) are both fine.
    const rbac = "/apis/rbac.authorization.k8s.io/v1"
    const role = await post(`${rbac}/clusterroles`, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "system:node-bootstrapper" },
      rules: [{ apiGroups: ["fleet.koder.dev"], resources: ["nodejoins"], verbs: ["create"] }]
    })
    expect([201, 409, 404]).toContain(role.status)
    const binding = await post(`${rbac}/clusterrolebindings`, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "system:node-bootstrapper" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "system:node-bootstrapper" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: "system:bootstrappers" }]
    })
    expect([201, 409, 404]).toContain(binding.status)
    const join = (name: string) => post("/apis/fleet.koder.dev/v1/nodejoins", { apiVersion: "fleet.koder.dev/v1", kind: "NodeJoin", spec: { nodeName: name } }, joinToken)
    const joined = await eventually(async () => {
      const r = await join("worker-1")
      return r.status === 403 ? undefined : r
    }, 5_000, "the bootstrapper grant to apply")
    expect(joined.status, joined.text).toBe(201)
    const status = (joined.json() as any).status
    expect(status).toMatchObject({ username: "system:node:worker-1", groups: ["system:nodes", "system:authenticated"] })
    const nodeToken = status.token as string
    expect((await join("worker-2")).status).toBe(401)
    expect((await http.send("GET", "/api/v1/namespaces", { token: nodeToken })).status).not.toBe(401)
    expect((await http.send("DELETE", "/apis/fleet.koder.dev/v1/nodecredentials/worker-1", { token: admin })).status).toBe(200)
    expect((await http.send("GET", "/api/v1/namespaces", { token: nodeToken })).status).toBe(401)
  })

  it("answers 401 on every route it registers without credentials (or with bad ones), health checks excepted", async () => {
    const paths = new Set<string>(["/api", "/apis", "/version", "/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1", "/api/v1", "/no/such/path", "/apis/no.such/v1/things"])
    const resources: Array<{ prefix: string; name: string; namespaced: boolean }> = []
    const core = (await http.send("GET", "/api/v1", { token: admin })).json() as any
    for (const r of core.resources) resources.push({ prefix: "/api/v1", name: r.name, namespaced: r.namespaced })
    const groups = (await http.send("GET", "/apis", { token: admin })).json() as any
    for (const g of groups.groups) {
      paths.add(`/apis/${g.name}`)
      for (const v of g.versions) {
        paths.add(`/apis/${v.groupVersion}`)
        paths.add(`/openapi/v3/apis/${v.groupVersion}`)
        const list = (await http.send("GET", `/apis/${v.groupVersion}`, { token: admin })).json() as any
        for (const r of list.resources) resources.push({ prefix: `/apis/${v.groupVersion}`, name: r.name, namespaced: r.namespaced })
      }
    }
    // Subresources served by their own handlers (not in discovery's status/scale list).
    resources.push({ prefix: "/api/v1", name: "serviceaccounts/token", namespaced: true })
    expect(resources.map((r) => r.name)).toEqual(expect.arrayContaining(["pods", "pods/status", "serviceaccounts", "nodejoins", "jointokens", "nodecredentials"]))
    const objectPaths = new Set<string>()
    for (const r of resources) {
      const [plural, sub] = r.name.split("/") as [string, string | undefined]
      const scopes = r.namespaced ? [`${r.prefix}/namespaces/default`, r.prefix] : [r.prefix]
      for (const scope of scopes) {
        if (sub === undefined) {
          paths.add(`${scope}/${plural}`)
          paths.add(`${scope}/${plural}?watch=true`)
        }
      }
      const base = r.namespaced ? `${r.prefix}/namespaces/default/${plural}/x` : `${r.prefix}/${plural}/x`
      objectPaths.add(sub === undefined ? base : `${base}/${sub}`)
    }
    const requests: Array<[string, string]> = []
    for (const p of paths) requests.push(["GET", p], ["POST", p])
    for (const p of objectPaths) for (const m of ["GET", "PUT", "PATCH", "DELETE", "POST"]) requests.push([m, p])
    expect(requests.length).toBeGreaterThan(150)
    const failures: Array<string> = []
    for (const [method, path] of requests) {
      for (const token of [undefined, "not-a-token", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMifQ."]) {
        const r = await http.send(method, path, { ...(token === undefined ? {} : { token }), ...(method === "GET" || method === "DELETE" ? {} : { body: "{}" }) })
        if (r.status !== 401 || (r.json() as any).reason !== "Unauthorized") failures.push(`${method} ${path} (${token ?? "none"}): ${r.status}`)
      }
    }
    expect(failures).toEqual([])
    for (const path of ["/healthz", "/readyz", "/livez"]) expect((await http.send("GET", path)).status, path).toBe(200)
  }, 60_000)
})
