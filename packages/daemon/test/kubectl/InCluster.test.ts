/**
 * In-cluster access on `koder-fleet dev` (issue 31): the `kubernetes` Service in `default` with its
 * Endpoints and EndpointSlice at the API server, `KUBERNETES_SERVICE_HOST`/`PORT` in containers,
 * and the projected token, CA and namespace at /var/run/secrets/kubernetes.io/serviceaccount, so
 * that a pod running `@kubernetes/client-node` with `loadFromCluster()` lists pods as its
 * ServiceAccount, within what RBAC grants it (and is refused what it does not).
 */
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { pollKubectl, startDev, type KubectlCluster } from "./KubectlCluster.js"

const clientNode = pathToFileURL(createRequire(import.meta.url).resolve("@kubernetes/client-node")).href

// Lists the pods of its namespace, then tries the cluster's nodes (not granted), as the pod's ServiceAccount.
const program = `
const k8s = await import(${JSON.stringify(clientNode)});
const kc = new k8s.KubeConfig();
kc.loadFromCluster();
const api = kc.makeApiClient(k8s.CoreV1Api);
const ns = (await import("node:fs")).readFileSync("/var/run/secrets/kubernetes.io/serviceaccount/namespace", "utf8");
console.log("server " + kc.getCurrentCluster().server);
const pods = await api.listNamespacedPod({ namespace: ns });
console.log("pods " + pods.items.map((p) => p.metadata.name).sort().join(","));
try { await api.listNode(); console.log("nodes allowed"); } catch (e) { console.log("nodes refused " + (e.code ?? e.statusCode)); }
setInterval(() => {}, 1000);
`

const manifest = `apiVersion: v1
kind: Namespace
metadata: {name: incluster}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: incluster}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: default-reads-pods, namespace: incluster}
subjects: [{kind: ServiceAccount, name: default, namespace: incluster}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
---
apiVersion: v1
kind: Pod
metadata: {name: operator, namespace: incluster}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: operator
      image: node
      command: ["node", "--input-type=module", "-e", ${JSON.stringify(program)}]
`

let cluster: KubectlCluster

beforeAll(async () => {
  cluster = await startDev()
}, 90_000)

afterAll(async () => {
  await cluster?.stop()
})

describe("in-cluster access", () => {
  it("the kubernetes Service in default points at the API server", async () => {
    const service = JSON.parse(await cluster.ok(["get", "service", "kubernetes", "-n", "default", "-o", "json"])) as { spec: { clusterIP: string; ports: Array<{ name: string; port: number; targetPort: number }> } }
    expect(service.spec.clusterIP).toBe("10.96.0.1")
    const port = cluster.fleet.port
    expect(service.spec.ports).toEqual([expect.objectContaining({ name: "https", port: 443, targetPort: port })])
    const endpoints = await pollKubectl(cluster, ["get", "endpoints", "kubernetes", "-n", "default", "-o", "jsonpath={.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}"], (r) => r.code === 0 && r.stdout !== "")
    expect(endpoints.stdout).toBe(`127.0.0.1:${port}`)
    const slice = await pollKubectl(cluster, ["get", "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes", "-o", "jsonpath={.items[0].endpoints[0].addresses[0]}:{.items[0].ports[0].port}"], (r) => r.code === 0 && r.stdout !== "")
    expect(slice.stdout).toBe(`127.0.0.1:${port}`)
    expect(await cluster.ok(["get", "configmap", "kube-root-ca.crt", "-n", "default", "-o", "jsonpath={.data.ca\\.crt}"])).toContain("BEGIN CERTIFICATE")
  })

  it("a pod using loadFromCluster lists its namespace's pods under its ServiceAccount's RBAC", async () => {
    await cluster.ok(["apply", "-f", "-"], { stdin: manifest })
    const logs = await pollKubectl(cluster, ["logs", "-n", "incluster", "operator"], (r) => r.code === 0 && r.stdout.includes("nodes "), 60_000)
    expect(logs.stdout).toContain(`server https://127.0.0.1:${cluster.fleet.port}`)
    expect(logs.stdout).toContain("pods operator")
    expect(logs.stdout).toContain("nodes refused 403")
    const env = await cluster.ok(["get", "pod", "operator", "-n", "incluster", "-o", "jsonpath={.spec.volumes[*].projected.sources[*].serviceAccountToken.path}"])
    expect(env).toBe("token")
  }, 90_000)
})
