import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Patch from "../../src/api/Patch.js"
import * as Kinds from "../../src/model/Kinds.js"

// Every input is deep-frozen: ES modules run in strict mode, so any write to an input throws.
const freeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null) {
    for (const child of Object.values(value)) freeze(child)
    Object.freeze(value)
  }
  return value
}

const right = (result: Either.Either<unknown, Patch.PatchError>): unknown => {
  if (Either.isLeft(result)) throw new Error(`expected success, got ${result.left.reason}: ${result.left.detail}`)
  return result.right
}

const left = (result: Either.Either<unknown, Patch.PatchError>): Patch.PatchError => {
  if (Either.isRight(result)) throw new Error(`expected failure, got ${JSON.stringify(result.right)}`)
  return result.left
}

/** The HTTP code and reason the API server would answer with. */
const status = (result: Either.Either<unknown, Patch.PatchError>) => {
  const s = Patch.toApiError(left(result)).status
  return { code: s.code, reason: s.reason }
}

describe("JSON Patch (RFC 6902 appendix A)", () => {
  it.each<[string, unknown, unknown, unknown]>([
    ["A.1 adding an object member", { foo: "bar" }, [{ op: "add", path: "/baz", value: "qux" }], { baz: "qux", foo: "bar" }],
    ["A.2 adding an array element", { foo: ["bar", "baz"] }, [{ op: "add", path: "/foo/1", value: "qux" }], { foo: ["bar", "qux", "baz"] }],
    ["A.3 removing an object member", { baz: "qux", foo: "bar" }, [{ op: "remove", path: "/baz" }], { foo: "bar" }],
    ["A.4 removing an array element", { foo: ["bar", "qux", "baz"] }, [{ op: "remove", path: "/foo/1" }], { foo: ["bar", "baz"] }],
    ["A.5 replacing a value", { baz: "qux", foo: "bar" }, [{ op: "replace", path: "/baz", value: "boo" }], { baz: "boo", foo: "bar" }],
    [
      "A.6 moving a value",
      { foo: { bar: "baz", waldo: "fred" }, qux: { corge: "grault" } },
      [{ op: "move", from: "/foo/waldo", path: "/qux/thud" }],
      { foo: { bar: "baz" }, qux: { corge: "grault", thud: "fred" } }
    ],
    [
      "A.7 moving an array element",
      { foo: ["all", "grass", "cows", "eat"] },
      [{ op: "move", from: "/foo/1", path: "/foo/3" }],
      { foo: ["all", "cows", "eat", "grass"] }
    ],
    [
      "A.8 testing a value: success",
      { baz: "qux", foo: ["a", 2, "c"] },
      [
        { op: "test", path: "/baz", value: "qux" },
        { op: "test", path: "/foo/1", value: 2 }
      ],
      { baz: "qux", foo: ["a", 2, "c"] }
    ],
    ["A.10 adding a nested member object", { foo: "bar" }, [{ op: "add", path: "/child", value: { grandchild: {} } }], { foo: "bar", child: { grandchild: {} } }],
    ["A.11 ignoring unrecognized elements", { foo: "bar" }, [{ op: "add", path: "/baz", value: "qux", xyz: 123 }], { foo: "bar", baz: "qux" }],
    ["A.14 ~ escape ordering", { "/": 9, "~1": 10 }, [{ op: "test", path: "/~01", value: 10 }], { "/": 9, "~1": 10 }],
    ["A.16 adding an array value", { foo: ["bar"] }, [{ op: "add", path: "/foo/-", value: ["abc", "def"] }], { foo: ["bar", ["abc", "def"]] }],
    ["copy", { a: { b: 1 } }, [{ op: "copy", from: "/a", path: "/c" }], { a: { b: 1 }, c: { b: 1 } }],
    ["replace the whole document", { a: 1 }, [{ op: "replace", path: "", value: { b: 2 } }], { b: 2 }],
    ["~1 in a path names a key with a slash", { "a/b": 1 }, [{ op: "replace", path: "/a~1b", value: 2 }], { "a/b": 2 }],
    ["test compares objects regardless of member order", { a: { x: 1, y: [1, 2] } }, [{ op: "test", path: "/a", value: { y: [1, 2], x: 1 } }], { a: { x: 1, y: [1, 2] } }],
    ["move to the same place is a no-op", { a: 1 }, [{ op: "move", from: "/a", path: "/a" }], { a: 1 }],
    ["__proto__ is an ordinary member", {}, [{ op: "add", path: "/__proto__", value: { polluted: true } }], JSON.parse('{"__proto__":{"polluted":true}}')]
  ])("%s", (_name, doc, patch, expected) => {
    const result = right(Patch.jsonPatch(freeze(doc), freeze(patch)))
    expect(result).toStrictEqual(expected)
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined()
  })

  it.each<[string, unknown, unknown, string]>([
    ["A.9 testing a value: error", { baz: "qux" }, [{ op: "test", path: "/baz", value: "bar" }], "testing value /baz failed: test failed"],
    ["A.12 adding to a nonexistent target", { foo: "bar" }, [{ op: "add", path: "/baz/bat", value: "qux" }], "doc is missing path"],
    ["A.15 comparing strings and numbers", { "/": 9, "~1": 10 }, [{ op: "test", path: "/~01", value: "10" }], "test failed"],
    ["remove a missing member", { a: 1 }, [{ op: "remove", path: "/b" }], "remove operation does not apply"],
    ["replace a missing member", { a: 1 }, [{ op: "replace", path: "/b", value: 1 }], "replace operation does not apply"],
    ["add past the end of an array", { a: [1] }, [{ op: "add", path: "/a/2", value: 1 }], "index out of bounds"],
    ["an index with a leading zero", { a: [1, 2] }, [{ op: "replace", path: "/a/01", value: 1 }], "doc is missing path"],
    ["- only appends", { a: [1] }, [{ op: "remove", path: "/a/-" }], "doc is missing path"],
    ["a pointer without a leading slash", { a: 1 }, [{ op: "add", path: "a", value: 1 }], "invalid JSON pointer"],
    ["a bad ~ escape", { a: 1 }, [{ op: "add", path: "/~2", value: 1 }], "invalid JSON pointer"],
    ["an unknown op", { a: 1 }, [{ op: "merge", path: "/a", value: 1 }], "Unexpected kind: merge"],
    ["add without a value", { a: 1 }, [{ op: "add", path: "/b" }], "missing the value field"],
    ["move without from", { a: 1 }, [{ op: "move", path: "/b" }], "missing the from field"],
    ["move into its own child", { a: { b: 1 } }, [{ op: "move", from: "/a", path: "/a/b/c" }], "cannot move"],
    ["a later op fails after earlier ones applied", { a: 1 }, [{ op: "add", path: "/b", value: 2 }, { op: "test", path: "/b", value: 3 }], "testing value /b failed"]
  ])("%s is 422 Invalid", (_name, doc, patch, detail) => {
    const result = Patch.jsonPatch(freeze(doc), freeze(patch))
    expect(left(result).detail).toContain(detail)
    expect(status(result)).toEqual({ code: 422, reason: "Invalid" })
  })

  it("a failing patch reports kube-apiserver's generic 422 with the detail as a cause", () => {
    const error = left(Patch.jsonPatch({ spec: { replicas: 1 } }, [{ op: "test", path: "/spec/replicas", value: 2 }]))
    expect(error.toApiError().status).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "the server rejected our request due to an error in our request",
      reason: "Invalid",
      details: { causes: [{ message: "testing value /spec/replicas failed: test failed" }] },
      code: 422
    })
  })

  it.each<[string, unknown]>([
    ["an object", { op: "add", path: "/a", value: 1 }],
    ["a string", "add /a 1"],
    ["null", null],
    ["an array of non-objects", ["add"]]
  ])("a body that is %s is 400 BadRequest", (_name, patch) => {
    const result = Patch.jsonPatch({}, freeze(patch))
    expect(status(result)).toEqual({ code: 400, reason: "BadRequest" })
    expect(left(result).detail).toMatch(/^json: cannot unmarshal /)
  })

  it("more than 10,000 operations is 413", () => {
    const ops = Array.from({ length: 10_001 }, () => ({ op: "test", path: "", value: {} }))
    expect(status(Patch.jsonPatch({}, ops))).toEqual({ code: 413, reason: "RequestEntityTooLarge" })
  })

  it("values added from the patch are copies, not the patch's own objects", () => {
    const patch = freeze([
      { op: "add", path: "/a", value: { b: 1 } },
      { op: "add", path: "/a/c", value: 2 }
    ])
    expect(right(Patch.jsonPatch({}, patch))).toEqual({ a: { b: 1, c: 2 } })
  })
})

