/** Pod resolv.conf in isolated mode, per dnsPolicy. */
import { describe, expect, it } from "@effect/vitest"
import * as PodDns from "../../src/network/PodDns.js"

const pod = (spec: Record<string, unknown>) => ({ metadata: { namespace: "shop", name: "p" }, spec })

describe("PodDns.config", () => {
  it("ClusterFirst (the default): the node's DNS, Kubernetes' search path, ndots:5", () => {
    expect(PodDns.config(pod({}), "10.42.1.1")).toEqual({
      nameservers: ["10.42.1.1"],
      searches: ["shop.svc.cluster.local", "svc.cluster.local", "cluster.local"],
      options: ["ndots:5"]
    })
  })

  it("adds dnsConfig, a pod's option replacing the default of that name", () => {
    const c = PodDns.config(pod({ dnsConfig: { nameservers: ["1.1.1.1"], searches: ["corp.example"], options: [{ name: "ndots", value: "2" }, { name: "edns0" }] } }), "10.42.1.1")
    expect(c).toEqual({
      nameservers: ["10.42.1.1", "1.1.1.1"],
      searches: ["shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"],
      options: ["ndots:2", "edns0"]
    })
  })

  it("Default keeps the host's resolver; None takes only dnsConfig", () => {
    expect(PodDns.config(pod({ dnsPolicy: "Default" }), "10.42.1.1")).toBeUndefined()
    expect(PodDns.config(pod({ dnsPolicy: "None", dnsConfig: { nameservers: ["9.9.9.9"] } }), "10.42.1.1")).toEqual({ nameservers: ["9.9.9.9"], searches: [], options: [] })
  })
})
