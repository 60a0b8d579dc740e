import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Decode from "../../src/model/Decode.js"
import * as NetworkPolicy from "../../src/model/NetworkPolicy.js"

const np = (spec: Record<string, unknown>): NetworkPolicy.NetworkPolicy =>
  ({ apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: { name: "p", namespace: "default" }, spec }) as NetworkPolicy.NetworkPolicy

const errors = (spec: Record<string, unknown>) => NetworkPolicy.validate(np(spec)).map((e) => `${e.path}: ${e.message}`)

describe("NetworkPolicy.validate", () => {
  it.each([
    ["deny all ingress", { podSelector: {} }, []],
    ["the Kubernetes documentation's test-network-policy", {
      podSelector: { matchLabels: { role: "db" } },
      policyTypes: ["Ingress", "Egress"],
      ingress: [{
        from: [{ ipBlock: { cidr: "172.17.0.0/16", except: ["172.17.1.0/24"] } }, { namespaceSelector: { matchLabels: { project: "myproject" } } }, { podSelector: { matchLabels: { role: "frontend" } } }],
        ports: [{ protocol: "TCP", port: 6379 }]
      }],
      egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/24" } }], ports: [{ protocol: "TCP", port: 5978 }] }]
    }, []],
    ["a named port and a port range", { ingress: [{ ports: [{ port: "http" }, { port: 32000, endPort: 32768 }] }] }, []],
    ["namespaceSelector and podSelector in one peer", { ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { a: "b" } } }] }] }, []],
    ["an unknown protocol", { ingress: [{ ports: [{ protocol: "ICMP", port: 1 }] }] }, ['spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"']],
    ["port 0", { ingress: [{ ports: [{ port: 0 }] }] }, ["spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"]],
    ["endPort below port", { egress: [{ ports: [{ port: 100, endPort: 50 }] }] }, ["spec.egress[0].ports[0].endPort: Invalid value: 100: must be greater than or equal to `port`"]],
    ["endPort with a named port", { ingress: [{ ports: [{ port: "web", endPort: 90 }] }] }, ["spec.ingress[0].ports[0].endPort: Invalid value: 90: may not be specified when `port` is non-numeric"]],
    ["endPort without port", { ingress: [{ ports: [{ endPort: 90 }] }] }, ["spec.ingress[0].ports[0].endPort: Invalid value: 90: may not be specified when `port` is not specified"]],
    ["a bad port name", { ingress: [{ ports: [{ port: "Web--" }] }] }, [
      'spec.ingress[0].ports[0].port: Invalid value: "Web--": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
      'spec.ingress[0].ports[0].port: Invalid value: "Web--": must not contain consecutive hyphens',
      'spec.ingress[0].ports[0].port: Invalid value: "Web--": must not begin or end with a hyphen'
    ]],
    ["an empty peer", { ingress: [{ from: [{}] }] }, ["spec.ingress[0].from[0]: Required value: must specify a peer"]],
    ["ipBlock with a podSelector", { egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/8" }, podSelector: {} }] }] }, ["spec.egress[0].to[0]: Forbidden: may not specify both ipBlock and another peer"]],
    ["a bad CIDR", { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0" } }] }] }, ['spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "10.0.0.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)']],
    ["an empty CIDR", { ingress: [{ from: [{ ipBlock: { cidr: "" } }] }] }, ["spec.ingress[0].from[0].ipBlock.cidr: Required value"]],
    ["except outside cidr", { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/16", except: ["10.1.0.0/24"] } }] }] }, ['spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a strict subset of `cidr`']],
    ["except equal to cidr", { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/16", except: ["10.0.0.0/16"] } }] }] }, ['spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "10.0.0.0/16": must be a strict subset of `cidr`']],
    ["except of another family", { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["fd00::/64"] } }] }] }, ['spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "fd00::/64": must be a strict subset of `cidr`']],
    ["IPv6 except inside", { ingress: [{ from: [{ ipBlock: { cidr: "fd00::/48", except: ["fd00:0:0:1::/64"] } }] }] }, []],
    ["an unknown policy type", { policyTypes: ["Ingress", "Both"] }, ['spec.policyTypes[1]: Unsupported value: "Both": supported values: "Ingress", "Egress"']],
    ["three policy types", { policyTypes: ["Ingress", "Egress", "Ingress"] }, ['spec.policyTypes: Invalid value: ["Ingress","Egress","Ingress"]: may not specify more than two policyTypes']]
  ])("%s", (_name, spec, expected) => {
    expect(errors(spec)).toEqual(expected)
  })

  it("rejects a malformed selector while decoding, at its path", () => {
    const decoded = Decode.decodeObject(NetworkPolicy.NetworkPolicy, np({ podSelector: { matchExpressions: [{ key: "a", operator: "In" }] } }))
    expect(Either.isLeft(decoded) && decoded.left.map((e) => e.path)).toEqual(["spec.podSelector.matchExpressions[0].values"])
  })
})

describe("NetworkPolicy.defaults", () => {
  it.each([
    ["no rules: Ingress only", { podSelector: {} }, ["Ingress"]],
    ["egress rules: Ingress and Egress", { egress: [{}] }, ["Ingress", "Egress"]],
    ["given types are kept", { policyTypes: ["Egress"] }, ["Egress"]]
  ])("%s", (_name, spec, types) => {
    const out = NetworkPolicy.defaults(np(spec))
    expect(out.spec?.policyTypes).toEqual(types)
    expect(NetworkPolicy.policyTypesOf(np(spec).spec)).toEqual(types)
  })

  it("ports are TCP unless said otherwise", () => {
    const out = NetworkPolicy.defaults(np({ ingress: [{ ports: [{ port: 80 }, { protocol: "UDP", port: 53 }] }] }))
    expect(out.spec?.ingress?.[0]?.ports).toEqual([{ port: 80, protocol: "TCP" }, { protocol: "UDP", port: 53 }])
  })
})
