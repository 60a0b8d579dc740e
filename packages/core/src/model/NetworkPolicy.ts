/**
 * The `networking.k8s.io/v1` `NetworkPolicy` kind: which pods it applies to (`podSelector` in
 * its namespace), and for each direction (`policyTypes`) the peers and ports they may talk to.
 * The evaluation lives in `policy/NetworkPolicy.ts`; this module is the shape, v1 defaulting and
 * kube-apiserver's `ValidateNetworkPolicy` with its messages (ports, peers, ipBlock CIDRs and
 * `except` strictly inside `cidr`, policyTypes).
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { IntOrString } from "./IntOrString.js"
import * as LabelSelector from "./LabelSelector.js"
import { ObjectMeta } from "./Meta.js"
import * as Networking from "./Networking.js"
import { Int32 } from "./Scalars.js"

/** A direction a policy governs. */
export const PolicyType = Schema.Literal("Ingress", "Egress")

/** A direction a policy governs. */
export type PolicyType = typeof PolicyType.Type

/** A port (number or a container port's name) or port range (`port`..`endPort`) for one protocol. */
export const NetworkPolicyPort = Schema.Struct({
  // Validation answers NotSupported for other protocols, so any string decodes.
  protocol: optional(Schema.String),
  port: optional(IntOrString),
  endPort: optional(Int32)
})

/** A port of a rule. */
export type NetworkPolicyPort = typeof NetworkPolicyPort.Type

/** A CIDR with holes (`except`), for peers outside the cluster. */
export const IPBlock = Schema.Struct({
  cidr: Schema.String,
  except: optional(Schema.Array(Schema.String))
})

/** A CIDR with holes. */
export type IPBlock = typeof IPBlock.Type

/**
 * Who is on the other end: pods (in the policy's namespace, or in the namespaces
 * `namespaceSelector` picks; both together mean "these pods in those namespaces"), or an ipBlock.
 */
export const NetworkPolicyPeer = Schema.Struct({
  podSelector: optional(LabelSelector.LabelSelector),
  namespaceSelector: optional(LabelSelector.LabelSelector),
  ipBlock: optional(IPBlock)
})

/** A peer of a rule. */
export type NetworkPolicyPeer = typeof NetworkPolicyPeer.Type

/** Traffic allowed into the selected pods: from any of `from` (absent/empty: anyone) to any of `ports` (absent/empty: all). */
export const NetworkPolicyIngressRule = Schema.Struct({
  ports: optional(Schema.Array(NetworkPolicyPort)),
  from: optional(Schema.Array(NetworkPolicyPeer))
})

/** An ingress rule. */
export type NetworkPolicyIngressRule = typeof NetworkPolicyIngressRule.Type

/** Traffic allowed out of the selected pods: to any of `to` on any of `ports`. */
export const NetworkPolicyEgressRule = Schema.Struct({
  ports: optional(Schema.Array(NetworkPolicyPort)),
  to: optional(Schema.Array(NetworkPolicyPeer))
})

/** An egress rule. */
export type NetworkPolicyEgressRule = typeof NetworkPolicyEgressRule.Type

/** What a policy asks for. */
export const NetworkPolicySpec = Schema.Struct({
  podSelector: optional(LabelSelector.LabelSelector),
  ingress: optional(Schema.Array(NetworkPolicyIngressRule)),
  egress: optional(Schema.Array(NetworkPolicyEgressRule)),
  // NotSupported is reported by validation, with kube-apiserver's message.
  policyTypes: optional(Schema.Array(Schema.String))
})

/** What a policy asks for. */
export type NetworkPolicySpec = typeof NetworkPolicySpec.Type

/** The `NetworkPolicy` kind (namespaced, short name `netpol`). */
export const NetworkPolicy = Schema.Struct({
  apiVersion: Schema.Literal("networking.k8s.io/v1"),
  kind: Schema.Literal("NetworkPolicy"),
  metadata: ObjectMeta,
  spec: optional(NetworkPolicySpec)
})

/** A NetworkPolicy object. */
export type NetworkPolicy = typeof NetworkPolicy.Type

/** A NetworkPolicy as stored (the wire form: a port may be a number or a name). */
export type StoredNetworkPolicy = typeof NetworkPolicy.Encoded

