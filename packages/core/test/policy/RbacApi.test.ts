// RBAC through the API server in process: the bootstrap policy as real objects, the access and
// rules reviews, scoped namespace discovery, the index following RBAC changes, aggregation written
// back, escalation prevention, and the matrix of profiles × verbs × resources on real requests.
import { ApiError, ApiServer, BootstrapPolicy, RbacApi, RbacEscalation, RbacIndex, Registry, Status, Store } from "@koder/fleet-core"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const users: Record<string, { name: string; uid: string; groups: Array<string> }> = {
  admin: { name: "admin", uid: "1", groups: ["system:masters", "system:authenticated"] },
  alice: { name: "alice", uid: "2", groups: ["system:authenticated"] },
  carol: { name: "carol", uid: "3", groups: ["system:authenticated"] },
  victor: { name: "victor", uid: "4", groups: ["system:authenticated"] },
  node: { name: "system:node:n1", uid: "5", groups: ["system:nodes", "system:authenticated"] },
  nobody: { name: "nobody", uid: "6", groups: ["system:authenticated"] },
  dave: { name: "dave", uid: "7", groups: ["system:authenticated"] }
}

const authenticate = (headers: Readonly<Record<string, string | undefined>>) => {
  const token = /^Bearer (\S+)$/.exec(headers["authorization"] ?? "")?.[1]
  const user = token === undefined ? undefined : users[token]
  return user === undefined ? Effect.fail(ApiError.of(Status.unauthorized())) : Effect.succeed(user)
}

let server: ApiServer.ApiServer
let index: RbacIndex.RbacIndex
let store: Store.StoreService
const scope = Effect.runSync(Scope.make())

const call = async (user: string | undefined, method: string, path: string, body?: unknown) => {
  const [p, q] = path.split("?")
  const r = await Effect.runPromise(
    server.handle({
      method,
      path: p!,
      query: new URLSearchParams(q ?? ""),
      headers: { "content-type": "application/json", ...(user === undefined ? {} : { authorization: `Bearer ${user}` }) },
      body: body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body)),
      client: user ?? "anonymous"
    })
  )
  return { status: r.status, body: (r._tag === "Json" ? r.body : undefined) as any }
}

const eventually = async <A>(check: () => Promise<A | undefined | false>, ms = 5_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v !== undefined && v !== false) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

const rbac = "/apis/rbac.authorization.k8s.io/v1"
const binding = (kind: "RoleBinding" | "ClusterRoleBinding", name: string, role: string, subjects: Array<Record<string, string>>, roleKind = "ClusterRole") => ({
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind,
  metadata: { name },
  roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: roleKind, name: role },
  subjects
})
const user = (name: string) => ({ kind: "User", name, apiGroup: "rbac.authorization.k8s.io" })

const ssar = (who: string, resourceAttributes: Record<string, string>) =>
  call(who, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
    apiVersion: "authorization.k8s.io/v1",
    kind: "SelfSubjectAccessReview",
    spec: { resourceAttributes }
  })

