/**
 * The hello example's manifests are what a user applies: every document decodes, passes the
 * API's validation and admission, and the control plane makes of them what the README promises —
 * two ready pods behind the `hello` Service's endpoints and an Ingress routing to it. (Running the
 * example for real, processes and HTTP, is the `koder-fleet dev` end-to-end test's job.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Controllers, Pods, type Client } from "@koder/fleet-core"
import { TestCluster } from "@koder/fleet-core/testing"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseAllDocuments } from "yaml"

const dir = fileURLToPath(new URL(".", import.meta.url))
const manifests = readdirSync(dir)
  .filter((f) => f.endsWith(".yaml"))
  .sort()
  .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), "utf8")).map((d) => ({ file: f, object: d.toJS() as Client.JsonObject })))

describe("examples/hello", () => {
  it("is a Deployment, a Service and an Ingress, all named hello", () => {
    expect(manifests.map((m) => `${String(m.object["kind"])}/${String((m.object["metadata"] as { name: string }).name)}`).sort()).toEqual([
      "Deployment/hello",
      "Ingress/hello",
      "Service/hello"
    ])
  })

  it.live("is accepted by the API and becomes two ready pods behind the Service", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: 2, controllers: Controllers.all() })
        for (const m of manifests) {
          yield* cluster.client.create({ ...m.object, metadata: { ...(m.object["metadata"] as object), namespace: "default" } })
        }
        const ready = yield* cluster.eventually(
          Effect.gen(function* () {
            const pods = (yield* TestCluster.pods(cluster, "default", "app=hello")).filter((p) => Pods.isReady(p))
            const endpoints = (yield* cluster.client.get({ apiVersion: "v1", kind: "Endpoints" }, "default", "hello")) as Client.JsonObject
            const addresses = ((endpoints["subsets"] as Array<{ addresses?: Array<unknown> }> | undefined) ?? []).flatMap((s) => s.addresses ?? [])
            if (pods.length !== 2 || addresses.length !== 2) return yield* Effect.fail(new Error(`${pods.length} ready pods, ${addresses.length} endpoint addresses`))
            return pods
          }),
          { timeoutMs: 30_000 }
        )
        expect(ready).toHaveLength(2)
        const ingress = (yield* cluster.client.get({ apiVersion: "networking.k8s.io/v1", kind: "Ingress" }, "default", "hello")) as Client.JsonObject
        expect(ingress["spec"]).toMatchObject({ ingressClassName: "fleet", rules: [{ host: "hello.localhost" }] })
      })
    )
  )
})
