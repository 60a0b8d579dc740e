/**
 * `kubectl apply --server-side` on `koder-fleet dev` (issue 31): create, re-apply unchanged, two
 * field managers in conflict (kubectl's own conflict help), `--force-conflicts`, a field removed
 * from the manifest, `kubectl scale` taking a field over, and a CRD whose list is a map by its
 * `x-kubernetes-list-map-keys` so two managers own different items of it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startDev, type KubectlCluster } from "./KubectlCluster.js"

const deployment = (replicas: number, extra = "") => `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ssa}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: web
          image: busybox
          command: ["sleep", "100000"]
${extra}`

const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gateways.ssa.example.com}
spec:
  group: ssa.example.com
  scope: Namespaced
  names: {plural: gateways, singular: gateway, kind: Gateway}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                listeners:
                  type: array
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [name]
                  items:
                    type: object
                    required: [name]
                    properties:
                      name: {type: string}
                      port: {type: integer}
`

const gateway = (listener: string, port: number) => `apiVersion: ssa.example.com/v1
kind: Gateway
metadata: {name: edge, namespace: ssa}
spec:
  listeners:
    - {name: ${listener}, port: ${port}}
`

let cluster: KubectlCluster

beforeAll(async () => {
  cluster = await startDev()
  await cluster.ok(["create", "namespace", "ssa"])
}, 90_000)

afterAll(async () => {
  await cluster?.stop()
})

const managers = async (kind: string, name: string) =>
  (JSON.parse(await cluster.ok(["get", kind, name, "-n", "ssa", "-o", "json", "--show-managed-fields"])) as { metadata: { managedFields: Array<{ manager: string; operation: string }> } }).metadata.managedFields.map((m) => `${m.manager}/${m.operation}`)

describe("kubectl apply --server-side", () => {
  it("creates, re-applies without a change, and records kubectl as the Apply manager", async () => {
    expect(await cluster.ok(["apply", "--server-side", "-f", "-"], { stdin: deployment(2) })).toContain("deployment.apps/web serverside-applied")
    const rv = await cluster.ok(["get", "deployment", "web", "-n", "ssa", "-o", "jsonpath={.metadata.resourceVersion}"])
    await cluster.ok(["apply", "--server-side", "-f", "-"], { stdin: deployment(2) })
    // A controller may write status meanwhile; the object's spec and its generation stay.
    expect(await cluster.ok(["get", "deployment", "web", "-n", "ssa", "-o", "jsonpath={.metadata.generation}"])).toBe("1")
    expect(Number(await cluster.ok(["get", "deployment", "web", "-n", "ssa", "-o", "jsonpath={.metadata.resourceVersion}"]))).toBeGreaterThanOrEqual(Number(rv))
    expect(await managers("deployment", "web")).toContain("kubectl/Apply")
  })

  it("a second manager changing replicas conflicts; --force-conflicts takes it over", async () => {
    const r = await cluster.kubectl(["apply", "--server-side", "--field-manager=ops", "-f", "-"], { stdin: deployment(4) })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain('Apply failed with 1 conflict: conflict with "kubectl" using apps/v1: .spec.replicas')
    expect(r.stderr).toContain("--force-conflicts")
    expect(await cluster.ok(["get", "deployment", "web", "-n", "ssa", "-o", "jsonpath={.spec.replicas}"])).toBe("2")
    await cluster.ok(["apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", "-"], { stdin: deployment(4) })
    expect(await cluster.ok(["get", "deployment", "web", "-n", "ssa", "-o", "jsonpath={.spec.replicas}"])).toBe("4")
    // kubectl no longer owns replicas: its own apply of another value goes through only with force as well.
    const back = await cluster.kubectl(["apply", "--server-side", "-f", "-"], { stdin: deployment(2) })
    expect(back.stderr).toContain('conflict with "ops"')
  })

  it("a field dropped from the manifest is removed; kubectl scale takes replicas as an Update", async () => {
    await cluster.ok(["apply", "--server-side", "--field-manager=labels", "-f", "-"], {
      stdin: `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ssa, labels: {team: a, tier: web}}\n`
    })
    expect(await cluster.ok(["get", "deployment", "web", "-n", "ssa", "-o", "jsonpath={.metadata.labels.tier}"])).toBe("web")
    await cluster.ok(["apply", "--server-side", "--field-manager=labels", "-f", "-"], { stdin: `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ssa, labels: {team: a}}\n` })
    expect(await cluster.ok(["get", "deployment", "web", "-n", "ssa", "-o", "jsonpath={.metadata.labels}"])).not.toContain("tier")
    await cluster.ok(["scale", "deployment", "web", "-n", "ssa", "--replicas=1"])
    const r = await cluster.kubectl(["apply", "--server-side", "--field-manager=ops", "-f", "-"], { stdin: deployment(4) })
    expect(r.stderr).toContain('conflict with "kubectl"')
  })

  it("a CRD's map-list: two managers own different items by their key", async () => {
    await cluster.ok(["apply", "--server-side", "-f", "-"], { stdin: crd })
    await cluster.ok(["wait", "--for=condition=Established", "crd/gateways.ssa.example.com", "--timeout=20s"])
    await cluster.ok(["apply", "--server-side", "--field-manager=http-team", "-f", "-"], { stdin: gateway("http", 80) })
    await cluster.ok(["apply", "--server-side", "--field-manager=tls-team", "-f", "-"], { stdin: gateway("https", 443) })
    expect(await cluster.ok(["get", "gateway", "edge", "-n", "ssa", "-o", "jsonpath={.spec.listeners[*].name}"])).toBe("http https")
    const conflict = await cluster.kubectl(["apply", "--server-side", "--field-manager=tls-team", "-f", "-"], { stdin: gateway("http", 8080) })
    expect(conflict.stderr).toContain('conflict with "http-team"')
    expect(conflict.stderr).toContain('.spec.listeners[name="http"].port')
    // tls-team stops applying https: its item goes, http-team's stays.
    await cluster.ok(["apply", "--server-side", "--field-manager=tls-team", "-f", "-"], { stdin: `apiVersion: ssa.example.com/v1\nkind: Gateway\nmetadata: {name: edge, namespace: ssa}\n` })
    expect(await cluster.ok(["get", "gateway", "edge", "-n", "ssa", "-o", "jsonpath={.spec.listeners[*].name}"])).toBe("http")
  })
})
