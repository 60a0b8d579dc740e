import { describe, expect, it } from "vitest"
import * as Endpoints from "../../src/controllers/Endpoints.js"

type Json = Record<string, unknown>

const T0 = Date.parse("2025-01-01T00:00:00Z")
const at = (s: number) => new Date(T0 + s * 1000).toISOString().replace(/\.\d+Z$/, "Z")

interface PodOptions {
  readonly ip?: string | null
  readonly ready?: boolean
  readonly readySince?: number
  readonly node?: string
  readonly labels?: Record<string, string>
  readonly deleting?: boolean
  readonly phase?: string
  readonly ports?: ReadonlyArray<Json>
  readonly hostname?: string
  readonly subdomain?: string
  readonly namespace?: string
}

const pod = (name: string, o: PodOptions = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name,
    namespace: o.namespace ?? "default",
    uid: `uid-${name}`,
    labels: o.labels ?? { app: "web" },
    creationTimestamp: at(0),
    ...(o.deleting ? { deletionTimestamp: at(100) } : {})
  },
  spec: {
    nodeName: o.node ?? "node-0",
    containers: [{ name: "app", image: "nginx", ...(o.ports ? { ports: o.ports } : {}) }],
    ...(o.hostname ? { hostname: o.hostname } : {}),
    ...(o.subdomain ? { subdomain: o.subdomain } : {})
  },
  status: {
    phase: o.phase ?? "Running",
    ...(o.ip === null ? {} : { podIP: o.ip ?? "10.244.0.2", podIPs: [{ ip: o.ip ?? "10.244.0.2" }] }),
    conditions: [{ type: "Ready", status: (o.ready ?? true) ? "True" : "False", lastTransitionTime: at(o.readySince ?? 1) }]
  }
})

const svc = (spec: Json = {}, labels: Record<string, string> = {}): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "default", uid: "svc-uid", labels, creationTimestamp: at(0) },
  spec: { type: "ClusterIP", clusterIP: "10.96.0.10", clusterIPs: ["10.96.0.10"], ipFamilies: ["IPv4"], selector: { app: "web" }, ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }], ...spec }
})

const addr = (name: string, ip: string, extra: Json = {}): Endpoints.Address => ({ ip, nodeName: "node-0", ...extra, targetRef: { kind: "Pod", namespace: "default", name, uid: `uid-${name}` } })
const port80 = [{ port: 8080, protocol: "TCP" }]

