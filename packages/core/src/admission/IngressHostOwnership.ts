/**
 * IngressHostOwnership admission: an Ingress may not claim a host that an Ingress of another
 * namespace owns, or that the admin's host policy (ConfigMap `kube-system/fleet-ingress-hosts`)
 * reserves for another namespace (issue 29 item 7). The decision is `IngressHosts.decide`, the
 * one the ingress proxy applies, over the stored Ingresses the proxy serves plus the new one: a
 * write is refused exactly when the proxy would not serve one of its hosts. Refusals are 422
 * naming the field (`spec.rules[i].host`, `spec.tls[i].hosts[j]`, `spec.defaultBackend`), the
 * host and the owning namespace. Two creates racing past this check are settled by the proxy,
 * which serves the older one only and reports the other (Warning Event `HostConflict`).
 * Only Ingresses of a class Fleet's proxy serves are checked: another controller's are its own.
 */
import { Effect } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as FieldError from "../model/FieldError.js"
import * as Status from "../model/Status.js"
import * as IngressHosts from "../network/IngressHosts.js"
import * as IngressRoutes from "../network/IngressRoutes.js"
import { asArray, asObject, asString } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import type { StoreService } from "../store/Store.js"
import { getObject, listObjects } from "./internal/json.js"

/** The plugin's name. */
export const name = "IngressHostOwnership"


/** The field errors of a candidate Ingress that loses hosts (pure). */
export const errorsFor = (candidate: Record<string, unknown>, losses: ReadonlyArray<IngressHosts.Loss>): ReadonlyArray<FieldError.FieldError> => {
  const spec = asObject(candidate["spec"])
  const errors: Array<FieldError.FieldError> = []
  for (const loss of losses) {
    const why = IngressHosts.describeLoss(loss)
    let path = ""
    asArray(spec["rules"]).forEach((r, i) => {
      if (path === "" && IngressHosts.normalize(asString(asObject(r)["host"])) === loss.host) path = `spec.rules[${i}].host`
    })
    asArray(spec["tls"]).forEach((t, i) =>
      asArray(asObject(t)["hosts"]).forEach((h, j) => {
        if (path === "" && IngressHosts.normalize(asString(h)) === loss.host) path = `spec.tls[${i}].hosts[${j}]`
      })
    )
    if (path === "" && loss.host === "") path = "spec.defaultBackend"
    errors.push(FieldError.forbidden(path, why))
  }
  return errors
}

/** The plugin, reading Ingresses, IngressClasses and the policy ConfigMap from `store`. */
export const make = (options: { readonly store: StoreService; readonly transformer?: Transformer }): Admission.Plugin => ({
  name,
  validate: (request) =>
    Effect.gen(function* () {
      const r = request.resource
      if (r.group !== "networking.k8s.io" || r.plural !== "ingresses" || request.subresource !== "") return []
      if (request.operation !== "CREATE" && request.operation !== "UPDATE") return []
      const codec = options.transformer ?? identity
      const classes = (yield* listObjects(options.store, codec, "networking.k8s.io", "ingressclasses")).map((s) => s.object)
      const candidate = request.object
      if (!IngressRoutes.isServed(candidate, classes)) return []
      const key = `${request.namespace}/${request.name}`
      const others = (yield* listObjects(options.store, codec, "networking.k8s.io", "ingresses"))
        .map((s) => s.object)
        .filter((o) => `${asString(metadataOf(o)["namespace"])}/${asString(metadataOf(o)["name"])}` !== key && IngressRoutes.isServed(o, classes))
      const { namespace, name: policyName } = IngressHosts.PolicyConfigMap
      const policyMap = yield* getObject(options.store, codec, { group: "", plural: "configmaps", namespace, name: policyName })
      const policy = IngressHosts.parsePolicy(asObject(policyMap?.object["data"])).policy
      // The candidate as the proxy would see it: with its namespace and name (a generateName'd
      // create has its name by now).
      const named = { ...candidate, metadata: { ...metadataOf(candidate), namespace: request.namespace, name: request.name } }
      // A host the write adds is a new claim: it must not take a host from anyone, whatever the
      // Ingress's age (an old Ingress adding another's host, or a create in the owner's second
      // with a lower uid, would win by age). Hosts it already claimed keep their age.
      const before = new Set(request.operation === "UPDATE" && request.oldObject !== undefined ? IngressHosts.claimsOf(request.oldObject) : [])
      const claims = IngressHosts.claimsOf(named)
      const kept = IngressHosts.onlyClaims(named, new Set(claims.filter((h) => before.has(h))))
      const added = IngressHosts.onlyClaims(named, new Set(claims.filter((h) => !before.has(h))))
      const newest = { ...added, metadata: { ...metadataOf(added), creationTimestamp: undefined, uid: undefined } }
      const losses = IngressHosts.decide([...others, kept, newest], policy).losses.filter((l) => l.ingress === key)
      if (losses.length === 0) return []
      return yield* Effect.fail(ApiError.of(Status.invalid({ group: "networking.k8s.io", kind: "Ingress" }, request.name, errorsFor(named, losses))))
    })
})
