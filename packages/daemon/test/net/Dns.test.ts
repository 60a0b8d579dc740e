/**
 * The cluster DNS server on real UDP and TCP sockets, asked by a real resolver (`node:dns`, which
 * retries over TCP on truncation), over an in-process cluster (core's TestCluster: real API
 * pipeline, the EndpointSlice and StatefulSet controllers, simulated nodes that give pods IPs).
 */
import { Controllers, ServiceCatalog } from "@koder/fleet-core"
import { TestCluster } from "@koder/fleet-core/testing"
import * as dnsPacket from "dns-packet"
import { Effect, Exit, Scope } from "effect"
import { createSocket } from "node:dgram"
import { Resolver } from "node:dns/promises"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as DnsServer from "../../src/net/DnsServer.js"

type Json = Record<string, unknown>

const scope = Effect.runSync(Scope.make())
const run = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Effect.runPromise(Scope.extend(effect, scope))

let cluster: TestCluster.TestCluster
let server: DnsServer.DnsServer
let upstream: ReturnType<typeof createSocket>

const resolver = () => {
  const r = new Resolver({ timeout: 2000, tries: 1 })
  r.setServers([`127.0.0.1:${server.address.port}`])
  return r
}

const eventually = async <A>(check: () => Promise<A>, ms = 10_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    try {
      return await check()
    } catch (e) {
      if (Date.now() > deadline) throw e
      await new Promise((r) => setTimeout(r, 50))
    }
  }
}

const create = (o: Json) => Effect.runPromise(cluster.client.create(o))
const service = (name: string, spec: Json): Json => ({ apiVersion: "v1", kind: "Service", metadata: { name, namespace: "shop" }, spec })

/** A raw UDP query (no EDNS): what a minimal client sees before any TCP retry. */
const rawUdp = (name: string, type: dnsPacket.RecordType) =>
  new Promise<dnsPacket.DecodedPacket>((resolve, reject) => {
    const s = createSocket("udp4")
    const timer = setTimeout(() => (s.close(), reject(new Error("no answer"))), 2000)
    s.on("message", (m) => {
      clearTimeout(timer)
      s.close()
      resolve(dnsPacket.decode(m))
    })
    s.send(dnsPacket.encode({ type: "query", id: 7, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name, class: "IN" }] }), server.address.port, "127.0.0.1")
  })

beforeAll(async () => {
  cluster = await run(TestCluster.make({ nodes: 1, controllers: [Controllers.EndpointSlice.reconciler(), Controllers.StatefulSet.reconciler()] }))
  const catalog = await run(ServiceCatalog.make(cluster.client))
  // A stand-in upstream resolver that knows one name.
  upstream = createSocket("udp4")
  upstream.on("message", (m, peer) => {
    const q = dnsPacket.decode(m)
    const known = q.questions?.[0]?.name === "example.test"
    upstream.send(
      dnsPacket.encode({
        type: "response",
        id: q.id ?? 0,
        flags: dnsPacket.RECURSION_AVAILABLE | (known ? 0 : 3),
        questions: q.questions ?? [],
        answers: known ? [{ type: "A", name: "example.test", ttl: 60, data: "192.0.2.1" }] : []
      }),
      peer.port,
      peer.address
    )
  })
  await new Promise<void>((r) => upstream.bind(0, "127.0.0.1", r))
  server = await run(DnsServer.make({ listen: { host: "127.0.0.1", port: 0 }, view: catalog, upstream: { host: "127.0.0.1", port: upstream.address().port } }))

  await create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } })
  await create(service("web", { selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] }))
  await create(service("db", { clusterIP: "None", selector: { app: "db" }, ports: [{ name: "pg", port: 5432 }] }))
  await create({
    apiVersion: "apps/v1",
    kind: "StatefulSet",
    metadata: { name: "db", namespace: "shop" },
    spec: {
      serviceName: "db",
      replicas: 2,
      selector: { matchLabels: { app: "db" } },
      template: { metadata: { labels: { app: "db" } }, spec: { containers: [{ name: "pg", image: "postgres:17", ports: [{ name: "pg", containerPort: 5432 }] }] } }
    }
  })
  // A selectorless headless Service with 60 hand-made endpoints: larger than one 512-byte datagram.
  await create(service("big", { clusterIP: "None", ports: [{ name: "http", port: 80 }] }))
  await create({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: "big-1", namespace: "shop", labels: { "kubernetes.io/service-name": "big" } },
    addressType: "IPv4",
    ports: [{ name: "http", port: 80, protocol: "TCP" }],
    endpoints: Array.from({ length: 60 }, (_, i) => ({ addresses: [`10.2.0.${i + 1}`], conditions: { ready: true } }))
  })
}, 30_000)

afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  upstream?.close()
})

const podIP = async (name: string) => {
  const pod = await Effect.runPromise(cluster.client.get({ apiVersion: "v1", kind: "Pod" }, "shop", name))
  const ip = ((pod["status"] ?? {}) as Json)["podIP"]
  if (typeof ip !== "string" || ip === "") throw new Error(`${name} has no IP yet`)
  return ip
}

describe("cluster DNS", () => {
  it("answers a Service's cluster IP, with a 5 s TTL, by full and short names", async () => {
    const svc = await Effect.runPromise(cluster.client.get({ apiVersion: "v1", kind: "Service" }, "shop", "web"))
    const clusterIP = ((svc["spec"] ?? {}) as Json)["clusterIP"] as string
    const r = resolver()
    expect(await r.resolve4("web.shop.svc.cluster.local", { ttl: true })).toEqual([{ address: clusterIP, ttl: 5 }])
    expect(await r.resolve4("web.shop")).toEqual([clusterIP])
    expect(await r.resolve4("web.shop.svc")).toEqual([clusterIP])
    expect(await r.resolveSrv("_http._tcp.web.shop.svc.cluster.local")).toEqual([{ name: "web.shop.svc.cluster.local", port: 80, priority: 0, weight: 100 }])
  })

  it("answers a headless Service with its ready pods, each StatefulSet pod by hostname, and SRV per pod", async () => {
    const [ip0, ip1] = await eventually(async () => [await podIP("db-0"), await podIP("db-1")])
    const r = resolver()
    await eventually(async () => expect((await r.resolve4("db.shop.svc.cluster.local")).sort()).toEqual([ip0, ip1].sort()))
    expect(await r.resolve4("db-0.db.shop.svc.cluster.local")).toEqual([ip0])
    expect(await r.resolve4("db-1.db.shop.svc.cluster.local")).toEqual([ip1])
    const srv = await r.resolveSrv("_pg._tcp.db.shop.svc.cluster.local")
    expect(srv.map((s) => `${s.name}:${s.port}`).sort()).toEqual(["db-0.db.shop.svc.cluster.local:5432", "db-1.db.shop.svc.cluster.local:5432"])
  })

  it("answers NXDOMAIN for unknown names in the cluster domain, also after a Service goes", async () => {
    const r = resolver()
    await expect(r.resolve4("nope.shop.svc.cluster.local")).rejects.toMatchObject({ code: "ENOTFOUND" })
    await expect(r.resolve4("db-9.db.shop.svc.cluster.local")).rejects.toMatchObject({ code: "ENOTFOUND" })
    await expect(r.resolveSrv("_nope._tcp.web.shop.svc.cluster.local")).rejects.toMatchObject({ code: "ENOTFOUND" })
    await create(service("brief", { selector: { app: "x" }, ports: [{ port: 80 }] }))
    await eventually(() => r.resolve4("brief.shop.svc.cluster.local"))
    await Effect.runPromise(cluster.client.delete({ apiVersion: "v1", kind: "Service" }, "shop", "brief"))
    await eventually(() => expect(r.resolve4("brief.shop.svc.cluster.local")).rejects.toMatchObject({ code: "ENOTFOUND" }))
  })

  it("forwards other names to the upstream", async () => {
    const r = resolver()
    expect(await r.resolve4("example.test")).toEqual(["192.0.2.1"])
    await expect(r.resolve4("unknown.test")).rejects.toMatchObject({ code: "ENOTFOUND" })
  })

  it("truncates a large answer over UDP; the resolver gets all of it over TCP", async () => {
    const udp = await rawUdp("big.shop.svc.cluster.local", "A")
    expect(udp.flag_tc).toBe(true)
    expect(udp.answers!.length).toBeGreaterThan(0)
    expect(udp.answers!.length).toBeLessThan(60)
    expect(dnsPacket.encode(udp).length).toBeLessThanOrEqual(512)
    const all = await resolver().resolve4("big.shop.svc.cluster.local")
    expect(all).toHaveLength(60)
  })

  it("refuses names outside the cluster without an upstream", async () => {
    const catalog = await run(ServiceCatalog.make(cluster.client))
    const alone = await run(DnsServer.make({ listen: { host: "127.0.0.1", port: 0 }, view: catalog }))
    const r = new Resolver({ timeout: 2000, tries: 1 })
    r.setServers([`127.0.0.1:${alone.address.port}`])
    await expect(r.resolve4("example.test")).rejects.toMatchObject({ code: "EREFUSED" })
    await eventually(async () => expect(await r.resolve4("web.shop.svc.cluster.local")).toHaveLength(1))
  })
})