describe("Endpoints.subsetsFor", () => {
  const named = [
    { name: "http", port: 80, targetPort: "http", protocol: "TCP" },
    { name: "admin", port: 9000, targetPort: 9000, protocol: "TCP" }
  ]
  const cases: ReadonlyArray<[string, Json, ReadonlyArray<Json>, ReadonlyArray<Json>]> = [
    [
      "ready pods share one subset, in address order",
      svc(),
      [pod("c", { ip: "10.244.0.10" }), pod("a", { ip: "10.244.0.9" }), pod("b", { ip: "10.244.1.2", node: "node-1" })],
      [{ addresses: [addr("a", "10.244.0.9"), addr("c", "10.244.0.10"), addr("b", "10.244.1.2", { nodeName: "node-1" })], ports: port80 }]
    ],
    [
      "unready pods are listed apart",
      svc(),
      [pod("a", { ip: "10.244.0.2" }), pod("b", { ip: "10.244.0.3", ready: false })],
      [{ addresses: [addr("a", "10.244.0.2")], notReadyAddresses: [addr("b", "10.244.0.3")], ports: port80 }]
    ],
    ["terminating, finished and IP-less pods are left out", svc(), [pod("a", { deleting: true }), pod("b", { phase: "Succeeded" }), pod("c", { ip: null })], []],
    [
      "publishNotReadyAddresses lists unready and terminating pods as ready",
      svc({ publishNotReadyAddresses: true }),
      [pod("a", { ip: "10.244.0.2", ready: false }), pod("b", { ip: "10.244.0.3", deleting: true })],
      [{ addresses: [addr("a", "10.244.0.2"), addr("b", "10.244.0.3")], ports: port80 }]
    ],
    [
      "a pod without the named port is in a subset of its own ports",
      svc({ ports: named }),
      [
        pod("a", { ip: "10.244.0.2", ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }] }),
        pod("b", { ip: "10.244.0.3", ports: [{ name: "http", containerPort: 8080 }] }),
        pod("c", { ip: "10.244.0.4" })
      ],
      [
        { addresses: [addr("a", "10.244.0.2"), addr("b", "10.244.0.3"), addr("c", "10.244.0.4")], ports: [{ name: "admin", port: 9000, protocol: "TCP" }] },
        { addresses: [addr("a", "10.244.0.2"), addr("b", "10.244.0.3")], ports: [{ name: "http", port: 8080, protocol: "TCP" }] }
      ]
    ],
    [
      "the same name on different container ports makes different subsets",
      svc({ ports: [named[0]] }),
      [pod("a", { ip: "10.244.0.2", ports: [{ name: "http", containerPort: 8080 }] }), pod("b", { ip: "10.244.0.3", ports: [{ name: "http", containerPort: 8081 }] })],
      [
        { addresses: [addr("a", "10.244.0.2")], ports: [{ name: "http", port: 8080, protocol: "TCP" }] },
        { addresses: [addr("b", "10.244.0.3")], ports: [{ name: "http", port: 8081, protocol: "TCP" }] }
      ]
    ],
    ["a named port of another protocol does not match", svc({ ports: [{ name: "dns", port: 53, targetPort: "dns", protocol: "UDP" }] }), [pod("a", { ports: [{ name: "dns", containerPort: 53, protocol: "TCP" }] })], []],
    ["a Service with a cluster IP and no ports has no endpoints", svc({ ports: [] }), [pod("a")], []],
    [
      "a headless Service without ports lists bare addresses, with hostnames for its subdomain",
      svc({ clusterIP: "None", clusterIPs: ["None"], ports: [] }),
      [pod("a", { ip: "10.244.0.2", hostname: "a", subdomain: "web" }), pod("b", { ip: "10.244.0.3", hostname: "b", subdomain: "other" })],
      [{ addresses: [addr("a", "10.244.0.2", { hostname: "a" }), addr("b", "10.244.0.3")] }]
    ],
    [
      "the address of the Service's family is used",
      svc({ clusterIP: "fd00::10", clusterIPs: ["fd00::10"], ipFamilies: ["IPv6"] }),
      [{ ...pod("a"), status: { phase: "Running", podIP: "10.244.0.2", podIPs: [{ ip: "10.244.0.2" }, { ip: "fd00:244::2" }], conditions: [{ type: "Ready", status: "True" }] } }, pod("v4only", { ip: "10.244.0.5" })],
      [{ addresses: [addr("a", "fd00:244::2")], ports: port80 }]
    ]
  ]
  it.each(cases)("%s", (_what, service, pods, want) => expect(Endpoints.subsetsFor(service, pods)).toEqual(want))
})

describe("Endpoints.truncate", () => {
  const a = (n: number) => Array.from({ length: n }, (_, i) => addr(`p${i}`, `10.0.${Math.floor(i / 250)}.${i % 250}`))
  it("keeps everything under capacity", () => {
    const subsets = [{ addresses: a(3), ports: port80 }]
    expect(Endpoints.truncate(subsets, 3)).toEqual({ subsets, truncated: false })
  })
  it("cuts not-ready addresses first, in proportion", () => {
    const out = Endpoints.truncate([{ addresses: a(4), notReadyAddresses: a(4), ports: port80 }, { notReadyAddresses: a(2), ports: [] }], 6)
    expect(out.truncated).toBe(true)
    expect(out.subsets.map((s) => [(s.addresses ?? []).length, (s.notReadyAddresses ?? []).length])).toEqual([
      [4, 2],
      [0, 0]
    ])
  })
  it("cuts ready addresses and every not-ready one when ready alone overflow", () => {
    const out = Endpoints.truncate([{ addresses: a(1500), notReadyAddresses: a(10), ports: port80 }])
    expect(out.truncated).toBe(true)
    expect(out.subsets.map((s) => [(s.addresses ?? []).length, (s.notReadyAddresses ?? []).length])).toEqual([[1000, 0]])
  })
})

