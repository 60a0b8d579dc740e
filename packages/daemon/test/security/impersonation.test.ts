/**
 * Impersonation and who-am-I through a real `koder-fleet server` over HTTPS (issue 29, item 6):
 * `Impersonate-*` headers are authorized per attribute with the `impersonate` verb and the request
 * then runs as the impersonated user (RBAC, reviews, the audit log with both identities);
 * SelfSubjectReview answers who the caller is. Then the real `kubectl` at /usr/bin/kubectl:
 * `auth whoami`, `--as=nobody get secrets`, `auth can-i --list` (it got a 422 before).
 */
import { execFile } from "node:child_process"
import { request as httpRequest } from "node:http"
import { accessSync, constants, existsSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const scratch = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()
const kubectlPath = "/usr/bin/kubectl"

type Json = Record<string, any>

describe("impersonation and SelfSubjectReview over HTTPS", () => {
  let dir: string
  let server: FleetProcess
  let http: ReturnType<typeof client>
  let admin: string
  const tokens: Record<string, string> = {}

  const send = (token: string, method: string, path: string, headers: Record<string, string> = {}, body?: unknown) =>
    http.send(method, path, { token, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  const created = async (path: string, body: unknown) => {
    const r = await send(admin, "POST", path, {}, body)
    expect(r.status, r.text).toBe(201)
  }
  const ssar = async (token: string, headers: Record<string, string>, resourceAttributes: Record<string, string>) => {
    const r = await send(token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", headers, {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SelfSubjectAccessReview",
      spec: { resourceAttributes }
    })
    expect(r.status, r.text).toBe(201)
    return (r.json() as Json)["status"]["allowed"] as boolean
  }
  const whoami = async (token: string, headers: Record<string, string> = {}, version = "v1") => {
    const r = await send(token, "POST", `/apis/authentication.k8s.io/${version}/selfsubjectreviews`, headers, {
      apiVersion: `authentication.k8s.io/${version}`,
      kind: "SelfSubjectReview",
      metadata: { creationTimestamp: null },
      status: { userInfo: {} }
    })
    expect(r.status, r.text).toBe(201)
    return r.json() as Json
  }
  const auditLines = (): ReadonlyArray<Json> =>
    readFileSync(join(dir, "audit.log"), "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as Json)

  const serviceAccountToken = async (namespace: string, name: string) => {
    await created(`/api/v1/namespaces/${namespace}/serviceaccounts`, { apiVersion: "v1", kind: "ServiceAccount", metadata: { name } })
    const r = await send(admin, "POST", `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {}, { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } })
    expect(r.status, r.text).toBe(201)
    return (r.json() as Json)["status"]["token"] as string
  }
  const roleRef = (name: string) => ({ apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name })

  beforeAll(async () => {
    dir = await mkdtemp(join(scratch, "fleet-impersonation-"))
    server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0", "--dns-listen", "off", "--ingress-listen", "off", "--ingress-tls-listen", "off", "--metrics-listen", "127.0.0.1:0"])
    const creds = credentials(server.kubeconfig)
    admin = creds.token
    http = client(server.port, creds.ca)

    for (const name of ["shop", "ops"]) await created("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } })
    tokens["alice"] = await serviceAccountToken("shop", "alice") // a customer of shop
    tokens["imp"] = await serviceAccountToken("ops", "imp") // may impersonate the user bob and the group readers, only
    await created("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "alice-customer" },
      roleRef: roleRef("fleet:customer"),
      subjects: [{ kind: "ServiceAccount", name: "alice", namespace: "shop" }]
    })
    await created("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "impersonate-bob" },
      rules: [
        { verbs: ["impersonate"], apiGroups: [""], resources: ["users"], resourceNames: ["bob"] },
        { verbs: ["impersonate"], apiGroups: [""], resources: ["groups"], resourceNames: ["readers"] }
      ]
    })
    await created("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "imp-impersonates-bob" },
      roleRef: roleRef("impersonate-bob"),
      subjects: [{ kind: "ServiceAccount", name: "imp", namespace: "ops" }]
    })
    // The group readers (not the user bob) may read shop.
    await created("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "readers-view" },
      roleRef: roleRef("view"),
      subjects: [{ kind: "Group", apiGroup: "rbac.authorization.k8s.io", name: "readers" }]
    })
    await created("/api/v1/namespaces/shop/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "db" }, stringData: { password: "p" } })
    // The RBAC index follows the store: wait (with a deadline) until every grant is in force.
    await eventually(async () => (await send(tokens["alice"]!, "GET", "/api/v1/namespaces/shop/pods")).status === 200 || undefined, 15_000, "alice's RoleBinding")
    await eventually(async () => (await send(tokens["imp"]!, "GET", "/api/v1/namespaces/shop/pods", { "Impersonate-User": "bob", "Impersonate-Group": "readers" })).status === 200 || undefined, 15_000, "imp's and readers' bindings")
  }, 90_000)

  afterAll(async () => {
    http?.close()
    if (server?.child.exitCode === null) server.child.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  it("without impersonation, the admin reads secrets", async () => {
    expect((await send(admin, "GET", "/api/v1/namespaces/shop/secrets")).status).toBe(200)
  })

  it("admin as nobody: get secrets is a 403 for nobody, not the admin's own rights", async () => {
    const r = await send(admin, "GET", "/api/v1/namespaces/shop/secrets", { "Impersonate-User": "nobody" })
    expect(r.status).toBe(403)
    expect(r.json()["kind"]).toBe("Status")
    expect(r.json()["message"]).toBe('secrets is forbidden: User "nobody" cannot list resource "secrets" in API group "" in the namespace "shop"')
  })

  it("a customer without the impersonate verb: 403 naming what was refused", async () => {
    const r = await send(tokens["alice"]!, "GET", "/api/v1/namespaces/shop/pods", { "Impersonate-User": "nobody" })
    expect(r.status).toBe(403)
    expect(r.json()["message"]).toBe('users "nobody" is forbidden: User "system:serviceaccount:shop:alice" cannot impersonate resource "users" in API group "" at the cluster scope')
    const masters = await send(tokens["alice"]!, "GET", "/api/v1/namespaces/shop/pods", { "Impersonate-User": "system:serviceaccount:shop:alice", "Impersonate-Group": "system:masters" })
    expect(masters.status).toBe(403)
    expect(masters.json()["message"]).toMatch(/^groups "system:masters" is forbidden: User "system:serviceaccount:shop:alice" cannot impersonate resource "groups"/)
  })

  it("a customer may impersonate ServiceAccounts of its own namespace only (kube's edit role grants it)", async () => {
    const own = await send(tokens["alice"]!, "GET", "/api/v1/namespaces/shop/configmaps", { "Impersonate-User": "system:serviceaccount:shop:default" })
    // Allowed to impersonate; the default account itself holds no rights in shop.
    expect(own.json()["message"]).toBe('configmaps is forbidden: User "system:serviceaccount:shop:default" cannot list resource "configmaps" in API group "" in the namespace "shop"')
    const other = await send(tokens["alice"]!, "GET", "/api/v1/namespaces/shop/configmaps", { "Impersonate-User": "system:serviceaccount:kube-system:default" })
    expect(other.status).toBe(403)
    expect(other.json()["message"]).toBe('serviceaccounts "default" is forbidden: User "system:serviceaccount:shop:alice" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "kube-system"')
  })

  it("impersonate granted on one user name and one group: those only, and the request runs with their rights", async () => {
    const imp = tokens["imp"]!
    // bob alone holds nothing in shop; with the group readers he may list pods.
    const bob = await send(imp, "GET", "/api/v1/namespaces/shop/pods", { "Impersonate-User": "bob" })
    expect(bob.status).toBe(403)
    expect(bob.json()["message"]).toMatch(/^pods is forbidden: User "bob" cannot list/)
    expect((await send(imp, "GET", "/api/v1/namespaces/shop/pods", { "Impersonate-User": "bob", "Impersonate-Group": "readers" })).status).toBe(200)
    // view never reads secrets, whoever impersonates.
    expect((await send(imp, "GET", "/api/v1/namespaces/shop/secrets", { "Impersonate-User": "bob", "Impersonate-Group": "readers" })).status).toBe(403)
    const carol = await send(imp, "GET", "/api/v1/namespaces/shop/pods", { "Impersonate-User": "carol" })
    expect(carol.status).toBe(403)
    expect(carol.json()["message"]).toBe('users "carol" is forbidden: User "system:serviceaccount:ops:imp" cannot impersonate resource "users" in API group "" at the cluster scope')
    const masters = await send(imp, "GET", "/api/v1/namespaces/shop/pods", { "Impersonate-User": "bob", "Impersonate-Group": "system:masters" })
    expect(masters.status).toBe(403)
    expect(masters.json()["message"]).toMatch(/^groups "system:masters" is forbidden: User "system:serviceaccount:ops:imp" cannot impersonate resource "groups"/)
    const uid = await send(imp, "GET", "/api/v1/namespaces/shop/pods", { "Impersonate-User": "bob", "Impersonate-Uid": "u-1" })
    expect(uid.status).toBe(403)
    expect(uid.json()["message"]).toMatch(/^uids.authentication.k8s.io "u-1" is forbidden/)
  })

  it("malformed impersonation is a 400, never ignored", async () => {
    const r = await send(admin, "GET", "/api/v1/namespaces/shop/secrets", { "Impersonate-Group": "system:masters" })
    expect(r.status).toBe(400)
    expect(r.json()["message"]).toBe("requested Impersonate-Group without impersonating a user: Impersonate-User is required")
    const typo = await send(admin, "GET", "/api/v1/namespaces/shop/secrets", { "Impersonate-Users": "nobody" })
    expect(typo.status).toBe(400)
  })

  it("SelfSubjectAccessReview answers for the impersonated user", async () => {
    const pods = { verb: "list", resource: "pods", namespace: "shop" }
    const secrets = { verb: "get", resource: "secrets", namespace: "shop" }
    expect(await ssar(admin, {}, secrets)).toBe(true)
    expect(await ssar(admin, { "Impersonate-User": "nobody" }, secrets)).toBe(false)
    expect(await ssar(admin, { "Impersonate-User": "bob", "Impersonate-Group": "readers" }, pods)).toBe(true)
    expect(await ssar(admin, { "Impersonate-User": "bob", "Impersonate-Group": "readers" }, secrets)).toBe(false)
    expect(await ssar(tokens["imp"]!, { "Impersonate-User": "bob" }, pods)).toBe(false)
  })

  it("SelfSubjectReview returns the caller, or the user it impersonates", async () => {
    const self = await whoami(admin)
    expect(self["kind"]).toBe("SelfSubjectReview")
    expect(self["status"]["userInfo"]).toEqual({ username: "fleet:bootstrap-admin", uid: "bootstrap-admin", groups: ["system:masters", "system:authenticated"] })
    const alice = (await whoami(tokens["alice"]!))["status"]["userInfo"]
    expect(alice["username"]).toBe("system:serviceaccount:shop:alice")
    expect(alice["groups"]).toEqual(["system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"])
    expect(alice["uid"]).toMatch(/^[0-9a-f-]{36}$/)
    const bob = await whoami(admin, { "Impersonate-User": "bob", "Impersonate-Group": "readers", "Impersonate-Uid": "u-7", "Impersonate-Extra-acme.com%2Fteam": "blue" })
    expect(bob["status"]["userInfo"]).toEqual({ username: "bob", uid: "u-7", groups: ["readers", "system:authenticated"], extra: { "acme.com/team": ["blue"] } })
    // v1beta1 too (older kubectl asks there), and listed by discovery.
    expect((await whoami(admin, {}, "v1beta1"))["status"]["userInfo"]["username"]).toBe("fleet:bootstrap-admin")
    const discovery = (await send(admin, "GET", "/apis/authentication.k8s.io/v1")).json()
    expect(discovery["resources"]).toContainEqual(expect.objectContaining({ name: "selfsubjectreviews", kind: "SelfSubjectReview", verbs: ["create"] }))
    // Only create: no list of reviews.
    expect((await send(admin, "GET", "/apis/authentication.k8s.io/v1/selfsubjectreviews")).status).toBe(405)
  })

  it("the audit log carries both identities; a refused impersonation is audited as the caller's", async () => {
    const cm = (name: string) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name } })
    const ok = await send(admin, "POST", "/api/v1/namespaces/shop/configmaps", { "Impersonate-User": "nobody", "Impersonate-Group": "system:masters" }, cm("as-nobody"))
    expect(ok.status, ok.text).toBe(201)
    const refused = await send(tokens["alice"]!, "POST", "/api/v1/namespaces/shop/configmaps", { "Impersonate-User": "nobody" }, cm("refused"))
    expect(refused.status).toBe(403)
    const lines = await eventually(() => {
      // The root CA publisher's kube-root-ca.crt is audited too; only the test's writes count.
      const all = auditLines().filter((l) => l["resource"] === "configmaps" && l["namespace"] === "shop" && l["user"] !== "system:kube-controller-manager")
      return all.length >= 2 ? all : undefined
    }, 10_000, "the audit lines")
    const written = lines.find((l) => l["code"] === 201)!
    expect(written).toMatchObject({
      user: "fleet:bootstrap-admin",
      groups: ["system:masters", "system:authenticated"],
      verb: "create",
      impersonatedUser: { user: "nobody", groups: ["system:masters", "system:authenticated"] }
    })
    const denied = lines.find((l) => l["code"] === 403)!
    expect(denied["user"]).toBe("system:serviceaccount:shop:alice")
    expect(denied["impersonatedUser"]).toBeUndefined()
  })

  it("the metrics endpoint honours impersonation too", async () => {
    const m = /metrics on http:\/\/(\S+):(\d+)\/metrics/.exec(server.stdout())
    expect(m, server.stdout()).not.toBeNull()
    const scrape = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: m![1], port: Number(m![2]), path: "/metrics", headers: { authorization: `Bearer ${admin}`, ...headers } }, (res) => {
          res.resume()
          res.on("end", () => resolve(res.statusCode ?? 0))
        })
        req.on("error", reject)
        req.end()
      })
    expect(await scrape({})).toBe(200)
    expect(await scrape({ "Impersonate-User": "nobody" })).toBe(403)
  })

  describe("with the real kubectl", () => {
    const kubectl = (args: ReadonlyArray<string>) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        execFile(kubectlPath, ["--kubeconfig", server.kubeconfig, ...args], { timeout: 60_000 }, (error, stdout, stderr) =>
          resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr })
        )
      })

    it("kubectl is installed (CI installs it; a missing kubectl fails here rather than skipping)", () => {
      expect(() => accessSync(kubectlPath, constants.X_OK), `${kubectlPath} is missing (CI=${process.env["CI"] ?? ""})`).not.toThrow()
    })

    it("kubectl auth whoami names the caller, and the impersonated user with each --as-group", async () => {
      const self = await kubectl(["auth", "whoami"])
      expect(self.code, self.stderr).toBe(0)
      expect(self.stdout).toMatch(/Username\s+fleet:bootstrap-admin/)
      expect(self.stdout).toMatch(/Groups\s+\[system:masters system:authenticated\]/)
      const as = await kubectl(["auth", "whoami", "--as=nobody", "--as-group=ops", "--as-group=cn=a, ou=b", "-o", "json"])
      expect(as.code, as.stderr).toBe(0)
      // Two headers, two groups: the comma inside the second stays in it.
      expect(JSON.parse(as.stdout)["status"]["userInfo"]).toEqual({ username: "nobody", groups: ["ops", "cn=a, ou=b", "system:authenticated"] })
    })

    it("kubectl --as=nobody get secrets is forbidden", async () => {
      const r = await kubectl(["--as=nobody", "get", "secrets", "-n", "shop"])
      expect(r.code).not.toBe(0)
      expect(r.stderr).toContain('Error from server (Forbidden): secrets is forbidden: User "nobody" cannot list resource "secrets" in API group "" in the namespace "shop"')
      const can = await kubectl(["auth", "can-i", "get", "secrets", "-n", "shop", "--as=nobody"])
      expect(can.stdout.trim()).toBe("no")
    })

    it("kubectl auth can-i --list works (it got a 422 for its null lists)", async () => {
      const r = await kubectl(["auth", "can-i", "--list", "-n", "shop"])
      expect(r.code, r.stderr).toBe(0)
      expect(r.stdout).toMatch(/^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$/m)
      const alice = await kubectl(["auth", "can-i", "--list", "-n", "shop", "--token", tokens["alice"]!])
      expect(alice.code, alice.stderr).toBe(0)
      expect(alice.stdout).toMatch(/^secrets\s+\[\]\s+\[\]\s+\[.*get.*\]$/m)
      expect(alice.stdout).toMatch(/^selfsubjectreviews\.authentication\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]$/m)
    })
  })
})
