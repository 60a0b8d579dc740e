import { it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { describe, expect } from "vitest"
import * as ClusterIpAllocator from "../../src/admission/ClusterIpAllocator.js"
import * as FieldError from "../../src/model/FieldError.js"
import * as IpRange from "../../src/network/IpRange.js"
import { makeMemory } from "../../src/store/Store.js"
import { namespace, start, type Harness } from "./harness.js"

const ranges = (text: string) => Either.getOrThrow(ClusterIpAllocator.parseRanges(text))
const v4 = ranges("10.96.0.0/12")
const dual = ranges("10.96.0.0/12,fd00:10:96::/112")

type Planned = { spec: Record<string, unknown>; allocate: ReadonlyArray<ClusterIpAllocator.Allocation>; release: ReadonlyArray<string> } | string
const planned = (spec: Record<string, unknown>, old: Record<string, unknown> | undefined, r: ClusterIpAllocator.Ranges): Planned => {
  const p = ClusterIpAllocator.plan(spec, old, r)
  return Either.isLeft(p) ? FieldError.formatAll(p.left) : { spec: p.right.spec, allocate: p.right.allocate, release: p.right.release }
}

const sel = { selector: { app: "web" } }
const stored = { type: "ClusterIP", ...sel, clusterIP: "10.96.4.4", clusterIPs: ["10.96.4.4"], ipFamilies: ["IPv4"], ipFamilyPolicy: "SingleStack" }
const storedDual = { ...stored, clusterIPs: ["10.96.4.4", "fd00:10:96::4"], ipFamilies: ["IPv4", "IPv6"], ipFamilyPolicy: "RequireDualStack" }

describe("ClusterIpAllocator.plan", () => {
  const cases: ReadonlyArray<[string, Record<string, unknown>, Record<string, unknown> | undefined, ClusterIpAllocator.Ranges, Planned]> = [
    [
      "a ClusterIP Service gets one address of the primary family",
      { type: "ClusterIP", ...sel },
      undefined,
      v4,
      { spec: { type: "ClusterIP", ...sel, ipFamilyPolicy: "SingleStack", ipFamilies: ["IPv4"], clusterIPs: [""] }, allocate: [{ index: 0, family: "IPv4", requested: undefined }], release: [] }
    ],
    [
      "a requested clusterIP fills clusterIPs (old clients)",
      { type: "NodePort", clusterIP: "10.96.0.10" },
      undefined,
      v4,
      {
        spec: { type: "NodePort", clusterIP: "10.96.0.10", clusterIPs: ["10.96.0.10"], ipFamilyPolicy: "SingleStack", ipFamilies: ["IPv4"] },
        allocate: [{ index: 0, family: "IPv4", requested: "10.96.0.10" }],
        release: []
      }
    ],
    [
      "headless with a selector: families, no address",
      { type: "ClusterIP", clusterIP: "None", ...sel },
      undefined,
      v4,
      { spec: { type: "ClusterIP", clusterIP: "None", clusterIPs: ["None"], ...sel, ipFamilyPolicy: "SingleStack", ipFamilies: ["IPv4"] }, allocate: [], release: [] }
    ],
    [
      "headless without a selector defaults to RequireDualStack with both families",
      { type: "ClusterIP", clusterIP: "None" },
      undefined,
      v4,
      { spec: { type: "ClusterIP", clusterIP: "None", clusterIPs: ["None"], ipFamilyPolicy: "RequireDualStack", ipFamilies: ["IPv4", "IPv6"] }, allocate: [], release: [] }
    ],
    ["ExternalName takes nothing", { type: "ExternalName", externalName: "db.example.com" }, undefined, v4, { spec: { type: "ExternalName", externalName: "db.example.com" }, allocate: [], release: [] }],
    [
      "ExternalName may not carry address fields",
      { type: "ExternalName", externalName: "x.example.com", clusterIP: "10.96.0.3", ipFamilies: ["IPv4"], ipFamilyPolicy: "SingleStack" },
      undefined,
      v4,
      "[spec.clusterIPs: Forbidden: may not be set for ExternalName services, spec.ipFamilies: Forbidden: may not be set for ExternalName services, spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services]"
    ],
    [
      "RequireDualStack on a single-stack cluster",
      { type: "ClusterIP", ipFamilyPolicy: "RequireDualStack" },
      undefined,
      v4,
      'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services'
    ],
    ["a family the cluster lacks", { type: "ClusterIP", ipFamilies: ["IPv6"] }, undefined, v4, 'spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster'],
    [
      "PreferDualStack on a single-stack cluster is single-stack",
      { type: "ClusterIP", ipFamilyPolicy: "PreferDualStack" },
      undefined,
      v4,
      { spec: { type: "ClusterIP", ipFamilyPolicy: "PreferDualStack", ipFamilies: ["IPv4"], clusterIPs: [""] }, allocate: [{ index: 0, family: "IPv4", requested: undefined }], release: [] }
    ],
    [
      "PreferDualStack on a dual-stack cluster takes both families",
      { type: "ClusterIP", ipFamilyPolicy: "PreferDualStack" },
      undefined,
      dual,
      {
        spec: { type: "ClusterIP", ipFamilyPolicy: "PreferDualStack", ipFamilies: ["IPv4", "IPv6"], clusterIPs: ["", ""] },
        allocate: [
          { index: 0, family: "IPv4", requested: undefined },
          { index: 1, family: "IPv6", requested: undefined }
        ],
        release: []
      }
    ],
    [
      "IPv6 first when asked",
      { type: "ClusterIP", ipFamilies: ["IPv6"] },
      undefined,
      dual,
      { spec: { type: "ClusterIP", ipFamilyPolicy: "SingleStack", ipFamilies: ["IPv6"], clusterIPs: [""] }, allocate: [{ index: 0, family: "IPv6", requested: undefined }], release: [] }
    ],
    [
      "the family of a requested address is inferred",
      { type: "ClusterIP", clusterIP: "fd00:10:96::a" },
      undefined,
      dual,
      {
        spec: { type: "ClusterIP", clusterIP: "fd00:10:96::a", clusterIPs: ["fd00:10:96::a"], ipFamilyPolicy: "SingleStack", ipFamilies: ["IPv6"] },
        allocate: [{ index: 0, family: "IPv6", requested: "fd00:10:96::a" }],
        release: []
      }
    ],
    ["an address that is not one", { type: "ClusterIP", clusterIP: "10.96.0.300" }, undefined, v4, 'spec.clusterIPs[0]: Invalid value: "10.96.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'],
    ["a requested IPv6 address on an IPv4 cluster", { type: "ClusterIP", clusterIP: "fd00::1" }, undefined, v4, 'spec.clusterIPs[0]: Invalid value: ["fd00::1"]: IPv6 is not configured on this cluster'],
    [
      "two addresses of one family",
      { type: "ClusterIP", clusterIP: "10.96.0.10", clusterIPs: ["10.96.0.10", "10.96.0.11"], ipFamilyPolicy: "RequireDualStack" },
      undefined,
      dual,
      'spec.clusterIPs: Invalid value: ["10.96.0.10","10.96.0.11"]: may specify no more than one IP for each IP family'
    ],
    [
      "clusterIPs must start with clusterIP",
      { type: "ClusterIP", clusterIP: "10.96.0.10", clusterIPs: ["10.96.0.11"] },
      undefined,
      v4,
      'spec.clusterIPs: Invalid value: ["10.96.0.11"]: first value must match `clusterIP`'
    ],
    [
      "an update that leaves the addresses out keeps them (kubectl replace)",
      { type: "ClusterIP", ...sel },
      stored,
      v4,
      { spec: { type: "ClusterIP", ...sel, clusterIP: "10.96.4.4", clusterIPs: ["10.96.4.4"], ipFamilyPolicy: "SingleStack", ipFamilies: ["IPv4"] }, allocate: [], release: [] }
    ],
    [
      "turning into ExternalName releases the address and clears the carried fields",
      { ...stored, type: "ExternalName", externalName: "db.example.com" },
      stored,
      v4,
      { spec: { type: "ExternalName", externalName: "db.example.com", ...sel }, allocate: [], release: ["10.96.4.4"] }
    ],
    [
      "turning from ExternalName into ClusterIP allocates",
      { type: "ClusterIP", ...sel },
      { type: "ExternalName", externalName: "db.example.com", ...sel },
      v4,
      { spec: { type: "ClusterIP", ...sel, ipFamilyPolicy: "SingleStack", ipFamilies: ["IPv4"], clusterIPs: [""] }, allocate: [{ index: 0, family: "IPv4", requested: undefined }], release: [] }
    ],
    [
      "upgrading to dual-stack allocates the secondary",
      { ...stored, ipFamilyPolicy: "RequireDualStack" },
      stored,
      dual,
      {
        spec: { ...stored, ipFamilyPolicy: "RequireDualStack", ipFamilies: ["IPv4", "IPv6"], clusterIPs: ["10.96.4.4", ""] },
        allocate: [{ index: 1, family: "IPv6", requested: undefined }],
        release: []
      }
    ],
    [
      "downgrading to SingleStack releases the secondary",
      { ...storedDual, ipFamilyPolicy: "SingleStack" },
      storedDual,
      dual,
      { spec: { ...stored }, allocate: [], release: ["fd00:10:96::4"] }
    ],
    [
      "dropping the secondary needs SingleStack",
      { ...storedDual, clusterIPs: ["10.96.4.4"], ipFamilies: ["IPv4"] },
      storedDual,
      dual,
      '[spec.ipFamilyPolicy: Invalid value: "RequireDualStack": must be \'SingleStack\' to release the secondary cluster IP, spec.ipFamilyPolicy: Invalid value: "RequireDualStack": must be \'SingleStack\' to release the secondary IP family]'
    ],
    [
      "an unchanged PreferDualStack Service is left alone when the cluster turns dual-stack",
      { ...stored, ipFamilyPolicy: "PreferDualStack" },
      { ...stored, ipFamilyPolicy: "PreferDualStack" },
      dual,
      { spec: { ...stored, ipFamilyPolicy: "PreferDualStack" }, allocate: [], release: [] }
    ]
  ]
  it.each(cases)("%s", (_what, spec, old, r, want) => expect(planned(spec, old, r)).toEqual(want))
})

describe("ClusterIpAllocator ranges", () => {
  const range = (cidr: string) => Either.getOrThrow(IpRange.parse(cidr))
  it.each([
    ["10.96.0.0/12", 256n],
    ["10.0.0.0/20", 256n],
    ["10.0.0.0/24", 16n],
    ["10.0.0.0/27", 16n],
    ["10.0.0.0/28", 0n],
    ["fd00::/112", 256n],
    ["fd00::/120", 16n]
  ] as const)("the static band of %s is %s", (cidr, want) => expect(ClusterIpAllocator.staticBand(range(cidr))).toBe(want))

  it.each([
    ["10.96.0.0/12", [{ first: 257n, last: (1n << 20n) - 2n }, { first: 2n, last: 256n }]],
    ["10.0.0.0/28", [{ first: 2n, last: 14n }]],
    ["10.0.0.0/30", [{ first: 2n, last: 2n }]],
    ["10.0.0.0/31", []],
    ["10.0.0.0/32", []],
    ["fd00::/127", []],
    ["fd00::/126", [{ first: 2n, last: 3n }]]
  ] as const)("%s is walked in its bands", (cidr, want) => expect(ClusterIpAllocator.dynamicBands(range(cidr))).toEqual(want))

  it.each([
    ["10.96.0.10", undefined],
    ["10.96.0.1", undefined],
    ["10.96.0.0", "the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12"],
    ["10.111.255.255", "the provided IP (10.111.255.255) is not in the valid range. The range of valid IPs is 10.96.0.0/12"],
    ["10.112.0.1", "the provided IP (10.112.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"]
  ] as const)("requesting %s", (ip, want) => expect(ClusterIpAllocator.outOfRange(range("10.96.0.0/12"), ip)).toBe(want))

  it.each([
    ["10.96.0.0/12", "10.96.0.0/12"],
    ["10.96.0.0/12, fd00::/108", "10.96.0.0/12,fd00::/108"],
    ["fd00::/56", "shortest allowed prefix length for service CIDR is 64, got 56"],
    ["10.96.0.0/12,10.100.0.0/16", "--service-cluster-ip-range: two ranges must be of different IP families (dual-stack)"],
    ["10.96.0.0/12,fd00::/108,10.1.0.0/16", '--service-cluster-ip-range must hold one or two CIDRs, got "10.96.0.0/12,fd00::/108,10.1.0.0/16"'],
    ["10.96.0.0", "invalid CIDR address: 10.96.0.0"]
  ] as const)("parseRanges(%s)", (text, want) => {
    const r = ClusterIpAllocator.parseRanges(text)
    expect(Either.isLeft(r) ? r.left : r.right.all.map((x) => x.cidr).join(",")).toBe(want)
  })
})

// ---- through the real API server --------------------------------------------------------

const serviceBody = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name },
  spec: { selector: { app: name }, ports: [{ port: 80 }], ...spec }
})

