/**
 * The embedding example's own API and controller: a `Website` custom resource (group
 * `sites.example.com`) and a reconciler, written against core's controller runner, that publishes
 * each Website as a ConfigMap holding its rendered `index.html` and reports back in status.
 *
 *   Website (spec.title, spec.body) ─▶ reconcile ─▶ ConfigMap <name>-site (owned: deleted with it)
 *                                                └▶ status { phase: Published, configMap, observedGeneration }
 *
 * Level-triggered like every Fleet controller: `reconcile(key)` reads the current Website and
 * ConfigMap from the shared informers, computes what should exist (`desiredConfigMap`, pure) and
 * writes only the difference. The ConfigMap carries a controller ownerReference, so the built-in
 * garbage collector deletes it when its Website goes.
 */
import { type Client, type Controller, Informer } from "@koder/fleet-core"
import { Effect } from "effect"

type JsonObject = Client.JsonObject

/** The Website resource, by plural (custom resources have no built-in kind table entry). */
export const WebsiteRef: Client.ResourceRef = { apiVersion: "sites.example.com/v1", plural: "websites", namespaced: true }

const ConfigMapRef: Client.ResourceRef = { apiVersion: "v1", kind: "ConfigMap" }

/** The CustomResourceDefinition the program registers at start. */
export const crd = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "websites.sites.example.com" },
  spec: {
    group: "sites.example.com",
    scope: "Namespaced",
    names: { kind: "Website", listKind: "WebsiteList", plural: "websites", singular: "website", shortNames: ["ws"] },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: [
          { name: "Title", type: "string", jsonPath: ".spec.title" },
          { name: "Phase", type: "string", jsonPath: ".status.phase" }
        ],
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: {
                type: "object",
                required: ["title"],
                properties: { title: { type: "string", minLength: 1 }, body: { type: "string" } }
              },
              status: {
                type: "object",
                properties: { phase: { type: "string" }, configMap: { type: "string" }, observedGeneration: { type: "integer" } }
              }
            }
          }
        }
      }
    ]
  }
}

interface Meta {
  readonly name: string
  readonly namespace: string
  readonly uid?: string
  readonly generation?: number
  readonly deletionTimestamp?: string
}
const meta = (o: JsonObject) => (o["metadata"] ?? {}) as Meta
const spec = (o: JsonObject) => (o["spec"] ?? {}) as { title?: string; body?: string }

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** The page a Website publishes (pure). */
export const render = (website: JsonObject): string => {
  const { title = "", body = "" } = spec(website)
  return `<!doctype html>\n<title>${escape(title)}</title>\n<h1>${escape(title)}</h1>\n<p>${escape(body)}</p>\n`
}

/** The ConfigMap a Website should have (pure). */
export const desiredConfigMap = (website: JsonObject): JsonObject => {
  const m = meta(website)
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: `${m.name}-site`,
      namespace: m.namespace,
      labels: { "sites.example.com/website": m.name },
      ownerReferences: [{ apiVersion: "sites.example.com/v1", kind: "Website", name: m.name, uid: m.uid, controller: true, blockOwnerDeletion: true }]
    },
    data: { "index.html": render(website) }
  }
}

/** The Website reconciler: one key per Website, woken by its own changes and its ConfigMap's. */
export const reconciler = (): Controller.Reconciler => ({
  name: "website",
  primary: WebsiteRef,
  // A ConfigMap changed or deleted behind our back queues its owning Website.
  watches: [{ ref: ConfigMapRef, keys: (change) => [change.object, change.old].flatMap((o) => (o ? Informer.keyOf(o) : [])).filter((k) => k.endsWith("-site")).map((k) => k.slice(0, -"-site".length)) }],
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const website = ctx.informers.for(WebsiteRef).get(namespace, name)
      if (website === undefined || meta(website).deletionTimestamp !== undefined) return
      const want = desiredConfigMap(website)
      const have = ctx.informers.for(ConfigMapRef).get(namespace, meta(want).name)
      if (have === undefined) {
        yield* ctx.client.create(want)
        yield* ctx.events.record(website, "Normal", "Published", `published as ConfigMap ${meta(want).name}`)
      } else if (JSON.stringify(have["data"]) !== JSON.stringify(want["data"])) {
        yield* ctx.client.update({ ...have, data: want["data"] })
        yield* ctx.events.record(website, "Normal", "Updated", `republished ConfigMap ${meta(want).name}`)
      }
      const status = { phase: "Published", configMap: meta(want).name, observedGeneration: meta(website).generation }
      if (JSON.stringify(website["status"] ?? {}) !== JSON.stringify(status)) {
        yield* ctx.client.patch(WebsiteRef, namespace, name, "merge", { status }, "status")
      }
    })
})
