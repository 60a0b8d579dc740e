/**
 * A node credential is worth only its node (issue 29), through a real `koder-fleet server` over
 * HTTPS: a node joined with the printed join token reads the Secret and ConfigMap its pod uses
 * but no other Secret (not in a namespace without pods either) and cannot list them; it mints a
 * token only for its pod's ServiceAccount, bound to that pod (never for a kube-system
 * cluster-admin account), and that token dies with the pod; a join cannot take a name in use
 * until the credential is revoked; the node's Secret reads are in the audit log.
 */
import { existsSync } from "node:fs"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const scratch = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()
const joins = "/apis/fleet.koder.dev/v1/nodejoins"
const nodeJoin = (nodeName: string) => JSON.stringify({ apiVersion: "fleet.koder.dev/v1", kind: "NodeJoin", spec: { nodeName } })
const tokenRequest = (boundObjectRef?: Record<string, unknown>) =>
  JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600, ...(boundObjectRef === undefined ? {} : { boundObjectRef }) } })

describe("the Node authorizer and the join flow, through a real server", () => {
  let dir: string
  let server: FleetProcess
  let http: ReturnType<typeof client>
  let admin: string
  let node: string
  let web: { uid: string }

  const as = (token: string) => ({
    get: (path: string) => http.send("GET", path, { token }),
    post: (path: string, body: unknown) => http.send("POST", path, { token, body: typeof body === "string" ? body : JSON.stringify(body) }),
    del: (path: string) => http.send("DELETE", path, { token })
  })
  const create = async (path: string, body: Record<string, unknown>) => {
    const r = await as(admin).post(path, body)
    expect(r.status, r.text).toBe(201)
    return r.json()
  }
  const podSpec = (nodeName: string, extra: Record<string, unknown> = {}) => ({
    nodeName,
    serviceAccountName: "web-sa",
    containers: [{ name: "c", image: "busybox", env: [{ name: "MODE", valueFrom: { configMapKeyRef: { name: "settings", key: "mode" } } }] }],
    volumes: [{ name: "creds", secret: { secretName: "mounted" } }],
    ...extra
  })

  beforeAll(async () => {
    dir = await mkdtemp(join(scratch, "fleet-nodeauthz-"))
    server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0"])
    const creds = credentials(server.kubeconfig)
    admin = creds.token
    http = client(server.port, creds.ca)

    const line = /--join-token (\S+)/.exec(server.stdout())
    expect(line, server.stdout()).not.toBeNull()
    const joined = await as(line![1]!).post(joins, nodeJoin("worker-1"))
    expect(joined.status, joined.text).toBe(201)
    node = (joined.json()["status"] as { token: string }).token
    expect((await as(node).post("/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name: "worker-1" } })).status).toBe(201)

    for (const name of ["shop", "empty"]) await create("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } })
    await eventually(async () => (await as(admin).get("/api/v1/namespaces/shop/serviceaccounts/default")).status === 200 || undefined, 10_000, "shop's default ServiceAccount")
    await create("/api/v1/namespaces/shop/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "web-sa" } })
    for (const [ns, name] of [["shop", "mounted"], ["shop", "unrelated"], ["empty", "lonely"]] as const) {
      await create(`/api/v1/namespaces/${ns}/secrets`, { apiVersion: "v1", kind: "Secret", metadata: { name }, stringData: { password: `${name}-value` } })
    }
    await create("/api/v1/namespaces/shop/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings" }, data: { mode: "fast" } })
    // The account the attacker minted a token for: kube-system, bound to cluster-admin.
    await create("/api/v1/namespaces/kube-system/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "root" } })
    await create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "root" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
      subjects: [{ kind: "ServiceAccount", name: "root", namespace: "kube-system" }]
    })
    const pod = await create("/api/v1/namespaces/shop/pods", { apiVersion: "v1", kind: "Pod", metadata: { name: "web" }, spec: podSpec("worker-1") })
    web = { uid: (pod["metadata"] as { uid: string }).uid }
    await create("/api/v1/namespaces/shop/pods", { apiVersion: "v1", kind: "Pod", metadata: { name: "elsewhere" }, spec: podSpec("worker-2") })
  }, 90_000)

  afterAll(async () => {
    http?.close()
    if (server?.child.exitCode === null) server.child.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  it("reads the Secret and ConfigMap its pod uses, and no other Secret", async () => {
    const mounted = await as(node).get("/api/v1/namespaces/shop/secrets/mounted")
    expect(mounted.status, mounted.text).toBe(200)
    expect((await as(node).get("/api/v1/namespaces/shop/configmaps/settings")).status).toBe(200)
    expect((await as(node).get("/api/v1/namespaces/shop/serviceaccounts/web-sa")).status).toBe(200)

    const unrelated = await as(node).get("/api/v1/namespaces/shop/secrets/unrelated")
    expect(unrelated.status).toBe(403)
    expect(unrelated.json()).toMatchObject({ kind: "Status", reason: "Forbidden" })
    expect(unrelated.json()["message"]).toBe(
      `secrets "unrelated" is forbidden: User "system:node:worker-1" cannot get resource "secrets" in API group "" in the namespace "shop": no relationship found between node 'worker-1' and this object`
    )
    expect(unrelated.text).not.toContain("unrelated-value")
    // A namespace with no pods at all, as in the issue.
    expect((await as(node).get("/api/v1/namespaces/empty/secrets/lonely")).status).toBe(403)
    // Lists and watches would hand over every Secret: refused.
    expect((await as(node).get("/api/v1/namespaces/shop/secrets")).status).toBe(403)
    expect((await as(node).get("/api/v1/secrets")).status).toBe(403)
    expect((await as(node).get("/api/v1/namespaces/shop/configmaps?watch=true")).status).toBe(403)
    // NodeRestriction: another node's pod cannot be evicted by this one.
    const evict = await as(node).post("/api/v1/namespaces/shop/pods/elsewhere/eviction", { apiVersion: "policy/v1", kind: "Eviction", metadata: { name: "elsewhere" } })
    expect(evict.status).toBe(403)
    expect(evict.json()["message"]).toContain(`node "worker-1" can only evict pods with spec.nodeName set to itself`)
    // Access reviews answer through the same chain.
    const review = await as(node).post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SelfSubjectAccessReview",
      spec: { resourceAttributes: { verb: "get", resource: "secrets", namespace: "shop", name: "unrelated" } }
    })
    expect((review.json()["status"] as { allowed: boolean }).allowed).toBe(false)
  })

  it("mints a token only for its pod's ServiceAccount, bound to that pod, and the token dies with the pod", async () => {
    const root = await as(node).post("/api/v1/namespaces/kube-system/serviceaccounts/root/token", tokenRequest({ apiVersion: "v1", kind: "Pod", name: "web", uid: web.uid }))
    expect(root.status).toBe(403)
    expect(root.json()["message"]).toContain("no relationship found between node 'worker-1' and this object")

    const unbound = await as(node).post("/api/v1/namespaces/shop/serviceaccounts/web-sa/token", tokenRequest())
    expect(unbound.status).toBe(403)
    expect(unbound.json()["message"]).toContain("node requested token not bound to a pod")
    const noUid = await as(node).post("/api/v1/namespaces/shop/serviceaccounts/web-sa/token", tokenRequest({ kind: "Pod", name: "web" }))
    expect(noUid.status).toBe(403)
    const otherNode = await as(node).post("/api/v1/namespaces/shop/serviceaccounts/web-sa/token", tokenRequest({ kind: "Pod", name: "elsewhere", uid: "x" }))
    expect(otherNode.status).toBe(403)

    const issued = await as(node).post("/api/v1/namespaces/shop/serviceaccounts/web-sa/token", tokenRequest({ apiVersion: "v1", kind: "Pod", name: "web", uid: web.uid }))
    expect(issued.status, issued.text).toBe(201)
    expect((issued.json()["spec"] as Record<string, unknown>)["boundObjectRef"]).toEqual({ kind: "Pod", apiVersion: "v1", name: "web", uid: web.uid })
    const token = (issued.json()["status"] as { token: string }).token
    const whoAmI = () =>
      as(token).post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SelfSubjectAccessReview",
        spec: { resourceAttributes: { verb: "get", resource: "pods", namespace: "shop" } }
      })
    expect((await whoAmI()).status).toBe(201)

    expect((await as(admin).del("/api/v1/namespaces/shop/pods/web?gracePeriodSeconds=0")).status).toBe(200)
    await eventually(async () => (await as(admin).get("/api/v1/namespaces/shop/pods/web")).status === 404 || undefined, 30_000, "the pod to be gone")
    expect((await whoAmI()).status).toBe(401)
    // Its node no longer reaches what the pod used.
    await eventually(async () => (await as(node).get("/api/v1/namespaces/shop/secrets/mounted")).status === 403 || undefined, 10_000, "the Secret to be out of reach")
  })

  it("refuses a join for a name in use until the credential is revoked, then rejoins", async () => {
    const mint = async () => {
      const r = await as(admin).post("/apis/fleet.koder.dev/v1/jointokens", { apiVersion: "fleet.koder.dev/v1", kind: "JoinToken", spec: { ttlSeconds: 600 } })
      expect(r.status).toBe(201)
      return (r.json()["status"] as { token: string }).token
    }
    const joinToken = await mint()
    const taken = await as(joinToken).post(joins, nodeJoin("worker-1"))
    expect(taken.status).toBe(409)
    expect(taken.json()).toMatchObject({ kind: "Status", reason: "Conflict" })
    expect(taken.json()["message"]).toContain('node "worker-1" already has a live node credential')
    // A node that exists without a credential (the issue's `vm`) is not claimable either.
    await create("/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name: "vm" } })
    const vm = await as(joinToken).post(joins, nodeJoin("vm"))
    expect(vm.status).toBe(409)
    expect(vm.json()["message"]).toContain('node "vm" already exists')

    expect((await as(admin).del("/apis/fleet.koder.dev/v1/nodecredentials/worker-1")).status).toBe(200)
    expect((await as(node).get("/api/v1/nodes/worker-1")).status).toBe(401)
    const rejoined = await as(joinToken).post(joins, nodeJoin("worker-1"))
    expect(rejoined.status, rejoined.text).toBe(201)
    node = (rejoined.json()["status"] as { token: string }).token
    expect((await as(node).get("/api/v1/nodes/worker-1")).status).toBe(200)
  })

  it("writes the node's Secret reads, allowed and refused, to the audit log", async () => {
    const records = async () =>
      (await readFile(join(dir, "audit.log"), "utf8"))
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>)
    const reads = await eventually(async () => {
      const found = (await records()).filter((r) => r["user"] === "system:node:worker-1" && r["resource"] === "secrets" && r["verb"] === "get")
      return found.some((r) => r["name"] === "mounted" && r["code"] === 200) && found.some((r) => r["name"] === "unrelated" && r["code"] === 403) ? found : undefined
    }, 10_000, "the node's reads in the audit log")
    expect(reads[0]).toMatchObject({ groups: expect.arrayContaining(["system:nodes"]), namespace: "shop" })
    // Metadata only: no value ever reaches the log.
    expect(await readFile(join(dir, "audit.log"), "utf8")).not.toContain("mounted-value")
  })
})
