import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Apps, Config, Decode, Pod } from "../../src/model/index.js"

const pod = (spec: unknown, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "x", namespace: "default" },
  spec,
  ...extra
})

const errors = (r: Either.Either<unknown, ReadonlyArray<{ path: string; message: string }>>) =>
  Either.isLeft(r) ? r.left.map((e) => `${e.path}: ${e.message}`) : []

describe("decodeObject field errors", () => {
  it.each<[string, unknown, ReadonlyArray<string>]>([
    ["missing image", pod({ containers: [{ name: "c" }] }), ["spec.containers[0].image: Required value"]],
    ["empty image", pod({ containers: [{ name: "c", image: "" }] }), ["spec.containers[0].image: Required value"]],
    ["no containers", pod({ containers: [] }), ["spec.containers: Required value"]],
    ["missing spec", { apiVersion: "v1", kind: "Pod", metadata: {} }, ["spec: Required value"]],
    ["wrong type", pod({ containers: [{ name: "c", image: 5 }] }), ["spec.containers[0].image: Invalid value: 5: expected string"]],
    ["object expected", pod({ containers: "nginx" }), ['spec.containers: Invalid value: "nginx": expected array']],
    [
      "enum",
      pod({ containers: [{ name: "c", image: "i" }], restartPolicy: "Sometimes" }),
      ['spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"']
    ],
    [
      "wrong apiVersion",
      { ...pod({ containers: [{ name: "c", image: "i" }] }), apiVersion: "v2" },
      ['apiVersion: Unsupported value: "v2": supported values: "v1"']
    ],
    [
      "port range",
      pod({ containers: [{ name: "c", image: "i", ports: [{ containerPort: 70000 }] }] }),
      ["spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"]
    ],
    [
      "integer",
      pod({ containers: [{ name: "c", image: "i" }], terminationGracePeriodSeconds: 1.5 }),
      ["spec.terminationGracePeriodSeconds: Invalid value: 1.5: must be an integer"]
    ],
    [
      "quantity",
      pod({ containers: [{ name: "c", image: "i", resources: { limits: { "nvidia.com/gpu": "1Gb" } } }] }),
      ["spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: \"1Gb\": unable to parse quantity's suffix"]
    ],
    [
      "container name",
      pod({ containers: [{ name: "My_C", image: "i" }] }),
      [
        "spec.containers[0].name: Invalid value: \"My_C\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
      ]
    ],
    [
      "several at once",
      pod({ containers: [{ image: "i" }, { name: "b" }], dnsPolicy: 3 }),
      [
        "spec.containers[0].name: Required value",
        "spec.containers[1].image: Required value",
        'spec.dnsPolicy: Unsupported value: 3: supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'
      ]
    ],
    [
      "labels",
      { ...pod({ containers: [{ name: "c", image: "i" }] }), metadata: { name: "x", labels: { "a/b/c": "v" } } },
      [
        "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
      ]
    ],
    [
      "more than one volume source",
      pod({ containers: [{ name: "c", image: "i" }], volumes: [{ name: "v", emptyDir: {}, hostPath: { path: "/x" } }] }),
      ["spec.volumes[0]: Forbidden: may not specify more than 1 volume type"]
    ],
    ["not an object", 42, [": Invalid value: 42: expected object"]]
  ])("%s", (_name, input, expected) => {
    expect(errors(Decode.decodeObject(Pod.Pod, input))).toEqual(expected)
  })

  it("reports the Deployment replicas type mismatch and selector problems", () => {
    const r = Decode.decodeObject(Apps.Deployment, {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web" },
      spec: {
        replicas: "x",
        selector: { matchLabels: { app: "web" } },
        template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "c", image: "i" }] } },
        strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "25", maxUnavailable: -1 } }
      }
    })
    expect(errors(r)).toEqual([
      'spec.replicas: Invalid value: "x": expected number',
      "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
      "spec.strategy.rollingUpdate.maxSurge: Invalid value: \"25\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
    ])
  })

  it("reports a data key at data[key]", () => {
    const r = Decode.decodeObject(Config.ConfigMap, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cfg" },
      data: { "bad key": "1", "good.key": "2" }
    })
    expect(errors(r)).toEqual([
      "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
    ])
  })
})

describe("unknown fields", () => {
  const input = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "x", selfLink: "/api/v1/x" },
    spec: { containers: [{ name: "c", image: "i", imagePullPolicy: "Always", futureField: 1 }], hostUsers: false },
    status: {}
  }

  it("are dropped by default", () => {
    const r = Decode.decodeObject(Pod.Pod, input)
    expect(r).toEqual(
      Either.right({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "x" },
        spec: { containers: [{ name: "c", image: "i", imagePullPolicy: "Always" }] },
        status: {}
      })
    )
  })

  it("are reported in strict mode", () => {
    expect(errors(Decode.decodeObject(Pod.Pod, input, { strict: true }))).toEqual([
      "metadata.selfLink: Unknown field",
      "spec.hostUsers: Unknown field",
      "spec.containers[0].futureField: Unknown field"
    ])
  })

  it("strict mode accepts a clean object", () => {
    const clean = { apiVersion: "v1", kind: "Pod", metadata: { name: "x" }, spec: { containers: [{ name: "c", image: "i" }] } }
    expect(Either.isRight(Decode.decodeObject(Pod.Pod, clean, { strict: true }))).toBe(true)
  })
})
