/**
 * Who asked for a certificate, as kube-apiserver records it: a CertificateSigningRequest's
 * `spec.username`, `uid`, `groups` and `extra` are the requester's, whatever the body said on
 * create, and stay so on update (the signer trusts them, so the body may never choose them).
 */
import { Effect } from "effect"
import type * as Admission from "../api/Admission.js"
import { asObject } from "../object/Json.js"

/** The plugin's name. */
export const name = "CertificateRequester"

/** The plugin. */
export const make = (): Admission.Plugin => ({
  name,
  mutate: (request) => {
    const r = request.resource
    if (r.group !== "certificates.k8s.io" || r.plural !== "certificatesigningrequests" || request.subresource !== "") return Effect.succeed(request.object)
    const spec = asObject(request.object["spec"])
    if (request.operation === "CREATE") {
      const u = request.user
      return Effect.succeed({ ...request.object, spec: { ...spec, username: u.name, uid: u.uid, groups: [...u.groups], ...(u.extra === undefined ? {} : { extra: u.extra }) } })
    }
    if (request.operation === "UPDATE" && request.oldObject !== undefined) {
      const old = asObject(request.oldObject["spec"])
      const { username: _u, uid: _i, groups: _g, extra: _e, ...rest } = spec
      return Effect.succeed({ ...request.object, spec: { ...rest, username: old["username"], uid: old["uid"], groups: old["groups"], ...(old["extra"] === undefined ? {} : { extra: old["extra"] }) } })
    }
    return Effect.succeed(request.object)
  }
})
