/**
 * `discovery.k8s.io/v1` `EndpointSlice`: a bounded piece (at most 1000 endpoints) of the backends
 * of a Service, with per-endpoint readiness. The EndpointSlice controller keeps several slices per
 * Service so that a change rewrites one small object, not one huge `Endpoints`; kube-proxy and DNS
 * read them. All addresses of a slice have its `addressType` (IPv4, IPv6 or FQDN), which is fixed.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional, StringMap } from "./internal/fields.js"
import { ObjectMeta, ObjectReference } from "./Meta.js"
import * as Networking from "./Networking.js"
import { Int32 } from "./Scalars.js"
import * as Validation from "./Validation.js"

/** The most endpoints one slice may hold. */
export const maxEndpoints = 1000

/** The most addresses one endpoint may have. */
export const maxAddresses = 100

const maxPorts = 20000
const maxZoneHints = 8

/** The kind of address every endpoint of a slice has (in kube-apiserver's "supported values" order). */
export const AddressType = Schema.Literal("FQDN", "IPv4", "IPv6")

/** An address type. */
export type AddressType = typeof AddressType.Type

/** Whether an endpoint takes traffic: `ready` (serving and not terminating), `serving`, `terminating`. */
export const EndpointConditions = Schema.Struct({
  ready: optional(Schema.Boolean),
  serving: optional(Schema.Boolean),
  terminating: optional(Schema.Boolean)
})

/** Endpoint conditions. */
export type EndpointConditions = typeof EndpointConditions.Type

/** Topology-aware routing hints: the zones (and nodes) that should use this endpoint. */
export const EndpointHints = Schema.Struct({
  forZones: optional(Schema.Array(Schema.Struct({ name: Schema.String }))),
  forNodes: optional(Schema.Array(Schema.Struct({ name: Schema.String })))
})

/** One backend: its addresses (usually one pod IP), conditions and where it runs. */
export const Endpoint = Schema.Struct({
  addresses: Schema.Array(Schema.String),
  conditions: optional(EndpointConditions),
  hostname: optional(Schema.String),
  targetRef: optional(ObjectReference),
  deprecatedTopology: optional(StringMap),
  nodeName: optional(Schema.String),
  zone: optional(Schema.String),
  hints: optional(EndpointHints)
})

/** An endpoint. */
export type Endpoint = typeof Endpoint.Type

/** The protocols of a slice's ports (in kube-apiserver's "supported values" order). */
export const PortProtocol = Schema.Literal("SCTP", "TCP", "UDP")

/** A port every endpoint of the slice serves; `port` unset means all ports. */
export const EndpointPort = Schema.Struct({
  name: optional(Schema.String),
  protocol: optional(PortProtocol),
  port: optional(Int32),
  appProtocol: optional(Schema.String)
})

/** An endpoint port. */
export type EndpointPort = typeof EndpointPort.Type

/** The `EndpointSlice` kind (discovery.k8s.io/v1, namespaced). */
export const EndpointSlice = Schema.Struct({
  apiVersion: Schema.Literal("discovery.k8s.io/v1"),
  kind: Schema.Literal("EndpointSlice"),
  metadata: ObjectMeta,
  addressType: AddressType,
  endpoints: optional(Schema.Array(Endpoint)),
  ports: optional(Schema.Array(EndpointPort))
})

/** An EndpointSlice object. */
export type EndpointSlice = typeof EndpointSlice.Type

/** The label naming the Service a slice belongs to. */
export const ServiceNameLabel = "kubernetes.io/service-name"

/** The label naming the controller that manages a slice. */
export const ManagedByLabel = "endpointslice.kubernetes.io/managed-by"

const tooMany = (path: string, actual: number, max: number): FieldError.FieldError => ({
  path,
  message: `Too many: ${actual}: must have at most ${max} items`
})

