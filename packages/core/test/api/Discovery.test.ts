import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Discovery from "../../src/api/Discovery.js"
import * as Registry from "../../src/api/Registry.js"
import * as Kinds from "../../src/model/Kinds.js"

/** A CRD-defined resource, built from a built-in one with its names changed. */
const customResource = (group: string, version: string, kind: string, plural: string, namespaced = true): Registry.Resource => {
  const base = Registry.builtIn(Kinds.all.find((k) => k.kind === "ConfigMap")!)
  return {
    ...base,
    group,
    version,
    apiVersion: `${group}/${version}`,
    kind,
    listKind: `${kind}List`,
    plural,
    singular: kind.toLowerCase(),
    namespaced,
    shortNames: ["ct"],
    categories: [],
    subresources: { status: true, scale: undefined },
    openapi: { _tag: "JsonSchema", schema: { type: "object", properties: { spec: { type: "object" } } } },
    crd: `${plural}.${group}`
  }
}

const right = <A, E>(e: Either.Either<A, E>): A => {
  if (Either.isLeft(e)) throw new Error(`expected Right, got ${JSON.stringify(e.left)}`)
  return e.right
}

const notFoundBody = {
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message: "the server could not find the requested resource",
  reason: "NotFound",
  details: {},
  code: 404
}

const allVerbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

describe("/version", () => {
  it("reports the emulated Kubernetes level with Fleet's version as build metadata", () => {
    const v = Discovery.version({ fleetVersion: "0.1.0", gitCommit: "abc", platform: "linux/amd64" })
    expect(v).toMatchObject({ major: "1", minor: "31", gitVersion: "v1.31.0+fleet.0.1.0", gitCommit: "abc", platform: "linux/amd64" })
    for (const key of ["gitTreeState", "buildDate", "goVersion", "compiler"]) expect(typeof (v as unknown as Record<string, unknown>)[key]).toBe("string")
  })
})

describe("/api and /apis", () => {
  it("/api lists v1 with the server address", () => {
    expect(Discovery.apiVersions("10.0.0.9:6443")).toEqual({
      kind: "APIVersions",
      versions: ["v1"],
      serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "10.0.0.9:6443" }]
    })
  })

  it("/apis lists every named group with its preferred version, built-in groups in kube's order", () => {
    const list = Discovery.apiGroupList(Registry.make())
    expect(list.kind).toBe("APIGroupList")
    expect(list.apiVersion).toBe("v1")
    const names = list.groups.map((g) => g.name)
    expect(names).not.toContain("")
    expect(names.indexOf("apps")).toBeGreaterThanOrEqual(0)
    expect(names.indexOf("apps")).toBeLessThan(names.indexOf("coordination.k8s.io"))
    const apps = list.groups.find((g) => g.name === "apps")
    expect(apps).toEqual({
      name: "apps",
      versions: [{ groupVersion: "apps/v1", version: "v1" }],
      preferredVersion: { groupVersion: "apps/v1", version: "v1" }
    })
  })

  it.each([["apps"], ["coordination.k8s.io"]])("/apis/%s is an APIGroup", (name) => {
    const group = right(Discovery.apiGroup(Registry.make(), name))
    expect(group).toMatchObject({ kind: "APIGroup", apiVersion: "v1", name, preferredVersion: { groupVersion: `${name}/v1`, version: "v1" } })
  })

  it.each([["nope.example.com"], [""], ["v1"]])("/apis/%j is kube-apiserver's 404", (name) => {
    const result = Discovery.apiGroup(Registry.make(), name)
    expect(Either.isLeft(result) && result.left.status).toEqual(notFoundBody)
  })
})

