import { describe, expect, it } from "vitest"
import * as FieldError from "../../src/model/FieldError.js"
import * as Storage from "../../src/model/Storage.js"

const sc = (over: Partial<Storage.StorageClass> = {}): Storage.StorageClass => ({ apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: { name: "s" }, provisioner: "example.com/p", ...over })
const messages = (errors: ReadonlyArray<FieldError.FieldError>) => errors.map(FieldError.format)

describe("StorageClass validation", () => {
  const cases: ReadonlyArray<readonly [string, Storage.StorageClass, ReadonlyArray<string>]> = [
    ["a plain class", sc(), []],
    ["no provisioner", sc({ provisioner: "" }), ["provisioner: Required value"]],
    ["a provisioner that is not a qualified name", sc({ provisioner: "a b" }), ["provisioner: Invalid value"]],
    ["an empty parameter key", sc({ parameters: { "": "x" } }), ["parameters: Invalid value"]],
    ["a topology term without expressions", sc({ allowedTopologies: [{ matchLabelExpressions: [] }] }), ["allowedTopologies[0].matchLabelExpressions: Required value"]],
    ["a topology expression without values", sc({ allowedTopologies: [{ matchLabelExpressions: [{ key: "zone", values: [] }] }] }), ["allowedTopologies[0].matchLabelExpressions[0].values: Required value"]]
  ]
  for (const [name, c, want] of cases) {
    it(name, () => {
      const got = messages(Storage.validateStorageClass(c))
      expect(got.length).toBe(want.length)
      want.forEach((w, i) => expect(got[i]).toContain(w))
    })
  }

  it("refuses changes to what provisioned volumes depend on, and allows the rest", () => {
    const old = sc({ parameters: { a: "1" }, reclaimPolicy: "Delete", volumeBindingMode: "Immediate" })
    expect(messages(Storage.validateStorageClassUpdate(sc({ parameters: { a: "1" }, reclaimPolicy: "Delete", volumeBindingMode: "Immediate", allowVolumeExpansion: true }), old))).toEqual([])
    expect(messages(Storage.validateStorageClassUpdate(sc({ provisioner: "example.com/q", parameters: { a: "2" }, reclaimPolicy: "Retain", volumeBindingMode: "WaitForFirstConsumer" }), old))).toEqual([
      "parameters: Forbidden: updates to parameters are forbidden.",
      "provisioner: Forbidden: updates to provisioner are forbidden.",
      "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
      'volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable'
    ])
  })

  it("picks the newest class marked default (either annotation), by name on a tie", () => {
    const marked = (name: string, at: string, beta = false) => sc({ metadata: { name, creationTimestamp: at, annotations: { [beta ? Storage.BetaIsDefaultClassAnnotation : Storage.IsDefaultClassAnnotation]: "true" } } })
    expect(Storage.defaultClass([sc(), marked("old", "2026-01-01T00:00:00Z"), marked("new", "2026-02-01T00:00:00Z", true)])?.metadata.name).toBe("new")
    expect(Storage.defaultClass([marked("b", "2026-01-01T00:00:00Z"), marked("a", "2026-01-01T00:00:00Z")])?.metadata.name).toBe("a")
    expect(Storage.defaultClass([sc({ metadata: { name: "x", annotations: { [Storage.IsDefaultClassAnnotation]: "false" } } })])).toBeUndefined()
  })

  it("defaults Delete and Immediate", () => {
    expect(Storage.defaults({ provisioner: "p" })).toEqual({ provisioner: "p", reclaimPolicy: "Delete", volumeBindingMode: "Immediate" })
    expect(Storage.defaults({ reclaimPolicy: "Retain", volumeBindingMode: "WaitForFirstConsumer" })).toEqual({ reclaimPolicy: "Retain", volumeBindingMode: "WaitForFirstConsumer" })
  })
})