describe("JSON Merge Patch (RFC 7386 appendix A)", () => {
  it.each<[unknown, unknown, unknown]>([
    [{ a: "b" }, { a: "c" }, { a: "c" }],
    [{ a: "b" }, { b: "c" }, { a: "b", b: "c" }],
    [{ a: "b" }, { a: null }, {}],
    [{ a: "b", b: "c" }, { a: null }, { b: "c" }],
    [{ a: ["b"] }, { a: "c" }, { a: "c" }],
    [{ a: "c" }, { a: ["b"] }, { a: ["b"] }],
    [{ a: { b: "c" } }, { a: { b: "d", c: null } }, { a: { b: "d" } }],
    [{ a: [{ b: "c" }] }, { a: [1] }, { a: [1] }],
    [["a", "b"], ["c", "d"], ["c", "d"]],
    [{ a: "b" }, ["c"], ["c"]],
    [{ a: "foo" }, null, null],
    [{ a: "foo" }, "bar", "bar"],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: "b", c: null }, { a: "b" }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }]
  ])("%j + %j = %j", (target, patch, expected) => {
    expect(right(Patch.mergePatch(freeze(target), freeze(patch)))).toStrictEqual(expected)
  })

  it("the result shares nothing with its inputs", () => {
    const target = freeze({ keep: { deep: [1] }, change: { x: 1 } })
    const patch = freeze({ change: { y: { z: 1 } } })
    const result = right(Patch.mergePatch(target, patch)) as { keep: { deep: Array<number> }; change: { y: { z: number } } }
    result.keep.deep.push(2)
    result.change.y.z = 2
    expect(target.keep.deep).toEqual([1])
    expect(patch.change.y.z).toBe(1)
  })
})

