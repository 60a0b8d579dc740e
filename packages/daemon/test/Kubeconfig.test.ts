/**
 * The kubeconfig's shape (what kubectl and client libraries read) and in-place updates.
 */
import { describe, expect, it } from "vitest"
import { parse } from "yaml"
import * as Kubeconfig from "../src/Kubeconfig.js"

const caPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

describe("Kubeconfig", () => {
  it("renders a standard kubeconfig with one cluster, user and current context", () => {
    const text = Kubeconfig.render({ server: "https://127.0.0.1:9300", caPem, token: "tok-123" })
    expect(parse(text)).toEqual({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "fleet", cluster: { server: "https://127.0.0.1:9300", "certificate-authority-data": Buffer.from(caPem).toString("base64") } }],
      users: [{ name: "fleet-admin", user: { token: "tok-123" } }],
      contexts: [{ name: "fleet", context: { cluster: "fleet", user: "fleet-admin" } }],
      "current-context": "fleet",
      preferences: {}
    })
    expect(Kubeconfig.tokenOf(text)).toBe("tok-123")
    expect(Kubeconfig.clusterOf(text)).toEqual({ server: "https://127.0.0.1:9300", caPem })
  })

  it("omits the CA data when there is no CA to trust", () => {
    const k = parse(Kubeconfig.render({ server: "https://fleet:9300", caPem: undefined, token: "t" })) as { clusters: Array<{ cluster: object }> }
    expect(k.clusters[0]!.cluster).toEqual({ server: "https://fleet:9300" })
  })

  it("updates the fleet cluster in place, keeping what the operator added", () => {
    const text = Kubeconfig.render({ server: "https://127.0.0.1:9300", caPem, token: "t" }) + "# mine\n"
    const edited = text.replace("clusters:\n", "clusters:\n  - name: other\n    cluster:\n      server: https://other:6443\n")
    const updated = Kubeconfig.update(edited, { server: "https://127.0.0.1:9400", caPem: "NEW" })!
    const k = parse(updated) as { clusters: Array<{ name: string; cluster: Record<string, string> }> }
    expect(k.clusters.map((c) => c.name)).toEqual(["other", "fleet"])
    expect(k.clusters[1]!.cluster).toEqual({ server: "https://127.0.0.1:9400", "certificate-authority-data": Buffer.from("NEW").toString("base64") })
    expect(updated).toContain("# mine")
    expect(Kubeconfig.tokenOf(updated)).toBe("t")
    expect(Kubeconfig.update("apiVersion: v1\nkind: Config\n", { server: "x", caPem: undefined })).toBeUndefined()
  })

  it("finds no token in text that is not a kubeconfig", () => {
    expect(Kubeconfig.tokenOf("{not yaml")).toBeUndefined()
    expect(Kubeconfig.tokenOf("users: 3")).toBeUndefined()
  })
})
