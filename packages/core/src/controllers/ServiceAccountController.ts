/**
 * The ServiceAccount controller, as kube-controller-manager's serviceaccount-controller: every
 * active namespace has the ServiceAccounts it should (`default`), re-created when deleted.
 * Namespaces that are terminating are left alone (nothing may be created in them).
 *
 * What it adds to what exists: the API server's `NamespaceServiceAccount` admission plugin creates
 * `default` in the namespace's own create transaction and backfills it at server start, but
 * nothing brought it back once deleted, and servers without that plugin (the test cluster) never
 * had one; `DefaultServiceAccount` admission only names `default` on pods. Tokens are issued on
 * request (`serviceaccounts/token`, bound and short-lived), so, as in Kubernetes since 1.24, no
 * token Secrets are created here; the `kube-root-ca.crt` ConfigMap publisher is another controller.
 */
import { Effect } from "effect"
import type * as Controller from "./Controller.js"
import { isTerminating, metadataOf } from "../object/Metadata.js"
import { type JsonObject } from "../object/Json.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"



/** The accounts every namespace gets by default. */
export const defaultAccounts: ReadonlyArray<string> = ["default"]

/** Whether a namespace is active: exists, not being deleted, phase Active (or not yet set). */
export const isActive = (ns: JsonObject): boolean => {
  const phase = Views.namespace(ns).status?.phase
  return !isTerminating(ns) && (phase === undefined || phase === "Active")
}

/** The accounts to create in a namespace (pure): the wanted ones it lacks, none unless it is active. */
export const decide = (namespace: JsonObject | undefined, existing: ReadonlySet<string>, wanted: ReadonlyArray<string>): ReadonlyArray<string> =>
  namespace === undefined || !isActive(namespace) ? [] : wanted.filter((name) => !existing.has(name))

/** Options of the controller. */
export interface Options {
  /** The accounts every active namespace must have (default `["default"]`). */
  readonly accounts?: ReadonlyArray<string>
}

/** The ServiceAccount controller. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const wanted = options.accounts ?? defaultAccounts
  return {
    name: "serviceaccount",
    primary: ResourceRefs.Namespace,
    watches: [
      {
        ref: ResourceRefs.ServiceAccount,
        // Only a deleted account it manages concerns it (upstream's serviceAccountDeleted).
        keys: (change) => {
          const m = metadataOf(change.object)
          return change.type === "DELETED" && wanted.includes(String(m["name"])) && typeof m["namespace"] === "string" ? [m["namespace"]] : []
        }
      }
    ],
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const ns = ctx.informers.for(ResourceRefs.Namespace).get(undefined, key)
        const accounts = ctx.informers.for(ResourceRefs.ServiceAccount)
        const existing = new Set(wanted.filter((name) => accounts.get(key, name) !== undefined))
        for (const name of decide(ns, existing, wanted)) {
          yield* ctx.client.create({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: key } }).pipe(
            // Already there (the cache lagged), or the namespace went or started terminating meanwhile.
            Effect.catchIf((e) => e.status.code === 409 || e.status.code === 404 || e.status.code === 403, () => Effect.void)
          )
        }
      })
  }
}