// A Deployment as kubectl would read it back.
const deployment = () =>
  freeze({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: "web",
      namespace: "default",
      labels: { app: "web", tier: "frontend" },
      finalizers: ["a.example.com/x", "b.example.com/y"]
    },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: {
          containers: [
            {
              name: "app",
              image: "nginx:1.25",
              env: [
                { name: "A", value: "1" },
                { name: "B", value: "2" }
              ],
              ports: [{ containerPort: 80 }]
            },
            { name: "sidecar", image: "envoy:1.0" }
          ],
          tolerations: [{ key: "dedicated", operator: "Equal", value: "web", effect: "NoSchedule" }],
          volumes: [{ name: "data", emptyDir: {} }]
        }
      }
    },
    status: {
      conditions: [
        { type: "Available", status: "True" },
        { type: "Progressing", status: "True" }
      ]
    }
  })

type Deployment = ReturnType<typeof deployment>
const podSpec = (d: unknown) => (d as Deployment).spec.template.spec
const template = (spec: unknown) => ({ spec: { template: { spec } } })
const strategic = (patch: unknown) => right(Patch.apply("application/strategic-merge-patch+json", deployment(), freeze(patch)))

describe("strategic merge patch on a Deployment", () => {
  it.each<[string, unknown, (result: Deployment) => unknown, unknown]>([
    [
      // Kubernetes puts items new to a list before the server's remaining items (mergeSortedSlice).
      "adding an env var to one container by name keeps the others",
      template({ containers: [{ name: "app", env: [{ name: "C", value: "3" }] }] }),
      (d) => podSpec(d).containers,
      [
        {
          name: "app",
          image: "nginx:1.25",
          env: [
            { name: "C", value: "3" },
            { name: "A", value: "1" },
            { name: "B", value: "2" }
          ],
          ports: [{ containerPort: 80 }]
        },
        { name: "sidecar", image: "envoy:1.0" }
      ]
    ],
    [
      "changing an env var's value by name",
      template({ containers: [{ name: "app", env: [{ name: "B", value: "two" }] }] }),
      (d) => podSpec(d).containers[0]?.env,
      [
        { name: "A", value: "1" },
        { name: "B", value: "two" }
      ]
    ],
    [
      "changing an image by container name",
      template({ containers: [{ name: "sidecar", image: "envoy:2.0" }] }),
      (d) => podSpec(d).containers.map((c) => `${c.name}=${c.image}`),
      ["app=nginx:1.25", "sidecar=envoy:2.0"]
    ],
    [
      // The example from kubernetes.io "Update API Objects in Place Using kubectl patch".
      "adding a container puts it first, as kubectl patch does",
      template({ containers: [{ name: "redis", image: "redis" }] }),
      (d) => podSpec(d).containers.map((c) => c.name),
      ["redis", "app", "sidecar"]
    ],
    [
      "deleting a container with $patch: delete",
      template({ containers: [{ name: "sidecar", $patch: "delete" }] }),
      (d) => podSpec(d).containers.map((c) => c.name),
      ["app"]
    ],
    [
      "deleting an env var with $patch: delete",
      template({ containers: [{ name: "app", env: [{ name: "A", $patch: "delete" }] }] }),
      (d) => podSpec(d).containers[0]?.env,
      [{ name: "B", value: "2" }]
    ],
    [
      "replacing the container list with $patch: replace",
      template({ containers: [{ name: "only", image: "busybox" }, { $patch: "replace" }] }),
      (d) => podSpec(d).containers,
      [{ name: "only", image: "busybox" }]
    ],
    [
      "replacing a map with $patch: replace",
      { metadata: { labels: { $patch: "replace", owner: "me" } } },
      (d) => d.metadata.labels,
      { owner: "me" }
    ],
    [
      "emptying a map with $patch: delete",
      { metadata: { labels: { $patch: "delete" } } },
      (d) => d.metadata.labels,
      {}
    ],
    ["$patch: merge on a map is the default", { metadata: { labels: { $patch: "merge", owner: "me" } } }, (d) => d.metadata.labels, { app: "web", tier: "frontend", owner: "me" }],
    ["null removes a label", { metadata: { labels: { tier: null } } }, (d) => d.metadata.labels, { app: "web" }],
    ["null removes a whole field", { spec: { template: { spec: { tolerations: null } } } }, (d) => "tolerations" in podSpec(d), false],
    [
      // PodSpec.tolerations has no patchStrategy tag: strategic merge patch replaces the list.
      "adding a toleration replaces the tolerations (they are atomic in Kubernetes)",
      template({ tolerations: [{ key: "gpu", operator: "Exists", effect: "NoSchedule" }] }),
      (d) => podSpec(d).tolerations,
      [{ key: "gpu", operator: "Exists", effect: "NoSchedule" }]
    ],
    [
      "a directive element in an atomic list is not stored as data",
      template({ tolerations: [{ $patch: "replace" }, { key: "gpu", operator: "Exists" }] }),
      (d) => podSpec(d).tolerations,
      [{ key: "gpu", operator: "Exists" }]
    ],
    [
      "ports merge by containerPort",
      template({ containers: [{ name: "app", ports: [{ containerPort: 80, name: "http" }, { containerPort: 443 }] }] }),
      (d) => podSpec(d).containers[0]?.ports,
      [{ containerPort: 80, name: "http" }, { containerPort: 443 }]
    ],
    [
      "conditions merge by type",
      { status: { conditions: [{ type: "Available", status: "False", reason: "MinimumReplicasUnavailable" }] } },
      (d) => d.status.conditions,
      [
        { type: "Available", status: "False", reason: "MinimumReplicasUnavailable" },
        { type: "Progressing", status: "True" }
      ]
    ],
    [
      "finalizers merge as a set",
      { metadata: { finalizers: ["b.example.com/y", "c.example.com/z"] } },
      (d) => d.metadata.finalizers,
      ["a.example.com/x", "b.example.com/y", "c.example.com/z"]
    ],
    [
      "a finalizer new to the set goes first, as Kubernetes orders it",
      { metadata: { finalizers: ["c.example.com/z"] } },
      (d) => d.metadata.finalizers,
      ["c.example.com/z", "a.example.com/x", "b.example.com/y"]
    ],
    [
      "$deleteFromPrimitiveList/finalizers removes finalizers",
      { metadata: { "$deleteFromPrimitiveList/finalizers": ["a.example.com/x"] } },
      (d) => d.metadata.finalizers,
      ["b.example.com/y"]
    ],
    [
      "$deleteFromPrimitiveList on an absent list changes nothing",
      { spec: { template: { metadata: { "$deleteFromPrimitiveList/finalizers": ["x"] } } } },
      (d) => d.spec.template.metadata,
      { labels: { app: "web" } }
    ],
    [
      "$setElementOrder reorders a list without changing it",
      template({ "$setElementOrder/containers": [{ name: "sidecar" }, { name: "app" }] }),
      (d) => podSpec(d).containers.map((c) => c.name),
      ["sidecar", "app"]
    ],
    [
      // What kubectl apply sends when it adds a container at the end.
      "$setElementOrder places a new container where the order says",
      template({
        "$setElementOrder/containers": [{ name: "app" }, { name: "sidecar" }, { name: "redis" }],
        containers: [{ name: "redis", image: "redis" }]
      }),
      (d) => podSpec(d).containers.map((c) => c.name),
      ["app", "sidecar", "redis"]
    ],
    [
      "$setElementOrder on a primitive list",
      { metadata: { "$setElementOrder/finalizers": ["b.example.com/y", "a.example.com/x"] } },
      (d) => d.metadata.finalizers,
      ["b.example.com/y", "a.example.com/x"]
    ],
    [
      "without $retainKeys a volume keeps its old source",
      template({ volumes: [{ name: "data", hostPath: { path: "/srv" } }] }),
      (d) => podSpec(d).volumes,
      [{ name: "data", emptyDir: {}, hostPath: { path: "/srv" } }]
    ],
    [
      "$retainKeys drops the fields it does not name",
      template({ volumes: [{ name: "data", hostPath: { path: "/srv" }, $retainKeys: ["name", "hostPath"] }] }),
      (d) => podSpec(d).volumes,
      [{ name: "data", hostPath: { path: "/srv" } }]
    ],
    [
      "a new container's directives are applied, not stored",
      template({ containers: [{ name: "new", image: "x", env: [{ name: "A", value: "1" }, { name: "GONE", $patch: "delete" }], args: null }] }),
      (d) => podSpec(d).containers[0],
      { name: "new", image: "x", env: [{ name: "A", value: "1" }] }
    ],
    ["scalars replace", { spec: { replicas: 5 } }, (d) => d.spec.replicas, 5],
    ["lists without a merge key replace", { spec: { template: { spec: { containers: [{ name: "app", args: ["b"] }] } } } }, (d) => (podSpec(d).containers[0] as { args?: unknown }).args, ["b"]]
  ])("%s", (_name, patch, select, expected) => {
    expect(select(strategic(patch) as Deployment)).toStrictEqual(expected)
  })

  it("leaves everything the patch does not mention alone", () => {
    const result = strategic({ spec: { replicas: 3 } }) as Deployment
    expect(result).toStrictEqual({ ...deployment(), spec: { ...deployment().spec, replicas: 3 } })
  })

  it("returns a fresh object: the frozen input is untouched and the result is writable", () => {
    const original = deployment()
    const before = JSON.stringify(original)
    const result = right(Patch.apply("application/strategic-merge-patch+json", original, freeze(template({ containers: [{ name: "app", image: "x" }] })))) as Deployment
    expect(JSON.stringify(original)).toBe(before)
    expect(Object.isFrozen(result.metadata)).toBe(false)
    expect(Object.isFrozen(podSpec(result).volumes)).toBe(false)
    expect(result.status).not.toBe(original.status)
  })
})

