import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import * as ServiceLoadBalancer from "../../src/controllers/ServiceLoadBalancer.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, unknown>

const pool = Either.getOrThrow(ServiceLoadBalancer.parsePool("127.0.0.2-127.0.0.4"))
const lb = (spec: Json = {}, ips: ReadonlyArray<string> = []): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "default" },
  spec: { type: "LoadBalancer", ports: [{ port: 80 }], ...spec },
  ...(ips.length === 0 ? {} : { status: { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } } })
})

describe("ServiceLoadBalancer.parsePool", () => {
  it.each([
    ["127.0.0.2-127.0.0.4", ["127.0.0.2", "127.0.0.4"], ["127.0.0.1", "127.0.0.5"]],
    ["192.168.1.240/30", ["192.168.1.240", "192.168.1.243"], ["192.168.1.244"]],
    ["10.0.0.1, fd00::1-fd00::ff", ["10.0.0.1", "fd00::80"], ["10.0.0.2", "fd00::100"]]
  ])("%s", (text, inside, outside) => {
    const p = Either.getOrThrow(ServiceLoadBalancer.parsePool(text))
    for (const ip of inside) expect(ServiceLoadBalancer.inPool(p, ip)).toBe(true)
    for (const ip of outside) expect(ServiceLoadBalancer.inPool(p, ip)).toBe(false)
  })
  it.each(["", "10.0.0.9-10.0.0.1", "10.0.0.1-fd00::1", "nonsense", "10.0.0.0/33"])("refuses %j", (text) => expect(Either.isLeft(ServiceLoadBalancer.parsePool(text))).toBe(true))
})

describe("ServiceLoadBalancer.decide", () => {
  const held = (entries: ReadonlyArray<[string, boolean]>) => new Map(entries)
  const cases: ReadonlyArray<[string, Json, ReadonlyMap<string, boolean>, ServiceLoadBalancer.Decision]> = [
    ["a new LoadBalancer gets the lowest free address", lb(), held([]), { _tag: "Assign", ip: "127.0.0.2" }],
    ["taken addresses are skipped", lb(), held([["127.0.0.2", true], ["127.0.0.3", false]]), { _tag: "Assign", ip: "127.0.0.4" }],
    ["an address it holds is kept", lb({}, ["127.0.0.3"]), held([]), { _tag: "Keep" }],
    ["an address an older Service holds is given up", lb({}, ["127.0.0.3"]), held([["127.0.0.3", true]]), { _tag: "Assign", ip: "127.0.0.2" }],
    ["an address a newer Service also holds is kept", lb({}, ["127.0.0.3"]), held([["127.0.0.3", false]]), { _tag: "Keep" }],
    ["an address no longer in the pool is replaced", lb({}, ["127.0.0.9"]), held([]), { _tag: "Assign", ip: "127.0.0.2" }],
    ["a requested address", lb({ loadBalancerIP: "127.0.0.4" }), held([]), { _tag: "Assign", ip: "127.0.0.4" }],
    ["a requested address outside the pool", lb({ loadBalancerIP: "10.0.0.1" }), held([]), { _tag: "Exhausted", reason: "LoadBalancerIPNotInPool", message: "loadBalancerIP 10.0.0.1 is not in the pool 127.0.0.2-127.0.0.4" }],
    ["the pool is full", lb(), held([["127.0.0.2", true], ["127.0.0.3", true], ["127.0.0.4", false]]), { _tag: "Exhausted", reason: "AllocationFailed", message: "no free address in the load-balancer pool 127.0.0.2-127.0.0.4" }],
    ["another implementation's class is left alone", lb({ loadBalancerClass: "example.com/lb" }), held([]), { _tag: "Keep" }],
    ["a former LoadBalancer is cleared", lb({ type: "ClusterIP" }, ["127.0.0.2"]), held([]), { _tag: "Clear" }],
    ["a ClusterIP Service is none of its business", lb({ type: "ClusterIP" }), held([]), { _tag: "Keep" }]
  ]
  it.each(cases)("%s", (_, service, others, want) => expect(ServiceLoadBalancer.decide(service, others, pool)).toEqual(want))
})

describe("the ServiceLoadBalancer controller", () => {
  it("gives 3 LoadBalancer Services distinct addresses of a 3-address pool, makes the 4th wait, and hands a freed address on", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const cluster = yield* TestCluster.make({ nodes: 0, scheduler: false, controllers: [ServiceLoadBalancer.reconciler({ pool: "127.0.0.2-127.0.0.4", retryMs: 100 })] })
          const svc = (name: string): Json => ({ apiVersion: "v1", kind: "Service", metadata: { name, namespace: "default" }, spec: { type: "LoadBalancer", selector: { app: name }, ports: [{ port: 8080 }] } })
          const ipOf = (name: string) =>
            Effect.map(cluster.client.get({ apiVersion: "v1", kind: "Service" }, "default", name), (s) => {
              const ingress = (((s["status"] ?? {}) as Json)["loadBalancer"] as Json | undefined)?.["ingress"] as ReadonlyArray<Json> | undefined
              return ingress?.[0]?.["ip"] as string | undefined
            })
          const assigned = (name: string) => TestCluster.eventually(Effect.flatMap(ipOf(name), (ip) => (ip === undefined ? Effect.fail(new Error(`${name} has no address`)) : Effect.succeed(ip))))
          for (const n of ["a", "b", "c"]) yield* cluster.client.create(svc(n))
          const ips = [yield* assigned("a"), yield* assigned("b"), yield* assigned("c")]
          expect([...ips].sort()).toEqual(["127.0.0.2", "127.0.0.3", "127.0.0.4"])
          yield* cluster.client.create(svc("d"))
          yield* TestCluster.eventually(
            Effect.flatMap(cluster.client.list({ apiVersion: "v1", kind: "Event" }, { namespace: "default" }), (list) =>
              (list["items"] as ReadonlyArray<Json>).some((e) => e["reason"] === "AllocationFailed") ? Effect.void : Effect.fail(new Error("no AllocationFailed event"))
            )
          )
          expect(yield* ipOf("d")).toBeUndefined()
          yield* cluster.client.delete({ apiVersion: "v1", kind: "Service" }, "default", "b")
          expect(yield* assigned("d")).toBe(ips[1])
        })
      )
    ), 20_000)
})
