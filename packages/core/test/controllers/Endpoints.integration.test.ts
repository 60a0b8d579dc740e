import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Endpoints from "../../src/controllers/Endpoints.js"
import { makeMemory } from "../../src/store/Store.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const ServiceRef = { apiVersion: "v1", kind: "Service" } as const
const EndpointsRef = { apiVersion: "v1", kind: "Endpoints" } as const

const pod = (name: string, labels: Record<string, string> = { app: "web" }, extra: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", labels, ...extra },
  spec: { containers: [{ name: "app", image: "nginx:1", ports: [{ name: "http", containerPort: 8080 }] }] }
})

const service = (name: string, spec: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: "default", labels: { team: "a" } },
  spec: { selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: "http" }], ...spec }
})

const cluster = () =>
  Effect.gen(function* () {
    const store = makeMemory()
    return yield* TestCluster.make({ nodes: 2, store, podStartupMs: 5, controllers: [Endpoints.reconciler()] })
  })

const endpointsOf = (c: TestCluster.TestCluster, name: string) => TestCluster.find(c, EndpointsRef, "default", name) as Effect.Effect<Json | undefined>

const ips = (addresses: ReadonlyArray<Json> | undefined) => (addresses ?? []).map((a) => a.targetRef.name as string).sort()

/** Wait until the Endpoints object of `name` satisfies `check`. */
const until = (c: TestCluster.TestCluster, name: string, check: (ep: Json | undefined) => boolean, what: string) =>
  c.eventually(Effect.flatMap(endpointsOf(c, name), (ep) => (check(ep) ? Effect.succeed(ep) : Effect.fail(new Error(`${what}: ${JSON.stringify(ep?.subsets)}`)))))

const ready = (c: TestCluster.TestCluster, names: ReadonlyArray<string>) =>
  c.eventually(
    Effect.flatMap(TestCluster.pods(c, "default"), (ps) =>
      names.every((n) => ps.some((p) => p["metadata"] && (p as Json).metadata.name === n && ((p as Json).status?.conditions ?? []).some((x: Json) => x.type === "Ready" && x.status === "True")))
        ? Effect.void
        : Effect.fail(new Error("pods not ready"))
    )
  )

describe("Endpoints through the API", () => {
  it.live("follows pods through readiness, deletion and the Service's own deletion", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        for (const n of ["a", "b", "c"]) yield* c.client.create(pod(n))
        yield* c.client.create(pod("other", { app: "db" }))
        yield* ready(c, ["a", "b", "c"])
        yield* c.client.create(service("web"))

        const ep = yield* until(c, "web", (e) => e !== undefined && ips(e.subsets?.[0]?.addresses).join() === "a,b,c", "three ready addresses")
        expect(ep!.subsets).toHaveLength(1)
        expect(ep!.subsets[0].ports).toEqual([{ name: "http", port: 8080, protocol: "TCP" }])
        // Addresses are ordered by IP, which depends on where the scheduler put each pod.
        const address = (ep!.subsets[0].addresses as Array<Json>).find((x) => x.targetRef?.name === "a")
        const a = yield* c.client.get(PodRef, "default", "a")
        expect(address).toEqual({ ip: (a as Json).status.podIP, nodeName: (a as Json).spec.nodeName, targetRef: { kind: "Pod", namespace: "default", name: "a", uid: (a as Json).metadata.uid } })
        expect(address?.ip).toMatch(/^10\.244\./)
        expect(ep!.metadata.labels).toMatchObject({ team: "a", "endpointslice.kubernetes.io/skip-mirror": "true" })
        expect(ep!.metadata.annotations["endpoints.kubernetes.io/last-change-trigger-time"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)

        // A pod failing readiness moves to notReadyAddresses.
        c.setReady("default", "b", false)
        yield* until(c, "web", (e) => ips(e?.subsets?.[0]?.addresses).join() === "a,c" && ips(e?.subsets?.[0]?.notReadyAddresses).join() === "b", "b not ready")
        c.setReady("default", "b", true)
        yield* until(c, "web", (e) => ips(e?.subsets?.[0]?.addresses).join() === "a,b,c" && e?.subsets?.[0]?.notReadyAddresses === undefined, "b ready again")

        // A deleted pod leaves.
        yield* c.client.delete(PodRef, "default", "c")
        yield* until(c, "web", (e) => ips(e?.subsets?.[0]?.addresses).join() === "a,b", "c gone")

        // A quiet cluster writes nothing more: the object's revision holds still.
        yield* c.idle
        const settled = yield* endpointsOf(c, "web")
        yield* c.idle
        expect((yield* endpointsOf(c, "web"))!.metadata.resourceVersion).toBe(settled!.metadata.resourceVersion)

        // The Service goes, and its Endpoints with it.
        yield* c.client.delete(ServiceRef, "default", "web")
        yield* until(c, "web", (e) => e === undefined, "Endpoints removed")
      })
    ),
    60_000
  )

  it.live("leaves terminating pods out, lists them with publishNotReadyAddresses, and ignores Services without selectors", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        // The finalizer keeps the pod around, terminating, after its kubelet has stopped it.
        yield* c.client.create(pod("held", { app: "web" }, { finalizers: ["example.com/hold"] }))
        yield* c.client.create(pod("plain"))
        yield* ready(c, ["held", "plain"])
        yield* c.client.create(service("web"))
        yield* c.client.create(service("all", { publishNotReadyAddresses: true }))
        yield* c.client.create({ ...service("manual"), spec: { ports: [{ port: 80 }] } })
        yield* until(c, "web", (e) => ips(e?.subsets?.[0]?.addresses).join() === "held,plain", "both listed")

        yield* c.client.delete(PodRef, "default", "held")
        yield* until(c, "web", (e) => ips(e?.subsets?.[0]?.addresses).join() === "plain" && e?.subsets?.[0]?.notReadyAddresses === undefined, "terminating pod left out")
        yield* until(c, "all", (e) => ips(e?.subsets?.[0]?.addresses).join() === "held,plain", "published anyway")
        yield* c.idle
        expect(yield* endpointsOf(c, "manual")).toBeUndefined()
        yield* c.client.patch(PodRef, "default", "held", "merge", { metadata: { finalizers: null } })
        yield* until(c, "all", (e) => ips(e?.subsets?.[0]?.addresses).join() === "plain", "finally gone")
      })
    ),
    60_000
  )
})