describe("strategic merge patch on other built-in kinds", () => {
  it.each<[string, unknown, unknown, unknown]>([
    [
      "Pod containers merge by name, tolerations replace",
      { apiVersion: "v1", kind: "Pod", spec: { containers: [{ name: "a", image: "1" }], tolerations: [{ key: "x" }] } },
      { spec: { containers: [{ name: "a", image: "2" }], tolerations: [{ key: "y" }] } },
      { apiVersion: "v1", kind: "Pod", spec: { containers: [{ name: "a", image: "2" }], tolerations: [{ key: "y" }] } }
    ],
    [
      "Pod status conditions merge by type",
      { apiVersion: "v1", kind: "Pod", status: { conditions: [{ type: "Ready", status: "False" }, { type: "PodScheduled", status: "True" }] } },
      { status: { conditions: [{ type: "Ready", status: "True" }] } },
      { apiVersion: "v1", kind: "Pod", status: { conditions: [{ type: "Ready", status: "True" }, { type: "PodScheduled", status: "True" }] } }
    ],
    [
      "Node conditions merge by type",
      { apiVersion: "v1", kind: "Node", status: { conditions: [{ type: "Ready", status: "True" }, { type: "DiskPressure", status: "False" }] } },
      { status: { conditions: [{ type: "DiskPressure", status: "True" }] } },
      { apiVersion: "v1", kind: "Node", status: { conditions: [{ type: "Ready", status: "True" }, { type: "DiskPressure", status: "True" }] } }
    ],
    [
      "Service ports merge by port",
      { apiVersion: "v1", kind: "Service", spec: { ports: [{ port: 80, targetPort: 8080 }, { port: 443 }] } },
      { spec: { ports: [{ port: 80, targetPort: 9090 }] } },
      { apiVersion: "v1", kind: "Service", spec: { ports: [{ port: 80, targetPort: 9090 }, { port: 443 }] } }
    ],
    [
      "Endpoints subsets are atomic",
      { apiVersion: "v1", kind: "Endpoints", subsets: [{ addresses: [{ ip: "10.0.0.1" }] }] },
      { subsets: [{ addresses: [{ ip: "10.0.0.2" }] }] },
      { apiVersion: "v1", kind: "Endpoints", subsets: [{ addresses: [{ ip: "10.0.0.2" }] }] }
    ],
    [
      "ReplicaSet pod template volumeMounts merge by mountPath",
      { apiVersion: "apps/v1", kind: "ReplicaSet", spec: { template: { spec: { containers: [{ name: "a", volumeMounts: [{ mountPath: "/a", name: "v" }] }] } } } },
      { spec: { template: { spec: { containers: [{ name: "a", volumeMounts: [{ mountPath: "/a", readOnly: true }] }] } } } },
      { apiVersion: "apps/v1", kind: "ReplicaSet", spec: { template: { spec: { containers: [{ name: "a", volumeMounts: [{ mountPath: "/a", name: "v", readOnly: true }] }] } } } }
    ],
    [
      "ownerReferences merge by uid",
      { apiVersion: "v1", kind: "ConfigMap", metadata: { ownerReferences: [{ uid: "1", name: "a" }] } },
      { metadata: { ownerReferences: [{ uid: "1", name: "b" }] } },
      { apiVersion: "v1", kind: "ConfigMap", metadata: { ownerReferences: [{ uid: "1", name: "b" }] } }
    ]
  ])("%s", (_name, original, patch, expected) => {
    expect(right(Patch.apply("application/strategic-merge-patch+json", freeze(original), freeze(patch)))).toStrictEqual(expected)
  })

  it("takes merge keys explicitly, or by apiVersion/kind name", () => {
    const pod = freeze({ spec: { containers: [{ name: "a", image: "1" }, { name: "b", image: "1" }] } })
    const patch = freeze({ spec: { containers: [{ name: "b", image: "2" }] } })
    const merged = { spec: { containers: [{ name: "a", image: "1" }, { name: "b", image: "2" }] } }
    expect(right(Patch.strategicMergePatch(pod, patch, Patch.builtInMergeKeys["v1/Pod"] ?? {}))).toStrictEqual(merged)
    expect(right(Patch.apply("application/strategic-merge-patch+json", pod, patch, "v1/Pod"))).toStrictEqual(merged)
    expect(right(Patch.strategicMergePatch(pod, patch, {}))).toStrictEqual({ spec: { containers: [{ name: "b", image: "2" }] } })
  })

  it("is supported for every built-in kind and no custom resource", () => {
    const missing = Kinds.all.filter((k) => Patch.builtInMergeKeys[`${k.apiVersion}/${k.kind}`] === undefined).map((k) => k.kind)
    // A new built-in kind needs its patchStrategy/patchMergeKey tags transcribed into the table.
    expect(missing).toEqual([])
    for (const k of Kinds.all) expect(Patch.supportsStrategic(k.apiVersion, k.kind)).toBe(true)
    expect(Patch.supportsStrategic("example.com/v1", "Widget")).toBe(false)
  })
})

