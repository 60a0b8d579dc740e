import { describe, expect, it } from "vitest"
import * as ServiceAccount from "../../src/controllers/ServiceAccountController.js"

type Json = Record<string, unknown>

const ns = (m: Json = {}, status: Json = { phase: "Active" }): Json => ({ apiVersion: "v1", kind: "Namespace", metadata: { name: "team", ...m }, status })

describe("ServiceAccount.decide", () => {
  const cases: ReadonlyArray<[string, Json | undefined, ReadonlyArray<string>, ReadonlyArray<string>, ReadonlyArray<string>]> = [
    ["an active namespace without default gets it", ns(), [], ["default"], ["default"]],
    ["an active namespace with default: nothing", ns(), ["default"], ["default"], []],
    ["several wanted accounts, one missing", ns(), ["default"], ["default", "builder"], ["builder"]],
    ["a namespace without a phase yet counts as active", ns({}, {}), [], ["default"], ["default"]],
    ["a terminating namespace: nothing", ns({ deletionTimestamp: "2024-01-01T00:00:00Z" }, { phase: "Terminating" }), [], ["default"], []],
    ["phase Terminating alone: nothing", ns({}, { phase: "Terminating" }), [], ["default"], []],
    ["a namespace that is gone: nothing", undefined, [], ["default"], []]
  ]
  it.each(cases)("%s", (_what, namespace, existing, wanted, expected) => {
    expect(ServiceAccount.decide(namespace, new Set(existing), wanted)).toEqual(expected)
  })
})
