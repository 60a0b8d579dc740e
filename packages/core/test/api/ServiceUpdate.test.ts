import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as TestCluster from "../../src/testing/TestCluster.js"

const SvcRef = { apiVersion: "v1", kind: "Service" } as const
const IpRef = { apiVersion: "networking.k8s.io/v1", kind: "IPAddress" } as const

const service = (spec: Record<string, unknown>) => ({ apiVersion: "v1", kind: "Service", metadata: { name: "web", namespace: "default" }, spec })
const specOf = (o: Record<string, unknown>) => o["spec"] as Record<string, any>

describe("Service updates keep or release the allocated IP as kube-apiserver does", () => {
  it.live("a PUT without clusterIP keeps the IP; changing it is refused; ExternalName releases it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 0, serviceClusterIpRange: "10.100.0.0/24" })
        const created = yield* cluster.client.create(service({ selector: { app: "web" }, ports: [{ port: 80 }] }))
        const ip = specOf(created)["clusterIP"] as string
        expect(ip).toMatch(/^10\.100\.0\.\d+$/)
        expect(specOf(created)["clusterIPs"]).toEqual([ip])
        expect(yield* TestCluster.find(cluster, IpRef, undefined, ip)).toBeDefined()

        // kubectl replace with the manifest as written: no clusterIP in it.
        const replaced = yield* cluster.client.update({ ...service({ selector: { app: "web" }, ports: [{ port: 8080 }] }), metadata: { ...(created["metadata"] as object) } })
        expect(specOf(replaced)["clusterIP"]).toBe(ip)
        expect(specOf(replaced)["ports"][0]["port"]).toBe(8080)

        const moved = yield* Effect.flip(cluster.client.patch(SvcRef, "default", "web", "merge", { spec: { clusterIP: "10.100.0.200", clusterIPs: ["10.100.0.200"] } }))
        expect(moved.status.code).toBe(422)
        expect(moved.status.message).toContain("spec.clusterIP")

        const external = yield* cluster.client.patch(SvcRef, "default", "web", "merge", { spec: { type: "ExternalName", externalName: "web.example.com", selector: null, ports: null } })
        expect(specOf(external)["clusterIP"]).toBeUndefined()
        expect(yield* TestCluster.find(cluster, IpRef, undefined, ip)).toBeUndefined()
      })
    )
  )
})
