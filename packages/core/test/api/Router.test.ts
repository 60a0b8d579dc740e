import { describe, expect, it } from "vitest"
import * as Router from "../../src/api/Router.js"

const res = (group: string, version: string, plural: string, namespace?: string, name?: string, subresource?: string, watchPath = false) => ({
  _tag: "Resource",
  group,
  version,
  plural,
  namespace,
  name,
  subresource,
  watchPath
})

describe("Router.route", () => {
  it.each([
    ["/version", { _tag: "Version" }],
    ["/healthz", { _tag: "Health", check: "healthz" }],
    ["/api", { _tag: "CoreVersions" }],
    ["/api/", { _tag: "CoreVersions" }],
    ["/apis", { _tag: "GroupList" }],
    ["/apis/apps", { _tag: "Group", group: "apps" }],
    ["/api/v1", { _tag: "ResourceList", group: "", version: "v1" }],
    ["/apis/apps/v1", { _tag: "ResourceList", group: "apps", version: "v1" }],
    ["/openapi/v2", { _tag: "OpenApiV2" }],
    ["/openapi/v3", { _tag: "OpenApiV3", groupVersion: undefined }],
    ["/openapi/v3/apis/apps/v1", { _tag: "OpenApiV3", groupVersion: "apis/apps/v1" }],
    ["/api/v1/pods", res("", "v1", "pods")],
    ["/api/v1/namespaces", res("", "v1", "namespaces")],
    ["/api/v1/namespaces/default", res("", "v1", "namespaces", undefined, "default")],
    ["/api/v1/namespaces/default/status", res("", "v1", "namespaces", undefined, "default", "status")],
    ["/api/v1/namespaces/default/pods", res("", "v1", "pods", "default")],
    ["/api/v1/namespaces/default/pods/web-0", res("", "v1", "pods", "default", "web-0")],
    ["/api/v1/namespaces/default/pods/web-0/status", res("", "v1", "pods", "default", "web-0", "status")],
    ["/apis/apps/v1/namespaces/prod/deployments/api/scale", res("apps", "v1", "deployments", "prod", "api", "scale")],
    ["/api/v1/nodes/n1", res("", "v1", "nodes", undefined, "n1")],
    ["/api/v1/watch/pods", res("", "v1", "pods", undefined, undefined, undefined, true)],
    ["/api/v1/watch/namespaces/default/pods", res("", "v1", "pods", "default", undefined, undefined, true)],
    ["/apis/example.com/v1/namespaces/a/widgets/w%201", res("example.com", "v1", "widgets", "a", "w 1")],
    ["/apis/f.io/v1/memberclusters/east/proxy/api/v1/namespaces/a/pods", { ...res("f.io", "v1", "memberclusters", undefined, "east", "proxy"), subpath: "api/v1/namespaces/a/pods" }],
    ["/apis/f.io/v1/memberclusters/east/proxy", { ...res("f.io", "v1", "memberclusters", undefined, "east", "proxy"), subpath: "" }],
    ["/api/v1/namespaces/a/services/web/proxy/healthz", { ...res("", "v1", "services", "a", "web", "proxy"), subpath: "healthz" }],
    ["/apis/f.io/v1/aggregate/core/v1/pods", { ...res("f.io", "v1", "aggregate"), subpath: "core/v1/pods" }],
    ["/apis/f.io/v1/aggregate/apps/v1/namespaces/a/deployments", { ...res("f.io", "v1", "aggregate"), subpath: "apps/v1/namespaces/a/deployments" }],
    ["/apis/f.io/v1/aggregate", res("f.io", "v1", "aggregate")],
    ["/apis/f.io/v1/memberclusters//proxy/x", { _tag: "Unknown" }],
    ["/", { _tag: "Unknown" }],
    ["/metrics-nope", { _tag: "Unknown" }],
    ["/api/v1/namespaces/default/pods/a/b/c", { _tag: "Unknown" }],
    ["/api/v1/nodes/n1/status/extra", { _tag: "Unknown" }]
  ])("%s", (path, want) => {
    expect(Router.route(path)).toEqual(want)
  })
})
