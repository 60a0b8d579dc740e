/**
 * The RBAC matrix through a real `koder-fleet server` over HTTPS with `@kubernetes/client-node`:
 * real identities (ServiceAccount tokens from TokenRequest for the customer, collaborator and
 * viewer; a node credential from the join flow; no token for anonymous), real requests, real
 * bindings. Also: the bootstrap policy readable as objects, reviews, accessible namespaces.
 */
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  ApiException,
  AppsV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  RbacAuthorizationV1Api
} from "@kubernetes/client-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const scratch = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()

interface Identity {
  readonly core: CoreV1Api
  readonly apps: AppsV1Api
  readonly authz: AuthorizationV1Api
  readonly custom: CustomObjectsApi
}

/** The HTTP status of a client-node call: 200 when it resolves, the ApiException's code otherwise. */
const statusOf = async (call: () => Promise<unknown>): Promise<number> => {
  try {
    await call()
    return 200
  } catch (e) {
    if (e instanceof ApiException) return e.code
    throw e
  }
}

describe("RBAC over HTTPS with @kubernetes/client-node", () => {
  let dir: string
  let server: FleetProcess
  let http: ReturnType<typeof client>
  let admin: { core: CoreV1Api; rbac: RbacAuthorizationV1Api; apps: AppsV1Api }
  const who: Record<string, Identity> = {}

  const identity = (token: string | undefined): Identity => {
    const { server: url, ca } = credentials(server.kubeconfig)
    const kc = new KubeConfig()
    kc.loadFromOptions({
      clusters: [{ name: "fleet", server: url, caData: Buffer.from(ca).toString("base64"), skipTLSVerify: false }],
      users: [token === undefined ? { name: "anonymous" } : { name: "u", token }],
      contexts: [{ name: "ctx", cluster: "fleet", user: token === undefined ? "anonymous" : "u" }],
      currentContext: "ctx"
    })
    return { core: kc.makeApiClient(CoreV1Api), apps: kc.makeApiClient(AppsV1Api), authz: kc.makeApiClient(AuthorizationV1Api), custom: kc.makeApiClient(CustomObjectsApi) }
  }

  const can = async (id: Identity, resourceAttributes: Record<string, string>) =>
    (await id.authz.createSelfSubjectAccessReview({ body: { apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", spec: { resourceAttributes } } })).status?.allowed === true

  const subject = (namespace: string, name: string) => ({ kind: "ServiceAccount", name, namespace })
  const bind = async (namespace: string | undefined, name: string, role: string, subjects: Array<{ kind: string; name: string; namespace: string }>) => {
    const body = { metadata: { name }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role }, subjects }
    if (namespace === undefined) await admin.rbac.createClusterRoleBinding({ body: { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", ...body } })
    else await admin.rbac.createNamespacedRoleBinding({ namespace, body: { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", ...body } })
  }

  const serviceAccountToken = async (namespace: string, name: string) => {
    await eventually(async () => (await statusOf(() => admin.core.readNamespace({ name: namespace }))) === 200 || undefined, 10_000, `namespace ${namespace}`)
    await admin.core.createNamespacedServiceAccount({ namespace, body: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name } } })
    const issued = await admin.core.createNamespacedServiceAccountToken({ namespace, name, body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences: [], expirationSeconds: 3600 } } })
    return issued.status!.token
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(scratch, "fleet-rbac-"))
    server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0"])
    const kc = new KubeConfig()
    kc.loadFromFile(server.kubeconfig)
    admin = { core: kc.makeApiClient(CoreV1Api), rbac: kc.makeApiClient(RbacAuthorizationV1Api), apps: kc.makeApiClient(AppsV1Api) }
    http = client(server.port, credentials(server.kubeconfig).ca)

    for (const name of ["shop", "other", "portal", "ops"]) await admin.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name } } })
    who["customer"] = identity(await serviceAccountToken("portal", "alice"))
    who["collaborator"] = identity(await serviceAccountToken("ops", "carol"))
    who["view"] = identity(await serviceAccountToken("ops", "victor"))
    who["anonymous"] = identity(undefined)
    await bind("shop", "customer-alice", "fleet:customer", [subject("portal", "alice")])
    await bind(undefined, "collaborator-carol", "fleet:collaborator", [subject("ops", "carol")])
    await bind("shop", "view-victor", "view", [subject("ops", "victor")])

    // A node credential through the join flow printed in the banner.
    const line = /--join-token (\S+)/.exec(server.stdout())
    expect(line, server.stdout()).not.toBeNull()
    const joined = await eventually(async () => {
      const r = await http.send("POST", "/apis/fleet.koder.dev/v1/nodejoins", {
        token: line![1]!,
        body: JSON.stringify({ apiVersion: "fleet.koder.dev/v1", kind: "NodeJoin", spec: { nodeName: "worker-1" } })
      })
      return r.status === 201 ? r : undefined
    }, 10_000, "the node join")
    who["node"] = identity((joined.json() as any).status.token as string)

    // The index follows the store: wait (with a deadline) until every grant is in force.
    await eventually(() => can(who["customer"]!, { verb: "list", resource: "pods", namespace: "shop" }), 10_000, "the customer's RoleBinding")
    await eventually(() => can(who["collaborator"]!, { verb: "list", resource: "nodes" }), 10_000, "the collaborator's ClusterRoleBinding")
    await eventually(() => can(who["view"]!, { verb: "list", resource: "pods", namespace: "shop" }), 10_000, "the viewer's RoleBinding")
    // Pods need the namespace's default ServiceAccount (DefaultServiceAccount admission).
    await eventually(async () => (await statusOf(() => admin.core.readNamespacedServiceAccount({ namespace: "shop", name: "default" }))) === 200 || undefined, 10_000, "shop's default ServiceAccount")
    await admin.apps.createNamespacedDeployment({
      namespace: "shop",
      body: {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "web" },
        spec: { replicas: 1, selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "c", image: "nginx" }] } } }
      }
    })
    await admin.core.createNamespacedSecret({ namespace: "shop", body: { apiVersion: "v1", kind: "Secret", metadata: { name: "db" }, stringData: { password: "p" } } })
  }, 90_000)

  afterAll(async () => {
    http?.close()
    if (server?.child.exitCode === null) server.child.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  // shop is a customer's namespace (fleet:customer is bound there), so its pods must meet the restricted Pod Security level.
  const restricted = { allowPrivilegeEscalation: false, runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" }, capabilities: { drop: ["ALL"] } }
  const pod = (name: string) => ({ apiVersion: "v1", kind: "Pod", metadata: { name }, spec: { containers: [{ name: "c", image: "nginx", securityContext: restricted }] } })
  const scale = (id: Identity, replicas: number) => () => id.apps.replaceNamespacedDeploymentScale({ namespace: "shop", name: "web", body: { apiVersion: "autoscaling/v1", kind: "Scale", metadata: { name: "web", namespace: "shop" }, spec: { replicas } } })

  // [identity, what, call, expected]: "ok" means neither 401 nor 403 (the call was authorized).
  const matrix: ReadonlyArray<[string, string, (id: Identity) => () => Promise<unknown>, "ok" | 401 | 403]> = [
    ["customer", "list pods in its namespace", (id) => () => id.core.listNamespacedPod({ namespace: "shop" }), "ok"],
    ["customer", "create a pod in its namespace", (id) => () => id.core.createNamespacedPod({ namespace: "shop", body: pod("p1") }), "ok"],
    ["customer", "get that pod", (id) => () => id.core.readNamespacedPod({ namespace: "shop", name: "p1" }), "ok"],
    ["customer", "delete that pod", (id) => () => id.core.deleteNamespacedPod({ namespace: "shop", name: "p1" }), "ok"],
    ["customer", "create a configmap", (id) => () => id.core.createNamespacedConfigMap({ namespace: "shop", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c1" } } }), "ok"],
    ["customer", "read a secret in its namespace", (id) => () => id.core.readNamespacedSecret({ namespace: "shop", name: "db" }), "ok"],
    ["customer", "scale a deployment", (id) => scale(id, 2), "ok"],
    ["customer", "list pods in another namespace", (id) => () => id.core.listNamespacedPod({ namespace: "other" }), 403],
    ["customer", "create a namespace", (id) => () => id.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "mine" } } }), 403],
    ["customer", "list namespaces", (id) => () => id.core.listNamespace(), 403],
    ["customer", "list nodes", (id) => () => id.core.listNode(), 403],
    ["collaborator", "list nodes", (id) => () => id.core.listNode(), "ok"],
    ["collaborator", "list pods everywhere", (id) => () => id.core.listPodForAllNamespaces(), "ok"],
    ["collaborator", "create a pod", (id) => () => id.core.createNamespacedPod({ namespace: "shop", body: pod("p2") }), "ok"],
    ["collaborator", "delete a pod", (id) => () => id.core.deleteNamespacedPod({ namespace: "shop", name: "p2" }), "ok"],
    ["collaborator", "create a configmap", (id) => () => id.core.createNamespacedConfigMap({ namespace: "other", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c2" } } }), "ok"],
    ["collaborator", "scale a deployment", (id) => scale(id, 3), "ok"],
    ["collaborator", "list namespaces", (id) => () => id.core.listNamespace(), "ok"],
    ["collaborator", "read a secret", (id) => () => id.core.readNamespacedSecret({ namespace: "shop", name: "db" }), 403],
    ["collaborator", "list secrets", (id) => () => id.core.listNamespacedSecret({ namespace: "shop" }), 403],
    ["collaborator", "create a namespace", (id) => () => id.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "carols" } } }), 403],
    ["view", "list pods in its namespace", (id) => () => id.core.listNamespacedPod({ namespace: "shop" }), "ok"],
    ["view", "read the deployment's scale", (id) => () => id.apps.readNamespacedDeploymentScale({ namespace: "shop", name: "web" }), "ok"],
    ["view", "create a configmap", (id) => () => id.core.createNamespacedConfigMap({ namespace: "shop", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c3" } } }), 403],
    ["view", "delete a pod", (id) => () => id.core.deleteNamespacedPod({ namespace: "shop", name: "p1" }), 403],
    ["view", "read a secret", (id) => () => id.core.readNamespacedSecret({ namespace: "shop", name: "db" }), 403],
    ["view", "scale a deployment", (id) => scale(id, 4), 403],
    ["view", "list pods in another namespace", (id) => () => id.core.listNamespacedPod({ namespace: "other" }), 403],
    ["node", "list nodes", (id) => () => id.core.listNode(), "ok"],
    ["node", "list pods everywhere", (id) => () => id.core.listPodForAllNamespaces(), "ok"],
    ["node", "create a configmap", (id) => () => id.core.createNamespacedConfigMap({ namespace: "shop", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c4" } } }), 403],
    ["node", "list secrets", (id) => () => id.core.listNamespacedSecret({ namespace: "shop" }), 403],
    ["node", "create a namespace", (id) => () => id.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "nodes" } } }), 403],
    ["node", "delete a deployment", (id) => () => id.apps.deleteNamespacedDeployment({ namespace: "shop", name: "web" }), 403],
    ["anonymous", "list pods", (id) => () => id.core.listNamespacedPod({ namespace: "shop" }), 401],
    ["anonymous", "list nodes", (id) => () => id.core.listNode(), 401],
    ["anonymous", "create a namespace", (id) => () => id.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "anon" } } }), 401]
  ]

  it.each(matrix)("%s: %s", async (name, _what, call, expected) => {
    const status = await statusOf(call(who[name]!))
    if (expected === "ok") expect(status, `status ${status}`).not.toBeOneOf([401, 403])
    else expect(status).toBe(expected)
  })

  it("answers SelfSubjectAccessReviews for pods/exec, exec/signal verbs and scale per profile", async () => {
    const exec = { verb: "create", resource: "pods", subresource: "exec", name: "p", namespace: "shop" }
    const execVerb = { verb: "exec", resource: "pods", name: "p", namespace: "shop" }
    const update = { verb: "update", resource: "pods", name: "p", namespace: "shop" }
    expect(await can(who["customer"]!, exec)).toBe(true)
    expect(await can(who["customer"]!, execVerb)).toBe(true)
    expect(await can(who["collaborator"]!, update)).toBe(true)
    expect(await can(who["collaborator"]!, exec)).toBe(false)
    expect(await can(who["collaborator"]!, execVerb)).toBe(false)
    expect(await can(who["view"]!, exec)).toBe(false)
    expect(await can(who["node"]!, { verb: "update", resource: "pods", subresource: "status", name: "p", namespace: "shop" })).toBe(true)
    expect(await can(who["node"]!, { verb: "create", group: "coordination.k8s.io", resource: "leases", name: "worker-1", namespace: "kube-node-lease" })).toBe(true)
    expect(await statusOf(() => who["anonymous"]!.authz.createSelfSubjectAccessReview({ body: { apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", spec: { resourceAttributes: { verb: "get", resource: "pods" } } } }))).toBe(401)
  })

  it("lists each identity's accessible namespaces", async () => {
    const names = async (id: Identity) =>
      ((await id.custom.listClusterCustomObject({ group: "fleet.koder.dev", version: "v1", plural: "accessiblenamespaces" })) as any).items.map((i: any) => i.metadata.name)
    expect(await names(who["customer"]!)).toEqual(["shop"])
    expect(await names(who["view"]!)).toEqual(["shop"])
    expect(await names(who["collaborator"]!)).toEqual(expect.arrayContaining(["default", "ops", "other", "portal", "shop"]))
  })

  it("serves the bootstrap policy as objects anyone allowed can read", async () => {
    const role = await admin.rbac.readClusterRole({ name: "fleet:customer" })
    expect(role.metadata?.annotations?.["rbac.authorization.kubernetes.io/autoupdate"]).toBe("true")
    expect(role.aggregationRule?.clusterRoleSelectors?.length).toBeGreaterThan(0)
    const names = (await admin.rbac.listClusterRole()).items.map((r) => r.metadata?.name)
    expect(names).toEqual(expect.arrayContaining(["cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user", "system:public-info-viewer", "system:node", "fleet:customer", "fleet:collaborator"]))
    const bindings = (await admin.rbac.listClusterRoleBinding()).items.map((b) => `${b.metadata?.name}=${b.subjects?.map((s) => s.name).join(",")}`)
    expect(bindings).toEqual(expect.arrayContaining(["cluster-admin=system:masters", "system:node=system:nodes", "system:discovery=system:authenticated"]))
    // The collaborator reads RBAC objects; the customer does not read cluster-wide ones.
    expect(await statusOf(() => (who["collaborator"]!.custom.listClusterCustomObject({ group: "rbac.authorization.k8s.io", version: "v1", plural: "clusterroles" })))).toBe(200)
    expect(await statusOf(() => (who["customer"]!.custom.listClusterCustomObject({ group: "rbac.authorization.k8s.io", version: "v1", plural: "clusterroles" })))).toBe(403)
  })
})
