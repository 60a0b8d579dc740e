/**
 * IP ranges (CIDRs) as numbers: parse `10.96.0.0/12` or `fd00:10:96::/112`, test membership, and
 * move between an address and its offset from the network address, for IPv4 and IPv6 alike (a
 * bigint holds all 128 bits). Pure; the Service ClusterIP allocator and its repair controller are
 * built on it. Address text is parsed and printed by `model/Networking.ts`, so every address
 * this module prints is in the one canonical form IPAddress object names must use.
 *
 *   parse("10.96.0.0/12") ─▶ { base: 10.96.0.0, size: 2^20 } ─▶ addressAt(r, 10n) = "10.96.0.10"
 */
import { Either } from "effect"
import * as Networking from "../model/Networking.js"

/** An IP family, with the Kubernetes spelling. */
export type Family = "IPv4" | "IPv6"

/** A parsed CIDR: the network address, the prefix length, and how many addresses it spans. */
export interface IpRange {
  /** The canonical text, host bits cleared (`10.96.0.0/12`). */
  readonly cidr: string
  readonly family: Family
  /** The network address as a number. */
  readonly base: bigint
  /** The prefix length. */
  readonly prefix: number
  /** Address width: 32 or 128. */
  readonly width: 32 | 128
  /** Number of addresses in the range, network and broadcast included (2^(width − prefix)). */
  readonly size: bigint
}

/** An address as a number, with its family. */
export interface Address {
  readonly family: Family
  readonly value: bigint
}

const widthOf = (family: Family): 32 | 128 => (family === "IPv4" ? 32 : 128)

/** Parses an address (IPv4 octets with leading zeros accepted, as Kubernetes' sloppy parser does). */
export const parseAddress = (text: string): Address | undefined => {
  const parsed = Networking.parseIP(text, true)
  if (parsed === undefined) return undefined
  let value = 0n
  for (const b of parsed.bytes) value = (value << 8n) | BigInt(b)
  return { family: parsed.family, value }
}

/** The canonical text of an address (RFC 5952 for IPv6). */
export const formatAddress = (address: Address): string => {
  const n = widthOf(address.family) / 8
  const bytes: Array<number> = []
  let v = address.value
  for (let i = 0; i < n; i++) {
    bytes.unshift(Number(v & 0xffn))
    v >>= 8n
  }
  return Networking.formatIP({ family: address.family, bytes })
}

/** The canonical form of an address, or undefined when it is not one. */
export const canonical = (text: string): string | undefined => {
  const a = parseAddress(text)
  return a === undefined ? undefined : formatAddress(a)
}

/** The family of an address, or undefined when it is not one. */
export const familyOf = (text: string): Family | undefined => parseAddress(text)?.family

/** Parses a CIDR; host bits are cleared, as Go's `net.ParseCIDR` answers the network. */
export const parse = (cidr: string): Either.Either<IpRange, string> => {
  const slash = cidr.indexOf("/")
  const invalid = Either.left(`invalid CIDR address: ${cidr}`)
  if (slash < 0) return invalid
  const address = parseAddress(cidr.slice(0, slash))
  const bits = cidr.slice(slash + 1)
  if (address === undefined || !/^\d{1,3}$/.test(bits)) return invalid
  const width = widthOf(address.family)
  const prefix = Number(bits)
  if (prefix > width) return invalid
  const hostBits = BigInt(width - prefix)
  const size = 1n << hostBits
  const base = (address.value >> hostBits) << hostBits
  return Either.right({
    cidr: `${formatAddress({ family: address.family, value: base })}/${prefix}`,
    family: address.family,
    base,
    prefix,
    width,
    size
  })
}

/** The offset of `address` from the range's network address, or undefined when outside the range. */
export const offsetOf = (range: IpRange, address: string): bigint | undefined => {
  const a = parseAddress(address)
  if (a === undefined || a.family !== range.family) return undefined
  const offset = a.value - range.base
  return offset >= 0n && offset < range.size ? offset : undefined
}

/** Whether the range holds `address`. */
export const contains = (range: IpRange, address: string): boolean => offsetOf(range, address) !== undefined

/** The address `offset` places after the network address (undefined outside `[0, size)`). */
export const addressAt = (range: IpRange, offset: bigint): string | undefined =>
  offset < 0n || offset >= range.size ? undefined : formatAddress({ family: range.family, value: range.base + offset })

/** The addresses from offset `from` to `to` inclusive, in order (clamped to the range). */
export function* addresses(range: IpRange, from = 0n, to = range.size - 1n): Generator<string> {
  const last = to < range.size ? to : range.size - 1n
  for (let o = from < 0n ? 0n : from; o <= last; o++) yield formatAddress({ family: range.family, value: range.base + o })
}

/**
 * The offsets a Service range may hand out, as kube-apiserver counts them: never the network
 * address, and for IPv4 never the broadcast address either (IPv6 has none). A /32, a /31 and an
 * IPv6 /128 have no usable address; `count` is then 0 and `first > last`.
 */
export const usable = (range: IpRange): { readonly first: bigint; readonly last: bigint; readonly count: bigint } => {
  const last = range.family === "IPv4" ? range.size - 2n : range.size - 1n
  const count = last >= 1n ? last : 0n
  return { first: 1n, last, count }
}
