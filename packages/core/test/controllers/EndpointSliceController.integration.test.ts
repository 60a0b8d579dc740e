import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Endpoints from "../../src/controllers/Endpoints.js"
import * as EndpointSlice from "../../src/controllers/EndpointSliceController.js"
import { makeMemory } from "../../src/store/Store.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const ServiceRef = { apiVersion: "v1", kind: "Service" } as const
const SliceRef = { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice" } as const

const pod = (name: string, extra: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", labels: { app: "web" }, ...extra },
  spec: { containers: [{ name: "app", image: "nginx:1" }] }
})

const service = (name: string): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: "default" },
  spec: { selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] }
})

const cluster = (options: EndpointSlice.Options = {}, nodes = 2) =>
  Effect.gen(function* () {
    const store = makeMemory()
    return yield* TestCluster.make({
      nodes,
      store,
      podStartupMs: 5,
      controllers: [EndpointSlice.reconciler(options), Endpoints.reconciler()]
    })
  })

const slicesOf = (c: TestCluster.TestCluster, name: string) =>
  Effect.map(
    c.client.list(SliceRef, { namespace: "default", labelSelector: `kubernetes.io/service-name=${name}` }),
    (l) => (l["items"] as ReadonlyArray<Json> | undefined) ?? []
  )

const endpoints = (slices: ReadonlyArray<Json>) => slices.flatMap((s) => (s.endpoints ?? []) as ReadonlyArray<Json>)
const names = (eps: ReadonlyArray<Json>) => eps.map((e) => e.targetRef.name as string).sort()

const until = (c: TestCluster.TestCluster, name: string, check: (slices: ReadonlyArray<Json>) => boolean, what: string) =>
  c.eventually(
    Effect.flatMap(slicesOf(c, name), (s) => (check(s) ? Effect.succeed(s) : Effect.fail(new Error(`${what}: ${JSON.stringify(s.map((x) => names(x.endpoints ?? [])))}`)))),
    { timeoutMs: 45_000 }
  )

describe("EndpointSlices through the API", () => {
  it.live("follow pods through readiness, termination and deletion; go with their Service", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(pod("a"))
        yield* c.client.create(pod("b"))
        yield* c.client.create(pod("held", { finalizers: ["example.com/hold"] }))
        yield* c.client.create(service("web"))
        const ready = (e: Json) => e.conditions.ready === true
        const slices = yield* until(c, "web", (s) => s.length === 1 && endpoints(s).filter(ready).length === 3, "three ready endpoints")

        const slice = slices[0]!
        const svc = (yield* c.client.get(ServiceRef, "default", "web")) as Json
        expect(slice.metadata.name).toMatch(/^web-[a-z0-9]{5}$/)
        expect(slice.metadata.labels).toMatchObject({ "kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io" })
        expect(slice.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Service", name: "web", uid: svc.metadata.uid, controller: true, blockOwnerDeletion: true }])
        expect(slice.addressType).toBe("IPv4")
        expect(slice.ports).toEqual([{ name: "http", port: 8080, protocol: "TCP" }])
        const a = (yield* c.client.get(PodRef, "default", "a")) as Json
        expect(slice.endpoints.find((e: Json) => e.targetRef.name === "a")).toEqual({
          addresses: [a.status.podIP],
          conditions: { ready: true, serving: true, terminating: false },
          targetRef: { kind: "Pod", namespace: "default", name: "a", uid: a.metadata.uid },
          nodeName: a.spec.nodeName
        })

        // Failing readiness: ready=false, serving=false, and the slice is updated in place.
        c.setReady("default", "b", false)
        const after = yield* until(c, "web", (s) => endpoints(s).find((e) => e.targetRef.name === "b")?.conditions.ready === false, "b unready")
        expect(after.map((s) => s.metadata.uid)).toEqual([slice.metadata.uid])
        expect(endpoints(after).find((e) => e.targetRef.name === "b")!.conditions).toEqual({ ready: false, serving: false, terminating: false })

        // Terminating (kept by its finalizer): still an endpoint, terminating and not ready.
        yield* c.client.delete(PodRef, "default", "held")
        yield* until(c, "web", (s) => endpoints(s).find((e) => e.targetRef.name === "held")?.conditions.terminating === true, "held terminating")
        expect(endpoints(yield* slicesOf(c, "web")).find((e) => e.targetRef.name === "held")!.conditions.ready).toBe(false)

        // Deleted pods leave (once their kubelet has stopped them and confirmed the deletion).
        yield* c.client.delete(PodRef, "default", "a")
        yield* c.client.patch(PodRef, "default", "held", "merge", { metadata: { finalizers: null } })
        yield* until(c, "web", (s) => names(endpoints(s)).join() === "b", "only b left")

        // Deleting the Service removes its slices (this controller does it; no garbage collector runs here).
        yield* c.client.delete(ServiceRef, "default", "web")
        yield* until(c, "web", (s) => s.length === 0, "slices removed")
      })
    ),
    60_000
  )

  it.live("250 pods with 100 endpoints per slice make three slices; losing pods keeps the slices", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster({ maxEndpointsPerSlice: 100 }, 3)
        yield* c.client.create(service("web"))
        yield* until(c, "web", (s) => s.length === 1 && endpoints(s).length === 0, "a placeholder slice")
        yield* Effect.forEach(Array.from({ length: 250 }, (_, i) => i), (i) => c.client.create(pod(`p${i}`)), { concurrency: 10, discard: true })
        const full = yield* until(c, "web", (s) => endpoints(s).filter((e) => e.conditions.ready).length === 250, "250 ready endpoints")
        expect(full.length).toBe(3)
        expect(full.map((s) => s.endpoints.length).sort((x, y) => x - y)).toEqual([50, 100, 100])
        expect(new Set(endpoints(full).map((e) => e.addresses[0])).size).toBe(250)

        // Ten pods go: the same three slices are updated, none replaced.
        yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => c.client.delete(PodRef, "default", `p${i}`), { discard: true })
        const fewer = yield* until(c, "web", (s) => endpoints(s).length === 240, "240 endpoints")
        expect(fewer.map((s) => s.metadata.uid).sort()).toEqual(full.map((s) => s.metadata.uid).sort())
      })
    ),
    120_000
  )
})
