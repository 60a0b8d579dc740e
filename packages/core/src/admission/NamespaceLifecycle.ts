/**
 * NamespaceLifecycle admission: nothing is created in a namespace that is missing or being
 * terminated, and the system namespaces (`default`, `kube-system`, `kube-public`) cannot be
 * deleted. Rest's create already checks the namespace before admission (so servers without this
 * plugin keep that rule); this plugin adds the immortal namespaces and makes the check atomic:
 * it contributes a `check` of the namespace's revision to the create's transaction, so a
 * namespace that starts terminating between the check and the commit makes admission run again.
 */
import { Effect, Either } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Status from "../model/Status.js"
import { asObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import type { StoreService } from "../store/Store.js"
import { getObject } from "./internal/json.js"

/** The plugin's name. */
export const name = "NamespaceLifecycle"

/** Namespaces that may never be deleted. */
export const immortal: ReadonlyArray<string> = ["default", "kube-system", "kube-public"]

/** What the plugin knows of the request's namespace: absent, or present (and maybe terminating). */
export type NamespaceState = { readonly _tag: "Missing" } | { readonly _tag: "Present"; readonly terminating: boolean }

/** The admission decision for one request. */
export const decide = (
  request: Pick<Admission.Request, "operation" | "resource" | "namespace" | "name">,
  namespace: NamespaceState | undefined
): Either.Either<void, ApiError.ApiError> => {
  const r = request.resource
  if (request.operation === "DELETE" && r.group === "" && r.plural === "namespaces" && immortal.includes(request.name)) {
    return Either.left(ApiError.of(Status.forbidden("namespaces", request.name, "this namespace may not be deleted")))
  }
  if (request.operation !== "CREATE" || !r.namespaced || namespace === undefined) return Either.void
  if (namespace._tag === "Missing") return Either.left(ApiError.of(Status.notFound("namespaces", request.namespace)))
  if (namespace.terminating) {
    return Either.left(
      ApiError.of(
        Status.forbidden(
          { group: r.group, resource: r.plural },
          request.name,
          `unable to create new content in namespace ${request.namespace} because it is being terminated`
        )
      )
    )
  }
  return Either.void
}

/** Whether a Namespace object is terminating. */
export const terminating = (namespace: unknown): boolean =>
  metadataOf(asObject(namespace))["deletionTimestamp"] !== undefined || asObject(asObject(namespace)["status"])["phase"] === "Terminating"

/** The plugin, reading namespaces from `store`. */
export const make = (options: { readonly store: StoreService; readonly transformer?: Transformer }): Admission.Plugin => ({
  name,
  validate: (request) =>
    Effect.gen(function* () {
      const needsNamespace = request.operation === "CREATE" && request.resource.namespaced && request.namespace !== ""
      const ns = needsNamespace
        ? yield* getObject(options.store, options.transformer ?? identity, { group: "", plural: "namespaces", name: request.namespace })
        : undefined
      const state: NamespaceState | undefined = !needsNamespace
        ? undefined
        : ns === undefined
          ? { _tag: "Missing" }
          : { _tag: "Present", terminating: terminating(ns.object) }
      const decision = decide(request, state)
      if (Either.isLeft(decision)) return yield* Effect.fail(decision.left)
      return ns === undefined ? [] : [{ op: "check" as const, key: ns.key, expectedRevision: ns.revision }]
    })
})
