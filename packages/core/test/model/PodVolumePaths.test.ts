// Paths and modes inside pod volumes, as Kubernetes validates them: a file or subPath that is
// absolute or climbs with `..` would reach the node outside the pod's directory, so decoding
// refuses it with the field named (kube-apiserver's words).
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Apps, Decode, Pod } from "../../src/model/index.js"

const podWith = (volumes: ReadonlyArray<unknown>, mount: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p" },
  spec: { containers: [{ name: "c", image: "x", volumeMounts: [{ name: "v", mountPath: "/data", ...mount }] }], volumes }
})
const errors = (input: unknown) => {
  const r = Decode.decodeObject(Pod.Pod, input)
  return Either.isLeft(r) ? r.left.map((e) => `${e.path}: ${e.message}`) : []
}
const fileMode = "must be a number between 0 and 0777 (octal), both inclusive"

const cases: ReadonlyArray<[string, ReadonlyArray<unknown>, Record<string, unknown>, ReadonlyArray<string>]> = [
  ["plain items and subPath", [{ name: "v", configMap: { name: "c", items: [{ key: "k", path: "dir/file" }], defaultMode: 0o644 } }], { subPath: "dir" }, []],
  ["a dotted name that is not '..'", [{ name: "v", secret: { secretName: "s", items: [{ key: "k", path: "a..b/.hidden" }] } }], { subPath: "x/..y" }, []],
  [
    "configMap item climbing",
    [{ name: "v", configMap: { name: "c", items: [{ key: "k", path: "../x" }] } }],
    {},
    [`spec.volumes[0].configMap.items[0].path: Invalid value: "../x": must not contain '..'`]
  ],
  [
    "secret item absolute",
    [{ name: "v", secret: { secretName: "s", items: [{ key: "k", path: "/etc/passwd" }] } }],
    {},
    [`spec.volumes[0].secret.items[0].path: Invalid value: "/etc/passwd": must be a relative path`]
  ],
  [
    "absolute and climbing: both errors",
    [{ name: "v", secret: { secretName: "s", items: [{ key: "k", path: "/a/../b" }] } }],
    {},
    [
      `spec.volumes[0].secret.items[0].path: Invalid value: "/a/../b": must be a relative path`,
      `spec.volumes[0].secret.items[0].path: Invalid value: "/a/../b": must not contain '..'`
    ]
  ],
  [
    "reserved '..data'",
    [{ name: "v", configMap: { name: "c", items: [{ key: "k", path: "..data" }] } }],
    {},
    [`spec.volumes[0].configMap.items[0].path: Invalid value: "..data": must not start with '..'`]
  ],
  ["empty item path", [{ name: "v", configMap: { name: "c", items: [{ key: "k", path: "" }] } }], {}, ["spec.volumes[0].configMap.items[0].path: Required value"]],
  [
    "downwardAPI item climbing",
    [{ name: "v", downwardAPI: { items: [{ path: "a/../../b", fieldRef: { fieldPath: "metadata.name" } }] } }],
    {},
    [`spec.volumes[0].downwardAPI.items[0].path: Invalid value: "a/../../b": must not contain '..'`]
  ],
  [
    "projected sources climbing",
    [
      {
        name: "v",
        projected: {
          sources: [
            { configMap: { name: "c", items: [{ key: "k", path: "../c" }] } },
            { secret: { name: "s", items: [{ key: "k", path: "/s" }] } },
            { downwardAPI: { items: [{ path: "..", fieldRef: { fieldPath: "metadata.name" } }] } },
            { serviceAccountToken: { path: "../token" } }
          ]
        }
      }
    ],
    {},
    [
      `spec.volumes[0].projected.sources[0].configMap.items[0].path: Invalid value: "../c": must not contain '..'`,
      `spec.volumes[0].projected.sources[1].secret.items[0].path: Invalid value: "/s": must be a relative path`,
      `spec.volumes[0].projected.sources[2].downwardAPI.items[0].path: Invalid value: "..": must not contain '..'`,
      // kube-apiserver reports a bare ".." twice as well.
      `spec.volumes[0].projected.sources[2].downwardAPI.items[0].path: Invalid value: "..": must not start with '..'`,
      `spec.volumes[0].projected.sources[3].serviceAccountToken.path: Invalid value: "../token": must not contain '..'`
    ]
  ],
  ["subPath climbing", [{ name: "v", emptyDir: {} }], { subPath: "../../etc" }, [`spec.containers[0].volumeMounts[0].subPath: Invalid value: "../../etc": must not contain '..'`]],
  ["subPath absolute", [{ name: "v", emptyDir: {} }], { subPath: "/etc" }, [`spec.containers[0].volumeMounts[0].subPath: Invalid value: "/etc": must be a relative path`]],
  [
    "subPathExpr climbing",
    [{ name: "v", emptyDir: {} }],
    { subPathExpr: "$(POD_NAME)/.." },
    [`spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "$(POD_NAME)/..": must not contain '..'`]
  ],
  [
    "subPath and subPathExpr together",
    [{ name: "v", emptyDir: {} }],
    { subPath: "a", subPathExpr: "b" },
    [`spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "b": subPathExpr and subPath are mutually exclusive`]
  ],
  ["hostPath climbing", [{ name: "v", hostPath: { path: "/srv/../etc" } }], {}, [`spec.volumes[0].hostPath.path: Invalid value: "/srv/../etc": must not contain '..'`]],
  ["modes at the bounds", [{ name: "v", secret: { secretName: "s", defaultMode: 0, items: [{ key: "k", path: "k", mode: 0o777 }] } }], {}, []],
  ["defaultMode over 0777", [{ name: "v", secret: { secretName: "s", defaultMode: 0o1000 } }], {}, [`spec.volumes[0].secret.defaultMode: Invalid value: 512: ${fileMode}`]],
  ["negative item mode", [{ name: "v", configMap: { name: "c", items: [{ key: "k", path: "k", mode: -1 }] } }], {}, [`spec.volumes[0].configMap.items[0].mode: Invalid value: -1: ${fileMode}`]],
  ["projected defaultMode", [{ name: "v", projected: { sources: [], defaultMode: 4096 } }], {}, [`spec.volumes[0].projected.defaultMode: Invalid value: 4096: ${fileMode}`]],
  ["downwardAPI item mode", [{ name: "v", downwardAPI: { items: [{ path: "n", mode: 0o7777, fieldRef: { fieldPath: "metadata.name" } }] } }], {}, [`spec.volumes[0].downwardAPI.items[0].mode: Invalid value: 4095: ${fileMode}`]]
]

describe("paths and modes inside pod volumes", () => {
  it.each(cases)("%s", (_, volumes, mount, expected) => {
    expect(errors(podWith(volumes, mount))).toEqual(expected)
  })

  it("holds in workload templates too", () => {
    const r = Decode.decodeObject(Apps.Deployment, {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "d" },
      spec: { selector: { matchLabels: { a: "b" } }, template: { metadata: { labels: { a: "b" } }, spec: podWith([{ name: "v", configMap: { name: "c", items: [{ key: "k", path: "../x" }] } }]).spec } }
    })
    expect(Either.isLeft(r) ? r.left.map((e) => `${e.path}: ${e.message}`) : []).toEqual([
      `spec.template.spec.volumes[0].configMap.items[0].path: Invalid value: "../x": must not contain '..'`
    ])
  })
})
