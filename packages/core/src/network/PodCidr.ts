/**
 * Pod CIDRs: the cluster CIDR (`--cluster-cidr`, default `10.42.0.0/16` as in k3s) cut into one
 * block per node (`/24` by default: 254 pods), and the few addresses every node's block reserves
 * (the network address, the bridge's gateway, the broadcast address). Pure arithmetic over
 * `IpRange`; the NodeIpam controller hands blocks to Nodes, the box's IPAM hands addresses of a
 * block to pods, and the agent routes other nodes' blocks.
 *
 *   cluster 10.42.0.0/16 ─▶ nodeBlock(i) = 10.42.i.0/24 ─▶ gateway 10.42.i.1, pods .2 … .254
 */
import { Either } from "effect"
import * as IpRange from "./IpRange.js"

/** The default cluster CIDR (k3s' default). */
export const defaultClusterCidr = "10.42.0.0/16"

/** The default prefix length of a node's block. */
export const defaultNodeMaskSize = 24

/** A cluster CIDR and the size of each node's block, checked. */
export interface Plan {
  readonly cluster: IpRange.IpRange
  readonly nodeMaskSize: number
  /** How many node blocks the cluster CIDR holds. */
  readonly blocks: bigint
}

/** Check a cluster CIDR against the node block size: IPv4, and at least one block of 4 addresses. */
export const plan = (clusterCidr: string, nodeMaskSize = defaultNodeMaskSize): Either.Either<Plan, string> =>
  Either.flatMap(IpRange.parse(clusterCidr), (cluster): Either.Either<Plan, string> => {
    if (cluster.family !== "IPv4") return Either.left(`${clusterCidr}: only IPv4 pod networks are supported`)
    if (!Number.isInteger(nodeMaskSize) || nodeMaskSize < cluster.prefix || nodeMaskSize > 30)
      return Either.left(`node mask size /${nodeMaskSize} must be between the cluster's /${cluster.prefix} and /30`)
    return Either.right({ cluster, nodeMaskSize, blocks: 1n << BigInt(nodeMaskSize - cluster.prefix) })
  })

/** The `index`th node block of the cluster (undefined past the last). */
export const nodeBlock = (p: Plan, index: bigint): string | undefined => {
  if (index < 0n || index >= p.blocks) return undefined
  const size = 1n << BigInt(32 - p.nodeMaskSize)
  return `${IpRange.addressAt(p.cluster, index * size)}/${p.nodeMaskSize}`
}

/**
 * The lowest node block not in `taken` (blocks of other nodes, in any form that parses; blocks
 * outside the cluster CIDR are ignored). Lowest-first keeps assignments dense and predictable.
 */
export const firstFree = (p: Plan, taken: Iterable<string>): string | undefined => {
  const used = new Set<string>()
  for (const t of taken) {
    const r = IpRange.parse(t)
    if (Either.isRight(r)) used.add(r.right.cidr)
  }
  for (let i = 0n; i < p.blocks; i++) {
    const block = nodeBlock(p, i)!
    if (!used.has(block)) return block
  }
  return undefined
}

/** A node's block parsed, with its reserved addresses. */
export interface Block {
  readonly range: IpRange.IpRange
  /** The bridge's address, the first usable one (pods' default route and DNS). */
  readonly gateway: string
  /** The offsets pods may take: from after the gateway to before the broadcast address. */
  readonly first: bigint
  readonly last: bigint
}

/** Parse a node's pod CIDR (IPv4, /30 or larger). */
export const block = (cidr: string): Either.Either<Block, string> =>
  Either.flatMap(IpRange.parse(cidr), (range): Either.Either<Block, string> => {
    if (range.family !== "IPv4") return Either.left(`${cidr}: only IPv4 pod networks are supported`)
    if (range.prefix > 30) return Either.left(`${cidr}: a node's pod CIDR needs at least 4 addresses`)
    return Either.right({ range, gateway: IpRange.addressAt(range, 1n)!, first: 2n, last: range.size - 2n })
  })

/** Whether `ip` is in `cidr` (false when either does not parse). */
export const contains = (cidr: string, ip: string): boolean => {
  const r = IpRange.parse(cidr)
  return Either.isRight(r) && IpRange.contains(r.right, ip)
}

/** Whether two CIDRs share an address. */
export const overlaps = (a: string, b: string): boolean => {
  const x = IpRange.parse(a)
  const y = IpRange.parse(b)
  if (Either.isLeft(x) || Either.isLeft(y) || x.right.family !== y.right.family) return false
  return x.right.base < y.right.base + y.right.size && y.right.base < x.right.base + x.right.size
}
