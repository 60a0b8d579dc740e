import { describe, expect, it } from "vitest"
import * as Namespace from "../../src/controllers/NamespaceController.js"

type Json = Record<string, unknown>

const now = Date.parse("2024-05-01T10:00:00Z")

const namespace = (m: Json = {}, status: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name: "team", deletionTimestamp: "2024-05-01T09:59:00Z", ...m },
  spec: { finalizers: ["kubernetes"] },
  status: { phase: "Terminating", ...status }
})

const pod = (name: string, graceLeftMs: number): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "team", deletionTimestamp: new Date(now + graceLeftMs).toISOString() }
})

const held = (name: string, finalizers: ReadonlyArray<string>): Json => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "team", deletionTimestamp: "2024-05-01T09:59:30Z", finalizers }
})

const summary = (d: Namespace.Decision) => ({
  finalize: d.finalize,
  requeueAfterMs: d.requeueAfterMs,
  conditions: Object.fromEntries(d.conditions.map((c) => [c.type, `${c.status} ${c.reason}: ${c.message}`]))
})

describe("Namespace.decide", () => {
  it("finalizes an empty namespace, reporting every condition False", () => {
    const d = Namespace.decide({ namespace: namespace(), discoveryErrors: [], contents: [{ resource: "pods.", remaining: [] }], now })
    expect(summary(d)).toEqual({
      finalize: true,
      requeueAfterMs: undefined,
      conditions: {
        NamespaceDeletionDiscoveryFailure: "False ResourcesDiscovered: All resources successfully discovered",
        NamespaceDeletionGroupVersionParsingFailure: "False ParsedGroupVersions: All legacy kube types successfully parsed",
        NamespaceDeletionContentFailure: "False ContentDeleted: All content successfully deleted, may be waiting on finalization",
        NamespaceContentRemaining: "False ContentRemoved: All content successfully removed",
        NamespaceFinalizersRemaining: "False ContentHasNoFinalizers: All content-preserving finalizers finished"
      }
    })
    expect(d.conditions.every((c) => c.lastTransitionTime === "2024-05-01T10:00:00Z")).toBe(true)
  })

  it("waits for terminating pods, requeueing after their remaining grace (bounded)", () => {
    const d = Namespace.decide({
      namespace: namespace(),
      discoveryErrors: [],
      contents: [
        { resource: "pods.", remaining: [pod("a", 4_000), pod("b", 7_000)] },
        { resource: "configmaps.", remaining: [] }
      ],
      now
    })
    expect(summary(d).finalize).toBe(false)
    expect(d.requeueAfterMs).toBe(7_000)
    expect(summary(d).conditions["NamespaceContentRemaining"]).toBe("True SomeResourcesRemain: Some resources are remaining: pods. has 2 resource instances")
    const long = Namespace.decide({ namespace: namespace(), discoveryErrors: [], contents: [{ resource: "pods.", remaining: [pod("a", 600_000)] }], now })
    expect(long.requeueAfterMs).toBe(15_000)
    const overdue = Namespace.decide({ namespace: namespace(), discoveryErrors: [], contents: [{ resource: "pods.", remaining: [pod("a", -5_000)] }], now })
    expect(overdue.requeueAfterMs).toBe(1_000)
  })

  it("reports content held by finalizers, sorted, counted per finalizer", () => {
    const d = Namespace.decide({
      namespace: namespace(),
      discoveryErrors: [],
      contents: [
        { resource: "widgets.example.com", remaining: [held("w", ["example.com/a"])] },
        { resource: "configmaps.", remaining: [held("x", ["example.com/b", "example.com/a"]), held("y", ["example.com/a"])] }
      ],
      now
    })
    const c = summary(d).conditions
    expect(c["NamespaceContentRemaining"]).toBe("True SomeResourcesRemain: Some resources are remaining: configmaps. has 2 resource instances, widgets.example.com has 1 resource instances")
    expect(c["NamespaceFinalizersRemaining"]).toBe(
      "True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: example.com/a in 3 resource instances, example.com/b in 1 resource instances"
    )
    expect(d.finalize).toBe(false)
    expect(d.requeueAfterMs).toBe(5_000)
  })

  it("does not finalize after a failed deletion or discovery", () => {
    const failed = Namespace.decide({ namespace: namespace(), discoveryErrors: [], contents: [{ resource: "secrets.", remaining: [], error: "secrets. s: boom" }], now })
    expect(summary(failed).conditions["NamespaceDeletionContentFailure"]).toBe("True ContentDeletionFailed: Failed to delete all resource types, 1 remaining: secrets. s: boom")
    expect(failed.finalize).toBe(false)
    const undiscovered = Namespace.decide({ namespace: namespace(), discoveryErrors: ["apiextensions.k8s.io/v1: unavailable"], contents: [], now })
    expect(summary(undiscovered).conditions["NamespaceDeletionDiscoveryFailure"]).toBe(
      "True DiscoveryFailed: Discovery failed for some groups, 1 failing: apiextensions.k8s.io/v1: unavailable"
    )
    expect(undiscovered.finalize).toBe(false)
  })

  it("keeps the transition time of a condition whose status did not change", () => {
    const before = [{ type: "NamespaceContentRemaining", status: "True", reason: "SomeResourcesRemain", message: "old", lastTransitionTime: "2024-05-01T09:59:10Z" }]
    const d = Namespace.decide({ namespace: namespace({}, { conditions: before }), discoveryErrors: [], contents: [{ resource: "pods.", remaining: [pod("a", 1_000)] }], now })
    expect(d.conditions.find((c) => c.type === "NamespaceContentRemaining")?.lastTransitionTime).toBe("2024-05-01T09:59:10Z")
  })

  it("knows which namespaces need it, and names resources as upstream", () => {
    expect(Namespace.needsFinalizing(namespace())).toBe(true)
    expect(Namespace.needsFinalizing({ ...namespace(), spec: { finalizers: ["other"] } })).toBe(false)
    expect(Namespace.needsFinalizing({ ...namespace(), metadata: { name: "team" } })).toBe(false)
    expect(Namespace.resourceName({ apiVersion: "v1", kind: "Pod", plural: "pods", namespaced: true })).toBe("pods.")
    expect(Namespace.resourceName({ apiVersion: "apps/v1", kind: "Deployment", plural: "deployments", namespaced: true })).toBe("deployments.apps")
  })
})