type StoredRule = { readonly ports?: ReadonlyArray<typeof NetworkPolicyPort.Encoded> | null }

const defaultPorts = <R extends StoredRule>(rules: ReadonlyArray<R>): ReadonlyArray<R> =>
  rules.map((rule) => (rule.ports == null ? rule : { ...rule, ports: rule.ports.map((p) => (p.protocol === undefined ? { ...p, protocol: "TCP" } : p)) }))

/**
 * v1 defaulting (SetDefaults_NetworkPolicy, SetDefaults_NetworkPolicyPort): ports are TCP unless
 * said otherwise; a policy without `policyTypes` governs Ingress, and Egress too when it has
 * egress rules.
 */
export const defaults = (o: StoredNetworkPolicy): StoredNetworkPolicy => {
  const spec = o.spec
  // The wire form allows null for an absent part; it stays as written.
  if (spec == null) return o
  const ingress = spec.ingress == null ? undefined : defaultPorts(spec.ingress)
  const egress = spec.egress == null ? undefined : defaultPorts(spec.egress)
  const given = spec.policyTypes ?? []
  const policyTypes = given.length > 0 ? given : (egress ?? []).length > 0 ? ["Ingress", "Egress"] : ["Ingress"]
  return {
    ...o,
    spec: { ...spec, ...(ingress === undefined ? {} : { ingress }), ...(egress === undefined ? {} : { egress }), policyTypes }
  }
}

/** The directions a policy governs, defaulted as Kubernetes does when `policyTypes` is absent. */
export const policyTypesOf = (spec: NetworkPolicySpec | undefined): ReadonlyArray<PolicyType> => {
  const given = (spec?.policyTypes ?? []).filter((t): t is PolicyType => t === "Ingress" || t === "Egress")
  if ((spec?.policyTypes ?? []).length > 0) return given
  return (spec?.egress ?? []).length > 0 ? ["Ingress", "Egress"] : ["Ingress"]
}

/** Why `name` is not a port name (Kubernetes' `IsValidPortName`, an IANA service name). */
export const portNameDetails = (name: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  if (name.length > 15) out.push("must be no more than 15 characters")
  if (!/^[-a-z0-9]+$/.test(name)) out.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
  if (!/[a-z]/.test(name)) out.push("must contain at least one letter (a-z)")
  if (name.includes("--")) out.push("must not contain consecutive hyphens")
  if (name.length > 0 && (name.startsWith("-") || name.endsWith("-"))) out.push("must not begin or end with a hyphen")
  return out
}

const portNumberDetail = "must be between 1 and 65535, inclusive"
const validPortNumber = (n: number) => Number.isInteger(n) && n >= 1 && n <= 65535
const protocols = ["TCP", "UDP", "SCTP"]

const validatePort = (port: NetworkPolicyPort, at: string): Array<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (port.protocol !== undefined && !protocols.includes(port.protocol)) errors.push(FieldError.notSupported(`${at}.protocol`, port.protocol, protocols))
  if (port.port === undefined) {
    if (port.endPort !== undefined) errors.push(FieldError.invalid(`${at}.endPort`, port.endPort, "may not be specified when `port` is not specified"))
  } else if (typeof port.port === "number") {
    if (!validPortNumber(port.port)) errors.push(FieldError.invalid(`${at}.port`, port.port, portNumberDetail))
    if (port.endPort !== undefined) {
      if (port.endPort < port.port) errors.push(FieldError.invalid(`${at}.endPort`, port.port, "must be greater than or equal to `port`"))
      if (!validPortNumber(port.endPort)) errors.push(FieldError.invalid(`${at}.endPort`, port.endPort, portNumberDetail))
    }
  } else {
    if (port.endPort !== undefined) errors.push(FieldError.invalid(`${at}.endPort`, port.endPort, "may not be specified when `port` is non-numeric"))
    for (const d of portNameDetails(port.port)) errors.push(FieldError.invalid(`${at}.port`, port.port, d))
  }
  return errors
}

const cidrDetail = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"