const cluster = (range: string, store = makeMemory()) =>
  Effect.gen(function* () {
    const h = yield* start((s) => Effect.succeed([ClusterIpAllocator.make({ store: s, range })]), store)
    const ns = yield* Effect.promise(() => h.call("POST", "/api/v1/namespaces", namespace("default")))
    expect(ns.status).toBe(201)
    return h
  })

const ipAddressesOf = (h: Harness) =>
  Effect.map(
    Effect.promise(() => h.call("GET", "/apis/networking.k8s.io/v1/ipaddresses")),
    (r) => (r.body.items as Array<any>).map((o) => ({ name: o.metadata.name as string, parent: o.spec.parentRef, labels: o.metadata.labels }))
  )

const post = (h: Harness, body: unknown, query = "") => Effect.promise(() => h.call("POST", `/api/v1/namespaces/default/services${query}`, body))

describe("ClusterIpAllocator through the API", () => {
  it.effect("allocates an address and records it as an IPAddress", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.96.0.0/12")
        const r = yield* post(h, serviceBody("web"))
        expect(r.status).toBe(201)
        const spec = r.body.spec
        expect(spec.clusterIPs).toEqual([spec.clusterIP])
        expect(spec.ipFamilies).toEqual(["IPv4"])
        expect(spec.ipFamilyPolicy).toBe("SingleStack")
        const range = Either.getOrThrow(IpRange.parse("10.96.0.0/12"))
        const offset = IpRange.offsetOf(range, spec.clusterIP)!
        // The upper band first, and never the address kept for the `kubernetes` Service.
        expect(offset).toBeGreaterThan(256n)
        expect(yield* ipAddressesOf(h)).toEqual([
          {
            name: spec.clusterIP,
            parent: { group: "", resource: "services", namespace: "default", name: "web" },
            labels: { "ipaddress.kubernetes.io/ip-family": "IPv4", "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io" }
          }
        ])
      })
    )
  )

  it.effect("gives a requested address once, refuses it twice and refuses what is out of range", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.96.0.0/12")
        const first = yield* post(h, serviceBody("dns", { clusterIP: "10.96.0.10" }))
        expect(first.status).toBe(201)
        expect(first.body.spec.clusterIPs).toEqual(["10.96.0.10"])
        const kubernetes = yield* post(h, serviceBody("kubernetes", { clusterIP: "10.96.0.1" }))
        expect(kubernetes.status).toBe(201)
        const again = yield* post(h, serviceBody("other", { clusterIP: "10.96.0.10" }))
        expect(again.status).toBe(422)
        expect(again.body.message).toBe('Service "other" is invalid: spec.clusterIPs: Invalid value: "10.96.0.10": failed to allocate IP 10.96.0.10: provided IP is already allocated')
        const outside = yield* post(h, serviceBody("far", { clusterIP: "192.168.0.10" }))
        expect(outside.status).toBe(422)
        expect(outside.body.message).toBe(
          'Service "far" is invalid: spec.clusterIPs: Invalid value: ["192.168.0.10"]: failed to allocate IP 192.168.0.10: the provided IP (192.168.0.10) is not in the valid range. The range of valid IPs is 10.96.0.0/12'
        )
        expect((yield* ipAddressesOf(h)).map((i) => i.name).sort()).toEqual(["10.96.0.1", "10.96.0.10"])
      })
    )
  )

  it.effect("headless and ExternalName Services get no address; dry runs reserve nothing", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.96.0.0/12")
        const headless = yield* post(h, serviceBody("db", { clusterIP: "None" }))
        expect(headless.status).toBe(201)
        expect(headless.body.spec.clusterIPs).toEqual(["None"])
        const external = yield* post(h, { apiVersion: "v1", kind: "Service", metadata: { name: "ext" }, spec: { type: "ExternalName", externalName: "db.example.com" } })
        expect(external.status).toBe(201)
        expect(external.body.spec.clusterIP).toBeUndefined()
        const dry = yield* post(h, serviceBody("dry"), "?dryRun=All")
        expect(dry.status).toBe(201)
        expect(dry.body.spec.clusterIP).toMatch(/^10\.(9[6-9]|10\d|11[01])\./)
        expect(yield* ipAddressesOf(h)).toEqual([])
      })
    )
  )

  it.effect("releases the address with the delete, in the same transaction", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.96.0.0/12")
        const created = yield* post(h, serviceBody("web", { clusterIP: "10.96.0.20" }))
        expect(created.status).toBe(201)
        const deleted = yield* Effect.promise(() => h.call("DELETE", "/api/v1/namespaces/default/services/web"))
        expect(deleted.status).toBe(200)
        expect(yield* ipAddressesOf(h)).toEqual([])
        // …so the address can be had again at once.
        expect((yield* post(h, serviceBody("web2", { clusterIP: "10.96.0.20" }))).status).toBe(201)
      })
    )
  )

  it.effect("an update from an old client (clusterIP without clusterIPs) keeps the addresses", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.96.0.0/12")
        const created = yield* post(h, serviceBody("web"))
        const ip = created.body.spec.clusterIP
        const replaced = yield* Effect.promise(() =>
          h.call("PUT", "/api/v1/namespaces/default/services/web", {
            ...serviceBody("web", { ports: [{ port: 8080 }], clusterIP: ip }),
            metadata: { name: "web", resourceVersion: created.body.metadata.resourceVersion }
          })
        )
        expect(replaced.body.message ?? "").toBe("")
        expect(replaced.body.spec.clusterIPs).toEqual([ip])
        expect(replaced.body.spec.ipFamilies).toEqual(["IPv4"])
        expect(replaced.body.spec.ports[0].port).toBe(8080)
        expect((yield* ipAddressesOf(h)).map((i) => i.name)).toEqual([ip])
      })
    )
  )

  it.effect("an ExternalName Service turned ClusterIP gets an address", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.96.0.0/12")
        const external = yield* post(h, { apiVersion: "v1", kind: "Service", metadata: { name: "db" }, spec: { type: "ExternalName", externalName: "db.example.com" } })
        expect(external.status).toBe(201)
        const patched = yield* Effect.promise(() =>
          h.call("PATCH", "/api/v1/namespaces/default/services/db", { spec: { type: "ClusterIP", externalName: null, selector: { app: "db" }, ports: [{ port: 5432 }] } }, "admin", "application/merge-patch+json")
        )
        expect(patched.body.message ?? "").toBe("")
        expect(patched.body.spec.ipFamilies).toEqual(["IPv4"])
        expect((yield* ipAddressesOf(h)).map((i) => [i.name, i.parent.name])).toEqual([[patched.body.spec.clusterIP, "db"]])
      })
    )
  )

  it.effect("allocates both families on a dual-stack range", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.96.0.0/16,fd00:10:96::/112")
        const r = yield* post(h, serviceBody("web", { ipFamilyPolicy: "RequireDualStack" }))
        expect(r.status).toBe(201)
        expect(r.body.spec.ipFamilies).toEqual(["IPv4", "IPv6"])
        const [a, b] = r.body.spec.clusterIPs
        expect(IpRange.familyOf(a)).toBe("IPv4")
        expect(b).toMatch(/^fd00:10:96::[0-9a-f]+$/)
        const ips = yield* ipAddressesOf(h)
        expect(ips.map((i) => i.name).sort()).toEqual([a, b].sort())
        expect(ips.find((i) => i.name === b)?.labels["ipaddress.kubernetes.io/ip-family"]).toBe("IPv6")
      })
    )
  )
})

