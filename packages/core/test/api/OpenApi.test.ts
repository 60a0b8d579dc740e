import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as OpenApi from "../../src/api/OpenApi.js"
import * as Registry from "../../src/api/Registry.js"
import * as Kinds from "../../src/model/Kinds.js"

type Json = Record<string, unknown>

const crontabSchema: Json = {
  type: "object",
  properties: {
    spec: {
      type: "object",
      properties: {
        cronSpec: { type: "string", pattern: "^\\d+$" },
        replicas: { type: "integer", minimum: 0, nullable: true },
        port: { "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] }
      }
    }
  }
}

/** A CRD-defined resource, built from a built-in one with its names changed. */
const customResource = (group: string, version: string, kind: string, plural: string): Registry.Resource => ({
  ...Registry.builtIn(Kinds.all.find((k) => k.kind === "ConfigMap")!),
  group,
  version,
  apiVersion: `${group}/${version}`,
  kind,
  listKind: `${kind}List`,
  plural,
  singular: kind.toLowerCase(),
  shortNames: [],
  categories: [],
  subresources: { status: true, scale: undefined },
  openapi: { _tag: "JsonSchema", schema: crontabSchema },
  crd: `${plural}.${group}`
})

const right = <A, E>(e: Either.Either<A, E>): A => {
  if (Either.isLeft(e)) throw new Error(`expected Right, got ${JSON.stringify(e.left)}`)
  return e.right
}

const obj = (v: unknown): Json => (typeof v === "object" && v !== null ? (v as Json) : {})
const at = (v: unknown, ...path: ReadonlyArray<string>): unknown => path.reduce<unknown>((o, k) => obj(o)[k], v)

/** Every value under `node` (depth first), with its key. */
const walk = (node: unknown, visit: (key: string, value: unknown) => void): void => {
  if (Array.isArray(node)) node.forEach((v) => walk(v, visit))
  else if (typeof node === "object" && node !== null) {
    for (const [k, v] of Object.entries(node)) {
      visit(k, v)
      walk(v, visit)
    }
  }
}

const refsOf = (doc: unknown): ReadonlyArray<string> => {
  const refs: Array<string> = []
  walk(doc, (k, v) => {
    if (k === "$ref" && typeof v === "string") refs.push(v)
  })
  return refs
}

describe("definition names", () => {
  it.each<[Pick<Registry.Resource, "group" | "version" | "kind" | "crd">, string]>([
    [{ group: "", version: "v1", kind: "Pod", crd: undefined }, "io.k8s.api.core.v1.Pod"],
    [{ group: "apps", version: "v1", kind: "Deployment", crd: undefined }, "io.k8s.api.apps.v1.Deployment"],
    [{ group: "coordination.k8s.io", version: "v1", kind: "Lease", crd: undefined }, "io.k8s.api.coordination.v1.Lease"],
    [
      { group: "apiextensions.k8s.io", version: "v1", kind: "CustomResourceDefinition", crd: undefined },
      "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
    ],
    [{ group: "stable.example.com", version: "v1", kind: "CronTab", crd: "crontabs.stable.example.com" }, "com.example.stable.v1.CronTab"]
  ])("%j → %s", (r, name) => {
    expect(OpenApi.definitionName(r)).toBe(name)
  })
})

describe("/openapi/v2", () => {
  const doc = OpenApi.v2(Registry.make())
  const definitions = obj(doc["definitions"])
  const paths = obj(doc["paths"])

  it("is a Swagger 2.0 document", () => {
    expect(doc["swagger"]).toBe("2.0")
    expect(doc["info"]).toMatchObject({ title: "Kubernetes", version: "v1.31.0" })
  })

  it.each<[string, string, string, string]>([
    ["io.k8s.api.core.v1.Pod", "", "v1", "Pod"],
    ["io.k8s.api.core.v1.PodList", "", "v1", "PodList"],
    ["io.k8s.api.core.v1.Namespace", "", "v1", "Namespace"],
    ["io.k8s.api.apps.v1.Deployment", "apps", "v1", "Deployment"],
    ["io.k8s.api.coordination.v1.Lease", "coordination.k8s.io", "v1", "Lease"],
    ["io.k8s.api.autoscaling.v1.Scale", "autoscaling", "v1", "Scale"]
  ])("%s carries x-kubernetes-group-version-kind", (name, group, version, kind) => {
    expect(at(definitions, name, "x-kubernetes-group-version-kind")).toEqual([{ group, kind, version }])
  })

  it("gives Pod its spec, status and the shared ObjectMeta", () => {
    const pod = obj(definitions["io.k8s.api.core.v1.Pod"])
    expect(pod["type"]).toBe("object")
    expect(Object.keys(obj(pod["properties"]))).toEqual(expect.arrayContaining(["apiVersion", "kind", "metadata", "spec", "status"]))
    expect(at(pod, "properties", "metadata")).toEqual({ $ref: "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" })
    expect(Object.keys(obj(at(definitions, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "properties")))).toEqual(
      expect.arrayContaining(["name", "namespace", "labels", "annotations", "resourceVersion", "uid"])
    )
  })

  it.each<[string, ReadonlyArray<string>, Json]>([
    ["containers", ["spec", "containers"], { "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge" }],
    ["container ports", ["spec", "containers", "items", "ports"], { "x-kubernetes-patch-merge-key": "containerPort" }],
    ["env", ["spec", "containers", "items", "env"], { "x-kubernetes-patch-merge-key": "name" }],
    ["volumes", ["spec", "volumes"], { "x-kubernetes-patch-merge-key": "name" }],
    ["conditions", ["status", "conditions"], { "x-kubernetes-patch-merge-key": "type" }]
  ])("marks Pod %s with its strategic merge key", (_, path, expected) => {
    const schemaPath = path.flatMap((p) => (p === "items" ? ["items"] : ["properties", p]))
    expect(at(definitions["io.k8s.api.core.v1.Pod"], ...schemaPath)).toMatchObject(expected)
  })

  it("keys service ports by port", () => {
    expect(at(definitions["io.k8s.api.core.v1.Service"], "properties", "spec", "properties", "ports")).toMatchObject({
      "x-kubernetes-patch-merge-key": "port"
    })
  })

  it("uses only what Swagger 2.0 allows, and every $ref resolves", () => {
    const bad: Array<string> = []
    walk(definitions, (k, v) => {
      if (["$schema", "$defs", "anyOf", "oneOf", "nullable", "const"].includes(k)) bad.push(k)
      if (k === "type" && (v === "null" || Array.isArray(v))) bad.push(`type ${JSON.stringify(v)}`)
      if (k === "required" && Array.isArray(v) && v.length === 0) bad.push("empty required")
      if (k === "additionalProperties" && v === false) bad.push("closed object")
    })
    expect(bad).toEqual([])
    for (const ref of refsOf(doc)) expect(definitions).toHaveProperty([ref.replace("#/definitions/", "")])
  })

  it.each<[string, string, string, string]>([
    ["/api/v1/namespaces/{namespace}/pods", "get", "listCoreV1NamespacedPod", "list"],
    ["/api/v1/namespaces/{namespace}/pods", "post", "createCoreV1NamespacedPod", "post"],
    ["/api/v1/namespaces/{namespace}/pods", "delete", "deleteCoreV1CollectionNamespacedPod", "deletecollection"],
    ["/api/v1/namespaces/{namespace}/pods/{name}", "get", "readCoreV1NamespacedPod", "get"],
    ["/api/v1/namespaces/{namespace}/pods/{name}", "put", "replaceCoreV1NamespacedPod", "put"],
    ["/api/v1/namespaces/{namespace}/pods/{name}", "patch", "patchCoreV1NamespacedPod", "patch"],
    ["/api/v1/namespaces/{namespace}/pods/{name}", "delete", "deleteCoreV1NamespacedPod", "delete"],
    ["/api/v1/namespaces/{namespace}/pods/{name}/status", "patch", "patchCoreV1NamespacedPodStatus", "patch"],
    ["/api/v1/pods", "get", "listCoreV1PodForAllNamespaces", "list"],
    ["/api/v1/nodes/{name}", "get", "readCoreV1Node", "get"],
    ["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "put", "replaceAppsV1NamespacedDeploymentScale", "put"],
    ["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", "get", "listCoordinationV1NamespacedLease", "list"]
  ])("%s %s is %s", (path, method, operationId, action) => {
    expect(at(paths, path, method)).toMatchObject({ operationId, "x-kubernetes-action": action })
  })

  it("does not serve a namespaced path for cluster-scoped kinds", () => {
    expect(Object.keys(paths).filter((p) => p.includes("{namespace}/nodes"))).toEqual([])
  })
})

describe("/openapi/v3", () => {
  it("indexes every group version with a hashed document URL", () => {
    const index = OpenApi.v3Index(Registry.make())
    expect(Object.keys(index.paths)).toEqual(expect.arrayContaining(["api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1"]))
    expect(index.paths["apis/apps/v1"]?.serverRelativeURL).toMatch(/^\/openapi\/v3\/apis\/apps\/v1\?hash=[0-9A-F]+$/)
  })

  it.each<[string, string, ReadonlyArray<string>, ReadonlyArray<string>]>([
    ["api/v1", "io.k8s.api.core.v1.Pod", ["io.k8s.api.core.v1.Node", "io.k8s.api.core.v1.PodList"], ["io.k8s.api.apps.v1.Deployment"]],
    [
      "apis/apps/v1",
      "io.k8s.api.apps.v1.Deployment",
      ["io.k8s.api.apps.v1.ReplicaSet", "io.k8s.api.autoscaling.v1.Scale", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"],
      ["io.k8s.api.core.v1.Pod"]
    ]
  ])("%s is an OpenAPI 3.0 document of its own kinds", (gv, kind, alsoHas, lacks) => {
    const doc = right(OpenApi.v3(Registry.make(), gv))
    expect(doc["openapi"]).toBe("3.0.0")
    const schemas = obj(at(doc, "components", "schemas"))
    expect(at(schemas, kind, "x-kubernetes-group-version-kind")).toBeDefined()
    for (const name of alsoHas) expect(schemas).toHaveProperty([name])
    for (const name of lacks) expect(schemas).not.toHaveProperty([name])
    for (const ref of refsOf(doc)) expect(schemas).toHaveProperty([ref.replace("#/components/schemas/", "")])
  })

  it("declares fieldValidation on PATCH with the operation's GVK, which kubectl checks before relying on the server", () => {
    const doc = right(OpenApi.v3(Registry.make(), "apis/apps/v1"))
    const patch = obj(at(doc, "paths", "/apis/apps/v1/namespaces/{namespace}/deployments/{name}", "patch"))
    expect(patch["x-kubernetes-group-version-kind"]).toEqual({ group: "apps", version: "v1", kind: "Deployment" })
    expect(patch["parameters"]).toContainEqual(expect.objectContaining({ name: "fieldValidation", in: "query" }))
    expect(Object.keys(obj(at(patch, "requestBody", "content")))).toContain("application/strategic-merge-patch+json")
  })

  it.each([["apis/nope/v1"], ["apis/apps/v2"], ["api/v2"], ["apps/v1"]])("%s is kube-apiserver's 404", (gv) => {
    const result = OpenApi.v3(Registry.make(), gv)
    expect(Either.isLeft(result) && result.left.status).toMatchObject({ kind: "Status", reason: "NotFound", code: 404 })
  })
})

describe("CustomResourceDefinitions", () => {
  it("appear in v2 and v3 while served, with their schema in each dialect", () => {
    const registry = Registry.make()
    const before = OpenApi.v3Index(registry)
    const v2Before = OpenApi.v2(registry)
    expect(OpenApi.v2(registry)).toBe(v2Before)

    registry.put(customResource("stable.example.com", "v1", "CronTab", "crontabs"))
    const v2 = OpenApi.v2(registry)
    expect(v2).not.toBe(v2Before)
    const def = at(v2, "definitions", "com.example.stable.v1.CronTab")
    expect(at(def, "x-kubernetes-group-version-kind")).toEqual([{ group: "stable.example.com", kind: "CronTab", version: "v1" }])
    expect(at(def, "properties", "spec", "properties", "replicas")).toEqual({ type: "integer", minimum: 0 })
    expect(at(def, "properties", "spec", "properties", "port")).toEqual({ "x-kubernetes-int-or-string": true })
    expect(at(v2, "paths", "/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/status")).toBeDefined()

    const index = OpenApi.v3Index(registry)
    expect(index.paths["apis/stable.example.com/v1"]).toBeDefined()
    // Other group versions keep their hash, so clients keep their cached documents.
    expect(index.paths["apis/apps/v1"]).toEqual(before.paths["apis/apps/v1"])
    const v3 = right(OpenApi.v3(registry, "apis/stable.example.com/v1"))
    const v3def = at(v3, "components", "schemas", "com.example.stable.v1.CronTab")
    expect(at(v3def, "properties", "spec", "properties", "replicas")).toEqual({ type: "integer", minimum: 0, nullable: true })
    expect(at(v3def, "properties", "metadata")).toEqual({ $ref: "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" })

    registry.remove("stable.example.com", "v1", "crontabs")
    expect(at(OpenApi.v2(registry), "definitions", "com.example.stable.v1.CronTab")).toBeUndefined()
    expect(OpenApi.v3Index(registry).paths["apis/stable.example.com/v1"]).toBeUndefined()
    expect(Either.isLeft(OpenApi.v3(registry, "apis/stable.example.com/v1"))).toBe(true)
  })
})

describe("every document is plain JSON", () => {
  const registry = Registry.make()
  registry.put(customResource("stable.example.com", "v1", "CronTab", "crontabs"))
  it.each<[string, () => unknown]>([
    ["v2", () => OpenApi.v2(registry)],
    ["v3 index", () => OpenApi.v3Index(registry)],
    ...Object.keys(OpenApi.v3Index(registry).paths).map((gv): [string, () => unknown] => [`v3 ${gv}`, () => right(OpenApi.v3(registry, gv))])
  ])("%s", (_, doc) => {
    const value = doc()
    expect(JSON.parse(JSON.stringify(value))).toEqual(value)
  })
})