describe("Endpoints.decide", () => {
  const now = T0 + 3_600_000
  const pods = [pod("a", { ip: "10.244.0.2", readySince: 5 }), pod("b", { ip: "10.244.0.3", readySince: 9 })]
  const built = Endpoints.decide(svc({}, { tier: "front" }), pods, undefined, now)

  it("creates the Endpoints object with the Service's labels, skip-mirror and the trigger time", () => {
    expect(built).toEqual({
      _tag: "Create",
      endpoints: {
        apiVersion: "v1",
        kind: "Endpoints",
        metadata: {
          name: "web",
          namespace: "default",
          labels: { tier: "front", "endpointslice.kubernetes.io/skip-mirror": "true" },
          annotations: { "endpoints.kubernetes.io/last-change-trigger-time": at(9) }
        },
        subsets: [{ addresses: [addr("a", "10.244.0.2"), addr("b", "10.244.0.3")], ports: port80 }]
      }
    })
  })

  const stored: Json = built._tag === "Create" ? { ...built.endpoints, metadata: { ...(built.endpoints["metadata"] as Json), uid: "ep-uid", resourceVersion: "7", labels: { ...((built.endpoints["metadata"] as Json)["labels"] as Json), "fleet.koder.dev/region": "local" } } } : {}

  const cases: ReadonlyArray<[string, Json | undefined, ReadonlyArray<Json>, Json | undefined, string]> = [
    ["nothing changed: no write (the region label the server adds is ignored)", svc({}, { tier: "front" }), pods, stored, "None"],
    ["a pod went away: update", svc({}, { tier: "front" }), pods.slice(0, 1), stored, "Update"],
    ["the Service's labels changed: update", svc({}, { tier: "back" }), pods, stored, "Update"],
    ["the Service is gone: delete", undefined, [], stored, "Delete"],
    ["the Service is gone and so is the object: nothing", undefined, [], undefined, "None"],
    ["a Service without a selector is left alone", svc({ selector: undefined }), pods, stored, "None"],
    ["an ExternalName Service is left alone", svc({ type: "ExternalName", externalName: "x.example.com" }), pods, stored, "None"]
  ]
  it.each(cases)("%s", (_what, service, ps, current, want) => expect(Endpoints.decide(service, ps, current, now)._tag).toBe(want))

  it("an update keeps identity and other annotations, and stamps the write time when the change left none", () => {
    const current = { ...stored, metadata: { ...(stored["metadata"] as Json), annotations: { keep: "me", "endpoints.kubernetes.io/last-change-trigger-time": at(9) } } }
    const action = Endpoints.decide(svc({}, { tier: "front" }), pods.slice(0, 1), current, now)
    expect(action._tag).toBe("Update")
    const m = (action as { endpoints: Json }).endpoints["metadata"] as Json
    expect(m).toMatchObject({ uid: "ep-uid", resourceVersion: "7", annotations: { keep: "me", "endpoints.kubernetes.io/last-change-trigger-time": at(3600) } })
    expect((m["labels"] as Json)["fleet.koder.dev/region"]).toBe("local")
  })

  it("marks headless Services and truncated objects", () => {
    const many = Array.from({ length: 1001 }, (_, i) => pod(`p${i}`, { ip: `10.244.${Math.floor(i / 250)}.${(i % 250) + 2}` }))
    const action = Endpoints.decide(svc({ clusterIP: "None", clusterIPs: ["None"] }), many, undefined, now) as { endpoints: Json }
    const m = action.endpoints["metadata"] as Json
    expect(m["labels"]).toEqual({ "service.kubernetes.io/headless": "", "endpointslice.kubernetes.io/skip-mirror": "true" })
    expect((m["annotations"] as Json)["endpoints.kubernetes.io/over-capacity"]).toBe("truncated")
    expect(((action.endpoints["subsets"] as Array<Json>)[0]!["addresses"] as Array<Json>).length).toBe(1000)
  })
})