describe("APIResourceList", () => {
  const registry = Registry.make()
  it.each<[string, string, string, Record<string, unknown>]>([
    ["", "v1", "pods", { singularName: "pod", namespaced: true, kind: "Pod", verbs: allVerbs, shortNames: ["po"], categories: ["all"] }],
    ["", "v1", "pods/status", { singularName: "", namespaced: true, kind: "Pod", verbs: ["get", "patch", "update"] }],
    ["", "v1", "nodes", { singularName: "node", namespaced: false, kind: "Node", shortNames: ["no"] }],
    ["", "v1", "namespaces", { namespaced: false, kind: "Namespace", shortNames: ["ns"] }],
    ["apps", "v1", "deployments", { namespaced: true, kind: "Deployment", verbs: allVerbs, shortNames: ["deploy"], categories: ["all"] }],
    [
      "apps",
      "v1",
      "deployments/scale",
      { singularName: "", namespaced: true, group: "autoscaling", version: "v1", kind: "Scale", verbs: ["get", "patch", "update"] }
    ],
    ["apps", "v1", "deployments/status", { namespaced: true, kind: "Deployment", verbs: ["get", "patch", "update"] }],
    ["coordination.k8s.io", "v1", "leases", { namespaced: true, kind: "Lease", verbs: allVerbs }]
  ])("%s/%s has %s", (group, version, name, expected) => {
    const list = right(Discovery.apiResourceList(registry, group, version))
    expect(list.kind).toBe("APIResourceList")
    expect(list.apiVersion).toBe("v1")
    expect(list.groupVersion).toBe(group === "" ? version : `${group}/${version}`)
    expect(list.resources.find((r) => r.name === name)).toMatchObject(expected)
  })

  it("omits empty shortNames and categories, as kube-apiserver's omitempty does", () => {
    const secrets = right(Discovery.apiResourceList(registry, "", "v1")).resources.find((r) => r.name === "secrets")
    expect(secrets).toBeDefined()
    expect(secrets).not.toHaveProperty("shortNames")
    expect(secrets).not.toHaveProperty("categories")
  })

  it("lists resources and their subresources sorted by name", () => {
    const names = right(Discovery.apiResourceList(registry, "apps", "v1")).resources.map((r) => r.name)
    expect(names).toEqual([...names].sort())
  })

  it.each([
    ["", "v2"],
    ["", "v1/pods"],
    ["apps", "v2"],
    ["nope.example.com", "v1"],
    ["apps", ""]
  ])("%j/%j is kube-apiserver's 404", (group, version) => {
    const result = Discovery.apiResourceList(registry, group, version)
    expect(Either.isLeft(result) && result.left.status).toEqual(notFoundBody)
  })
})

