/**
 * `networking.k8s.io/v1` `IPAddress`: one object per allocated Service IP, named by the IP itself
 * in canonical form, pointing at the object that holds it (`spec.parentRef`, immutable). The
 * ClusterIP allocator creates one per address, so the store's create-if-absent is the lock that
 * keeps two Services from getting the same IP. Also the IP parsing the discovery and networking
 * kinds share (Go's `netip` canonical forms and `ValidateNonSpecialIP`).
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { makeObjectMeta } from "./Meta.js"
import * as Validation from "./Validation.js"

// ---- IP addresses --------------------------------------------------------------------------

/** A parsed IP: four bytes (IPv4) or sixteen (IPv6). */
export interface ParsedIP {
  readonly family: "IPv4" | "IPv6"
  readonly bytes: ReadonlyArray<number>
}

/** Parses dotted-quad IPv4; `sloppy` allows leading zeros (Kubernetes' `ParseIPSloppy`). */
const parseIPv4 = (s: string, sloppy: boolean): ReadonlyArray<number> | undefined => {
  const parts = s.split(".")
  if (parts.length !== 4) return undefined
  const bytes: Array<number> = []
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || (!sloppy && p.length > 1 && p.startsWith("0"))) return undefined
    const n = Number(p)
    if (n > 255) return undefined
    bytes.push(n)
  }
  return bytes
}

const parseIPv6 = (s: string, sloppy: boolean): ReadonlyArray<number> | undefined => {
  if (!/^[0-9A-Fa-f:.]+$/.test(s)) return undefined
  const halves = s.split("::")
  if (halves.length > 2) return undefined
  const groups = (text: string): Array<number> | undefined => {
    if (text === "") return []
    const out: Array<number> = []
    const items = text.split(":")
    for (const [i, item] of items.entries()) {
      if (i === items.length - 1 && item.includes(".")) {
        const v4 = parseIPv4(item, sloppy)
        if (v4 === undefined) return undefined
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!)
      } else if (/^[0-9A-Fa-f]{1,4}$/.test(item)) out.push(parseInt(item, 16))
      else return undefined
    }
    return out
  }
  const head = groups(halves[0]!)
  const tail = halves.length === 2 ? groups(halves[1]!) : []
  if (head === undefined || tail === undefined) return undefined
  const missing = 8 - head.length - tail.length
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined
  const all = [...head, ...new Array<number>(missing).fill(0), ...tail]
  return all.flatMap((g) => [g >> 8, g & 0xff])
}

/** Parses an IPv4 or IPv6 address; `sloppy` accepts IPv4 octets with leading zeros. */
export const parseIP = (s: string, sloppy = false): ParsedIP | undefined => {
  if (s.includes(":")) {
    const bytes = parseIPv6(s, sloppy)
    return bytes && { family: "IPv6", bytes }
  }
  const bytes = parseIPv4(s, sloppy)
  return bytes && { family: "IPv4", bytes }
}

const isV4Mapped = (b: ReadonlyArray<number>) => b.length === 16 && b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff

/** The canonical text of an address, as Go's `netip.Addr.String` prints it (RFC 5952 for IPv6). */
export const formatIP = (ip: ParsedIP): string => {
  const b = ip.bytes
  if (ip.family === "IPv4") return b.join(".")
  if (isV4Mapped(b)) return `::ffff:${b.slice(12).join(".")}`
  const groups = Array.from({ length: 8 }, (_, i) => (b[2 * i]! << 8) | b[2 * i + 1]!)
  // The longest run of two or more zero groups (the first one on a tie) becomes "::".
  let best = -1
  let bestLen = 1
  for (let i = 0; i < 8; ) {
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLen) {
      best = i
      bestLen = j - i
    }
    i = j === i ? i + 1 : j
  }
  const hex = (gs: ReadonlyArray<number>) => gs.map((g) => g.toString(16)).join(":")
  return best < 0 ? hex(groups) : `${hex(groups.slice(0, best))}::${hex(groups.slice(best + bestLen))}`
}

/** Whether `s` is an IPv4 address (leading zeros allowed, as Kubernetes' sloppy parser does). */
export const isIPv4 = (s: string): boolean => parseIP(s, true)?.family === "IPv4"

/** Whether `s` is an IPv6 address. */
export const isIPv6 = (s: string): boolean => parseIP(s, true)?.family === "IPv6"

/**
 * Details of why `ip` may not be an endpoint address (kube-apiserver's `ValidateNonSpecialIP`):
 * unspecified, loopback, link-local and link-local multicast addresses are refused; loopback only
 * unless `allowLoopback`.
 */
