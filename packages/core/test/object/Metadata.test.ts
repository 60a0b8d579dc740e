import { describe, expect, it } from "vitest"
import * as Metadata from "../../src/object/Metadata.js"

const owner = { apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs", uid: "u1", controller: true }
const full = {
  metadata: {
    name: "web",
    namespace: "default",
    uid: "u2",
    generation: 4,
    creationTimestamp: "2024-05-01T10:00:00Z",
    finalizers: ["a", 1, "b"],
    labels: { app: "web" },
    annotations: { note: "x" },
    ownerReferences: [{ ...owner, uid: "u0", controller: false }, owner],
    deletionTimestamp: "2024-05-01T11:00:00Z"
  }
}
const empty = {}
const clusterScoped = { metadata: { name: "n1" } }

describe("Metadata accessors", () => {
  const cases: ReadonlyArray<readonly [string, (o: Record<string, unknown>) => unknown, unknown, unknown, unknown]> = [
    // accessor, full, empty, cluster-scoped
    ["nameOf", Metadata.nameOf, "web", "", "n1"],
    ["namespaceOf", Metadata.namespaceOf, "default", "", ""],
    ["namespaceOrUndefined", Metadata.namespaceOrUndefined, "default", undefined, undefined],
    ["uidOf", Metadata.uidOf, "u2", "", ""],
    ["generationOf", Metadata.generationOf, 4, 0, 0],
    ["creationMs", Metadata.creationMs, Date.parse("2024-05-01T10:00:00Z"), undefined, undefined],
    ["finalizersOf", Metadata.finalizersOf, ["a", "b"], [], []],
    ["labelsOf", Metadata.labelsOf, { app: "web" }, {}, {}],
    ["annotationsOf", Metadata.annotationsOf, { note: "x" }, {}, {}],
    ["controllerRefOf", Metadata.controllerRefOf, owner, undefined, undefined],
    ["isTerminating", Metadata.isTerminating, true, false, false],
    ["keyOf", Metadata.keyOf, "default/web", "", "n1"]
  ]
  it.each(cases)("%s", (_name, read, wantFull, wantEmpty, wantCluster) => {
    expect(read(full)).toEqual(wantFull)
    expect(read(empty)).toEqual(wantEmpty)
    expect(read(clusterScoped)).toEqual(wantCluster)
  })

  it("isControlledBy and ownerReferencesOf", () => {
    expect(Metadata.isControlledBy(full, "u1")).toBe(true)
    expect(Metadata.isControlledBy(full, "u0")).toBe(false)
    expect(Metadata.ownerReferencesOf(full)).toHaveLength(2)
  })

  it("splitKey inverts keyOf", () => {
    expect(Metadata.splitKey("default/web")).toEqual({ namespace: "default", name: "web" })
    expect(Metadata.splitKey("n1")).toEqual({ namespace: undefined, name: "n1" })
  })

  it("times", () => {
    expect(Metadata.timeMs("nope")).toBeUndefined()
    expect(Metadata.rfc3339(Date.parse("2024-05-01T10:00:00.123Z"))).toBe("2024-05-01T10:00:00Z")
  })
})