beforeAll(async () => {
  store = Store.makeMemory()
  await Effect.runPromise(BootstrapPolicy.ensure(store))
  index = await Effect.runPromise(RbacIndex.make(store).pipe(Scope.extend(scope)))
  const registry = Registry.make()
  RbacApi.install(registry, RbacApi.Evaluator.fromIndex(index), store)
  server = await Effect.runPromise(
    ApiServer.make({ store, registry, authenticate, authorize: index.authorize, admission: [RbacEscalation.plugin(index.policy)] }).pipe(Scope.extend(scope))
  )
  for (const ns of ["shop", "other"]) expect((await call("admin", "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } })).status).toBe(201)
  expect((await call("admin", "POST", `${rbac}/namespaces/shop/rolebindings`, binding("RoleBinding", "alice", "fleet:customer", [user("alice")]))).status).toBe(201)
  expect((await call("admin", "POST", `${rbac}/namespaces/shop/rolebindings`, binding("RoleBinding", "victor", "view", [user("victor")]))).status).toBe(201)
  expect((await call("admin", "POST", `${rbac}/clusterrolebindings`, binding("ClusterRoleBinding", "carol", "fleet:collaborator", [user("carol")]))).status).toBe(201)
  await eventually(async () => (await ssar("carol", { verb: "list", resource: "nodes" })).body.status.allowed)
  await eventually(async () => (await ssar("alice", { verb: "list", resource: "pods", namespace: "shop" })).body.status.allowed)
  await eventually(async () => (await ssar("victor", { verb: "list", resource: "pods", namespace: "shop" })).body.status.allowed)
})

afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

describe("bootstrap policy", () => {
  it("exists as real objects, annotated for autoupdate, with aggregated rules written back", async () => {
    const admin = await call("admin", "GET", `${rbac}/clusterroles/cluster-admin`)
    expect(admin.status).toBe(200)
    expect(admin.body.metadata.annotations["rbac.authorization.kubernetes.io/autoupdate"]).toBe("true")
    const crb = await call("admin", "GET", `${rbac}/clusterrolebindings/cluster-admin`)
    expect(crb.body.subjects).toEqual([{ kind: "Group", apiGroup: "rbac.authorization.k8s.io", name: "system:masters" }])
    const view = await eventually(async () => {
      const r = await call("admin", "GET", `${rbac}/clusterroles/view`)
      return r.body.rules.length > 0 ? r.body : undefined
    })
    expect(view.aggregationRule.clusterRoleSelectors).toEqual([{ matchLabels: { "rbac.authorization.k8s.io/aggregate-to-view": "true" } }])
  })

  it("is written idempotently", async () => {
    const before = await Effect.runPromise(store.currentRevision)
    await Effect.runPromise(BootstrapPolicy.ensure(store))
    expect(await Effect.runPromise(store.currentRevision)).toBe(before)
  })

  it("follows aggregation: a role labelled aggregate-to-view extends view", async () => {
    const widgets = {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "widget-viewer", labels: { "rbac.authorization.k8s.io/aggregate-to-view": "true" } },
      rules: [{ verbs: ["get", "list"], apiGroups: ["example.com"], resources: ["widgets"] }]
    }
    expect((await ssar("victor", { verb: "list", group: "example.com", resource: "widgets", namespace: "shop" })).body.status.allowed).toBe(false)
    expect((await call("admin", "POST", `${rbac}/clusterroles`, widgets)).status).toBe(201)
    await eventually(async () => (await ssar("victor", { verb: "list", group: "example.com", resource: "widgets", namespace: "shop" })).body.status.allowed)
    // admin ⊇ edit ⊇ view: the customer profile gets it too.
    await eventually(async () => (await ssar("alice", { verb: "get", group: "example.com", resource: "widgets", namespace: "shop" })).body.status.allowed)
    await eventually(async () => {
      const view = await call("admin", "GET", `${rbac}/clusterroles/view`)
      return view.body.rules.some((r: any) => r.resources?.includes("widgets"))
    })
  })
})

describe("reviews", () => {
  it("SelfSubjectAccessReview answers allowed and why", async () => {
    const yes = await ssar("alice", { verb: "create", resource: "pods", namespace: "shop" })
    expect(yes.status).toBe(201)
    expect(yes.body.kind).toBe("SelfSubjectAccessReview")
    expect(yes.body.status.allowed).toBe(true)
    expect(yes.body.status.reason).toContain('RoleBinding "alice/shop" of ClusterRole "fleet:customer"')
    expect((await ssar("alice", { verb: "create", resource: "pods", namespace: "other" })).body.status.allowed).toBe(false)
    const path = await call("nobody", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SelfSubjectAccessReview",
      spec: { nonResourceAttributes: { path: "/apis/apps/v1", verb: "get" } }
    })
    expect(path.body.status.allowed).toBe(true)
    const bad = await call("nobody", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", { apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", spec: {} })
    expect(bad.status).toBe(422)
    // Authorization comes first (list is not granted), then the method check.
    expect((await call("nobody", "GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")).status).toBe(403)
    expect((await call("admin", "GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")).status).toBe(405)
  })

  it("SubjectAccessReview is for those allowed to create it", async () => {
    const body = { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: { user: "alice", resourceAttributes: { verb: "delete", resource: "secrets", namespace: "shop" } } }
    expect((await call("alice", "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body)).status).toBe(403)
    const r = await call("admin", "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body)
    expect(r.status).toBe(201)
    expect(r.body.status.allowed).toBe(true)
  })

  it("SelfSubjectRulesReview lists the rules in a namespace", async () => {
    const review = (who: string, namespace: string) =>
      call(who, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", { apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectRulesReview", spec: { namespace } })
    const shop = await review("alice", "shop")
    expect(shop.status).toBe(201)
    expect(shop.body.status.incomplete).toBe(false)
    expect(shop.body.status.resourceRules.some((r: any) => r.resources.includes("secrets") && r.verbs.includes("delete"))).toBe(true)
    expect(shop.body.status.nonResourceRules.some((r: any) => r.nonResourceURLs.includes("/api"))).toBe(true)
    const other = await review("alice", "other")
    expect(other.body.status.resourceRules.some((r: any) => r.resources.includes("secrets"))).toBe(false)
    expect(other.body.status.resourceRules.some((r: any) => r.resources.includes("selfsubjectaccessreviews"))).toBe(true)
  })

  it("appear in discovery", async () => {
    const list = await call("nobody", "GET", "/apis/authorization.k8s.io/v1")
    expect(list.body.resources.map((r: any) => r.name)).toEqual(expect.arrayContaining(["selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews"]))
  })
})

describe("accessible namespaces", () => {
  const names = async (who: string) => {
    const r = await call(who, "GET", "/apis/fleet.koder.dev/v1/accessiblenamespaces")
    expect(r.status).toBe(200)
    expect(r.body.kind).toBe("AccessibleNamespaceList")
    return r.body.items.map((i: any) => i.metadata.name)
  }
  it("lists only the namespaces the caller reaches, or all when it may list namespaces", async () => {
    expect(await names("alice")).toEqual(["shop"])
    expect(await names("victor")).toEqual(["shop"])
    expect(await names("nobody")).toEqual([])
    expect(await names("carol")).toEqual(["other", "shop"])
    expect(await names("admin")).toEqual(["other", "shop"])
    expect((await call("alice", "GET", "/apis/fleet.koder.dev/v1/accessiblenamespaces/shop")).body.kind).toBe("AccessibleNamespace")
    expect((await call("alice", "GET", "/apis/fleet.koder.dev/v1/accessiblenamespaces/other")).status).toBe(404)
    expect((await call("alice", "GET", "/api/v1/namespaces")).status).toBe(403)
    expect((await call(undefined, "GET", "/apis/fleet.koder.dev/v1/accessiblenamespaces")).status).toBe(401)
  })
})

describe("consistency", () => {
  it("grants access shortly after a RoleBinding is created, and revokes it after deletion", async () => {
    expect((await call("dave", "GET", "/api/v1/namespaces/other/configmaps")).status).toBe(403)
    expect((await call("admin", "POST", `${rbac}/namespaces/other/rolebindings`, binding("RoleBinding", "dave", "view", [user("dave")]))).status).toBe(201)
    await eventually(async () => (await call("dave", "GET", "/api/v1/namespaces/other/configmaps")).status === 200)
    expect((await call("admin", "DELETE", `${rbac}/namespaces/other/rolebindings/dave`)).status).toBe(200)
    await eventually(async () => (await call("dave", "GET", "/api/v1/namespaces/other/configmaps")).status === 403)
  })
})

describe("escalation prevention", () => {
  it("lets a customer grant what it holds, not more", async () => {
    const up = await call("alice", "POST", `${rbac}/namespaces/shop/rolebindings`, binding("RoleBinding", "up", "cluster-admin", [user("alice")]))
    expect(up.status).toBe(403)
    expect(up.body.message).toContain("attempting to grant RBAC permissions not currently held")
    expect((await call("alice", "POST", `${rbac}/namespaces/shop/rolebindings`, binding("RoleBinding", "friend", "view", [user("friend")]))).status).toBe(201)
    const role = {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "quota-editor" },
      rules: [{ verbs: ["update"], apiGroups: [""], resources: ["resourcequotas"] }]
    }
    expect((await call("alice", "POST", `${rbac}/namespaces/shop/roles`, role)).status).toBe(403)
    expect((await call("alice", "POST", `${rbac}/clusterrolebindings`, binding("ClusterRoleBinding", "x", "view", [user("alice")]))).status).toBe(403)
  })
})

// The matrix: each cell is one real request; expected status, or "ok" for any 2xx/404 (allowed).
describe("matrix", () => {
  const pod = (name: string) => ({ apiVersion: "v1", kind: "Pod", metadata: { name }, spec: { containers: [{ name: "c", image: "nginx" }] } })
  const cm = (name: string) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name } })
  const allowed = (status: number) => status !== 403 && status !== 401
  const cells: ReadonlyArray<[string, string, string, unknown, boolean]> = [
    // customer: full control in its namespace, nothing elsewhere, nothing cluster-wide
    ["alice", "POST", "/api/v1/namespaces/shop/pods", pod("a1"), true],
    ["alice", "GET", "/api/v1/namespaces/shop/pods", undefined, true],
    ["alice", "DELETE", "/api/v1/namespaces/shop/pods/a1", undefined, true],
    ["alice", "POST", "/api/v1/namespaces/shop/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "s" } }, true],
    ["alice", "GET", "/api/v1/namespaces/shop/secrets/s", undefined, true],
    ["alice", "GET", "/api/v1/namespaces/other/pods", undefined, false],
    ["alice", "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "mine" } }, false],
    ["alice", "GET", "/api/v1/nodes", undefined, false],
    ["alice", "GET", "/api/v1/namespaces/shop", undefined, true],
    ["alice", "DELETE", "/api/v1/namespaces/shop", undefined, false],
    ["alice", "GET", "/api/v1/pods", undefined, false],
    // collaborator: reads everything but secrets, manages workloads
    ["carol", "GET", "/api/v1/nodes", undefined, true],
    ["carol", "GET", "/api/v1/pods", undefined, true],
    ["carol", "POST", "/api/v1/namespaces/other/configmaps", cm("c1"), true],
    ["carol", "DELETE", "/api/v1/namespaces/other/configmaps/c1", undefined, true],
    ["carol", "GET", "/api/v1/namespaces/shop/secrets", undefined, false],
    ["carol", "GET", "/api/v1/namespaces/shop/secrets/s", undefined, false],
    ["carol", "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "carols" } }, false],
    ["carol", "GET", "/api/v1/namespaces", undefined, true],
    // view: read-only in its namespace, no secrets
    ["victor", "GET", "/api/v1/namespaces/shop/pods", undefined, true],
    ["victor", "POST", "/api/v1/namespaces/shop/configmaps", cm("v1"), false],
    ["victor", "GET", "/api/v1/namespaces/shop/secrets", undefined, false],
    ["victor", "GET", "/api/v1/namespaces/other/pods", undefined, false],
    // node: nodes and leases, reads pods; no configmap writes, no namespaces
    ["node", "GET", "/api/v1/nodes", undefined, true],
    ["node", "POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name: "n1" } }, true],
    ["node", "GET", "/api/v1/pods", undefined, true],
    ["node", "POST", "/api/v1/namespaces/shop/configmaps", cm("n"), false],
    ["node", "DELETE", "/api/v1/namespaces/shop", undefined, false],
    ["node", "GET", "/api/v1/namespaces/shop/secrets", undefined, false],
    // everyone: discovery, version; nobody else
    ["nobody", "GET", "/apis", undefined, true],
    ["nobody", "GET", "/version", undefined, true],
    ["nobody", "GET", "/api/v1/namespaces/shop/pods", undefined, false]
  ]
  it.each(cells)("%s %s %s", async (who, method, path, body, expected) => {
    const r = await call(who, method, path, body)
    expect(allowed(r.status), `${r.status} ${JSON.stringify(r.body?.message ?? "")}`).toBe(expected)
    if (!expected) expect(r.status).toBe(403)
  })

  it("anonymous requests are 401", async () => {
    expect((await call(undefined, "GET", "/api/v1/namespaces/shop/pods")).status).toBe(401)
  })

  it("exec and scale need their own grants", async () => {
    const can = async (who: string, attrs: Record<string, string>) => (await ssar(who, attrs)).body.status.allowed
    expect(await can("alice", { verb: "exec", resource: "pods", name: "p", namespace: "shop" })).toBe(true)
    expect(await can("alice", { verb: "create", resource: "pods", subresource: "exec", name: "p", namespace: "shop" })).toBe(true)
    expect(await can("carol", { verb: "exec", resource: "pods", name: "p", namespace: "shop" })).toBe(false)
    expect(await can("carol", { verb: "create", resource: "pods", subresource: "exec", name: "p", namespace: "shop" })).toBe(false)
    expect(await can("carol", { verb: "update", resource: "pods", name: "p", namespace: "shop" })).toBe(true)
    expect(await can("carol", { verb: "update", group: "apps", resource: "deployments", subresource: "scale", name: "d", namespace: "shop" })).toBe(true)
    expect(await can("victor", { verb: "update", group: "apps", resource: "deployments", subresource: "scale", name: "d", namespace: "shop" })).toBe(false)
    expect(await can("victor", { verb: "get", group: "apps", resource: "deployments", subresource: "scale", name: "d", namespace: "shop" })).toBe(true)
    expect(await can("node", { verb: "update", resource: "pods", subresource: "status", name: "p", namespace: "shop" })).toBe(true)
    expect(await can("node", { verb: "update", resource: "pods", name: "p", namespace: "shop" })).toBe(false)
  })
})
