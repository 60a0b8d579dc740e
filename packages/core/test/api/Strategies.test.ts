import { describe, expect, it } from "vitest"
import * as Strategies from "../../src/api/Strategies.js"
import * as Kinds from "../../src/model/Kinds.js"

// The table assembled from the per-group modules, as discovery and `kubectl get` see it.
describe("the built-in strategies, assembled from their groups", () => {
  it.each([
    ["Pod", { status: true, scale: false, all: true }],
    ["Service", { status: true, scale: false, all: true }],
    ["Deployment", { status: true, scale: true, all: true }],
    ["StatefulSet", { status: true, scale: true, all: true }],
    ["DaemonSet", { status: true, scale: false, all: true }],
    ["Job", { status: true, scale: false, all: true }],
    ["HorizontalPodAutoscaler", { status: true, scale: false, all: true }],
    ["ResourceQuota", { status: true, scale: false, all: false }],
    ["Ingress", { status: true, scale: false, all: false }],
    ["CustomResourceDefinition", { status: true, scale: false, all: false }],
    ["AlertRule", { status: true, scale: false, all: false }],
    ["ConfigMap", { status: false, scale: false, all: false }],
    ["EndpointSlice", { status: false, scale: false, all: false }],
    ["Role", { status: false, scale: false, all: false }]
  ])("%s: subresources and categories", (kind, want) => {
    const sub = Strategies.subresources(kind)
    expect({ status: sub.status, scale: sub.scale !== undefined, all: Strategies.categories(kind).includes("all") }).toEqual(want)
  })

  it("gives every built-in kind a strategy keyed by apiVersion and kind", () => {
    expect(Strategies.forKind("apps/v1", "Deployment").tracksGeneration).toBe(true)
    expect(Strategies.forKind("v1", "Deployment")).toBe(Strategies.neutral)
    expect(Kinds.all.filter((k) => Strategies.forKind(k.apiVersion, k.kind) !== Strategies.neutral).map((k) => k.kind)).toContain("CronJob")
  })

  it.each([
    ["Pod", ["Ready", "Status", "Restarts", "Age", "IP", "Node"]],
    ["Deployment", ["Ready", "Up-to-date", "Available", "Age"]],
    ["CronJob", ["Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"]],
    ["Lease", ["Holder", "Age"]],
    ["Role", ["Age"]]
  ])("%s columns", (kind, names) => {
    expect(Strategies.printerColumns(kind).map((c) => c.name)).toEqual(names)
  })
})
