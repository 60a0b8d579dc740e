import { describe, expect, it } from "vitest"
import * as EndpointSlice from "../../src/controllers/EndpointSliceController.js"

type Json = Record<string, unknown>

const T0 = Date.parse("2025-01-01T00:00:00Z")
const at = (s: number) => new Date(T0 + s * 1000).toISOString().replace(/\.\d+Z$/, "Z")
const now = T0 + 3_600_000

interface PodOptions {
  readonly ready?: boolean
  readonly deleting?: boolean
  readonly node?: string
  readonly ips?: ReadonlyArray<string>
  readonly ports?: ReadonlyArray<Json>
}

const ipOf = (i: number) => `10.244.${Math.floor(i / 200)}.${(i % 200) + 2}`

const pod = (i: number, o: PodOptions = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: `p${String(i).padStart(3, "0")}`, namespace: "default", uid: `uid-${i}`, labels: { app: "web" }, creationTimestamp: at(0), ...(o.deleting ? { deletionTimestamp: at(50) } : {}) },
  spec: { nodeName: o.node ?? "node-0", containers: [{ name: "app", image: "nginx", ...(o.ports ? { ports: o.ports } : {}) }] },
  status: {
    phase: "Running",
    podIP: (o.ips ?? [ipOf(i)])[0],
    podIPs: (o.ips ?? [ipOf(i)]).map((ip) => ({ ip })),
    conditions: [{ type: "Ready", status: (o.ready ?? true) ? "True" : "False", lastTransitionTime: at(1) }]
  }
})

const svc = (spec: Json = {}, meta: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "default", uid: "svc-uid", labels: { tier: "front" }, creationTimestamp: at(0), ...meta },
  spec: { type: "ClusterIP", clusterIP: "10.96.0.10", clusterIPs: ["10.96.0.10"], ipFamilies: ["IPv4"], selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }], ...spec }
})

const nodes: Record<string, Json> = {
  "node-0": { metadata: { name: "node-0", labels: { "topology.kubernetes.io/zone": "zone-a" } } },
  "node-1": { metadata: { name: "node-1" } }
}

const plan = (service: Json | undefined, pods: ReadonlyArray<Json>, slices: ReadonlyArray<Json> = [], max = 100) =>
  EndpointSlice.decide({ service, pods, node: (n) => nodes[n], slices, maxEndpointsPerSlice: max, now })

let counter = 0
/** What the API would store for a slice the plan creates: a name, a uid, a resourceVersion, the region label. */
const stored = (s: Json): Json => {
  counter++
  const m = s["metadata"] as Json
  return { ...s, metadata: { ...m, name: `web-${counter}`, generateName: undefined, uid: `slice-${counter}`, resourceVersion: String(counter), labels: { ...(m["labels"] as Json), "fleet.koder.dev/region": "local" } } }
}
/** The slices after applying a plan to `slices`. */
const apply = (slices: ReadonlyArray<Json>, p: EndpointSlice.Plan): ReadonlyArray<Json> => {
  const name = (s: Json) => (s["metadata"] as Json)["name"]
  const gone = new Set(p.delete.map(name))
  const updated = new Map(p.update.map((s) => [name(s), s]))
  return [...slices.filter((s) => !gone.has(name(s))).map((s) => updated.get(name(s)) ?? s), ...p.create.map(stored)]
}
const sizes = (slices: ReadonlyArray<Json>) => slices.map((s) => (s["endpoints"] as Array<unknown>).length)
const pods = (n: number, o: PodOptions = {}) => Array.from({ length: n }, (_, i) => pod(i, o))
const podNames = (s: Json) => (s["endpoints"] as Array<Json>).map((e) => (e["targetRef"] as Json)["name"])

