/**
 * A service's own controller tested against Fleet in-process: the embedding example's `Website`
 * CRD and reconciler (examples/embed/Website.ts) run inside `TestCluster` next to the built-in
 * garbage collector — the real API pipeline validates the CRD's objects, the real controller
 * runner drives the reconciler — with no process, port or file. This is the fast inner loop; the
 * embed example's own test runs the same code as a separate program over HTTP.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Client, Controllers } from "@koder/fleet-core"
import { TestCluster } from "@koder/fleet-core/testing"
import { Effect } from "effect"
import * as Website from "../embed/Website.js"

const ConfigMapRef = { apiVersion: "v1", kind: "ConfigMap" } as const
const website = (name: string, spec: Record<string, unknown>) => ({ apiVersion: "sites.example.com/v1", kind: "Website", metadata: { name, namespace: "default" }, spec })
const page = (cm: Client.JsonObject) => (cm["data"] as Record<string, string>)["index.html"] ?? ""

describe("the Website controller, tested with TestCluster", () => {
  it("renders a page with the title and body escaped (pure)", () => {
    expect(Website.render(website("a", { title: "A & B", body: "<script>" }))).toBe("<!doctype html>\n<title>A &#38; B</title>\n<h1>A &#38; B</h1>\n<p>&#60;script&#62;</p>\n")
  })

  it.live("publishes, republishes on edit, repairs a deleted ConfigMap, and cleans up with the Website", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({
          nodes: 0,
          scheduler: false,
          // The CRD is served before the controllers start: the Website informer lists it at once.
          crds: [Website.crd],
          controllers: [Website.reconciler(), Controllers.GarbageCollector.reconciler()]
        })
        const { client } = cluster
        yield* client.create(website("docs", { title: "Docs", body: "v1" }))
        yield* cluster.eventually(Effect.flatMap(client.get(ConfigMapRef, "default", "docs-site"), (cm) => (page(cm).includes("v1") ? Effect.void : Effect.fail(new Error("old page")))))

        yield* client.patch(Website.WebsiteRef, "default", "docs", "merge", { spec: { body: "v2" } })
        yield* cluster.eventually(Effect.flatMap(client.get(ConfigMapRef, "default", "docs-site"), (cm) => (page(cm).includes("v2") ? Effect.void : Effect.fail(new Error("old page")))))
        const status = (yield* client.get(Website.WebsiteRef, "default", "docs"))["status"]
        expect(status).toMatchObject({ phase: "Published", configMap: "docs-site" })

        // Someone deletes the ConfigMap: the controller (watching ConfigMaps) puts it back.
        const before = (yield* client.get(ConfigMapRef, "default", "docs-site"))["metadata"] as { uid: string }
        yield* client.delete(ConfigMapRef, "default", "docs-site")
        yield* cluster.eventually(
          Effect.flatMap(client.get(ConfigMapRef, "default", "docs-site"), (cm) => ((cm["metadata"] as { uid: string }).uid !== before.uid ? Effect.void : Effect.fail(new Error("not recreated"))))
        )

        // The CRD's schema holds in the API pipeline.
        const invalid = yield* Effect.flip(client.create(website("untitled", { body: "no title" })))
        expect(invalid.status.code).toBe(422)

        yield* client.delete(Website.WebsiteRef, "default", "docs")
        yield* cluster.eventually(Effect.flip(client.get(ConfigMapRef, "default", "docs-site")))
      })
    )
  )
})
