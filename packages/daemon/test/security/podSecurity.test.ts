/**
 * Pod Security Admission through a real `koder-fleet server` over HTTPS: namespace labels pick
 * the level (403 with kube-apiserver's message when a pod violates it), `warn` answers with
 * `Warning` headers, `audit` annotates the audit log, unlabelled namespaces get the server's
 * default (baseline), a customer (a ServiceAccount bound to `fleet:customer` in its own
 * namespace) gets restricted, and workload templates are warned about, never refused. Also the
 * volume paths pod validation refuses (422), and a bad `--pod-security-default`.
 */
import { existsSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ApiException, CoreV1Api, KubeConfig, RbacAuthorizationV1Api, type V1Pod } from "@kubernetes/client-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, spawnRole, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const scratch = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()

/** The HTTP status of a client-node call and its Status message (201/200 and "" when it resolves). */
const outcome = async (call: () => Promise<unknown>): Promise<{ code: number; message: string }> => {
  try {
    await call()
    return { code: 200, message: "" }
  } catch (e) {
    if (e instanceof ApiException) return { code: e.code, message: String((JSON.parse(String(e.body)) as { message?: string }).message ?? "") }
    throw e
  }
}

/** kube's `299 - "…"` warnings of a response. */
const warningsOf = (header: string | Array<string> | undefined): ReadonlyArray<string> =>
  [header ?? []].flat().flatMap((h) => [...h.matchAll(/299 - ("(?:[^"\\]|\\.)*")/g)].map((m) => JSON.parse(m[1]!) as string))

const restrictedContext = { allowPrivilegeEscalation: false, runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" }, capabilities: { drop: ["ALL"] } }
const pod = (name: string, spec: Record<string, unknown> = {}, securityContext: Record<string, unknown> = {}): V1Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: { containers: [{ name: "c", image: "nginx", securityContext }], ...spec }
})
const compliant = (name: string) => pod(name, {}, restrictedContext)
const privileged = (name: string) => pod(name, {}, { privileged: true })
const hostPath = (name: string) => pod(name, { volumes: [{ name: "root", hostPath: { path: "/" } }] })
const hostNetwork = (name: string) => pod(name, { hostNetwork: true })
const labelled = (name: string, labels: Record<string, string>) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels } })

