import { describe, expect, it } from "vitest"
import * as ResourceQuota from "../../src/controllers/ResourceQuotaController.js"

const quota = (hard: Record<string, string>, extra: Record<string, unknown> = {}, status?: Record<string, unknown>) => ({
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name: "q", namespace: "a" },
  spec: { hard, ...extra },
  ...(status === undefined ? {} : { status })
})

const pod = (name: string, cpu: string | undefined, phase = "Running", memoryLimit?: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "a" },
  spec: {
    containers: [
      {
        name: "c",
        image: "x",
        resources: { ...(cpu === undefined ? {} : { requests: { cpu } }), ...(memoryLimit === undefined ? {} : { limits: { memory: memoryLimit } }) }
      }
    ]
  },
  status: { phase }
})

const service = (type: string, ports: number) => ({ apiVersion: "v1", kind: "Service", metadata: { name: type, namespace: "a" }, spec: { type, ports: Array.from({ length: ports }, (_, i) => ({ port: 80 + i })) } })

const observed = (fields: Partial<ResourceQuota.Observed> = {}): ResourceQuota.Observed => ({ pods: [], services: [], counts: new Map(), ...fields })

describe("ResourceQuota.usage", () => {
  const pods = [pod("a", "500m", "Running", "1Gi"), pod("b", "1", "Pending"), pod("done", "2", "Succeeded")]
  const cases: ReadonlyArray<[string, Record<string, string>, ResourceQuota.Observed, Record<string, string>]> = [
    ["pods and cpu requests of unfinished pods", { pods: "10", "requests.cpu": "4" }, observed({ pods }), { pods: "2", "requests.cpu": "1500m" }],
    ["count/pods and bare cpu", { "count/pods": "10", cpu: "4" }, observed({ pods }), { "count/pods": "2", cpu: "1500m" }],
    ["memory limits", { "limits.memory": "4Gi" }, observed({ pods }), { "limits.memory": "1Gi" }],
    ["object counts by name and by count/", { configmaps: "5", "count/secrets": "5", "count/deployments.apps": "2" }, observed({ counts: new Map([["/configmaps", 3], ["/secrets", 1], ["apps/deployments", 2]]) }), { configmaps: "3", "count/secrets": "1", "count/deployments.apps": "2" }],
    ["service kinds", { "services.nodeports": "10", "services.loadbalancers": "2" }, observed({ services: [service("NodePort", 2), service("LoadBalancer", 1), service("ClusterIP", 3)] }), { "services.nodeports": "3", "services.loadbalancers": "1" }],
    ["nothing there yet: zeros", { pods: "1", secrets: "1" }, observed(), { pods: "0", secrets: "0" }]
  ]
  it.each(cases)("%s", (_what, hard, obs, used) => {
    expect(ResourceQuota.decide(quota(hard), obs)).toEqual({ hard, used })
  })

  it("counts only pods in a scoped quota's scope, and nothing else", () => {
    const scoped = quota({ pods: "5", configmaps: "5" }, { scopes: ["BestEffort"] })
    const status = ResourceQuota.decide(scoped, observed({ pods: [pod("besteffort", undefined), pod("burstable", "1")], counts: new Map([["/configmaps", 4]]) }))
    expect(status).toEqual({ hard: { pods: "5", configmaps: "5" }, used: { pods: "1", configmaps: "0" } })
  })

  it("answers nothing when the stored status is current", () => {
    const q = quota({ pods: "5" }, {}, { hard: { pods: "5" }, used: { pods: "1" } })
    expect(ResourceQuota.decide(q, observed({ pods: [pod("a", undefined)] }))).toBeUndefined()
    expect(ResourceQuota.decide(q, observed({ pods: [] }))).toEqual({ hard: { pods: "5" }, used: { pods: "0" } })
  })

  it("maps keys to the objects they count", () => {
    expect(ResourceQuota.countTarget("count/deployments.apps")).toEqual({ group: "apps", plural: "deployments" })
    expect(ResourceQuota.countTarget("persistentvolumeclaims")).toEqual({ group: "", plural: "persistentvolumeclaims" })
    expect(ResourceQuota.countTarget("requests.storage")).toBeUndefined()
  })
})
