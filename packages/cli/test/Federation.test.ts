/** `kfleet federation join`'s kubeconfig flattening and `get --all-members`' paths (pure). */
import { describe, expect, it } from "vitest"
import { parse } from "yaml"
import * as Federation from "../src/commands/Federation.js"
import * as Get from "../src/commands/Get.js"

describe("federation join: the member's kubeconfig as the hub keeps it", () => {
  const pem = (what: string) => `-----BEGIN ${what}-----\nAAAA\n-----END ${what}-----\n`
  const b64 = (s: string) => Buffer.from(s).toString("base64")

  it("one self-contained context with the server, its CA and a token", () => {
    const doc = parse(Federation.flatten({ context: "south", server: "https://south:9300", namespace: "default", insecure: false, caPem: pem("CERTIFICATE"), token: "t0k" }))
    expect(doc).toEqual({
      apiVersion: "v1",
      kind: "Config",
      "current-context": "member",
      clusters: [{ name: "member", cluster: { server: "https://south:9300", "certificate-authority-data": b64(pem("CERTIFICATE")) } }],
      users: [{ name: "member", user: { token: "t0k" } }],
      contexts: [{ name: "member", context: { cluster: "member", user: "member" } }]
    })
  })

  it("a client certificate and key are inlined; a context without credentials is refused", () => {
    const doc = parse(Federation.flatten({ context: "c", server: "https://m:1", namespace: "default", insecure: false, certPem: pem("CERTIFICATE"), keyPem: pem("PRIVATE KEY") }))
    expect(doc.users[0].user).toEqual({ "client-certificate-data": b64(pem("CERTIFICATE")), "client-key-data": b64(pem("PRIVATE KEY")) })
    expect(doc.clusters[0].cluster).toEqual({ server: "https://m:1" })
    expect(() => Federation.flatten({ context: "bare", server: "https://m:1", namespace: "default", insecure: false })).toThrow('context "bare"')
  })
})

describe("get --all-members: the hub's aggregated read", () => {
  it.each([
    [{ group: "", version: "v1", plural: "pods" }, "default", "/apis/federation.fleet.koder.dev/v1alpha1/aggregate/core/v1/namespaces/default/pods"],
    [{ group: "", version: "v1", plural: "pods" }, undefined, "/apis/federation.fleet.koder.dev/v1alpha1/aggregate/core/v1/pods"],
    [{ group: "apps", version: "v1", plural: "deployments" }, "web", "/apis/federation.fleet.koder.dev/v1alpha1/aggregate/apps/v1/namespaces/web/deployments"],
    [{ group: "", version: "v1", plural: "nodes" }, undefined, "/apis/federation.fleet.koder.dev/v1alpha1/aggregate/core/v1/nodes"]
  ])("%o in %s → %s", (info, namespace, path) => {
    expect(Get.aggregatePath(info, namespace)).toBe(path)
  })
})
