// The ingress's endpoint order and retry rule (IngressUpstreams): round-robin per backend, endpoints
// that refused a connection sorted last for a while, at most maxAttempts tried, and which failures
// may move a request on.
import type { IngressRoutes } from "@koder/fleet-core"
import { describe, expect, it } from "vitest"
import * as IngressUpstreams from "../../src/net/IngressUpstreams.js"

const backend = (service: string, ...ports: Array<number>): IngressRoutes.Backend => ({
  namespace: "default",
  service,
  port: "80",
  targets: ports.map((port) => ({ address: "10.0.0.1", port })),
  problem: undefined
})
const ports = (targets: ReadonlyArray<IngressRoutes.Target>) => targets.map((t) => t.port)

describe("IngressUpstreams", () => {
  it("rotates each backend's endpoints on its own, at most maxAttempts of them", () => {
    const u = IngressUpstreams.make(2)
    const web = backend("web", 1, 2, 3)
    expect(ports(IngressUpstreams.order(u, web))).toEqual([1, 2])
    expect(ports(IngressUpstreams.order(u, web))).toEqual([2, 3])
    expect(ports(IngressUpstreams.order(u, backend("api", 7, 8)))).toEqual([7, 8])
    expect(ports(IngressUpstreams.order(u, web))).toEqual([3, 1])
  })

  it("sorts an endpoint that was marked down last", () => {
    const u = IngressUpstreams.make(3)
    const web = backend("web", 1, 2, 3)
    IngressUpstreams.markDown(u, web.targets[0]!)
    expect(ports(IngressUpstreams.order(u, web))).toEqual([2, 3, 1])
  })

  it.each([
    ["ECONNREFUSED", true, true, "POST", true],
    ["ECONNREFUSED", false, true, "POST", false],
    ["UND_ERR_CONNECT_TIMEOUT", true, false, "GET", true],
    ["ECONNRESET", true, false, "GET", true],
    ["ECONNRESET", true, false, "POST", false],
    ["ECONNRESET", true, true, "PUT", false],
    ["UND_ERR_HEADERS_TIMEOUT", true, false, "GET", false]
  ])("retryable(%s, untouched %s, body %s, %s) is %s", (code, untouched, withBody, method, expected) => {
    expect(IngressUpstreams.retryable(code, untouched, withBody, method)).toBe(expected)
  })

  it("reads an error's code from itself or its cause", () => {
    expect(IngressUpstreams.codeOf({ code: "ECONNREFUSED" })).toBe("ECONNREFUSED")
    expect(IngressUpstreams.codeOf({ cause: { code: "EPIPE" } })).toBe("EPIPE")
    expect(IngressUpstreams.codeOf(new Error("x"))).toBe("")
    expect(IngressUpstreams.codeOf(undefined)).toBe("")
  })
})
