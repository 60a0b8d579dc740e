/**
 * HTTP routing kinds (`networking.k8s.io/v1`): `Ingress` (host and path rules sending requests to
 * Services, TLS from Secrets) and `IngressClass` (which controller implements a class; Fleet's is
 * `fleet.koder.dev/ingress`, class name `fleet`).
 *
 * Validation follows kube-apiserver's ValidateIngress where users meet it: every path has a
 * `pathType`; `Exact` and `Prefix` paths are absolute; a backend names a Service or a resource,
 * not both; a Service port is a name or a number, not both; a rule's host is a DNS name (a
 * leading `*.` wildcard allowed) and never an IP.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { ObjectMeta } from "./Meta.js"
import { Int32 } from "./Scalars.js"
import * as Validation from "./Validation.js"

/** How a path matches: exactly, by `/`-separated prefix, or as the controller decides (Prefix for Fleet). */
export const PathType = Schema.Literal("Exact", "Prefix", "ImplementationSpecific")

/** A Service port by name or number. */
export const ServiceBackendPort = Schema.Struct({ name: optional(Schema.String), number: optional(Int32) })

/** Where matching requests go. */
export const IngressBackend = Schema.Struct({
  service: optional(Schema.Struct({ name: Schema.String, port: optional(ServiceBackendPort) })),
  resource: optional(Schema.Struct({ apiGroup: optional(Schema.String), kind: Schema.String, name: Schema.String }))
})

/** One path of a rule. */
export const HTTPIngressPath = Schema.Struct({
  path: optional(Schema.String),
  pathType: optional(PathType),
  backend: IngressBackend
})

/** A host's rules. */
export const IngressRule = Schema.Struct({
  host: optional(Schema.String),
  http: optional(Schema.Struct({ paths: Schema.Array(HTTPIngressPath) }))
})

/** TLS for some hosts, from a Secret of type kubernetes.io/tls in the Ingress's namespace. */
export const IngressTLS = Schema.Struct({ hosts: optional(Schema.Array(Schema.String)), secretName: optional(Schema.String) })

/** What an Ingress asks for. */
export const IngressSpec = Schema.Struct({
  ingressClassName: optional(Schema.String),
  defaultBackend: optional(IngressBackend),
  tls: optional(Schema.Array(IngressTLS)),
  rules: optional(Schema.Array(IngressRule))
})

/** Where the Ingress is reachable. */
export const IngressStatus = Schema.Struct({
  loadBalancer: optional(
    Schema.Struct({
      ingress: optional(
        Schema.Array(
          Schema.Struct({
            ip: optional(Schema.String),
            hostname: optional(Schema.String),
            ports: optional(Schema.Array(Schema.Struct({ port: Int32, protocol: Schema.String, error: optional(Schema.String) })))
          })
        )
      )
    })
  )
})

/** The `Ingress` kind (namespaced, short name `ing`). */
export const Ingress = Schema.Struct({
  apiVersion: Schema.Literal("networking.k8s.io/v1"),
  kind: Schema.Literal("Ingress"),
  metadata: ObjectMeta,
  spec: optional(IngressSpec),
  status: optional(IngressStatus)
})

/** An Ingress object. */
export type Ingress = typeof Ingress.Type

/** The `IngressClass` kind (cluster-scoped). */
export const IngressClass = Schema.Struct({
  apiVersion: Schema.Literal("networking.k8s.io/v1"),
  kind: Schema.Literal("IngressClass"),
  metadata: ObjectMeta,
  spec: optional(
    Schema.Struct({
      controller: optional(Schema.String),
      parameters: optional(Schema.Struct({ apiGroup: optional(Schema.String), kind: Schema.String, name: Schema.String, namespace: optional(Schema.String), scope: optional(Schema.String) }))
    })
  )
})

/** An IngressClass object. */
export type IngressClass = typeof IngressClass.Type

/** The controller name of Fleet's ingress. */
export const FleetController = "fleet.koder.dev/ingress"

/** The class name Fleet's ingress serves (and Ingresses without a class, when it is the default). */
export const FleetClass = "fleet"

/** Annotations kept for compatibility with manifests written for older clusters. */
export const LegacyClassAnnotation = "kubernetes.io/ingress.class"

const validateBackend = (b: typeof IngressBackend.Type, path: string): Array<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (b.service !== undefined && b.resource !== undefined) errors.push(FieldError.invalid(path, "", "cannot set both resource and service backends"))
  if (b.service === undefined && b.resource === undefined) errors.push(FieldError.invalid(path, "", "resource or service backend is required"))
  if (b.service !== undefined) {
    const port = b.service.port
    if (port === undefined || (port.name === undefined && port.number === undefined)) errors.push(FieldError.required(`${path}.service.port`, "port name or number is required"))
    else if (port.name !== undefined && port.number !== undefined) errors.push(FieldError.invalid(`${path}.service.port`, port, "cannot set both port name & port number"))
    else if (port.number !== undefined && (port.number < 1 || port.number > 65535)) errors.push(FieldError.invalid(`${path}.service.port.number`, port.number, "must be between 1 and 65535, inclusive"))
  }
  return errors
}

const ipLike = /^(\d{1,3}\.){3}\d{1,3}$|:/

/** Field errors of an Ingress (pure). */
export const validate = (ing: Ingress): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const spec = ing.spec ?? {}
  if (spec.defaultBackend !== undefined) errors.push(...validateBackend(spec.defaultBackend, "spec.defaultBackend"))
  if ((spec.rules ?? []).length === 0 && spec.defaultBackend === undefined) {
    errors.push(FieldError.invalid("spec.rules", [], "either `defaultBackend` or `rules` must be specified"))
  }
  ;(spec.rules ?? []).forEach((rule, i) => {
    const at = `spec.rules[${i}]`
    if (rule.host !== undefined && rule.host !== "") {
      const bare = rule.host.startsWith("*.") ? rule.host.slice(2) : rule.host
      if (ipLike.test(rule.host)) errors.push(FieldError.invalid(`${at}.host`, rule.host, "must be a DNS name, not an IP address"))
      else if (Validation.isDNS1123Subdomain(bare).length > 0) errors.push(FieldError.invalid(`${at}.host`, rule.host, Validation.isDNS1123Subdomain(bare).join("; ")))
    }
    ;(rule.http?.paths ?? []).forEach((p, j) => {
      const pat = `${at}.http.paths[${j}]`
      if (p.pathType === undefined) errors.push(FieldError.required(`${pat}.pathType`, "pathType must be specified"))
      else if (p.pathType !== "ImplementationSpecific" && !(p.path ?? "").startsWith("/")) errors.push(FieldError.invalid(`${pat}.path`, p.path ?? "", "must be an absolute path"))
      errors.push(...validateBackend(p.backend, `${pat}.backend`))
    })
  })
  return errors
}
