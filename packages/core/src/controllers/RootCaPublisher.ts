/**
 * The `kube-root-ca.crt` ConfigMap in every active namespace, as kube-controller-manager's
 * root-ca-cert-publisher: `ca.crt` holds the CA that signs the API server's serving certificate,
 * so a pod's projected `kube-api-access-*` volume (admission/DefaultServiceAccount.ts) carries the
 * CA an in-cluster client verifies the API with. A changed or deleted ConfigMap is put back.
 * Without a CA (a control plane serving no TLS) it does nothing.
 */
import { Effect } from "effect"
import { asObject, type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import type * as Controller from "./Controller.js"
import { isActive } from "./ServiceAccountController.js"

/** The ConfigMap's name. */
export const name = "kube-root-ca.crt"

/** Options of the publisher. */
export interface Options {
  /** The CA bundle (PEM) to publish; absent: the controller is idle. */
  readonly caPem?: string
}

/** What to do in one namespace (pure). */
export const decide = (namespace: JsonObject | undefined, live: JsonObject | undefined, caPem: string): "create" | "update" | "keep" => {
  if (namespace === undefined || !isActive(namespace)) return "keep"
  if (live === undefined) return "create"
  return asObject(live["data"])["ca.crt"] === caPem ? "keep" : "update"
}

/** The publisher (`root-ca-cert-publisher`). */
export const reconciler = (options: Options = {}): Controller.Reconciler => ({
  name: "root-ca-cert-publisher",
  primary: ResourceRefs.Namespace,
  watches: [
    {
      ref: ResourceRefs.ConfigMap,
      keys: (change) => {
        const m = metadataOf(change.object)
        return m["name"] === name && typeof m["namespace"] === "string" ? [m["namespace"]] : []
      }
    }
  ],
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const caPem = options.caPem
      if (caPem === undefined) return
      const namespace = ctx.informers.for(ResourceRefs.Namespace).get(undefined, key)
      const live = ctx.informers.for(ResourceRefs.ConfigMap).get(key, name)
      switch (decide(namespace, live, caPem)) {
        case "create":
          yield* ctx.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: key }, data: { "ca.crt": caPem } }).pipe(
            // Already there (the cache lagged), or the namespace went or started terminating meanwhile.
            Effect.catchIf((e) => e.status.code === 409 || e.status.code === 404 || e.status.code === 403, () => Effect.void)
          )
          return
        case "update":
          yield* ctx.client.update({ ...live!, data: { "ca.crt": caPem } }).pipe(Effect.catchIf((e) => e.status.code === 409 || e.status.code === 404, () => Effect.void))
          return
        case "keep":
          return
      }
    })
})
