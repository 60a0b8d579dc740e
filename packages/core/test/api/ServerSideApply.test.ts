/** Field sets, FieldsV1, apply and update ownership (pure), table-driven where the cases are data. */
import { describe, expect, it } from "vitest"
import * as FieldSet from "../../src/api/internal/fieldSet.js"
import * as ServerSideApply from "../../src/api/ServerSideApply.js"

const deploymentSchema = ServerSideApply.builtInSchema("apps/v1/Deployment")

const deployment = (replicas: number, image = "nginx", extra: Record<string, unknown> = {}) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default", labels: { app: "web" } },
  spec: { replicas, selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "web", image, ...extra }] } } }
})

const containerOf = (o: Record<string, unknown>): Record<string, unknown> =>
  (o["spec"] as { template: { spec: { containers: Array<Record<string, unknown>> } } }).template.spec.containers[0]!

const write = (manager: string): ServerSideApply.Write => ({ manager, apiVersion: "apps/v1", time: "2026-12-07T00:00:00Z" })

const owned = (entries: ReadonlyArray<ServerSideApply.Entry>, manager: string, operation = "Apply") =>
  [...FieldSet.fromFieldsV1(entries.find((e) => e.manager === manager && e.operation === operation)?.fieldsV1 ?? {})].map(FieldSet.describe).sort()

describe("field sets", () => {
  it.each<[string, unknown, ReadonlyArray<string>]>([
    ["scalars and nested maps", { spec: { replicas: 1, selector: { matchLabels: { app: "a" } } } }, [".spec.replicas", ".spec.selector.matchLabels.app"]],
    ["an empty map is a leaf", { metadata: { labels: {} } }, [".metadata.labels"]],
    ["a map-list item and its fields", { spec: { template: { spec: { containers: [{ name: "a", image: "x" }] } } } }, ['.spec.template.spec.containers[name="a"]', '.spec.template.spec.containers[name="a"].image', '.spec.template.spec.containers[name="a"].name']],
    ["a set-list's items", { metadata: { finalizers: ["a", "b"] } }, ['.metadata.finalizers[="a"]', '.metadata.finalizers[="b"]']],
    ["an atomic list is one leaf", { spec: { template: { spec: { tolerations: [{ key: "k" }] } } } }, [".spec.template.spec.tolerations"]],
    ["never owned: identity and status", { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "w", uid: "u", resourceVersion: "1" }, status: { replicas: 1 } }, []]
  ])("%s", (_, object, paths) => {
    expect([...ServerSideApply.ownedFields(object, deploymentSchema)].map(FieldSet.describe).sort()).toEqual([...paths].sort())
  })

  it("FieldsV1 round-trips, with `.` on an owned node that has owned children", () => {
    const set = ServerSideApply.ownedFields(deployment(2), deploymentSchema)
    const v1 = FieldSet.toFieldsV1(set)
    expect(v1).toMatchObject({ "f:spec": { "f:template": { "f:spec": { "f:containers": { 'k:{"name":"web"}': { ".": {}, "f:image": {}, "f:name": {} } } } } } })
    expect(FieldSet.fromFieldsV1(v1)).toEqual(set)
  })

  it("a CRD's list-type markers: map with keys, set, atomic map", () => {
    const schema = ServerSideApply.crdSchema({
      type: "object",
      properties: {
        spec: {
          type: "object",
          properties: {
            ports: { type: "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"], items: { type: "object" } },
            tags: { type: "array", "x-kubernetes-list-type": "set", items: { type: "string" } },
            blob: { type: "object", "x-kubernetes-map-type": "atomic" }
          }
        }
      }
    })
    const paths = [...ServerSideApply.ownedFields({ spec: { ports: [{ port: 80, protocol: "TCP", name: "http" }], tags: ["a"], blob: { x: 1 } } }, schema)].map(FieldSet.describe).sort()
    expect(paths).toEqual(['.spec.blob', '.spec.ports[port=80,protocol="TCP"]', '.spec.ports[port=80,protocol="TCP"].name', '.spec.ports[port=80,protocol="TCP"].port', '.spec.ports[port=80,protocol="TCP"].protocol', '.spec.tags[="a"]'])
  })
})

