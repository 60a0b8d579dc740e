// The default admission chain inside a real (in-process) API server: quota under 50 concurrent
// creates, LimitRange defaults, NodeRestriction, NamespaceLifecycle, ServiceAccount defaulting.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as AdmissionPlugins from "../../src/admission/index.js"
import { namespace, pod, start, type Harness } from "./harness.js"

const run = <A>(body: (h: Harness) => Promise<A>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(start((store) => AdmissionPlugins.make({ store, region: "eu-1" })), (h) => Effect.promise(() => body(h)))))

const quota = (name: string, hard: Record<string, string>) => ({ apiVersion: "v1", kind: "ResourceQuota", metadata: { name }, spec: { hard } })

describe("the default chain", () => {
  it("lists its plugins in kube-apiserver's order", () => {
    expect(AdmissionPlugins.order).toEqual([
      "NamespaceLifecycle",
      "NodeRestriction",
      "MemberRestriction",
      "CertificateRequester",
      "DefaultServiceAccount",
      "PodSecurity",
      "Priority",
      "DefaultTolerationSeconds",
      "PersistentVolumeClaimResize",
      "DefaultStorageClass",
      "LimitRanger",
      "MutatingAdmissionWebhook",
      "RegionLabel",
      "ValidatingAdmissionWebhook",
      "IngressHostOwnership",
      "ResourceQuota",
      "ClusterIpAllocator",
      "NodePortAllocator"
    ])
  })

  it("never lets 50 concurrent creates overshoot a quota", () =>
    run(async ({ call }) => {
      expect((await call("POST", "/api/v1/namespaces", namespace("team"))).status).toBe(201)
      const created = await call("POST", "/api/v1/namespaces/team/resourcequotas", quota("pods", { pods: "10", "requests.cpu": "2", "count/configmaps": "3" }))
      expect(created.status).toBe(201)
      expect(created.body.status).toEqual({ hard: { pods: "10", "requests.cpu": "2", "count/configmaps": "3" }, used: { "count/configmaps": "0", pods: "0", "requests.cpu": "0" } })
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => call("POST", "/api/v1/namespaces/team/pods", pod(`p${i}`, { requests: { cpu: "100m" } })))
      )
      const codes = results.map((r) => r.status)
      expect(codes.filter((c) => c === 201)).toHaveLength(10)
      expect(codes.filter((c) => c === 403)).toHaveLength(40)
      const refused = results.find((r) => r.status === 403)!
      expect(refused.body.reason).toBe("Forbidden")
      expect(refused.body.message).toMatch(/^pods "p\d+" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=10, limited: pods=10$/)
      const list = await call("GET", "/api/v1/namespaces/team/pods")
      expect(list.body.items).toHaveLength(10)
      const q = await call("GET", "/api/v1/namespaces/team/resourcequotas/pods")
      expect(q.body.status.used).toEqual({ "count/configmaps": "0", pods: "10", "requests.cpu": "1" })
      expect(q.body.status.hard).toEqual(q.body.spec.hard)

      // Deleting releases usage; count/<resource> tracks other kinds.
      expect((await call("DELETE", "/api/v1/namespaces/team/pods/" + list.body.items[0].metadata.name)).status).toBe(200)
      expect((await call("GET", "/api/v1/namespaces/team/resourcequotas/pods")).body.status.used).toMatchObject({ pods: "9", "requests.cpu": "900m" })
      const cms = await Promise.all(Array.from({ length: 6 }, (_, i) => call("POST", "/api/v1/namespaces/team/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `c${i}` } })))
      expect(cms.filter((r) => r.status === 201)).toHaveLength(3)
      expect(cms.find((r) => r.status === 403)!.body.message).toMatch(/exceeded quota: pods, requested: count\/configmaps=1, used: count\/configmaps=3, limited: count\/configmaps=3$/)
    }))

  it("leaves quota usage alone on a pod's status writes until the pod turns Succeeded, which releases it at once", () =>
    run(async ({ call }) => {
      await call("POST", "/api/v1/namespaces", namespace("team"))
      expect((await call("POST", "/api/v1/namespaces/team/resourcequotas", quota("pods", { pods: "5", "requests.cpu": "1" }))).status).toBe(201)
      expect((await call("POST", "/api/v1/namespaces/team/pods", pod("job", { requests: { cpu: "100m" } }))).status).toBe(201)
      const used = async () => (await call("GET", "/api/v1/namespaces/team/resourcequotas/pods")).body.status.used
      expect(await used()).toEqual({ pods: "1", "requests.cpu": "100m" })
      const status = (phase: string) => call("PATCH", "/api/v1/namespaces/team/pods/job/status", { status: { phase } }, "admin", "application/merge-patch+json")
      expect((await status("Running")).status).toBe(200)
      expect(await used()).toEqual({ pods: "1", "requests.cpu": "100m" })
      expect((await status("Succeeded")).status).toBe(200)
      expect(await used()).toEqual({ pods: "0", "requests.cpu": "0" })
    }))

  it("refuses a pod that does not state a resource the quota caps, and counts existing objects for a new quota", () =>
    run(async ({ call }) => {
      await call("POST", "/api/v1/namespaces", namespace("team"))
      for (const n of ["a", "b"]) expect((await call("POST", "/api/v1/namespaces/team/pods", pod(n, { limits: { memory: "1Gi" } }))).status).toBe(201)
      const created = await call("POST", "/api/v1/namespaces/team/resourcequotas", quota("mem", { "limits.memory": "3Gi", "requests.memory": "3Gi", "limits.cpu": "1" }))
      expect(created.body.status.used).toEqual({ "limits.cpu": "0", "limits.memory": "2Gi", "requests.memory": "2Gi" })
      const missing = await call("POST", "/api/v1/namespaces/team/pods", pod("c", { limits: { memory: "1Gi" } }))
      expect(missing.status).toBe(403)
      expect(missing.body.message).toBe('pods "c" is forbidden: failed quota: mem: must specify limits.cpu for: app')
      const over = await call("POST", "/api/v1/namespaces/team/pods", pod("d", { limits: { memory: "2Gi", cpu: "1" } }))
      expect(over.body.message).toBe('pods "d" is forbidden: exceeded quota: mem, requested: limits.memory=2Gi,requests.memory=2Gi, used: limits.memory=2Gi,requests.memory=2Gi, limited: limits.memory=3Gi,requests.memory=3Gi')
      expect((await call("POST", "/api/v1/namespaces/team/pods", pod("e", { limits: { memory: "1Gi", cpu: "500m" } }))).status).toBe(201)
      // Raising the cap recounts usage; a direct write of status cannot fake it.
      const raised = await call("PATCH", "/api/v1/namespaces/team/resourcequotas/mem", { spec: { hard: { "limits.memory": "4Gi", "requests.memory": "4Gi", "limits.cpu": "1" } } }, "admin", "application/merge-patch+json")
      expect(raised.body.status).toEqual({ hard: raised.body.spec.hard, used: { "limits.cpu": "500m", "limits.memory": "3Gi", "requests.memory": "3Gi" } })
      const faked = await call("PATCH", "/api/v1/namespaces/team/resourcequotas/mem/status", { status: { used: { "limits.memory": "0" } } }, "admin", "application/merge-patch+json")
      expect(faked.body.status.used["limits.memory"]).toBe("3Gi")
    }))

  it("applies LimitRange defaults and refuses pods outside its bounds", () =>
    run(async ({ call }) => {
      await call("POST", "/api/v1/namespaces", namespace("team"))
      const lr = await call("POST", "/api/v1/namespaces/team/limitranges", {
        apiVersion: "v1",
        kind: "LimitRange",
        metadata: { name: "limits" },
        spec: { limits: [{ type: "Container", max: { cpu: "1", memory: "1Gi" }, min: { cpu: "50m" }, defaultRequest: { cpu: "100m", memory: "256Mi" } }] }
      })
      expect(lr.status).toBe(201)
      expect(lr.body.spec.limits[0].default).toEqual({ cpu: "1", memory: "1Gi" })
      const created = await call("POST", "/api/v1/namespaces/team/pods", pod("web"))
      expect(created.status).toBe(201)
      expect(created.body.spec.containers[0].resources).toEqual({ limits: { cpu: "1", memory: "1Gi" }, requests: { cpu: "100m", memory: "256Mi" } })
      expect(created.body.metadata.annotations["kubernetes.io/limit-ranger"]).toBe("LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app")
      const big = await call("POST", "/api/v1/namespaces/team/pods", pod("big", { limits: { cpu: "2" } }))
      expect(big.status).toBe(403)
      expect(big.body.message).toBe('pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2')
      const small = await call("POST", "/api/v1/namespaces/team/pods", pod("small", { requests: { cpu: "10m" } }))
      expect(small.body.message).toBe('pods "small" is forbidden: minimum cpu usage per Container is 50m, but request is 10m')
    }))

  it("defaults the ServiceAccount and the region label", () =>
    run(async ({ call }) => {
      await call("POST", "/api/v1/namespaces", namespace("team"))
      const created = await call("POST", "/api/v1/namespaces/team/pods", pod("web"))
      expect(created.body.spec.serviceAccountName).toBe("default")
      expect(created.body.metadata.labels["fleet.koder.dev/region"]).toBe("local")
      const own = await call("POST", "/api/v1/namespaces/team/pods", pod("own", undefined, { serviceAccountName: "builder" }))
      expect(own.body.spec.serviceAccountName).toBe("builder")
    }))

  it("refuses deleting the system namespaces and creating in a terminating one", () =>
    run(async ({ call }) => {
      for (const n of ["default", "kube-system", "team"]) await call("POST", "/api/v1/namespaces", namespace(n))
      const del = await call("DELETE", "/api/v1/namespaces/default")
      expect(del.status).toBe(403)
      expect(del.body.message).toBe('namespaces "default" is forbidden: this namespace may not be deleted')
      expect((await call("DELETE", "/api/v1/namespaces/kube-system")).status).toBe(403)
      expect((await call("DELETE", "/api/v1/namespaces/team")).status).toBe(200)
      const late = await call("POST", "/api/v1/namespaces/team/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } })
      expect(late.status).toBe(403)
      expect(late.body.message).toContain("unable to create new content in namespace team because it is being terminated")
      expect((await call("POST", "/api/v1/namespaces/missing/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } })).status).toBe(404)
    }))

  it("lets a node touch only its own Node, Lease and pods' status", () =>
    run(async ({ call }) => {
      for (const n of ["team", "kube-node-lease"]) await call("POST", "/api/v1/namespaces", namespace(n))
      const node = (name: string, labels: Record<string, string> = {}) => ({ apiVersion: "v1", kind: "Node", metadata: { name, labels } })
      const lease = (name: string) => ({ apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name }, spec: { holderIdentity: name } })
      await call("POST", "/api/v1/namespaces/team/pods", pod("mine", undefined, { nodeName: "n1" }))
      await call("POST", "/api/v1/namespaces/team/pods", pod("theirs", undefined, { nodeName: "n2" }))
      await call("POST", "/api/v1/nodes", node("n2"))
      expect((await call("POST", "/apis/coordination.k8s.io/v1/namespaces/team/leases", lease("n1"))).status).toBe(201)
      const merge = "application/merge-patch+json"
      const matrix: ReadonlyArray<[string, string, string, unknown, string | undefined, number]> = [
        ["own node create", "POST", "/api/v1/nodes", node("n1"), undefined, 201],
        ["own node update", "PATCH", "/api/v1/nodes/n1", { metadata: { labels: { a: "b" } } }, merge, 200],
        ["own node status", "PATCH", "/api/v1/nodes/n1/status", { status: { phase: "Running" } }, merge, 200],
        ["restricted label", "PATCH", "/api/v1/nodes/n1", { metadata: { labels: { "node-restriction.kubernetes.io/pool": "x" } } }, merge, 403],
        ["other node", "PATCH", "/api/v1/nodes/n2", { metadata: { labels: { a: "b" } } }, merge, 403],
        ["other node delete", "DELETE", "/api/v1/nodes/n2", undefined, undefined, 403],
        ["own lease", "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease("n1"), undefined, 201],
        ["own lease renew", "PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", { spec: { leaseDurationSeconds: 40 } }, merge, 200],
        ["other lease", "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease("n2"), undefined, 403],
        ["lease elsewhere", "PATCH", "/apis/coordination.k8s.io/v1/namespaces/team/leases/n1", { spec: { leaseDurationSeconds: 40 } }, merge, 403],
        ["own pod status", "PATCH", "/api/v1/namespaces/team/pods/mine/status", { status: { phase: "Running" } }, merge, 200],
        ["own pod spec", "PATCH", "/api/v1/namespaces/team/pods/mine", { metadata: { labels: { a: "b" } } }, merge, 403],
        ["other pod status", "PATCH", "/api/v1/namespaces/team/pods/theirs/status", { status: { phase: "Running" } }, merge, 403],
        ["create pod", "POST", "/api/v1/namespaces/team/pods", pod("new", undefined, { nodeName: "n1" }), undefined, 403],
        ["delete other pod", "DELETE", "/api/v1/namespaces/team/pods/theirs?gracePeriodSeconds=0", undefined, undefined, 403],
        ["delete own pod", "DELETE", "/api/v1/namespaces/team/pods/mine?gracePeriodSeconds=0", undefined, undefined, 200],
        ["configmaps are RBAC's", "POST", "/api/v1/namespaces/team/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } }, undefined, 201]
      ]
      const got: Array<[string, number]> = []
      for (const [what, method, path, body, type, _] of matrix) got.push([what, (await call(method, path, body, "node:n1", type)).status])
      expect(got).toEqual(matrix.map(([what, , , , , want]) => [what, want]))
      const other = await call("PATCH", "/api/v1/nodes/n2", { metadata: { labels: { a: "b" } } }, "node:n1", merge)
      expect(other.body.message).toBe('nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"')
      const spec = await call("PATCH", "/api/v1/namespaces/team/pods/theirs/status", { status: { phase: "Running" } }, "node:n1", merge)
      expect(spec.body.message).toBe('pods "theirs" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself')
      // An administrator is not a node.
      expect((await call("PATCH", "/api/v1/nodes/n2", { metadata: { labels: { a: "b" } } }, "admin", merge)).status).toBe(200)
    }))
})