describe("EndpointSlice.decide: building slices", () => {
  it("puts three ready pods in one slice labelled, owned and stamped as upstream does", () => {
    const p = plan(svc(), pods(3))
    expect(p.update).toEqual([])
    expect(p.delete).toEqual([])
    expect(p.create).toEqual([
      {
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: {
          generateName: "web-",
          namespace: "default",
          labels: { tier: "front", "kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io" },
          ownerReferences: [{ apiVersion: "v1", kind: "Service", name: "web", uid: "svc-uid", controller: true, blockOwnerDeletion: true }],
          annotations: { "endpoints.kubernetes.io/last-change-trigger-time": at(1) }
        },
        addressType: "IPv4",
        endpoints: [0, 1, 2].map((i) => ({
          addresses: [ipOf(i)],
          conditions: { ready: true, serving: true, terminating: false },
          targetRef: { kind: "Pod", namespace: "default", name: `p00${i}`, uid: `uid-${i}` },
          nodeName: "node-0",
          zone: "zone-a"
        })),
        ports: [{ name: "http", port: 8080, protocol: "TCP" }]
      }
    ])
  })

  it.each([
    ["unready", { ready: false }, { ready: false, serving: false, terminating: false }],
    ["terminating and ready", { deleting: true }, { ready: false, serving: true, terminating: true }],
    ["terminating and unready", { deleting: true, ready: false }, { ready: false, serving: false, terminating: true }]
  ] as const)("an %s pod is an endpoint with its conditions", (_what, o, conditions) => {
    const [slice] = plan(svc(), [pod(0, o)]).create
    expect((slice!["endpoints"] as Array<Json>)[0]!["conditions"]).toEqual(conditions)
  })

  it("publishNotReadyAddresses makes every endpoint ready", () => {
    const [slice] = plan(svc({ publishNotReadyAddresses: true }), [pod(0, { ready: false }), pod(1, { deleting: true })]).create
    expect((slice!["endpoints"] as Array<Json>).map((e) => e["conditions"])).toEqual([
      { ready: true, serving: false, terminating: false },
      { ready: true, serving: true, terminating: true }
    ])
  })

  it("250 pods with 100 per slice make three slices", () => {
    const p = plan(svc(), pods(250), [], 100)
    expect(sizes(p.create)).toEqual([100, 100, 50])
  })

  it("groups pods by the ports they serve", () => {
    const service = svc({ ports: [{ name: "http", port: 80, targetPort: "http", protocol: "TCP" }] })
    const p = plan(service, [pod(0, { ports: [{ name: "http", containerPort: 8080 }] }), pod(1, { ports: [{ name: "http", containerPort: 9090 }] }), pod(2)])
    expect(p.create.map((s) => [s["ports"], podNames(s)])).toEqual([
      [[{ name: "http", port: 8080, protocol: "TCP" }], ["p000"]],
      [[{ name: "http", port: 9090, protocol: "TCP" }], ["p001"]],
      [[], ["p002"]]
    ])
  })

  it("a dual-stack Service gets one slice per address type", () => {
    const p = plan(svc({ ipFamilies: ["IPv4", "IPv6"], clusterIPs: ["10.96.0.10", "fd00::10"] }), [pod(0, { ips: ["10.244.0.2", "fd00:244::2"] })])
    expect(p.create.map((s) => [s["addressType"], (s["endpoints"] as Array<Json>)[0]!["addresses"]])).toEqual([
      ["IPv4", ["10.244.0.2"]],
      ["IPv6", ["fd00:244::2"]]
    ])
  })

  it("a headless Service without families takes both address types; a family with no pods gets a placeholder", () => {
    const p = plan(svc({ clusterIP: "None", clusterIPs: ["None"], ipFamilies: undefined }), [pod(0)])
    expect(p.create.map((s) => [s["addressType"], sizes([s])[0], (s["metadata"] as Json)["labels"]])).toEqual([
      ["IPv4", 1, expect.objectContaining({ "service.kubernetes.io/headless": "" })],
      ["IPv6", 0, expect.objectContaining({ "service.kubernetes.io/headless": "" })]
    ])
  })

  it("skips pods on nodes not known yet, and says so", () => {
    const p = plan(svc(), [pod(0), pod(1, { node: "node-9" })])
    expect(p.skipped).toBe(1)
    expect(podNames(p.create[0]!)).toEqual(["p000"])
  })

  it("leaves Services without a selector, and ExternalName ones, alone", () => {
    const existing = [stored(plan(svc(), pods(1)).create[0]!)]
    expect(plan(svc({ selector: undefined }), pods(1), existing)).toEqual({ create: [], update: [], delete: [], skipped: 0 })
    expect(plan(svc({ type: "ExternalName" }), pods(1), existing)).toEqual({ create: [], update: [], delete: [], skipped: 0 })
  })

  it("a Service being deleted gets no new slices", () => {
    expect(plan(svc({}, { deletionTimestamp: at(60) }), pods(3)).create).toEqual([])
  })
})