describe("CustomResourceDefinitions come and go", () => {
  it("a put resource appears everywhere and a removed one disappears", () => {
    const registry = Registry.make()
    // Prime every memo first, so the test sees invalidation, not a first computation.
    Discovery.apiGroupList(registry)
    Discovery.apiResourceList(registry, "stable.example.com", "v1")
    Discovery.aggregated(registry, "apis")

    registry.put(customResource("stable.example.com", "v1", "CronTab", "crontabs"))
    const groups = Discovery.apiGroupList(registry).groups.map((g) => g.name)
    expect(groups[groups.length - 1]).toBe("stable.example.com")
    expect(right(Discovery.apiGroup(registry, "stable.example.com")).preferredVersion.groupVersion).toBe("stable.example.com/v1")
    expect(right(Discovery.apiResourceList(registry, "stable.example.com", "v1")).resources.map((r) => r.name)).toEqual([
      "crontabs",
      "crontabs/status"
    ])
    const item = Discovery.aggregated(registry, "apis").items.find((i) => i.metadata.name === "stable.example.com")
    expect(item?.versions[0]?.resources[0]).toMatchObject({ resource: "crontabs", scope: "Namespaced", shortNames: ["ct"] })

    registry.remove("stable.example.com", "v1", "crontabs")
    expect(Discovery.apiGroupList(registry).groups.map((g) => g.name)).not.toContain("stable.example.com")
    expect(Either.isLeft(Discovery.apiGroup(registry, "stable.example.com"))).toBe(true)
    expect(Either.isLeft(Discovery.apiResourceList(registry, "stable.example.com", "v1"))).toBe(true)
    expect(Discovery.aggregated(registry, "apis").items.map((i) => i.metadata.name)).not.toContain("stable.example.com")
  })

  it("orders a group's versions by Kubernetes priority and prefers the first", () => {
    const registry = Registry.make()
    for (const v of ["v1beta1", "v2alpha1", "v1"]) registry.put(customResource("batch.example.com", v, `Job${v}`, `jobs${v}`))
    const group = right(Discovery.apiGroup(registry, "batch.example.com"))
    expect(group.versions.map((v) => v.version)).toEqual(["v1", "v1beta1", "v2alpha1"])
    expect(group.preferredVersion).toEqual({ groupVersion: "batch.example.com/v1", version: "v1" })
  })

  it("compares versions as Kubernetes documents it", () => {
    const documented = ["v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "foo1", "foo10"]
    const shuffled = [...documented].reverse()
    expect(shuffled.sort(Discovery.compareVersions)).toEqual(documented)
  })
})

describe("aggregated discovery", () => {
  const v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
  const v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"

  it.each<[string, string | undefined, string | undefined]>([
    ["no header", undefined, undefined],
    ["plain JSON", "application/json", undefined],
    ["kubectl 1.31", `${v2},${v2beta1},application/json`, v2],
    ["v2beta1 only", `${v2beta1},application/json`, v2beta1],
    ["with spaces", "application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList, application/json", v2],
    ["refused with q=0", `${v2};q=0,application/json`, undefined],
    ["plain JSON first wins ties", `application/json,${v2}`, undefined],
    ["higher q wins", `application/json;q=0.5,${v2}`, v2],
    ["a Table request", "application/json;as=Table;v=v1;g=meta.k8s.io", undefined],
    ["protobuf only", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", undefined],
    ["unknown version", "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", undefined]
  ])("Accept: %s", (_, accept, expected) => {
    expect(Discovery.wantsAggregated(accept)).toBe(expected)
  })

  it("/api holds the core group, unnamed, with scopes, response kinds and subresources", () => {
    const doc = Discovery.aggregated(Registry.make(), "api")
    expect(doc).toMatchObject({ kind: "APIGroupDiscoveryList", apiVersion: "apidiscovery.k8s.io/v2", metadata: {} })
    expect(doc.items).toHaveLength(1)
    expect(doc.items[0]?.metadata).toEqual({})
    const v1 = doc.items[0]?.versions[0]
    expect(v1?.version).toBe("v1")
    expect(v1?.freshness).toBe("Current")
    expect(v1?.resources.find((r) => r.resource === "pods")).toEqual({
      resource: "pods",
      responseKind: { group: "", version: "v1", kind: "Pod" },
      scope: "Namespaced",
      singularResource: "pod",
      verbs: allVerbs,
      shortNames: ["po"],
      categories: ["all"],
      subresources: [{ subresource: "status", responseKind: { group: "", version: "v1", kind: "Pod" }, verbs: ["get", "patch", "update"] }]
    })
    expect(v1?.resources.find((r) => r.resource === "nodes")?.scope).toBe("Cluster")
  })

  it("/apis holds the named groups; deployments/scale answers autoscaling/v1 Scale", () => {
    const doc = Discovery.aggregated(Registry.make(), "apis")
    expect(doc.items.map((i) => i.metadata.name)).not.toContain(undefined)
    const deployments = doc.items.find((i) => i.metadata.name === "apps")?.versions[0]?.resources.find((r) => r.resource === "deployments")
    expect(deployments?.subresources).toContainEqual({
      subresource: "scale",
      responseKind: { group: "autoscaling", version: "v1", kind: "Scale" },
      verbs: ["get", "patch", "update"]
    })
  })

  it("names the apiVersion of the media type it answers", () => {
    expect(Discovery.aggregated(Registry.make(), "apis", v2beta1).apiVersion).toBe("apidiscovery.k8s.io/v2beta1")
    expect(Discovery.aggregated(Registry.make(), "apis", v2).apiVersion).toBe("apidiscovery.k8s.io/v2")
  })
})

describe("every document is plain JSON", () => {
  const registry = Registry.make()
  registry.put(customResource("stable.example.com", "v1", "CronTab", "crontabs"))
  it.each<[string, () => unknown]>([
    ["version", () => Discovery.version()],
    ["/api", () => Discovery.apiVersions("localhost:9300")],
    ["/apis", () => Discovery.apiGroupList(registry)],
    ["/apis/apps", () => right(Discovery.apiGroup(registry, "apps"))],
    ["/api/v1", () => right(Discovery.apiResourceList(registry, "", "v1"))],
    ["/apis/stable.example.com/v1", () => right(Discovery.apiResourceList(registry, "stable.example.com", "v1"))],
    ["aggregated /api", () => Discovery.aggregated(registry, "api")],
    ["aggregated /apis", () => Discovery.aggregated(registry, "apis")],
    ["404", () => Discovery.notFound]
  ])("%s", (_, doc) => {
    const value = doc()
    expect(JSON.parse(JSON.stringify(value))).toEqual(value)
  })
})