describe("ClusterIpAllocator under concurrency", () => {
  it.live("200 concurrent creates get 200 distinct addresses, one IPAddress each", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.96.0.0/12")
        const results = yield* Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) => post(h, serviceBody(`svc-${i}`)), { concurrency: "unbounded" })
        expect(results.map((r) => r.status)).toEqual(Array(200).fill(201))
        const ips = results.map((r) => r.body.spec.clusterIP as string)
        expect(new Set(ips).size).toBe(200)
        const recorded = yield* ipAddressesOf(h)
        expect(recorded.length).toBe(200)
        const byName = new Map(recorded.map((i) => [i.name, i.parent.name]))
        results.forEach((r) => expect(byName.get(r.body.spec.clusterIP)).toBe(r.body.metadata.name))
      })
    )
  )

  it.live("a /28 holds 13 Services; the rest are told the range is full and leak nothing", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const h = yield* cluster("10.0.0.0/28")
        const results = yield* Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) => post(h, serviceBody(`svc-${i}`)), { concurrency: "unbounded" })
        const ok = results.filter((r) => r.status === 201)
        const refused = results.filter((r) => r.status !== 201)
        expect(ok.length).toBe(13)
        expect(new Set(refused.map((r) => `${r.status} ${r.body.message}`))).toEqual(new Set(["500 Internal error occurred: failed to allocate a serviceIP: range is full"]))
        const ips = ok.map((r) => r.body.spec.clusterIP as string)
        expect(new Set(ips).size).toBe(13)
        expect(ips).not.toContain("10.0.0.1")
        const recorded = yield* ipAddressesOf(h)
        expect(recorded.map((i) => i.name).sort()).toEqual([...ips].sort())
        const byName = new Map(recorded.map((i) => [i.name, i.parent.name]))
        ok.forEach((r) => expect(byName.get(r.body.spec.clusterIP)).toBe(r.body.metadata.name))
        // Freeing one address lets exactly one more in.
        const gone = yield* Effect.promise(() => h.call("DELETE", `/api/v1/namespaces/default/services/${ok[0]!.body.metadata.name}`))
        expect(gone.status).toBe(200)
        const next = yield* post(h, serviceBody("late"))
        expect(next.status).toBe(201)
        expect(next.body.spec.clusterIP).toBe(ok[0]!.body.spec.clusterIP)
        expect((yield* post(h, serviceBody("later"))).status).toBe(500)
      })
    )
  )
})