describe("EndpointSlice.decide: keeping churn low", () => {
  const initial = () => apply([], plan(svc(), pods(250)))

  it("nothing changed: nothing written", () => {
    const slices = initial()
    expect(plan(svc(), pods(250), slices)).toEqual({ create: [], update: [], delete: [], skipped: 0 })
  })

  it("a pod turning unready rewrites only its slice, in place", () => {
    const slices = initial()
    const ps = pods(250).map((p, i) => (i === 120 ? pod(i, { ready: false }) : p))
    const p = plan(svc(), ps, slices)
    expect(p.create).toEqual([])
    expect(p.delete).toEqual([])
    expect(p.update.map((s) => (s["metadata"] as Json)["name"])).toEqual([(slices[1]!["metadata"] as Json)["name"]])
    const before = slices[1]!["metadata"] as Json
    expect(p.update[0]!["metadata"]).toMatchObject({ uid: before["uid"], resourceVersion: before["resourceVersion"], labels: expect.objectContaining({ "fleet.koder.dev/region": "local" }) })
    expect(plan(svc(), ps, apply(slices, p))).toEqual({ create: [], update: [], delete: [], skipped: 0 })
  })

  it("a deleted pod leaves its slice, which is updated, not replaced", () => {
    const slices = initial()
    const p = plan(svc(), pods(250).filter((_, i) => i !== 5), slices)
    expect(p.create).toEqual([])
    expect(p.delete).toEqual([])
    expect(sizes(p.update)).toEqual([99])
  })

  it("new pods fill a slice being updated anyway before any other", () => {
    const slices = initial()
    // p005 and p006 leave the first slice; two new pods arrive: both go into that slice, which is written anyway.
    const ps = [...pods(250).filter((_, i) => i !== 5 && i !== 6), pod(300), pod(301)]
    const p = plan(svc(), ps, slices)
    expect(p.create).toEqual([])
    expect(sizes(p.update)).toEqual([100])
    expect(p.update[0]!["metadata"]).toMatchObject({ uid: (slices[0]!["metadata"] as Json)["uid"] })
    expect(sizes(apply(slices, p))).toEqual([100, 100, 50])
    expect(sizes(apply(slices, p)).reduce((a, b) => a + b)).toBe(250)
  })

  it("a small batch of new pods goes to the unchanged slice closest to full that takes it whole", () => {
    const slices = apply([], plan(svc(), pods(170), [], 100)) // 100 + 70
    const p = plan(svc(), [...pods(170), ...[400, 401, 402].map((i) => pod(i))], slices, 100)
    expect(p.create).toEqual([])
    expect(p.update.map((s) => [(s["metadata"] as Json)["uid"], sizes([s])[0]])).toEqual([[(slices[1]!["metadata"] as Json)["uid"], 73]])
  })

  it("more new pods than fit anywhere make full new slices first", () => {
    const slices = apply([], plan(svc(), pods(90), [], 100))
    const p = plan(svc(), pods(215), slices, 100)
    // 125 new: 100 to a new slice, 25 do not fit in the slice of 90, so a second new slice.
    expect(sizes(p.create)).toEqual([100, 25])
    expect(p.update).toEqual([])
  })

  it("an emptied slice and a new one become one update of the emptied slice", () => {
    const slices = apply([], plan(svc(), pods(200), [], 100))
    // Pods 0–99 (slice 1) go; pods 500–599 arrive: slice 1 is reused for them.
    const ps = [...pods(200).slice(100), ...Array.from({ length: 100 }, (_, i) => pod(500 + i))]
    const p = plan(svc(), ps, slices, 100)
    expect(p.create).toEqual([])
    expect(p.delete).toEqual([])
    expect(p.update.map((s) => [(s["metadata"] as Json)["uid"], sizes([s])[0]])).toEqual([[(slices[0]!["metadata"] as Json)["uid"], 100]])
  })

  it("an emptied slice with nothing to replace it is deleted", () => {
    const slices = apply([], plan(svc(), pods(200), [], 100))
    const p = plan(svc(), pods(200).slice(100), slices, 100)
    expect(p.update).toEqual([])
    expect(p.delete.map((s) => (s["metadata"] as Json)["uid"])).toEqual([(slices[0]!["metadata"] as Json)["uid"]])
  })

  it("a Service without endpoints keeps one placeholder slice", () => {
    const p = plan(svc(), [])
    expect(p.create).toEqual([expect.objectContaining({ addressType: "IPv4", endpoints: [], ports: [] })])
    const withPlaceholder = apply([], p)
    expect(plan(svc(), [], withPlaceholder)).toEqual({ create: [], update: [], delete: [], skipped: 0 })
    // The last pods leaving turn their slice into the placeholder (an update, not delete + create).
    const one = apply([], plan(svc(), pods(1)))
    const emptied = plan(svc(), [], one)
    expect(emptied.create).toEqual([])
    expect(emptied.delete).toEqual([])
    expect(emptied.update).toEqual([expect.objectContaining({ endpoints: [], ports: [] })])
  })

  it("the Service's labels changing rewrites its slices", () => {
    const slices = initial()
    const p = plan(svc({}, { labels: { tier: "back" } }), pods(250), slices)
    expect(p.update.length).toBe(3)
    expect(p.update.every((s) => ((s["metadata"] as Json)["labels"] as Json)["tier"] === "back")).toBe(true)
  })

  it("deletes slices of an older Service of the same name, and of address types it no longer has", () => {
    const slices = initial()
    const recreated = svc({}, { uid: "new-uid" })
    // Slices of the old uid are not reused: deleted, and new ones made.
    const p = plan(recreated, pods(250), slices)
    expect(p.delete.length).toBe(3)
    expect(sizes(p.create)).toEqual([100, 100, 50])
    expect(p.update).toEqual([])
    // An IPv6-only Service: the IPv4 slices go, and (no pod has an IPv6 address) a placeholder comes.
    const v6 = plan(svc({ ipFamilies: ["IPv6"], clusterIP: "fd00::10", clusterIPs: ["fd00::10"] }), pods(250), slices)
    expect(v6.delete.length).toBe(3)
    expect(v6.create).toEqual([expect.objectContaining({ addressType: "IPv6", endpoints: [] })])
  })

  it("deletes every slice once the Service is gone", () => {
    const slices = initial()
    expect(plan(undefined, [], slices).delete).toEqual(slices)
  })
})

describe("EndpointSlice helpers", () => {
  it("picks the slice closest to full that still fits", () => {
    const s = (n: number, name: string) => ({ metadata: { name }, endpoints: Array(n).fill({}) })
    expect(EndpointSlice.sliceToFill([s(10, "a"), s(95, "b"), s(80, "c")], 10, 100)).toEqual(s(80, "c"))
    expect(EndpointSlice.sliceToFill([s(95, "b")], 10, 100)).toBeUndefined()
  })

  it.each([
    [{ ipFamilies: ["IPv6", "IPv4"] }, ["IPv6", "IPv4"]],
    [{ ipFamilies: undefined, clusterIP: "fd00::1" }, ["IPv6"]],
    [{ ipFamilies: undefined, clusterIP: "10.96.0.1" }, ["IPv4"]],
    [{ ipFamilies: undefined, clusterIP: "None" }, ["IPv4", "IPv6"]]
  ] as const)("address types of %j", (spec, want) => expect(EndpointSlice.addressTypesFor(svc(spec))).toEqual(want))
})
