/**
 * kubectl's tooling on `koder-fleet dev` (issue 31): `apply -k` on a kustomization (a
 * configMapGenerator's hashed ConfigMap, a namePrefix, the Deployment rewritten to use both),
 * `kubectl proxy` (plain HTTP to the API through it), `explain` and `api-resources` (from the
 * server's OpenAPI and discovery).
 */
import { get as httpGet } from "node:http"
import { dirname } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { pollKubectl, startDev, waitForOutput, type KubectlCluster } from "./KubectlCluster.js"

const kustomization = (greeting: string) => `namePrefix: kz-
labels:
  - pairs:
      suite: kustomize
configMapGenerator:
  - name: settings
    literals:
      - GREETING=${greeting}
resources:
  - deployment.yaml
`

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 1
  selector:
    matchLabels:
      app: kz
  template:
    metadata:
      labels:
        app: kz
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: busybox
          command: ["sh", "-c", "echo greeting=$GREETING; exec sleep 600"]
          envFrom:
            - configMapRef:
                name: settings
`

const fetchText = (url: string) =>
  new Promise<{ status: number; contentType: string; text: string }>((resolve, reject) => {
    httpGet(url, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (d: string) => (text += d))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers["content-type"] ?? ""), text }))
      res.on("error", reject)
    }).on("error", reject)
  })

describe("kubectl on koder-fleet dev: kustomize, proxy, explain", () => {
  let c: KubectlCluster

  beforeAll(async () => {
    c = await startDev()
  }, 60_000)
  afterAll(async () => {
    await c?.stop()
  }, 30_000)

  it("apply -k creates the generated, hashed ConfigMap and the prefixed Deployment that uses it", async () => {
    const dir = dirname(await c.writeFile("kz/kustomization.yaml", kustomization("from-kustomize")))
    await c.writeFile("kz/deployment.yaml", deployment)
    // The name kustomize generates on the client: prefix, generator name, content hash.
    const built = await c.ok(["kustomize", dir])
    const generated = /\n {2}name: (kz-settings-[a-z0-9]{10})\n/.exec(built)?.[1]
    expect(generated, built).toBeDefined()
    expect(await c.ok(["apply", "-k", dir])).toBe(`configmap/${generated} created\ndeployment.apps/kz-app created\n`)
    expect(await c.ok(["get", "configmaps,deployments", "-l", "suite=kustomize", "-o", "name"])).toBe(`configmap/${generated}\ndeployment.apps/kz-app\n`)
    expect(await c.ok(["get", "configmap", generated!, "-o", "jsonpath={.data.GREETING}"])).toBe("from-kustomize")
    expect(await c.ok(["get", "deployment", "kz-app", "-o", "jsonpath={.spec.template.spec.containers[0].envFrom[0].configMapRef.name}"])).toBe(generated)
    expect(await c.ok(["rollout", "status", "deployment/kz-app", "--timeout=30s"], { timeoutMs: 35_000 })).toContain('deployment "kz-app" successfully rolled out')
    await pollKubectl(c, ["logs", "deployment/kz-app"], (r) => r.stdout === "greeting=from-kustomize\n")
    expect(await c.ok(["apply", "-k", dir])).toBe(`configmap/${generated} unchanged\ndeployment.apps/kz-app unchanged\n`)
  }, 50_000)

  it("apply -k after a generator change creates a ConfigMap of a new hash and rolls the Deployment onto it", async () => {
    const dir = dirname(await c.writeFile("kz/kustomization.yaml", kustomization("changed")))
    const out = await c.ok(["apply", "-k", dir])
    const generated = /^configmap\/(kz-settings-[a-z0-9]{10}) created\ndeployment\.apps\/kz-app configured\n$/.exec(out)?.[1]
    expect(generated, out).toBeDefined()
    expect(await c.ok(["rollout", "status", "deployment/kz-app", "--timeout=30s"], { timeoutMs: 35_000 })).toContain("successfully rolled out")
    await pollKubectl(c, ["logs", "deployment/kz-app"], (r) => r.stdout === "greeting=changed\n")
    // The old ConfigMap stays (no prune): two generated ConfigMaps now.
    expect((await c.ok(["get", "configmaps", "-l", "suite=kustomize", "-o", "name"])).trimEnd().split("\n")).toHaveLength(2)
  }, 50_000)

  it("proxy --port=0 serves the API over plain HTTP on the port it prints", async () => {
    const proxy = c.spawn(["proxy", "--port=0"])
    try {
      const [, address] = await waitForOutput(proxy, /^Starting to serve on (127\.0\.0\.1:\d+)\n/)
      const pods = await fetchText(`http://${address}/api/v1/namespaces/default/pods`)
      expect(pods.status).toBe(200)
      expect(pods.contentType).toContain("application/json")
      const list = JSON.parse(pods.text) as { kind: string; apiVersion: string; items: Array<{ metadata: { name: string } }> }
      expect(list).toMatchObject({ kind: "PodList", apiVersion: "v1" })
      expect(list.items.some((p) => p.metadata.name.startsWith("kz-app-"))).toBe(true)
      const version = JSON.parse((await fetchText(`http://${address}/version`)).text) as { major: string }
      expect(version.major).toBe("1")
      expect((await fetchText(`http://${address}/api/v1/namespaces/default/pods/missing`)).status).toBe(404)
    } finally {
      proxy.kill()
    }
  })

  it("explain describes a kind and a field path from the server's OpenAPI", async () => {
    const [kind, field] = await Promise.all([c.ok(["explain", "deployments"]), c.ok(["explain", "deployment.spec.strategy"])])
    expect(kind).toMatch(/^GROUP:\s+apps\nKIND:\s+Deployment\nVERSION:\s+v1\n/)
    // Fleet's schemas are inline and carry no descriptions: kubectl prints `<Object>` and `<no description>`.
    expect(kind).toMatch(/\n {2}spec\t<Object>/)
    expect(kind).toMatch(/\n {2}status\t<Object>/)
    expect(field).toMatch(/\nFIELD: strategy <Object>\n/)
    expect(field).toMatch(/\n {2}rollingUpdate\t</)
    expect(field).toMatch(/\n {2}type\t<string>\n {2}enum: RollingUpdate, Recreate\n/)
    const missing = await c.kubectl(["explain", "deployment.spec.nothing"])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('field "nothing" does not exist')
  })

  it("api-resources and api-versions list what discovery serves", async () => {
    const [resources, versions] = await Promise.all([c.ok(["api-resources"]), c.ok(["api-versions"])])
    expect(resources).toMatch(/^NAME\s+SHORTNAMES\s+APIVERSION\s+NAMESPACED\s+KIND\n/)
    expect(resources).toMatch(/\ndeployments\s+deploy\s+apps\/v1\s+true\s+Deployment\n/)
    expect(resources).toMatch(/\npods\s+po\s+v1\s+true\s+Pod\n/)
    expect(resources).toMatch(/\nnodes\s+no\s+v1\s+false\s+Node\n/)
    expect(versions.split("\n")).toEqual(expect.arrayContaining(["v1", "apps/v1", "batch/v1", "metrics.k8s.io/v1beta1"]))
  })
})
