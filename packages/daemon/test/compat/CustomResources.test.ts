/**
 * `@kubernetes/client-node` 1.4 with CustomResourceDefinitions against a real `koder-fleet
 * server`: a CRD created through ApiextensionsV1Api (with an openAPIV3Schema) is served, and
 * its objects are created, read, listed, merge-patched and deleted through CustomObjectsApi;
 * an object the schema rejects gets a 422 Invalid Status.
 */
import { PatchStrategy, type V1CustomResourceDefinition } from "@kubernetes/client-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "../fixtures/FleetProcess.js"
import { failure, patchAs, startCluster, type Cluster } from "./Cluster.js"

const ns = "compat-crd"
const group = "compat.koder.dev"
const version = "v1"
const plural = "widgets"

const crd: V1CustomResourceDefinition = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: `${plural}.${group}` },
  spec: {
    group,
    scope: "Namespaced",
    names: { plural, singular: "widget", kind: "Widget", listKind: "WidgetList", shortNames: ["wd"] },
    versions: [
      {
        name: version,
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: {
                type: "object",
                required: ["size"],
                properties: {
                  size: { type: "integer", minimum: 1 },
                  color: { type: "string", _enum: ["red", "blue"] },
                  note: { type: "string", _default: "none" }
                }
              },
              status: { type: "object", properties: { ready: { type: "boolean" } } }
            }
          }
        }
      }
    ]
  }
}

const widget = (name: string, spec: Record<string, unknown>) => ({ apiVersion: `${group}/${version}`, kind: "Widget", metadata: { name }, spec })

