// discovery.k8s.io/v1 EndpointSlice: decoding, port defaults, and kube-apiserver's validation.
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { EndpointSlice, Kinds } from "../../src/model/index.js"
import { created, createErrors, updateErrors } from "./harness.js"

const slice = (fields: Record<string, unknown> = {}) => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: { name: "web-abc12", namespace: "default", labels: { [EndpointSlice.ServiceNameLabel]: "web" } },
  addressType: "IPv4",
  endpoints: [{ addresses: ["10.244.1.7"], conditions: { ready: true } }],
  ports: [{ name: "http", port: 80 }],
  ...fields
})

describe("EndpointSlice", () => {
  it("decodes a slice as the controller writes it (strict)", () => {
    const full = slice({
      endpoints: [
        {
          addresses: ["10.244.1.7"],
          conditions: { ready: true, serving: true, terminating: false },
          hostname: "web-0",
          nodeName: "node-1",
          zone: "eu-west-1a",
          targetRef: { kind: "Pod", namespace: "default", name: "web-0", uid: "p1" },
          hints: { forZones: [{ name: "eu-west-1a" }] }
        }
      ],
      ports: [{ name: "http", protocol: "TCP", port: 80, appProtocol: "http" }]
    })
    const r = Kinds.decodeAny(full, { strict: true })
    if (Either.isLeft(r)) expect(r.left).toEqual([])
    expect(Either.isRight(r) && r.right.info).toMatchObject({ group: "discovery.k8s.io", plural: "endpointslices", shortNames: [] })
  })

  it("defaults port names to empty and protocols to TCP", () => {
    expect(created(slice({ ports: [{ port: 80 }, { name: "dns", port: 53, protocol: "UDP" }] })).ports).toEqual([
      { name: "", protocol: "TCP", port: 80 },
      { name: "dns", protocol: "UDP", port: 53 }
    ])
  })

  it.each([
    ["IPv6", ["2001:db8::1"]],
    ["FQDN", ["db.example.com"]],
    // A host-mode pod on a loopback-only host has its node's 127.0.0.1 (unlike Kubernetes).
    ["IPv4", ["127.0.0.1"]],
    ["IPv6", ["::1"]]
  ])("accepts %s addresses %j", (addressType, addresses) => {
    expect(createErrors(slice({ addressType, endpoints: [{ addresses }] }))).toEqual([])
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["a missing address type", { ...slice(), addressType: undefined }, "addressType: Required value"],
    ["an unknown address type", slice({ addressType: "IPX" }), 'addressType: Unsupported value: "IPX": supported values: "FQDN", "IPv4", "IPv6"'],
    ["an endpoint without addresses", slice({ endpoints: [{ addresses: [] }] }), "endpoints[0].addresses: Required value: must contain at least 1 address"],
    ["101 addresses", slice({ endpoints: [{ addresses: Array.from({ length: 101 }, (_, i) => `10.0.${i >> 8}.${(i % 250) + 1}`) }] }), "endpoints[0].addresses: Too many: 101: must have at most 100 items"],
    ["1001 endpoints", slice({ endpoints: Array.from({ length: 1001 }, () => ({ addresses: ["10.0.0.1"] })) }), "endpoints: Too many: 1001: must have at most 1000 items"],
    ["an IPv6 address in an IPv4 slice", slice({ endpoints: [{ addresses: ["2001:db8::1"] }] }), 'endpoints[0].addresses[0]: Invalid value: "2001:db8::1": must be a valid IPv4 address'],
    ["an IPv4 address in an IPv6 slice", slice({ addressType: "IPv6", endpoints: [{ addresses: ["10.0.0.1"] }] }), 'endpoints[0].addresses[0]: Invalid value: "10.0.0.1": must be a valid IPv6 address'],
    ["a link-local address", slice({ endpoints: [{ addresses: ["169.254.169.254"] }] }), 'endpoints[0].addresses[0]: Invalid value: "169.254.169.254": may not be in the link-local range (169.254.0.0/16, fe80::/10)'],
    ["the unspecified address", slice({ addressType: "IPv6", endpoints: [{ addresses: ["::"] }] }), 'endpoints[0].addresses[0]: Invalid value: "::": may not be unspecified (::)'],
    ["a one-label FQDN", slice({ addressType: "FQDN", endpoints: [{ addresses: ["localhost"] }] }), 'endpoints[0].addresses[0]: Invalid value: "localhost": should be a domain with at least two segments separated by dots'],
    ["a bad hostname", slice({ endpoints: [{ addresses: ["10.0.0.1"], hostname: "Web_0" }] }), 'endpoints[0].hostname: Invalid value: "Web_0": a lowercase RFC 1123 label'],
    ["a bad node name", slice({ endpoints: [{ addresses: ["10.0.0.1"], nodeName: "Node_1" }] }), 'endpoints[0].nodeName: Invalid value: "Node_1": a lowercase RFC 1123 subdomain'],
    ["duplicate port names", slice({ ports: [{ name: "http", port: 80 }, { name: "http", port: 8080 }] }), 'ports[1].name: Duplicate value: "http"'],
    ["an unknown protocol", slice({ ports: [{ name: "x", port: 1, protocol: "QUIC" }] }), 'ports[0].protocol: Unsupported value: "QUIC": supported values: "SCTP", "TCP", "UDP"'],
    ["a bad appProtocol", slice({ ports: [{ name: "x", port: 1, appProtocol: "a/b/c" }] }), 'ports[0].appProtocol: Invalid value: "a/b/c": a qualified name']
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(JSON.parse(JSON.stringify(object))).join("\n")).toContain(message)
  })

  it("keeps the address type immutable and lets endpoints change", () => {
    const old = created(slice())
    expect(updateErrors({ ...old, endpoints: [{ addresses: ["10.244.1.8"], conditions: { ready: false } }] }, old)).toEqual([])
    expect(updateErrors({ ...old, addressType: "IPv6", endpoints: [] }, old)).toContain('addressType: Invalid value: "IPv6": field is immutable')
  })
})