describe("apply", () => {
  it("creates: the manager owns what it applied", () => {
    const r = ServerSideApply.apply(undefined, deployment(2), deploymentSchema, write("a"), false)
    expect(r._tag).toBe("Applied")
    if (r._tag !== "Applied") return
    expect(r.object).toEqual(deployment(2))
    expect(owned(r.entries, "a")).toContain(".spec.replicas")
  })

  it("a second manager changing an owned field conflicts; the same value is shared; force takes it", () => {
    const first = ServerSideApply.apply(undefined, deployment(2), deploymentSchema, write("a"), false)
    if (first._tag !== "Applied") throw new Error("first apply")
    const live = { ...first.object, metadata: { ...first.object["metadata"] as object, managedFields: first.entries } }
    const conflict = ServerSideApply.apply(live, { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" }, spec: { replicas: 5 } }, deploymentSchema, write("b"), false)
    expect(conflict).toEqual({ _tag: "Conflicts", conflicts: [{ manager: "a", apiVersion: "apps/v1", field: ".spec.replicas" }] })
    expect(ServerSideApply.conflictMessage(conflict._tag === "Conflicts" ? conflict.conflicts : [])).toBe('Apply failed with 1 conflict: conflict with "a" using apps/v1: .spec.replicas')
    const shared = ServerSideApply.apply(live, { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" }, spec: { replicas: 2 } }, deploymentSchema, write("b"), false)
    expect(shared._tag === "Applied" && owned(shared.entries, "a").includes(".spec.replicas") && owned(shared.entries, "b").includes(".spec.replicas")).toBe(true)
    const forced = ServerSideApply.apply(live, { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" }, spec: { replicas: 5 } }, deploymentSchema, write("b"), true)
    if (forced._tag !== "Applied") throw new Error("forced")
    expect(forced.object["spec"]).toMatchObject({ replicas: 5 })
    expect(owned(forced.entries, "a")).not.toContain(".spec.replicas")
    expect(owned(forced.entries, "b")).toEqual([".spec.replicas"])
  })

  it("a field the manager no longer applies is removed, unless another manager owns it", () => {
    const first = ServerSideApply.apply(undefined, deployment(2, "nginx", { args: ["-v"] }), deploymentSchema, write("a"), false)
    if (first._tag !== "Applied") throw new Error("first")
    const live = { ...first.object, metadata: { ...(first.object["metadata"] as object), managedFields: first.entries } }
    const second = ServerSideApply.apply(live, deployment(2), deploymentSchema, write("a"), false)
    if (second._tag !== "Applied") throw new Error("second")
    expect(containerOf(second.object)["args"]).toBeUndefined()
    // Owned by an Update of someone else too: it stays.
    const liveB = { ...live, metadata: { ...live.metadata, managedFields: [...first.entries, { manager: "c", operation: "Update" as const, apiVersion: "apps/v1", time: "t", fieldsType: "FieldsV1" as const, fieldsV1: { "f:spec": { "f:template": { "f:spec": { "f:containers": { 'k:{"name":"web"}': { "f:args": {} } } } } } } }] } }
    const third = ServerSideApply.apply(liveB, deployment(2), deploymentSchema, write("a"), false)
    if (third._tag !== "Applied") throw new Error("third")
    expect(containerOf(third.object)["args"]).toEqual(["-v"])
  })

  it("an item the manager stops applying goes whole, its key fields with it", () => {
    const schema = ServerSideApply.crdSchema({ type: "object", properties: { spec: { type: "object", properties: { listeners: { type: "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], items: { type: "object" } } } } } })
    const gw = (listeners: Array<{ name: string; port: number }>) => ({ apiVersion: "x/v1", kind: "G", metadata: { name: "e" }, spec: { listeners } })
    const a = ServerSideApply.apply(undefined, gw([{ name: "http", port: 80 }]), schema, write("a"), false)
    if (a._tag !== "Applied") throw new Error("a")
    const b = ServerSideApply.apply({ ...a.object, metadata: { name: "e", managedFields: a.entries } }, gw([{ name: "https", port: 443 }]), schema, write("b"), false)
    if (b._tag !== "Applied") throw new Error("b")
    expect(b.object["spec"]).toEqual({ listeners: [{ name: "http", port: 80 }, { name: "https", port: 443 }] })
    const gone = ServerSideApply.apply({ ...b.object, metadata: { name: "e", managedFields: b.entries } }, { apiVersion: "x/v1", kind: "G", metadata: { name: "e" } }, schema, write("b"), false)
    if (gone._tag !== "Applied") throw new Error("gone")
    expect(gone.object["spec"]).toEqual({ listeners: [{ name: "http", port: 80 }] })
    expect(gone.entries.map((e) => e.manager)).toEqual(["a"])
  })

  it("merges map-lists by key and keeps other managers' items", () => {
    const live = deployment(1)
    const config = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" }, spec: { template: { spec: { containers: [{ name: "sidecar", image: "envoy" }] } } } }
    const r = ServerSideApply.apply(live, config, deploymentSchema, write("b"), false)
    if (r._tag !== "Applied") throw new Error("apply")
    expect((r.object["spec"] as { template: { spec: { containers: Array<{ name: string }> } } }).template.spec.containers.map((c) => c.name)).toEqual(["web", "sidecar"])
  })
})

describe("update", () => {
  it("moves the changed fields to the writer and drops removed ones from everyone", () => {
    const created = ServerSideApply.update(undefined, deployment(2), [], deploymentSchema, write("kubectl-create"))
    expect(created).toEqual([expect.objectContaining({ manager: "kubectl-create", operation: "Update" })])
    const scaled = ServerSideApply.update(deployment(2), deployment(3), created, deploymentSchema, write("hpa"))
    expect(owned(scaled, "hpa", "Update")).toEqual([".spec.replicas"])
    expect(owned(scaled, "kubectl-create", "Update")).not.toContain(".spec.replicas")
    const unchanged = ServerSideApply.update(deployment(3), deployment(3), scaled, deploymentSchema, write("x"))
    expect(unchanged).toBe(scaled)
  })

  it("a status write owns only status fields, under its subresource", () => {
    const before = { ...deployment(1), status: { replicas: 0 } }
    const after = { ...deployment(1), status: { replicas: 1 } }
    const entries = ServerSideApply.update(before, after, [], deploymentSchema, { ...write("controller"), subresource: "status" })
    expect(entries).toEqual([expect.objectContaining({ manager: "controller", subresource: "status", fieldsV1: { "f:status": { "f:replicas": {} } } })])
  })
})