describe("client-node ApiextensionsV1Api and CustomObjectsApi", () => {
  let c: Cluster

  beforeAll(async () => {
    c = await startCluster()
    await c.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } } })
  })

  afterAll(async () => {
    await c?.stop()
  })

  it("creates a CRD and serves its kind", async () => {
    const created = await c.extensions.createCustomResourceDefinition({ body: crd })
    expect(created.metadata?.name).toBe(`${plural}.${group}`)
    // client-node serialises `_enum`/`_default` as `enum`/`default`: the server must have kept them.
    const schema = created.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.["spec"]?.properties
    expect(schema?.["color"]?._enum).toEqual(["red", "blue"])
    expect(schema?.["note"]?._default).toBe("none")

    const established = await eventually(
      async () => {
        const read = await c.extensions.readCustomResourceDefinition({ name: `${plural}.${group}` })
        return read.status?.conditions?.find((k) => k.type === "Established" && k.status === "True") ? read : undefined
      },
      10_000,
      "the CRD to be Established"
    )
    expect(established.status?.acceptedNames).toMatchObject({ plural, kind: "Widget" })
    const list = await c.extensions.listCustomResourceDefinition()
    expect(list.items.map((d) => d.metadata?.name)).toContain(`${plural}.${group}`)
    const empty = await c.custom.listNamespacedCustomObject({ group, version, namespace: ns, plural })
    expect(empty).toMatchObject({ apiVersion: `${group}/${version}`, kind: "WidgetList", items: [] })
  })

  it("create, get, list, merge patch and delete a custom object", async () => {
    const created = (await c.custom.createNamespacedCustomObject({ group, version, namespace: ns, plural, body: widget("w1", { size: 3, color: "red" }) })) as any
    expect(created).toMatchObject({ apiVersion: `${group}/${version}`, kind: "Widget", metadata: { name: "w1", namespace: ns, generation: 1 }, spec: { size: 3, color: "red", note: "none" } })
    expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/)

    const got = (await c.custom.getNamespacedCustomObject({ group, version, namespace: ns, plural, name: "w1" })) as any
    expect(got.metadata.resourceVersion).toBe(created.metadata.resourceVersion)

    await c.custom.createNamespacedCustomObject({ group, version, namespace: ns, plural, body: { ...widget("w2", { size: 1 }), metadata: { name: "w2", labels: { tier: "b" } } } })
    const list = (await c.custom.listNamespacedCustomObject({ group, version, namespace: ns, plural })) as any
    expect(list.kind).toBe("WidgetList")
    expect(list.items.map((i: any) => i.metadata.name)).toEqual(["w1", "w2"])
    const selected = (await c.custom.listNamespacedCustomObject({ group, version, namespace: ns, plural, labelSelector: "tier=b" })) as any
    expect(selected.items.map((i: any) => i.metadata.name)).toEqual(["w2"])
    const everywhere = (await c.custom.listClusterCustomObject({ group, version, plural })) as any
    expect(everywhere.items).toHaveLength(2)

    const patched = (await c.custom.patchNamespacedCustomObject(
      { group, version, namespace: ns, plural, name: "w1", body: { spec: { size: 5, color: null } } },
      patchAs(PatchStrategy.MergePatch)
    )) as any
    expect(patched.spec).toEqual({ size: 5, note: "none" })
    expect(patched.metadata.generation).toBe(2)

    const status = (await c.custom.patchNamespacedCustomObjectStatus(
      { group, version, namespace: ns, plural, name: "w1", body: { status: { ready: true } } },
      patchAs(PatchStrategy.MergePatch)
    )) as any
    expect(status.status).toEqual({ ready: true })
    expect(status.metadata.generation).toBe(2)

    await c.custom.deleteNamespacedCustomObject({ group, version, namespace: ns, plural, name: "w1" })
    const gone = await failure(c.custom.getNamespacedCustomObject({ group, version, namespace: ns, plural, name: "w1" }))
    expect(gone.code).toBe(404)
    expect(gone.status).toMatchObject({ kind: "Status", reason: "NotFound", message: `${plural}.${group} "w1" not found`, details: { name: "w1", group, kind: plural } })
  })

  it("a schema-invalid object gets 422 Invalid naming the fields", async () => {
    const invalid = await failure(c.custom.createNamespacedCustomObject({ group, version, namespace: ns, plural, body: widget("bad", { size: 0, color: "green" }) }))
    expect(invalid.code).toBe(422)
    expect(invalid.status).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", reason: "Invalid", code: 422, details: { name: "bad", group, kind: "Widget" } })
    expect(invalid.status.message).toMatch(new RegExp(`^Widget\\.${group.replaceAll(".", "\\.")} "bad" is invalid: `))
    const fields = (invalid.status.details?.causes ?? []).map((k) => k.field)
    expect(fields).toEqual(expect.arrayContaining(["spec.size", "spec.color"]))

    const missing = await failure(c.custom.createNamespacedCustomObject({ group, version, namespace: ns, plural, body: widget("bad", { color: "red" }) }))
    expect(missing.code).toBe(422)
    expect(missing.status.details?.causes?.map((k) => k.field)).toContain("spec.size")
    expect(missing.status.message).toContain("spec.size: Required value")

    // A patch that breaks the schema is refused too, and the object is unchanged.
    await c.custom.createNamespacedCustomObject({ group, version, namespace: ns, plural, body: widget("ok", { size: 2 }) })
    const patch = await failure(
      c.custom.patchNamespacedCustomObject({ group, version, namespace: ns, plural, name: "ok", body: { spec: { size: "big" } } }, patchAs(PatchStrategy.MergePatch))
    )
    expect(patch.code).toBe(422)
    expect(patch.status.details?.causes?.map((k) => k.field)).toContain("spec.size")
    expect(((await c.custom.getNamespacedCustomObject({ group, version, namespace: ns, plural, name: "ok" })) as any).spec.size).toBe(2)
  })

  it("deleting the CRD removes its objects and stops serving the kind", async () => {
    await c.extensions.deleteCustomResourceDefinition({ name: `${plural}.${group}` })
    const gone = await eventually(
      async () => {
        const f = await failure(c.custom.listNamespacedCustomObject({ group, version, namespace: ns, plural })).catch(() => undefined)
        return f?.code === 404 ? f : undefined
      },
      10_000,
      "the kind to stop being served"
    )
    expect(gone.status).toMatchObject({ kind: "Status", reason: "NotFound", code: 404 })
    expect((await failure(c.extensions.readCustomResourceDefinition({ name: `${plural}.${group}` }))).code).toBe(404)
  })
})
