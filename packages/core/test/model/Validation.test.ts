import { describe, expect, it } from "vitest"
import { FieldError, Validation } from "../../src/model/index.js"

describe("name and label rules", () => {
  it.each([
    ["example.com", true],
    ["a", true],
    ["web-0", true],
    ["a".repeat(253), true],
    ["a".repeat(254), false],
    ["Web", false],
    ["-web", false],
    ["web-", false],
    ["web..x", false],
    ["web_x", false],
    ["", false]
  ])("isDNS1123Subdomain(%j) valid: %s", (name, ok) => {
    expect(Validation.isDNS1123Subdomain(name).length === 0).toBe(ok)
  })

  it.each([
    ["web", true],
    ["a".repeat(63), true],
    ["a".repeat(64), false],
    ["web.x", false]
  ])("isDNS1123Label(%j) valid: %s", (name, ok) => {
    expect(Validation.isDNS1123Label(name).length === 0).toBe(ok)
  })

  it.each([
    ["web", true],
    ["1web", false],
    ["web-1", true]
  ])("isDNS1035Label(%j) valid: %s", (name, ok) => {
    expect(Validation.isDNS1035Label(name).length === 0).toBe(ok)
  })

  it.each([
    ["app", []],
    ["app.kubernetes.io/name", []],
    ["My_Key.1", []],
    ["a".repeat(63), []],
    ["a".repeat(64), ["name part must be no more than 63 characters"]],
    ["/name", ["prefix part must be non-empty"]],
    ["example.com/", ["name part must be non-empty", "name part must consist"]],
    ["Example.com/name", ["prefix part a lowercase RFC 1123 subdomain"]],
    ["a/b/c", ["a qualified name must consist"]],
    ["-x", ["name part must consist"]]
  ])("isQualifiedName(%j)", (key, expected) => {
    const errs = Validation.isQualifiedName(key)
    expect(errs.length).toBe(expected.length)
    expected.forEach((prefix, i) => expect(errs[i]).toMatch(new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`)))
  })

  it.each([
    ["", true],
    ["v1.2_x-y", true],
    ["a".repeat(63), true],
    ["a".repeat(64), false],
    ["-a", false],
    ["a b", false]
  ])("isValidLabelValue(%j) valid: %s", (value, ok) => {
    expect(Validation.isValidLabelValue(value).length === 0).toBe(ok)
  })

  it.each([
    ["app.conf", []],
    ["KEY_NAME", []],
    [".", ["must not be '.'"]],
    ["..", ["must not be '..'"]],
    ["..data", ["must not start with '..'"]],
    ["a/b", ["a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"]]
  ])("isConfigMapKey(%j)", (key, expected) => {
    expect(Validation.isConfigMapKey(key)).toEqual(expected)
  })
})

describe("validate* return field errors", () => {
  it("validateName uses the exact Kubernetes message", () => {
    expect(Validation.validateName("My.Pod")).toEqual([
      {
        path: "metadata.name",
        message:
          "Invalid value: \"My.Pod\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
      }
    ])
    expect(Validation.validateNamespaceName("ok", "metadata.namespace")).toEqual([])
  })

  it("validateAnnotations allows upper case keys and limits total size", () => {
    expect(Validation.validateAnnotations({ "Example.com/Key": "x" })).toEqual([])
    expect(Validation.validateAnnotations({ big: "x".repeat(256 * 1024) })).toEqual([
      { path: "metadata.annotations", message: "Too long: must have at most 262144 bytes" }
    ])
    // Size counts UTF-8 bytes, not UTF-16 units.
    expect(Validation.validateAnnotations({ k: "é".repeat(131072) }).length).toBe(1)
  })

  it("validateConfigMapKeys reports each key at data[key]", () => {
    expect(Validation.validateConfigMapKeys({ ok: "", "..x": "" }).map(FieldError.format)).toEqual([
      "data[..x]: Invalid value: \"..x\": must not start with '..'"
    ])
  })

  it("FieldError helpers format like field.Error", () => {
    expect(FieldError.format(FieldError.required("spec.x", "must be set"))).toBe("spec.x: Required value: must be set")
    expect(FieldError.format(FieldError.invalid("spec.x", null))).toBe('spec.x: Invalid value: "null"')
    expect(FieldError.format(FieldError.duplicate("spec.ports[1].name", "http"))).toBe('spec.ports[1].name: Duplicate value: "http"')
    expect(FieldError.format(FieldError.forbidden("spec.x", "may not be set"))).toBe("spec.x: Forbidden: may not be set")
    expect(FieldError.formatAll([FieldError.required("a"), FieldError.required("a")])).toBe("a: Required value")
    expect(FieldError.prefix("spec", [FieldError.required("[0].name")]).map(FieldError.format)).toEqual(["spec[0].name: Required value"])
  })
})
