// policy/v1 PodDisruptionBudget and the Eviction body, and networking.k8s.io/v1 IPAddress.
import { Either, Option } from "effect"
import { describe, expect, it } from "vitest"
import { Decode, Kinds, Networking, Policy } from "../../src/model/index.js"
import { created, createErrors, updateErrors } from "./harness.js"

const pdb = (spec: Record<string, unknown> = {}) => ({
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: { name: "web", namespace: "default" },
  spec: { minAvailable: 2, selector: { matchLabels: { app: "web" } }, ...spec }
})

describe("PodDisruptionBudget", () => {
  it("decodes a budget with its status (strict)", () => {
    const full = {
      ...pdb({ unhealthyPodEvictionPolicy: "AlwaysAllow" }),
      status: {
        observedGeneration: 1,
        disruptedPods: { "web-0": "2024-05-01T10:00:00Z" },
        disruptionsAllowed: 1,
        currentHealthy: 3,
        desiredHealthy: 2,
        expectedPods: 3,
        conditions: [{ type: "DisruptionAllowed", status: "True", reason: "SufficientPods", observedGeneration: 1, lastTransitionTime: "2024-05-01T10:00:00Z", message: "" }]
      }
    }
    const r = Kinds.decodeAny(full, { strict: true })
    if (Either.isLeft(r)) expect(r.left).toEqual([])
    expect(Either.isRight(r) && r.right.info.shortNames).toEqual(["pdb"])
  })

  it("starts with a zero status and generation 1", () => {
    const o = created(JSON.parse(JSON.stringify(pdb({ maxUnavailable: "25%", minAvailable: undefined }))))
    expect(o.status).toEqual({ disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0 })
    expect(o.metadata.generation).toBe(1)
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["both minAvailable and maxUnavailable", pdb({ maxUnavailable: 1 }), 'spec: Invalid value: {"minAvailable":2,"maxUnavailable":1,"selector":{"matchLabels":{"app":"web"}}}: minAvailable and maxUnavailable cannot be both set'],
    ["a negative minAvailable", pdb({ minAvailable: -1 }), "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"],
    ["a percentage over 100%", pdb({ minAvailable: "150%" }), 'spec.minAvailable: Invalid value: "150%": must not be greater than 100%'],
    ["a malformed percentage", pdb({ minAvailable: "half" }), 'spec.minAvailable: Invalid value: "half": a valid percent string must be'],
    ["an unknown eviction policy", pdb({ unhealthyPodEvictionPolicy: "Never" }), 'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: "AlwaysAllow", "IfHealthyBudget"']
  ])("refuses %s", (_, object, message) => {
    expect(createErrors(JSON.parse(JSON.stringify(object))).join("\n")).toContain(message)
  })

  it("lets the spec change (policy/v1 budgets are mutable) and bumps the generation", () => {
    const old = created(pdb())
    expect(updateErrors({ ...old, spec: { ...old.spec, minAvailable: "50%" } }, old)).toEqual([])
  })
})

describe("Eviction", () => {
  it("is a request body, not a stored kind", () => {
    expect(Option.isNone(Kinds.kindFor("policy/v1", "Eviction"))).toBe(true)
    expect(Kinds.all.some((k) => k.kind === "Eviction")).toBe(false)
  })

  it("decodes the body kubectl drain sends", () => {
    const body = {
      apiVersion: "policy/v1",
      kind: "Eviction",
      metadata: { name: "web-0", namespace: "default" },
      deleteOptions: { gracePeriodSeconds: 30, preconditions: { uid: "p1", resourceVersion: "12" }, propagationPolicy: "Background", dryRun: ["All"] }
    }
    expect(Decode.decodeObject(Policy.Eviction, body, { strict: true })).toEqual(Either.right(body))
    const bad = Decode.decodeObject(Policy.Eviction, { ...body, deleteOptions: { propagationPolicy: "Later" } })
    expect(Either.isLeft(bad) && bad.left).toEqual([
      { path: "deleteOptions.propagationPolicy", message: 'Unsupported value: "Later": supported values: "Orphan", "Background", "Foreground"' }
    ])
  })
})

describe("IPAddress", () => {
  const ip = (name: string, parentRef: Record<string, unknown> = { group: "", resource: "services", namespace: "default", name: "web" }) => ({
    apiVersion: "networking.k8s.io/v1",
    kind: "IPAddress",
    metadata: { name },
    spec: { parentRef }
  })

  it.each([["10.96.0.10"], ["2001:db8::a"], ["::ffff:10.0.0.1"], ["fd00::"]])("is named by the canonical address %s", (name) => {
    expect(created(ip(name)).metadata.name).toBe(name)
  })

  it.each<[string, string]>([
    ["10.96.0.010", 'ParseAddr("10.96.0.010"): IPv4 field has octet with leading zero'],
    ["2001:DB8::A", "must be a canonical format IP address"],
    ["2001:db8:0:0:0:0:0:a", "must be a canonical format IP address"],
    ["10.96.0", 'ParseAddr("10.96.0"): unable to parse IP'],
    ["web", 'ParseAddr("web"): unable to parse IP']
  ])("refuses the name %s", (name, detail) => {
    expect(createErrors(ip(name))).toContain(`metadata.name: Invalid value: ${JSON.stringify(name)}: ${detail}`)
  })

  it.each<[string, Record<string, unknown>, string]>([
    ["no resource", { name: "web" }, "spec.parentRef.resource: Required value"],
    ["no name", { resource: "services", name: "" }, "spec.parentRef.name: Required value"],
    ["a slash in the name", { resource: "services", name: "a/b" }, "spec.parentRef.name: Invalid value: \"a/b\": may not contain '/'"],
    ["a bad group", { group: "Core", resource: "services", name: "web" }, 'spec.parentRef.group: Invalid value: "Core": a lowercase RFC 1123 subdomain']
  ])("refuses a parent reference with %s", (_, parentRef, message) => {
    expect(createErrors(ip("10.96.0.11", parentRef)).join("\n")).toContain(message)
  })

  it("keeps the parent reference immutable", () => {
    const old = created(ip("10.96.0.12"))
    expect(updateErrors({ ...old, metadata: { ...old.metadata, labels: { a: "b" } } }, old)).toEqual([])
    expect(updateErrors({ ...old, spec: { parentRef: { resource: "services", namespace: "default", name: "other" } } }, old).join("\n")).toContain(
      "spec.parentRef: Invalid value: "
    )
  })

  it("maps any spelling of an address to its object name", () => {
    expect(Networking.nameFor("2001:0DB8:0000:0000:0000:0000:0000:000A")).toBe("2001:db8::a")
    expect(Networking.nameFor("010.096.000.010")).toBe("10.96.0.10")
    expect(Networking.nameFor("1:0:0:1:0:0:0:1")).toBe("1:0:0:1::1")
    expect(Networking.nameFor("1:0:0:1:1:0:0:1")).toBe("1::1:1:0:0:1")
    expect(Networking.nameFor("nope")).toBeUndefined()
  })
})
