import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as ResourceQuota from "../../src/admission/ResourceQuotaAdmission.js"
import * as Quantity from "../../src/model/Quantity.js"

const amounts = (m: Record<string, string>) => new Map(Object.entries(m).map(([k, v]) => [k, Either.getOrThrow(Quantity.parse(v))]))
const formatted = (m: ReadonlyMap<string, Quantity.Quantity>) => Object.fromEntries([...m].map(([k, v]) => [k, Quantity.format(v)]))
const pods = { group: "", plural: "pods" }
const pod = (containers: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({
  spec: { containers: containers.map((resources, i) => ({ name: `c${i}`, resources })) },
  ...extra
})

describe("ResourceQuota.usage", () => {
  const keys = ["pods", "count/pods", "requests.cpu", "cpu", "requests.memory", "limits.cpu", "limits.memory", "configmaps", "count/deployments.apps"]
  const cases: ReadonlyArray<[string, { group: string; plural: string }, unknown, Record<string, string>]> = [
    [
      "a pod",
      pods,
      pod([{ requests: { cpu: "250m", memory: "64Mi" }, limits: { cpu: "500m", memory: "128Mi" } }, { requests: { cpu: "250m" } }]),
      { pods: "1", "count/pods": "1", "requests.cpu": "500m", cpu: "500m", "requests.memory": "64Mi", "limits.cpu": "500m", "limits.memory": "128Mi" }
    ],
    ["a request defaults to the limit", pods, pod([{ limits: { cpu: "1" } }]), { pods: "1", "count/pods": "1", "requests.cpu": "1", cpu: "1", "limits.cpu": "1" }],
    ["a finished pod uses nothing", pods, pod([{ requests: { cpu: "1" } }], { status: { phase: "Succeeded" } }), {}],
    ["a configmap", { group: "", plural: "configmaps" }, {}, { configmaps: "1" }],
    ["a deployment", { group: "apps", plural: "deployments" }, {}, { "count/deployments.apps": "1" }]
  ]
  it.each(cases)("%s", (_what, target, object, want) => expect(formatted(ResourceQuota.usage(target, object, keys))).toEqual(want))

  it("counts services' load balancers and node ports", () => {
    const svc = { spec: { type: "LoadBalancer", ports: [{ port: 80 }, { port: 443 }] } }
    expect(formatted(ResourceQuota.usage({ group: "", plural: "services" }, svc, ["services", "services.loadbalancers", "services.nodeports"]))).toEqual({
      services: "1",
      "services.loadbalancers": "1",
      "services.nodeports": "2"
    })
  })
})

describe("ResourceQuota.decide", () => {
  const quota = (used: Record<string, string>) => ({ name: "q", hard: amounts({ pods: "5", "requests.memory": "1Gi" }), used: amounts(used) })
  const cases: ReadonlyArray<[string, Record<string, string>, Record<string, string>, Record<string, string> | string]> = [
    ["room left", { pods: "4" }, { pods: "1" }, { pods: "5" }],
    ["full", { pods: "5" }, { pods: "1" }, "exceeded quota: q, requested: pods=1, used: pods=5, limited: pods=5"],
    [
      "two resources over",
      { pods: "5", "requests.memory": "768Mi" },
      { pods: "1", "requests.memory": "512Mi" },
      "exceeded quota: q, requested: pods=1,requests.memory=512Mi, used: pods=5,requests.memory=768Mi, limited: pods=5,requests.memory=1Gi"
    ],
    ["a release never fails, nor goes below zero", { pods: "0" }, { pods: "-1" }, { pods: "0" }],
    ["unknown usage counts from zero", {}, { pods: "1" }, { pods: "1" }],
    ["keys the quota does not cap are ignored", { pods: "5" }, { secrets: "1" }, { pods: "5" }]
  ]
  it.each(cases)("%s", (_what, used, delta, want) => {
    const decided = ResourceQuota.decide(quota(used), amounts(delta))
    expect(Either.isLeft(decided) ? decided.left : formatted(decided.right)).toEqual(want)
  })
})

describe("ResourceQuota scopes and required fields", () => {
  it("selects pods by scope", () => {
    const scoped = (scopes: Array<string>) => ({ spec: { hard: { pods: "1" }, scopes } })
    const bestEffort = pod([{}])
    const burstable = pod([{ requests: { cpu: "1" } }], { spec: { activeDeadlineSeconds: 10, containers: [{ name: "c", resources: { requests: { cpu: "1" } } }] } })
    expect(ResourceQuota.inScope(scoped(["BestEffort"]), pods, bestEffort)).toBe(true)
    expect(ResourceQuota.inScope(scoped(["BestEffort"]), pods, burstable)).toBe(false)
    expect(ResourceQuota.inScope(scoped(["NotBestEffort", "Terminating"]), pods, burstable)).toBe(true)
    expect(ResourceQuota.inScope(scoped(["NotTerminating"]), pods, burstable)).toBe(false)
    expect(ResourceQuota.inScope(scoped(["BestEffort"]), { group: "", plural: "configmaps" }, {})).toBe(false)
    expect(ResourceQuota.inScope({ spec: { hard: {} } }, { group: "", plural: "configmaps" }, {})).toBe(true)
  })

  it("names the containers that do not state a capped resource", () => {
    const p = pod([{ requests: { cpu: "1" } }, { limits: { memory: "1Gi" } }])
    expect(ResourceQuota.unspecified(p, ["pods", "requests.cpu", "limits.cpu", "limits.memory", "requests.storage"])).toEqual([
      "limits.cpu for: c0,c1",
      "limits.memory for: c0",
      "requests.cpu for: c1"
    ])
  })

  it("names count keys as kube does", () => {
    expect(ResourceQuota.countKey({ group: "", plural: "pods" })).toBe("count/pods")
    expect(ResourceQuota.countKey({ group: "apps", plural: "deployments" })).toBe("count/deployments.apps")
  })
})
