import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ClusterIpAllocator from "../../src/admission/ClusterIpAllocator.js"
import * as ClusterIpRepair from "../../src/controllers/ClusterIpRepair.js"
import * as Endpoints from "../../src/controllers/Endpoints.js"
import * as EndpointSlice from "../../src/controllers/EndpointSliceController.js"
import { makeMemory } from "../../src/store/Store.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const ServiceRef = { apiVersion: "v1", kind: "Service" } as const
const IPAddressRef = ClusterIpRepair.IPAddressRef
const EventRef = { apiVersion: "v1", kind: "Event" } as const
const EndpointsRef = { apiVersion: "v1", kind: "Endpoints" } as const
const SliceRef = { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice" } as const

const service = (name: string, extra: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: "default", ...extra },
  spec: { selector: { app: name }, ports: [{ port: 80 }] }
})

const cluster = (controllers: ReadonlyArray<ReturnType<typeof ClusterIpRepair.reconciler>> = [ClusterIpRepair.reconciler({ leakGraceMs: 300 })]) =>
  Effect.gen(function* () {
    const store = makeMemory()
    return yield* TestCluster.make({ nodes: 1, store, controllers })
  })

const addresses = (c: TestCluster.TestCluster) =>
  Effect.map(c.client.list(IPAddressRef), (l) => ((l["items"] as ReadonlyArray<Json> | undefined) ?? []).map((o) => ({ name: o.metadata.name as string, parent: o.spec.parentRef.name as string })))

const expectAddresses = (c: TestCluster.TestCluster, want: ReadonlyArray<{ name: string; parent: string }>, what: string) =>
  c.eventually(
    Effect.flatMap(addresses(c), (got) => {
      const sorted = [...got].sort((a, b) => a.name.localeCompare(b.name))
      const expected = [...want].sort((a, b) => a.name.localeCompare(b.name))
      return JSON.stringify(sorted) === JSON.stringify(expected) ? Effect.void : Effect.fail(new Error(`${what}: ${JSON.stringify(sorted)}`))
    }),
    { timeoutMs: 20_000 }
  )

const reasons = (c: TestCluster.TestCluster) => Effect.map(c.client.list(EventRef, { namespace: "default" }), (l) => ((l["items"] as ReadonlyArray<Json> | undefined) ?? []).map((e) => e.reason as string))

describe("ClusterIpRepair through the API", () => {
  it.live("puts back an IPAddress deleted by hand", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const web = (yield* c.client.create(service("web"))) as Json
        const ip = web.spec.clusterIP as string
        yield* expectAddresses(c, [{ name: ip, parent: "web" }], "allocated")
        yield* c.client.delete(IPAddressRef, undefined, ip)
        yield* expectAddresses(c, [{ name: ip, parent: "web" }], "recreated")
        yield* c.eventually(Effect.flatMap(reasons(c), (r) => (r.includes("ClusterIPNotAllocated") ? Effect.void : Effect.fail(new Error(r.join())))))
      })
    ), 60_000)

  it.live("cleans up what admission could not: a refused create's reservation, a Service removed past its finalizer, a stray address", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const web = (yield* c.client.create(service("web"))) as Json
        const webIP = web.spec.clusterIP as string

        // A second "web": its address is taken in admission, then the name clash refuses the write.
        const again = yield* Effect.either(c.client.create(service("web")))
        expect(again._tag === "Left" && again.left.status.reason).toBe("AlreadyExists")

        // A Service whose deletion waits for a finalizer: the final removal skips admission.
        const held = (yield* c.client.create(service("held", { finalizers: ["example.com/hold"] }))) as Json
        yield* c.client.delete(ServiceRef, "default", "held")
        yield* c.client.patch(ServiceRef, "default", "held", "merge", { metadata: { finalizers: null } })

        // An address nobody holds.
        yield* c.client.create(ClusterIpAllocator.ipAddressFor("10.96.200.1", { namespace: "default", name: "ghost" }))

        yield* expectAddresses(c, [{ name: webIP, parent: "web" }], "only web's address left")
        expect(held.spec.clusterIP).not.toBe(webIP)
        const r = yield* reasons(c)
        expect(r).toContain("IPAddressNotAllocated")
        expect(r).toContain("IPAddressWrongReference")
      })
    ), 60_000)

  it.live("deleting a Service removes its Endpoints, its slices and its IPAddress", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster([ClusterIpRepair.reconciler({ leakGraceMs: 300 }), Endpoints.reconciler(), EndpointSlice.reconciler()])
        yield* c.client.create({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "default", labels: { app: "web" } }, spec: { containers: [{ name: "c", image: "nginx:1" }] } })
        const web = (yield* c.client.create(service("web"))) as Json
        const slices = () => Effect.map(c.client.list(SliceRef, { namespace: "default", labelSelector: "kubernetes.io/service-name=web" }), (l) => (l["items"] as ReadonlyArray<Json>).length)
        yield* c.eventually(
          Effect.gen(function* () {
            const ep = (yield* c.client.get(EndpointsRef, "default", "web")) as Json
            if ((ep.subsets ?? []).length !== 1) return yield* Effect.fail(new Error("no endpoints yet"))
            if ((yield* slices()) !== 1) return yield* Effect.fail(new Error("no slice yet"))
          })
        )
        yield* expectAddresses(c, [{ name: web.spec.clusterIP, parent: "web" }], "allocated")
        yield* c.client.delete(ServiceRef, "default", "web")
        yield* expectAddresses(c, [], "released")
        yield* c.eventually(
          Effect.gen(function* () {
            const ep = yield* TestCluster.find(c, EndpointsRef, "default", "web")
            if (ep !== undefined || (yield* slices()) !== 0) return yield* Effect.fail(new Error("Endpoints or slices left"))
          })
        )
      })
    ), 60_000)
})