describe("errors map to the Status kube-apiserver sends", () => {
  const widget = freeze({ apiVersion: "example.com/v1", kind: "Widget", spec: { size: 1 } })

  it.each<[string, number, string, () => Either.Either<unknown, Patch.PatchError>]>([
    ["a JSON patch that is not an array", 400, "BadRequest", () => Patch.apply("application/json-patch+json", deployment(), { op: "add" })],
    ["a failing test op", 422, "Invalid", () => Patch.apply("application/json-patch+json", deployment(), [{ op: "test", path: "/spec/replicas", value: 9 }])],
    ["a path that is not there", 422, "Invalid", () => Patch.apply("application/json-patch+json", deployment(), [{ op: "remove", path: "/spec/paused" }])],
    ["a JSON patch leaving a non-object", 422, "Invalid", () => Patch.apply("application/json-patch+json", deployment(), [{ op: "replace", path: "", value: 5 }])],
    ["a merge patch that is not an object", 400, "BadRequest", () => Patch.apply("application/merge-patch+json", deployment(), ["x"])],
    ["a strategic patch that is not an object", 400, "BadRequest", () => Patch.apply("application/strategic-merge-patch+json", deployment(), [1])],
    ["an unknown $patch directive", 400, "BadRequest", () => Patch.apply("application/strategic-merge-patch+json", deployment(), { metadata: { $patch: "explode" } })],
    ["a list element without its merge key", 400, "BadRequest", () => Patch.apply("application/strategic-merge-patch+json", deployment(), template({ containers: [{ image: "x" }] }))],
    ["a delete directive without its merge key", 400, "BadRequest", () => Patch.apply("application/strategic-merge-patch+json", deployment(), template({ containers: [{ $patch: "delete" }] }))],
    ["a non-list $deleteFromPrimitiveList", 400, "BadRequest", () => Patch.apply("application/strategic-merge-patch+json", deployment(), { metadata: { "$deleteFromPrimitiveList/finalizers": "a" } })],
    ["a non-list $retainKeys", 400, "BadRequest", () => Patch.apply("application/strategic-merge-patch+json", deployment(), { metadata: { $retainKeys: "name" } })],
    ["$retainKeys not naming a patched field", 400, "BadRequest", () => Patch.apply("application/strategic-merge-patch+json", deployment(), { metadata: { $retainKeys: ["name"], labels: {} } })],
    ["a $setElementOrder contradicting the patch", 400, "BadRequest", () => Patch.apply("application/strategic-merge-patch+json", deployment(), template({ "$setElementOrder/containers": [{ name: "app" }], containers: [{ name: "new" }] }))],
    ["a merged list of lists", 422, "Invalid", () => Patch.apply("application/strategic-merge-patch+json", deployment(), { metadata: { finalizers: [["a"]] } })],
    ["a strategic patch for a custom resource", 415, "UnsupportedMediaType", () => Patch.apply("application/strategic-merge-patch+json", widget, { spec: { size: 2 } })],
    ["server-side apply", 415, "UnsupportedMediaType", () => Patch.apply("application/apply-patch+yaml", deployment(), {})],
    ["a plain JSON body", 415, "UnsupportedMediaType", () => Patch.apply("application/json", deployment(), {})],
    ["a patch nested too deep", 400, "BadRequest", () => Patch.apply("application/merge-patch+json", deployment(), JSON.parse(`${'{"a":'.repeat(1001)}1${"}".repeat(1001)}`))],
  ])("%s → %i %s", (_name, code, reason, run) => {
    expect(status(run())).toEqual({ code, reason })
  })

  it("415 lists the media types that would work", () => {
    const forCrd = Patch.toApiError(left(Patch.apply("application/strategic-merge-patch+json", widget, {}))).status.message
    expect(forCrd).toBe(
      "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )
    const wrongType = Patch.toApiError(left(Patch.apply("text/plain", widget, {}))).status.message
    expect(wrongType).toContain("application/strategic-merge-patch+json")
  })

  it("custom resources still take JSON and merge patches", () => {
    expect(right(Patch.apply("application/merge-patch+json", widget, { spec: { size: 2 } }))).toEqual({ ...widget, spec: { size: 2 } })
    expect(right(Patch.apply("application/json-patch+json", widget, [{ op: "replace", path: "/spec/size", value: 3 }]))).toEqual({ ...widget, spec: { size: 3 } })
  })
})

describe("content types", () => {
  it.each<[string | undefined, Patch.PatchType | undefined]>([
    ["application/json-patch+json", "json"],
    ["application/merge-patch+json; charset=utf-8", "merge"],
    ["Application/Strategic-Merge-Patch+JSON", "strategic"],
    [" application/strategic-merge-patch+json ;charset=UTF-8", "strategic"],
    ["application/apply-patch+yaml", undefined],
    ["application/json", undefined],
    ["", undefined],
    [undefined, undefined]
  ])("%j → %s", (header, expected) => {
    const parsed = Patch.parseContentType(header)
    expect(Either.getOrUndefined(parsed)).toBe(expected)
    if (expected === undefined) expect(status(parsed)).toEqual({ code: 415, reason: "UnsupportedMediaType" })
  })

  it("lists the three patch types it applies and server-side apply", () => {
    expect(Patch.accepted).toEqual(["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"])
    expect(Patch.contentTypes.apply).toBe("application/apply-patch+yaml")
  })
})