describe("Pod Security Admission over HTTPS", () => {
  let dir: string
  let server: FleetProcess
  let http: ReturnType<typeof client>
  let token: string
  let admin: { core: CoreV1Api; rbac: RbacAuthorizationV1Api }
  let customer: CoreV1Api

  const post = (path: string, body: unknown, as = token) => http.send("POST", path, { token: as, body: JSON.stringify(body) })

  beforeAll(async () => {
    dir = await mkdtemp(join(scratch, "fleet-psa-"))
    server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0"])
    const kc = new KubeConfig()
    kc.loadFromFile(server.kubeconfig)
    admin = { core: kc.makeApiClient(CoreV1Api), rbac: kc.makeApiClient(RbacAuthorizationV1Api) }
    const creds = credentials(server.kubeconfig)
    token = creds.token
    http = client(server.port, creds.ca)

    await admin.core.createNamespace({ body: labelled("strict", { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest" }) })
    await admin.core.createNamespace({ body: labelled("host", { "pod-security.kubernetes.io/enforce": "privileged" }) })
    await admin.core.createNamespace({ body: labelled("soft", { "pod-security.kubernetes.io/enforce": "privileged", "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/audit": "baseline", "pod-security.kubernetes.io/audit-version": "v1.30" }) })
    await admin.core.createNamespace({ body: labelled("plain", {}) })
    await admin.core.createNamespace({ body: labelled("acme", {}) })

    // The customer: a ServiceAccount of its own namespace, bound to fleet:customer there.
    await eventually(async () => (await outcome(() => admin.core.readNamespace({ name: "acme" }))).code === 200 || undefined, 10_000, "namespace acme")
    await admin.core.createNamespacedServiceAccount({ namespace: "acme", body: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "owner" } } })
    const issued = await admin.core.createNamespacedServiceAccountToken({ namespace: "acme", name: "owner", body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences: [], expirationSeconds: 3600 } } })
    await admin.rbac.createNamespacedRoleBinding({
      namespace: "acme",
      body: {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "customer" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "fleet:customer" },
        subjects: [{ kind: "ServiceAccount", name: "owner", namespace: "acme" }]
      }
    })
    const { server: url, ca } = creds
    const ckc = new KubeConfig()
    ckc.loadFromOptions({
      clusters: [{ name: "fleet", server: url, caData: Buffer.from(ca).toString("base64"), skipTLSVerify: false }],
      users: [{ name: "owner", token: issued.status!.token }],
      contexts: [{ name: "ctx", cluster: "fleet", user: "owner" }],
      currentContext: "ctx"
    })
    customer = ckc.makeApiClient(CoreV1Api)
    // Pods need their namespace's default ServiceAccount; the customer's grant takes a moment.
    for (const ns of ["strict", "host", "soft", "plain", "acme"]) {
      await eventually(async () => (await outcome(() => admin.core.readNamespacedServiceAccount({ namespace: ns, name: "default" }))).code === 200 || undefined, 10_000, `${ns}'s default ServiceAccount`)
    }
    await eventually(async () => (await outcome(() => customer.listNamespacedPod({ namespace: "acme" }))).code === 200 || undefined, 10_000, "the customer's RoleBinding")
  }, 90_000)

  afterAll(async () => {
    http?.close()
    if (server?.child.exitCode === null) server.child.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  it("refuses privileged, hostPath and hostNetwork pods in a restricted namespace, naming the violation", async () => {
    const cases: ReadonlyArray<[V1Pod, string]> = [
      [privileged("priv"), 'privileged (container "c" must not set securityContext.privileged=true)'],
      [hostPath("disk"), 'restricted volume types (volume "root" uses restricted volume type "hostPath")'],
      [hostNetwork("net"), "host namespaces (hostNetwork=true)"]
    ]
    for (const [body, violation] of cases) {
      const refused = await outcome(() => admin.core.createNamespacedPod({ namespace: "strict", body }))
      expect(refused.code).toBe(403)
      expect(refused.message).toMatch(new RegExp(`^pods "${body.metadata!.name}" is forbidden: violates PodSecurity "restricted:latest": `))
      expect(refused.message).toContain(violation)
    }
    expect((await outcome(() => admin.core.createNamespacedPod({ namespace: "strict", body: compliant("ok") }))).code).toBe(200)
    const list = await admin.core.listNamespacedPod({ namespace: "strict" })
    expect(list.items.map((p) => p.metadata?.name)).toEqual(["ok"])
  })

  it("admits them where an administrator labelled the namespace privileged", async () => {
    for (const body of [privileged("priv"), hostPath("disk"), hostNetwork("net")]) {
      expect((await outcome(() => admin.core.createNamespacedPod({ namespace: "host", body }))).code).toBe(200)
    }
  })

  it("enforces baseline where no label says otherwise (the server's default)", async () => {
    const refused = await outcome(() => admin.core.createNamespacedPod({ namespace: "plain", body: hostNetwork("net") }))
    expect(refused).toEqual({ code: 403, message: 'pods "net" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)' })
    expect((await outcome(() => admin.core.createNamespacedPod({ namespace: "plain", body: pod("web") }))).code).toBe(200)
  })

  it("warns with Warning headers and audits, without refusing", async () => {
    const created = await post("/api/v1/namespaces/soft/pods", hostPath("disk"))
    expect(created.status).toBe(201)
    expect(warningsOf(created.headers["warning"])).toEqual([
      expect.stringMatching(/^would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false .*, restricted volume types \(volume "root" uses restricted volume type "hostPath"\), /)
    ])
    const audit = await eventually(() => {
      const lines = readFileSync(join(dir, "audit.log"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { resource: string; namespace: string; code: number; annotations?: Record<string, string> })
      return lines.find((l) => l.resource === "pods" && l.namespace === "soft" && l.code === 201)
    }, 10_000, "the pod's audit line")
    expect(audit.annotations).toEqual({
      "pod-security.kubernetes.io/enforce-policy": "privileged:latest",
      "pod-security.kubernetes.io/audit-violations": 'would violate PodSecurity "baseline:v1.30": hostPath volumes (volume "root")'
    })
    // A compliant pod: no warning.
    const quiet = await post("/api/v1/namespaces/soft/pods", compliant("quiet"))
    expect(quiet.status).toBe(201)
    expect(quiet.headers["warning"]).toBeUndefined()
  })

  it("accepts a Deployment whose template violates the warn level, with a warning", async () => {
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web" },
      spec: { replicas: 0, selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: privileged("x").spec } }
    }
    const created = await post("/apis/apps/v1/namespaces/soft/deployments", deployment)
    expect(created.status).toBe(201)
    expect(warningsOf(created.headers["warning"])).toEqual([expect.stringMatching(/^would violate PodSecurity "restricted:latest": privileged \(container "c" must not set securityContext.privileged=true\)/)])
  })

  it("holds a customer to restricted in its own namespace, and the customer cannot relabel it", async () => {
    for (const body of [privileged("priv"), hostPath("disk"), hostNetwork("net"), pod("plain")]) {
      const refused = await outcome(() => customer.createNamespacedPod({ namespace: "acme", body }))
      expect(refused.code).toBe(403)
      expect(refused.message).toContain('violates PodSecurity "restricted:latest"')
    }
    expect((await outcome(() => customer.createNamespacedPod({ namespace: "acme", body: compliant("ok") }))).code).toBe(200)
    const relabel = await http.send("PATCH", "/api/v1/namespaces/acme", {
      token: (await customerToken()) ?? "",
      body: JSON.stringify({ metadata: { labels: { "pod-security.kubernetes.io/enforce": "privileged" } } }),
      headers: { "content-type": "application/merge-patch+json" }
    })
    expect(relabel.status).toBe(403)
  })

  it("refuses volume paths that leave the volume, and file modes past 0777 (422)", async () => {
    const bad = await post("/api/v1/namespaces/plain/pods", pod("cm", { volumes: [{ name: "v", configMap: { name: "c", items: [{ key: "k", path: "../x" }] } }] }))
    expect(bad.status).toBe(422)
    expect(bad.json()).toMatchObject({ kind: "Status", reason: "Invalid", details: { causes: [{ field: "spec.volumes[0].configMap.items[0].path", reason: "FieldValueInvalid" }] } })
    expect(bad.json()["message"]).toBe(`Pod "cm" is invalid: spec.volumes[0].configMap.items[0].path: Invalid value: "../x": must not contain '..'`)
    const sub = await post("/api/v1/namespaces/plain/pods", pod("sub", { volumes: [{ name: "v", emptyDir: {} }], containers: [{ name: "c", image: "nginx", volumeMounts: [{ name: "v", mountPath: "/d", subPath: "/etc" }] }] }))
    expect(sub.status).toBe(422)
    expect(sub.json()["message"]).toContain(`spec.containers[0].volumeMounts[0].subPath: Invalid value: "/etc": must be a relative path`)
    const mode = await post("/api/v1/namespaces/plain/pods", pod("mode", { volumes: [{ name: "v", secret: { secretName: "s", defaultMode: 4096 } }] }))
    expect(mode.status).toBe(422)
    expect(mode.json()["message"]).toContain("spec.volumes[0].secret.defaultMode: Invalid value: 4096: must be a number between 0 and 0777 (octal), both inclusive")
  })

  it("refuses to start with an unknown --pod-security-default", async () => {
    const other = await mkdtemp(join(scratch, "fleet-psa-flag-"))
    try {
      const bad = spawnRole("server", ["--data-dir", other, "--listen", "127.0.0.1:0", "--pod-security-default", "strict"])
      expect(await bad.exited).not.toBe(0)
      expect(bad.stderr()).toContain('--pod-security-default "strict": must be one of privileged, baseline, restricted')
    } finally {
      await rm(other, { recursive: true, force: true })
    }
  }, 120_000)

  /** A fresh token of the customer's ServiceAccount (for raw requests). */
  const customerToken = async () =>
    (await admin.core.createNamespacedServiceAccountToken({ namespace: "acme", name: "owner", body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences: [], expirationSeconds: 600 } } })).status?.token
})