export const nonSpecialIPDetails = (ip: string, allowLoopback = false): ReadonlyArray<string> => {
  const parsed = parseIP(ip, true)
  if (parsed === undefined) return ["must be a valid IP address"]
  const b = isV4Mapped(parsed.bytes) ? parsed.bytes.slice(12) : parsed.bytes
  const v4 = b.length === 4
  const out: Array<string> = []
  if (b.every((x) => x === 0)) out.push(`may not be unspecified (${ip})`)
  if (!allowLoopback && (v4 ? b[0] === 127 : b.slice(0, 15).every((x) => x === 0) && b[15] === 1)) out.push("may not be in the loopback range (127.0.0.0/8, ::1/128)")
  if (v4 ? b[0] === 169 && b[1] === 254 : b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) {
    out.push("may not be in the link-local range (169.254.0.0/16, fe80::/10)")
  }
  if (v4 ? b[0] === 224 && b[1] === 0 && b[2] === 0 : b[0] === 0xff && (b[1]! & 0x0f) === 0x02) {
    out.push("may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")
  }
  return out
}

/**
 * Details of why `name` is not an IPAddress name (kube-apiserver's `ValidateIPAddressName`): it
 * must parse, and be written the one way Go prints it, so each IP has exactly one object.
 */
export const ipAddressNameDetails = (name: string): ReadonlyArray<string> => {
  const parsed = parseIP(name)
  if (parsed === undefined) {
    // netip names the one mistake Kubernetes' sloppy parser forgives; anything else is unparsable.
    const detail = parseIP(name, true) === undefined ? "unable to parse IP" : "IPv4 field has octet with leading zero"
    return [`ParseAddr(${JSON.stringify(name)}): ${detail}`]
  }
  return formatIP(parsed) === name ? [] : ["must be a canonical format IP address"]
}

// ---- IPAddress -----------------------------------------------------------------------------

// Path segment names (resource, namespace, name in a URL), as apimachinery checks them.
const pathSegmentDetails = (name: string): ReadonlyArray<string> => {
  if (name === "." || name === "..") return [`may not be '${name}'`]
  return ["/", "%"].filter((c) => name.includes(c)).map((c) => `may not contain '${c}'`)
}

/** The object an IPAddress is allocated to (a Service, for ClusterIPs). */
export const ParentReference = Schema.Struct({
  group: optional(Schema.String),
  resource: Schema.String,
  namespace: optional(Schema.String),
  name: Schema.String
})

/** A parent reference. */
export type ParentReference = typeof ParentReference.Type

/** The desired state of an IPAddress: who holds it. */
export const IPAddressSpec = Schema.Struct({ parentRef: ParentReference })

/** IPAddress metadata: the name is the address in canonical form. */
export const IPAddressMeta = makeObjectMeta(ipAddressNameDetails)

/** The `IPAddress` kind (networking.k8s.io/v1, cluster-scoped). */
export const IPAddress = Schema.Struct({
  apiVersion: Schema.Literal("networking.k8s.io/v1"),
  kind: Schema.Literal("IPAddress"),
  metadata: IPAddressMeta,
  spec: IPAddressSpec
})

/** An IPAddress object. */
export type IPAddress = typeof IPAddress.Type

/** Errors of an IPAddress's parent reference, worded like kube-apiserver. */
export const validateIPAddress = (ip: IPAddress): ReadonlyArray<FieldError.FieldError> => {
  const ref = ip.spec.parentRef
  const at = "spec.parentRef"
  const errors: Array<FieldError.FieldError> = []
  if (ref.group !== undefined && ref.group !== "") {
    for (const d of Validation.isDNS1123Subdomain(ref.group)) errors.push(FieldError.invalid(`${at}.group`, ref.group, d))
  }
  const segment = (field: string, value: string | undefined, required: boolean) => {
    if (value === undefined || value === "") {
      if (required) errors.push(FieldError.required(`${at}.${field}`))
      return
    }
    for (const d of pathSegmentDetails(value)) errors.push(FieldError.invalid(`${at}.${field}`, value, d))
  }
  segment("resource", ref.resource, true)
  segment("name", ref.name, true)
  segment("namespace", ref.namespace, false)
  return errors
}

/** The IP an IPAddress object stands for, parsed from its name. */
export const addressOf = (ip: Pick<IPAddress, "metadata">): ParsedIP | undefined =>
  ip.metadata.name === undefined ? undefined : parseIP(ip.metadata.name)

/** The name of the IPAddress object for an address (its canonical text), or undefined if invalid. */
export const nameFor = (address: string): string | undefined => {
  const parsed = parseIP(address, true)
  return parsed && formatIP(parsed)
}

/** Field-level wrapper of `nonSpecialIPDetails`, for endpoint addresses. */
export const validateNonSpecialIP = (ip: string, path: string, allowLoopback = false): ReadonlyArray<FieldError.FieldError> =>
  nonSpecialIPDetails(ip, allowLoopback).map((d) => FieldError.invalid(path, ip, d))