// Loopback addresses are endpoints here, unlike in Kubernetes: a host-mode pod's address is its
// node's, and on a host with only a loopback interface (a sandbox, an offline laptop, a CI
// container) that is 127.0.0.1. Proxies, DNS and the ingress dial it as any other address.
const validateAddress = (address: string, type: AddressType, path: string): ReadonlyArray<FieldError.FieldError> => {
  switch (type) {
    case "IPv4":
      return Networking.isIPv4(address)
        ? Networking.validateNonSpecialIP(address, path, true)
        : [FieldError.invalid(path, address, "must be a valid IPv4 address")]
    case "IPv6":
      return Networking.isIPv6(address)
        ? Networking.validateNonSpecialIP(address, path, true)
        : [FieldError.invalid(path, address, "must be a valid IPv6 address")]
    case "FQDN": {
      if (address === "") return [FieldError.required(path)]
      const name = address.endsWith(".") ? address.slice(0, -1) : address
      const subdomain = Validation.isDNS1123Subdomain(name)
      if (subdomain.length > 0) return [FieldError.invalid(path, name, subdomain.join(","))]
      const labels = name.split(".")
      if (labels.length < 2) return [FieldError.invalid(path, name, "should be a domain with at least two segments separated by dots")]
      for (const label of labels) {
        const errs = Validation.isDNS1123Label(label)
        if (errs.length > 0) return [FieldError.invalid(path, label, errs.join(","))]
      }
      return []
    }
  }
}

const validateHints = (hints: typeof EndpointHints.Type, path: string): ReadonlyArray<FieldError.FieldError> => {
  const zones = hints.forZones ?? []
  if (zones.length > maxZoneHints) return [tooMany(`${path}.forZones`, zones.length, maxZoneHints)]
  const errors: Array<FieldError.FieldError> = []
  const seen = new Set<string>()
  zones.forEach((z, i) => {
    const at = `${path}.forZones[${i}].name`
    if (seen.has(z.name)) errors.push(FieldError.duplicate(at, z.name))
    seen.add(z.name)
    for (const d of Validation.isValidLabelValue(z.name)) errors.push(FieldError.invalid(at, z.name, d))
  })
  return errors
}

/** Errors of a slice beyond its schema (kube-apiserver's `ValidateEndpointSlice`). */
export const validate = (slice: EndpointSlice): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const endpoints = slice.endpoints ?? []
  if (endpoints.length > maxEndpoints) errors.push(tooMany("endpoints", endpoints.length, maxEndpoints))
  else {
    endpoints.forEach((e, i) => {
      const at = `endpoints[${i}]`
      if (e.addresses.length === 0) errors.push(FieldError.required(`${at}.addresses`, "must contain at least 1 address"))
      else if (e.addresses.length > maxAddresses) errors.push(tooMany(`${at}.addresses`, e.addresses.length, maxAddresses))
      e.addresses.forEach((a, j) => errors.push(...validateAddress(a, slice.addressType, `${at}.addresses[${j}]`)))
      if (e.nodeName !== undefined) {
        for (const d of Validation.isDNS1123Subdomain(e.nodeName)) errors.push(FieldError.invalid(`${at}.nodeName`, e.nodeName, d))
      }
      if (e.hostname !== undefined) {
        for (const d of Validation.isDNS1123Label(e.hostname)) errors.push(FieldError.invalid(`${at}.hostname`, e.hostname, d))
      }
      if (e.hints !== undefined) errors.push(...validateHints(e.hints, `${at}.hints`))
    })
  }
  const ports = slice.ports ?? []
  if (ports.length > maxPorts) return [...errors, tooMany("ports", ports.length, maxPorts)]
  const names = new Set<string>()
  ports.forEach((p, i) => {
    const at = `ports[${i}]`
    const name = p.name ?? ""
    if (name !== "") for (const d of Validation.isDNS1123Label(name)) errors.push(FieldError.invalid(`${at}.name`, name, d))
    if (names.has(name)) errors.push(FieldError.duplicate(`${at}.name`, name))
    names.add(name)
    if (p.protocol === undefined) errors.push(FieldError.required(`${at}.protocol`))
    if (p.appProtocol !== undefined) {
      for (const d of Validation.isQualifiedName(p.appProtocol)) errors.push(FieldError.invalid(`${at}.appProtocol`, p.appProtocol, d))
    }
  })
  return errors
}

/** Errors of a slice update: `addressType` is immutable. */
export const validateUpdate = (slice: EndpointSlice, old: EndpointSlice): ReadonlyArray<FieldError.FieldError> =>
  slice.addressType === old.addressType ? [] : [FieldError.invalid("addressType", slice.addressType, "field is immutable")]
