/**
 * Pod IP allocation within a node's block, as a pure state machine the box persists (one JSON
 * file) after every change. Like CNI's host-local plugin it hands addresses out round-robin from
 * the last one given, not lowest-first: a pod's address is not reused by the very next pod, so a
 * peer still holding a connection or a cached DNS answer for a deleted pod does not reach a new
 * one by mistake.
 *
 *   State { cidr, last, allocations ip → owner } ─▶ allocate(owner) ─▶ next free after `last`
 *                                                ─▶ release(owner)
 */
import { Either } from "effect"
import * as IpRange from "./IpRange.js"
import * as PodCidr from "./PodCidr.js"

/** What is persisted: the block, the last offset handed out, and who holds which address. */
export interface State {
  readonly cidr: string
  /** Offset (from the network address) of the last address handed out; 0 before the first. */
  readonly last: number
  /** Address → owner (the sandbox id). */
  readonly allocations: Readonly<Record<string, string>>
}

/** An empty state for a block. */
export const empty = (cidr: string): State => ({ cidr, last: 0, allocations: {} })

/** The address `owner` holds, if any. */
export const addressOf = (state: State, owner: string): string | undefined =>
  Object.entries(state.allocations).find(([, o]) => o === owner)?.[0]

/**
 * Give `owner` an address: the one it already holds (a retried create), else the next free one
 * after `last`, wrapping around. Left when the block is full or does not parse.
 */
export const allocate = (state: State, owner: string): Either.Either<{ readonly state: State; readonly ip: string }, string> => {
  const held = addressOf(state, owner)
  if (held !== undefined) return Either.right({ state, ip: held })
  return Either.flatMap(PodCidr.block(state.cidr), (b) => {
    const span = b.last - b.first + 1n
    const start = BigInt(state.last) < b.first || BigInt(state.last) > b.last ? b.first : BigInt(state.last) + 1n
    for (let i = 0n; i < span; i++) {
      const offset = b.first + ((start - b.first + i) % span)
      const ip = IpRange.addressAt(b.range, offset)!
      if (state.allocations[ip] === undefined)
        return Either.right({ state: { cidr: state.cidr, last: Number(offset), allocations: { ...state.allocations, [ip]: owner } }, ip })
    }
    return Either.left(`no free address left in ${state.cidr} (${state.cidr} holds ${span} pods)`)
  })
}

/** Release every address `owner` holds (none: unchanged). */
export const release = (state: State, owner: string): State => {
  const allocations = Object.fromEntries(Object.entries(state.allocations).filter(([, o]) => o !== owner))
  return Object.keys(allocations).length === Object.keys(state.allocations).length ? state : { ...state, allocations }
}

/** Keep only the owners still alive (a box that died between creating and recording a sandbox). */
export const retain = (state: State, alive: ReadonlySet<string>): State => {
  const allocations = Object.fromEntries(Object.entries(state.allocations).filter(([, o]) => alive.has(o)))
  return Object.keys(allocations).length === Object.keys(state.allocations).length ? state : { ...state, allocations }
}