describe("Endpoints helpers", () => {
  it.each([
    [{ port: 80 }, pod("a"), 80],
    [{ port: 80, targetPort: 8080 }, pod("a"), 8080],
    [{ port: 80, targetPort: "8081" }, pod("a"), 8081],
    [{ port: 80, targetPort: "http", protocol: "TCP" }, pod("a", { ports: [{ name: "http", containerPort: 3000 }] }), 3000],
    [{ port: 80, targetPort: "http" }, pod("a"), undefined],
    [
      { port: 80, targetPort: "http" },
      { ...pod("a"), spec: { containers: [], initContainers: [{ name: "proxy", restartPolicy: "Always", ports: [{ name: "http", containerPort: 15001 }] }] } },
      15001
    ],
    // Host-network mode: the agent's host port for the container port wins.
    [
      { port: 80, targetPort: "http" },
      { ...pod("a", { ports: [{ name: "http", containerPort: 8080 }] }), status: { hostPorts: [{ containerName: "app", name: "http", containerPort: 8080, protocol: "TCP", hostPort: 41234 }] } },
      41234
    ],
    [{ port: 80, targetPort: 8080 }, { ...pod("a"), status: { hostPorts: [{ containerName: "app", containerPort: 8080, hostPort: 41235 }] } }, 41235],
    [{ port: 53, targetPort: 8080, protocol: "UDP" }, { ...pod("a"), status: { hostPorts: [{ containerName: "app", containerPort: 8080, protocol: "TCP", hostPort: 41236 }] } }, 8080]
  ] as const)("findPort(%j)", (servicePort, p, want) => expect(Endpoints.findPort(p, servicePort)).toBe(want))

  it("selects by every selector key, in the Service's namespace only", () => {
    expect(Endpoints.selects(svc(), pod("a"))).toBe(true)
    expect(Endpoints.selects(svc({ selector: { app: "web", tier: "x" } }), pod("a"))).toBe(false)
    expect(Endpoints.selects(svc(), pod("a", { namespace: "other" }))).toBe(false)
    expect(Endpoints.selects(svc({ selector: {} }), pod("a"))).toBe(false)
  })

  it("maps pod changes to the Services selecting them, skipping changes endpoints ignore", () => {
    const services = [svc(), { ...svc({ selector: { app: "db" } }), metadata: { name: "db", namespace: "default" } }]
    const informers = { for: () => ({ list: () => services }) } as never
    const a = pod("a")
    expect(Endpoints.servicesOfPod({ type: "ADDED", object: a, old: undefined }, informers)).toEqual(["default/web"])
    const relabelled = { ...a, metadata: { ...(a["metadata"] as Json), labels: { app: "db" } } }
    expect([...Endpoints.servicesOfPod({ type: "MODIFIED", object: relabelled, old: a }, informers)].sort()).toEqual(["default/db", "default/web"])
    const noise = { ...a, status: { ...(a["status"] as Json), containerStatuses: [{ restartCount: 1 }] } }
    expect(Endpoints.servicesOfPod({ type: "MODIFIED", object: noise, old: a }, informers)).toEqual([])
    expect(Endpoints.servicesOfPod({ type: "MODIFIED", object: pod("a", { ready: false }), old: a }, informers)).toEqual(["default/web"])
  })
})
