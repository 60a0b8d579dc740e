import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as NamespaceLifecycle from "../../src/admission/NamespaceLifecycle.js"
import { request } from "./requests.js"

describe("NamespaceLifecycle.decide", () => {
  const present = { _tag: "Present", terminating: false } as const
  const cases: ReadonlyArray<[string, ReturnType<typeof request>, NamespaceLifecycle.NamespaceState | undefined, string | undefined]> = [
    ["create in a live namespace", request("CREATE", "", "pods", { namespace: "a", name: "p" }), present, undefined],
    ["create in a missing namespace", request("CREATE", "", "pods", { namespace: "a", name: "p" }), { _tag: "Missing" }, 'namespaces "a" not found'],
    [
      "create in a terminating namespace",
      request("CREATE", "apps", "deployments", { namespace: "a", name: "d" }),
      { _tag: "Present", terminating: true },
      'deployments.apps "d" is forbidden: unable to create new content in namespace a because it is being terminated'
    ],
    ["update in a terminating namespace", request("UPDATE", "", "pods", { namespace: "a", name: "p" }), { _tag: "Present", terminating: true }, undefined],
    ["delete default", request("DELETE", "", "namespaces", { name: "default" }), undefined, 'namespaces "default" is forbidden: this namespace may not be deleted'],
    ["delete kube-public", request("DELETE", "", "namespaces", { name: "kube-public" }), undefined, 'namespaces "kube-public" is forbidden: this namespace may not be deleted'],
    ["delete another namespace", request("DELETE", "", "namespaces", { name: "team" }), undefined, undefined],
    ["create a cluster-scoped object", request("CREATE", "", "nodes", { name: "n" }), undefined, undefined]
  ]
  it.each(cases)("%s", (_what, req, ns, message) => {
    const decided = NamespaceLifecycle.decide(req, ns)
    expect(Either.isLeft(decided) ? decided.left.status.message : undefined).toBe(message)
  })

  it("knows a terminating namespace by its deletionTimestamp or phase", () => {
    expect(NamespaceLifecycle.terminating({ metadata: { deletionTimestamp: "2024-01-01T00:00:00Z" } })).toBe(true)
    expect(NamespaceLifecycle.terminating({ metadata: {}, status: { phase: "Terminating" } })).toBe(true)
    expect(NamespaceLifecycle.terminating({ metadata: {}, status: { phase: "Active" } })).toBe(false)
  })
})
