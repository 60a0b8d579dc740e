// NodePortAllocator: the pure plan (table), then the plugin in a real in-process API server
// (memory store) under concurrency: distinct ports, no duplicates for a requested port, freed on delete.
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import * as ClusterIpAllocator from "../../src/admission/ClusterIpAllocator.js"
import * as NodePortAllocator from "../../src/admission/NodePortAllocator.js"
import * as FieldError from "../../src/model/FieldError.js"
import { namespace, start, type Harness } from "./harness.js"

const range = Either.getOrThrow(NodePortAllocator.parseRange("30000-32767"))

type Planned = { spec: Record<string, unknown>; allocate: ReadonlyArray<NodePortAllocator.Allocation>; release: ReadonlyArray<number> } | string
const planned = (spec: Record<string, unknown>, old?: Record<string, unknown>): Planned => {
  const p = NodePortAllocator.plan(spec, old, range)
  return Either.isLeft(p) ? FieldError.formatAll(p.left) : { spec: p.right.spec, allocate: p.right.allocate, release: p.right.release }
}

const http = { name: "http", port: 80 }
const held = (nodePort: number, p: Record<string, unknown> = http) => ({ ...p, nodePort })

describe("NodePortAllocator.parseRange", () => {
  it.each([
    ["30000-32767", { first: 30000, last: 32767 }],
    ["30000+10", { first: 30000, last: 30009 }],
    [" 1-65535 ", { first: 1, last: 65535 }]
  ])("%s", (text, want) => expect(NodePortAllocator.parseRange(text)).toEqual(Either.right(want)))
  it.each(["30000", "a-b", "32767-30000", "0-10", "1-70000"])("refuses %s", (text) => expect(Either.isLeft(NodePortAllocator.parseRange(text))).toBe(true))
})

describe("NodePortAllocator.plan", () => {
  const cases: ReadonlyArray<[string, Record<string, unknown>, Record<string, unknown> | undefined, Planned]> = [
    ["a ClusterIP Service holds none", { type: "ClusterIP", ports: [http] }, undefined, { spec: { type: "ClusterIP", ports: [http] }, allocate: [], release: [] }],
    [
      "a NodePort Service gets one per port",
      { type: "NodePort", ports: [http, { name: "https", port: 443 }] },
      undefined,
      { spec: { type: "NodePort", ports: [http, { name: "https", port: 443 }] }, allocate: [{ index: 0, requested: undefined }, { index: 1, requested: undefined }], release: [] }
    ],
    [
      "a requested node port is claimed",
      { type: "NodePort", ports: [held(30080)] },
      undefined,
      { spec: { type: "NodePort", ports: [held(30080)] }, allocate: [{ index: 0, requested: 30080 }], release: [] }
    ],
    [
      "TCP and UDP of one port share a node port",
      { type: "NodePort", ports: [{ name: "dns", port: 53, protocol: "UDP" }, { name: "dns-tcp", port: 53, protocol: "TCP" }] },
      undefined,
      { spec: { type: "NodePort", ports: [{ name: "dns", port: 53, protocol: "UDP" }, { name: "dns-tcp", port: 53, protocol: "TCP" }] }, allocate: [{ index: 0, requested: undefined }], release: [] }
    ],
    [
      "an update that leaves nodePort out keeps it",
      { type: "NodePort", ports: [http] },
      { type: "NodePort", ports: [held(30080)] },
      { spec: { type: "NodePort", ports: [held(30080)] }, allocate: [], release: [] }
    ],
    [
      "a changed node port: the new one claimed, the old one released",
      { type: "NodePort", ports: [held(30081)] },
      { type: "NodePort", ports: [held(30080)] },
      { spec: { type: "NodePort", ports: [held(30081)] }, allocate: [{ index: 0, requested: 30081 }], release: [30080] }
    ],
    [
      "NodePort to ClusterIP drops the node ports and releases them",
      { type: "ClusterIP", ports: [held(30080)] },
      { type: "NodePort", ports: [held(30080)] },
      { spec: { type: "ClusterIP", ports: [http] }, allocate: [], release: [30080] }
    ],
    [
      "ClusterIP to LoadBalancer allocates",
      { type: "LoadBalancer", ports: [http] },
      { type: "ClusterIP", ports: [http] },
      { spec: { type: "LoadBalancer", ports: [http] }, allocate: [{ index: 0, requested: undefined }], release: [] }
    ],
    [
      "a LoadBalancer without node-port allocation holds none",
      { type: "LoadBalancer", allocateLoadBalancerNodePorts: false, ports: [http] },
      undefined,
      { spec: { type: "LoadBalancer", allocateLoadBalancerNodePorts: false, ports: [http] }, allocate: [], release: [] }
    ],
    ["a node port on a ClusterIP Service is refused", { type: "ClusterIP", ports: [held(30080)] }, undefined, "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"],
    [
      "a node port out of the range is refused",
      { type: "NodePort", ports: [held(8080)] },
      undefined,
      "spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"
    ],
    [
      "the same node port twice for one protocol is refused",
      { type: "NodePort", ports: [held(30080), held(30080, { name: "b", port: 81 })] },
      undefined,
      "spec.ports[1].nodePort: Duplicate value: 30080"
    ]
  ]
  it.each(cases)("%s", (_, spec, old, want) => expect(planned(spec, old)).toEqual(want))
})