/** A CIDR as kube-apiserver parses it: address, prefix length, and the family's width. */
const parseCidr = (cidr: string): { readonly bytes: ReadonlyArray<number>; readonly prefix: number } | undefined => {
  const slash = cidr.indexOf("/")
  if (slash < 0) return undefined
  const ip = Networking.parseIP(cidr.slice(0, slash), true)
  const bits = cidr.slice(slash + 1)
  if (ip === undefined || !/^\d{1,3}$/.test(bits)) return undefined
  const prefix = Number(bits)
  if (prefix > ip.bytes.length * 8) return undefined
  return { bytes: ip.bytes, prefix }
}

// Whether the first `prefix` bits of `a` and `b` are equal (same family assumed).
const samePrefix = (a: ReadonlyArray<number>, b: ReadonlyArray<number>, prefix: number): boolean => {
  for (let bit = 0; bit < prefix; bit++) {
    const i = bit >> 3
    const mask = 0x80 >> (bit & 7)
    if ((a[i]! & mask) !== (b[i]! & mask)) return false
  }
  return true
}

const validateIPBlock = (block: IPBlock, at: string): Array<FieldError.FieldError> => {
  if (block.cidr === "") return [FieldError.required(`${at}.cidr`, "")]
  const errors: Array<FieldError.FieldError> = []
  const cidr = parseCidr(block.cidr)
  if (cidr === undefined) return [FieldError.invalid(`${at}.cidr`, block.cidr, cidrDetail)]
  ;(block.except ?? []).forEach((text, i) => {
    const path = `${at}.except[${i}]`
    const except = parseCidr(text)
    if (except === undefined) return errors.push(FieldError.invalid(path, text, cidrDetail))
    const inside = except.bytes.length === cidr.bytes.length && samePrefix(except.bytes, cidr.bytes, cidr.prefix)
    if (!inside || cidr.prefix >= except.prefix) errors.push(FieldError.invalid(path, text, "must be a strict subset of `cidr`"))
  })
  return errors
}

const validatePeer = (peer: NetworkPolicyPeer, at: string): Array<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  let count = 0
  if (peer.podSelector !== undefined) {
    count++
    errors.push(...LabelSelector.validate(peer.podSelector, `${at}.podSelector`))
  }
  if (peer.namespaceSelector !== undefined) {
    count++
    errors.push(...LabelSelector.validate(peer.namespaceSelector, `${at}.namespaceSelector`))
  }
  if (peer.ipBlock !== undefined) {
    count++
    errors.push(...validateIPBlock(peer.ipBlock, `${at}.ipBlock`))
  }
  if (count === 0) errors.push(FieldError.required(at, "must specify a peer"))
  else if (count > 1 && peer.ipBlock !== undefined) errors.push(FieldError.forbidden(at, "may not specify both ipBlock and another peer"))
  return errors
}

/** Field errors of a NetworkPolicy (kube-apiserver's ValidateNetworkPolicySpec), create and update alike. */
export const validate = (np: NetworkPolicy): ReadonlyArray<FieldError.FieldError> => {
  const spec = np.spec ?? {}
  const errors: Array<FieldError.FieldError> = []
  if (spec.podSelector !== undefined) errors.push(...LabelSelector.validate(spec.podSelector, "spec.podSelector"))
  ;(spec.ingress ?? []).forEach((rule, i) => {
    const at = `spec.ingress[${i}]`
    ;(rule.ports ?? []).forEach((p, j) => errors.push(...validatePort(p, `${at}.ports[${j}]`)))
    ;(rule.from ?? []).forEach((p, j) => errors.push(...validatePeer(p, `${at}.from[${j}]`)))
  })
  ;(spec.egress ?? []).forEach((rule, i) => {
    const at = `spec.egress[${i}]`
    ;(rule.to ?? []).forEach((p, j) => errors.push(...validatePeer(p, `${at}.to[${j}]`)))
    ;(rule.ports ?? []).forEach((p, j) => errors.push(...validatePort(p, `${at}.ports[${j}]`)))
  })
  const types = spec.policyTypes ?? []
  if (types.length > 2) {
    errors.push(FieldError.invalid("spec.policyTypes", types, "may not specify more than two policyTypes"))
    return errors
  }
  types.forEach((t, i) => {
    if (t !== "Ingress" && t !== "Egress") errors.push(FieldError.notSupported(`spec.policyTypes[${i}]`, t, ["Ingress", "Egress"]))
  })
  return errors
}
