import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Config, Decode, IntOrString, Meta, Scalars, Validation } from "../../src/model/index.js"

describe("region label", () => {
  it("has the documented name and default", () => {
    expect(Meta.RegionLabel).toBe("fleet.koder.dev/region")
    expect(Meta.DefaultRegion).toBe("local")
  })

  it.each([
    [{}, "eu-west", { labels: { "fleet.koder.dev/region": "eu-west" } }],
    [{ name: "a", labels: { app: "x" } }, "local", { name: "a", labels: { app: "x", "fleet.koder.dev/region": "local" } }],
    // Never overwrites, even with a different configured region.
    [
      { labels: { "fleet.koder.dev/region": "us-east" } },
      "eu-west",
      { labels: { "fleet.koder.dev/region": "us-east" } }
    ],
    [{ labels: { "fleet.koder.dev/region": "" } }, "eu-west", { labels: { "fleet.koder.dev/region": "" } }]
  ])("withRegionDefault(%j, %s)", (meta, region, expected) => {
    expect(Meta.withRegionDefault(meta, region)).toEqual(expected)
  })

  it("defaults to the local region and does not mutate its input", () => {
    const meta = { name: "a", labels: { app: "x" } }
    const out = Meta.withRegionDefault(meta)
    expect(out.labels).toEqual({ app: "x", "fleet.koder.dev/region": "local" })
    expect(meta.labels).toEqual({ app: "x" })
    // Unchanged metadata is returned as-is.
    expect(Meta.withRegionDefault(out, "other")).toBe(out)
  })

  const r = (region?: string) => (region === undefined ? { labels: { app: "x" } } : { labels: { "fleet.koder.dev/region": region } })
  it.each([
    [r("eu"), r("eu"), false],
    [r("eu"), r("us"), true],
    [r("eu"), r(), true], // removed
    [r("eu"), {}, true],
    [r(), r(), false],
    [{}, {}, false]
  ])("regionChanged(%j, %j) = %s", (oldMeta, newMeta, changed) => {
    expect(Meta.regionChanged(oldMeta, newMeta)).toBe(changed)
  })
})

describe("ObjectMeta", () => {
  it("decodes full metadata as kubectl sends it", () => {
    const r = Decode.decodeObject(Meta.ObjectMeta, {
      name: "web-0",
      generateName: "web-",
      namespace: "default",
      uid: "2f6c1a3e-7c55-4b8e-9b1a-0d1b2c3d4e5f",
      resourceVersion: "12345",
      generation: 3,
      creationTimestamp: "2024-05-01T10:00:00Z",
      deletionTimestamp: null,
      deletionGracePeriodSeconds: 30,
      labels: { app: "web", "app.kubernetes.io/name": "web", empty: "" },
      annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}", "Example.COM/Mixed": "ok" },
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "ReplicaSet", name: "web-abc", uid: "u1", controller: true, blockOwnerDeletion: true }
      ],
      finalizers: ["kubernetes.io/pvc-protection"],
      managedFields: [{ manager: "kubectl", operation: "Apply" }],
      selfLink: "/api/v1/namespaces/default/pods/web-0"
    })
    expect(Either.isRight(r)).toBe(true)
    if (Either.isRight(r)) {
      // null decodes to absent; managedFields are kept (server-side apply); unknown fields are dropped.
      expect("deletionTimestamp" in r.right).toBe(false)
      expect(r.right.managedFields?.[0]?.manager).toBe("kubectl")
      expect("selfLink" in r.right).toBe(false)
      expect(r.right.ownerReferences?.[0]?.controller).toBe(true)
    }
  })

  it.each([
    [{ name: "Web" }, "metadata.name"],
    [{ name: "a".repeat(254) }, "metadata.name"],
    [{ name: "-a" }, "metadata.name"],
    [{ namespace: "my.ns" }, "metadata.namespace"],
    [{ labels: { "a/b/c": "x" } }, "metadata.labels"],
    [{ labels: { app: "x".repeat(64) } }, "metadata.labels"],
    [{ annotations: { "bad key": "x" } }, "metadata.annotations"],
    [{ creationTimestamp: "yesterday" }, "metadata.creationTimestamp"],
    [{ generation: 1.5 }, "metadata.generation"],
    [{ finalizers: "x" }, "metadata.finalizers"]
  ])("rejects %j at %s", (meta, path) => {
    const r = Decode.decodeObject(Config.ConfigMap, { apiVersion: "v1", kind: "ConfigMap", metadata: meta })
    expect(Either.isLeft(r)).toBe(true)
    if (Either.isLeft(r)) expect(r.left.map((e) => e.path)).toEqual([path])
  })

  it("reports label problems with Kubernetes' wording", () => {
    expect(Validation.validateLabels({ "-bad": "ok", good: "bad value" })).toEqual([
      {
        path: "metadata.labels",
        message:
          "Invalid value: \"-bad\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
      },
      {
        path: "metadata.labels",
        message:
          "Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
      }
    ])
  })
})

describe("List", () => {
  it("wraps items with list metadata", () => {
    const PodNames = Meta.List(Meta.ObjectMeta)
    const r = Decode.decodeObject(PodNames, {
      apiVersion: "v1",
      kind: "List",
      metadata: { resourceVersion: "7", continue: "abc", remainingItemCount: 3 },
      items: [{ name: "a" }, { name: "B" }]
    })
    expect(Either.isLeft(r) && r.left.map((e) => e.path)).toEqual(["items[1].name"])
  })
})

describe("Scalars", () => {
  it("formats Time and MicroTime as the API serialises them", () => {
    const d = new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 678))
    expect(Scalars.formatTime(d)).toBe("2024-01-02T03:04:05Z")
    expect(Scalars.formatMicroTime(d)).toBe("2024-01-02T03:04:05.678000Z")
  })

  it.each([
    ["2024-01-02T03:04:05Z", true],
    ["2024-01-02T03:04:05.123456Z", true],
    ["2024-01-02T03:04:05+02:00", true],
    ["2024-01-02 03:04:05Z", false],
    ["2024-13-02T03:04:05Z", false],
    ["2024-01-02", false]
  ])("Time accepts %s: %s", (t, ok) => {
    expect(Either.isRight(Decode.decodeObject(Scalars.Time, t))).toBe(ok)
  })
})

describe("IntOrString", () => {
  it.each([
    [5, 10, true, 5],
    ["25%", 10, true, 3],
    ["25%", 10, false, 2],
    ["100%", 7, false, 7],
    ["0%", 7, true, 0]
  ])("scaledValue(%j, %d, roundUp=%s) = %d", (v, total, up, expected) => {
    expect(IntOrString.scaledValue(v, total, up)).toEqual(Either.right(expected))
  })

  it("rejects strings that are not percentages", () => {
    expect(Either.isLeft(IntOrString.scaledValue("abc", 10, true))).toBe(true)
    expect(Either.isLeft(IntOrString.scaledValue("x%", 10, true))).toBe(true)
  })

  it("decodes ints and strings, rejecting other JSON", () => {
    expect(Decode.decodeObject(IntOrString.IntOrString, 8080)).toEqual(Either.right(8080))
    expect(Decode.decodeObject(IntOrString.IntOrString, "http")).toEqual(Either.right("http"))
    expect(Decode.decodeObject(IntOrString.IntOrString, true)).toEqual(
      Either.left([{ path: "", message: "Invalid value: true: expected number or string" }])
    )
  })
})