const service = (name: string, spec: Record<string, unknown>) => ({ apiVersion: "v1", kind: "Service", metadata: { name }, spec: { selector: { app: name }, ...spec } })
const nodePorts = (body: any): Array<number> => (body?.spec?.ports ?? []).map((p: any) => p.nodePort)

const run = <A>(rangeText: string, body: (h: Harness) => Promise<A>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(
        start((store) => Effect.succeed([ClusterIpAllocator.make({ store }), NodePortAllocator.make({ store, range: rangeText })])),
        (h) => Effect.promise(async () => {
          await h.call("POST", "/api/v1/namespaces", namespace("default"))
          return body(h)
        })
      )
    )
  )

const allocated = async (h: Harness) => (await Effect.runPromise(h.store.list(NodePortAllocator.keyPrefix))).items.map((kv) => Number(kv.key.slice(NodePortAllocator.keyPrefix.length))).sort()

describe("NodePortAllocator in the API server", () => {
  it("gives 40 concurrent NodePort Services 40 distinct ports of a 40-port range; the 41st finds it full; a delete frees one", () =>
    run("30000-30039", async (h) => {
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => h.call("POST", "/api/v1/namespaces/default/services", service(`s${i}`, { type: "NodePort", ports: [http] }))))
      expect(results.map((r) => r.status)).toEqual(Array(40).fill(201))
      const ports = results.flatMap((r) => nodePorts(r.body))
      expect(new Set(ports).size).toBe(40)
      expect(ports.every((p) => p >= 30000 && p <= 30039)).toBe(true)
      expect(await allocated(h)).toEqual([...ports].sort())

      const full = await h.call("POST", "/api/v1/namespaces/default/services", service("s40", { type: "NodePort", ports: [http] }))
      expect(full.status).toBe(500)
      expect(full.body.message).toContain("range is full")

      expect((await h.call("DELETE", "/api/v1/namespaces/default/services/s7")).status).toBe(200)
      expect(await allocated(h)).not.toContain(ports[7])
      const again = await h.call("POST", "/api/v1/namespaces/default/services", service("s40", { type: "NodePort", ports: [http] }))
      expect(again.status).toBe(201)
      expect(nodePorts(again.body)).toEqual([ports[7]])
    }))

  it("lets exactly one of 20 concurrent creates requesting the same port have it", () =>
    run(NodePortAllocator.defaultRange, async (h) => {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => h.call("POST", "/api/v1/namespaces/default/services", service(`want-${i}`, { type: "NodePort", ports: [held(31000)] })))
      )
      expect(results.filter((r) => r.status === 201)).toHaveLength(1)
      const refused = results.filter((r) => r.status === 422)
      expect(refused).toHaveLength(19)
      expect(refused[0]!.body.message).toContain("spec.ports[0].nodePort: Invalid value: 31000: provided port is already allocated")
      expect(await allocated(h)).toEqual([31000])
    }))

  it("keeps the node port across an update that leaves it out, and frees it when the type goes back to ClusterIP", () =>
    run(NodePortAllocator.defaultRange, async (h) => {
      const created = await h.call("POST", "/api/v1/namespaces/default/services", service("web", { type: "NodePort", ports: [http] }))
      const [port] = nodePorts(created.body)
      const { nodePort: _, ...bare } = created.body.spec.ports[0]
      const put = await h.call("PUT", "/api/v1/namespaces/default/services/web", { ...created.body, spec: { ...created.body.spec, ports: [bare] } })
      expect(put.status).toBe(200)
      expect(nodePorts(put.body)).toEqual([port])
      const back = await h.call("PUT", "/api/v1/namespaces/default/services/web", { ...put.body, spec: { ...put.body.spec, type: "ClusterIP" } })
      expect(back.status).toBe(200)
      expect(nodePorts(back.body)).toEqual([undefined])
      expect(await allocated(h)).toEqual([])
    }))
})
